"""``ClientManageProcessor``: HEART_BEAT (34), UNREGISTER_CLIENT (35) and CHECK_CLIENT_CONFIG (46).

A heartbeat's SQL92 subscriptions are compiled at once (:class:`~pocketmq.broker.filter.ConsumerFilterManager`), so the
first pull finds them ready. CHECK_CLIENT_CONFIG is what a Java push consumer sends at start for each non-TAG
subscription: SYSTEM_ERROR "The broker does not support consumer to filter message by SQL92" when
``enablePropertyFilter`` is false, SUBSCRIPTION_PARSE_FAILED with the parser's message when it does not compile.
"""

from __future__ import annotations

from collections.abc import Callable

from pocketmq.broker.client_manager import ClientManager, parse_heartbeat
from pocketmq.broker.filter import ConsumerFilterManager, is_tag_type
from pocketmq.broker.topic_manager import TopicConfigManager
from pocketmq.common.errors import FieldFormatError
from pocketmq.common.filter import FilterError
from pocketmq.common.logs import get_logger
from pocketmq.common.subscription import SubscriptionData
from pocketmq.common.topic import retry_topic
from pocketmq.common.topic_config import PermName
from pocketmq.remoting import route as rd
from pocketmq.remoting.codes import LanguageCode, RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection, Handler
from pocketmq.remoting.errors import InvalidHeaderError
from pocketmq.remoting.headers import UnregisterClientRequestHeader

log = get_logger("pocketmq.broker.client_manage")
_LANGUAGES = frozenset(int(c) for c in LanguageCode)


class ClientManageProcessor:
    def __init__(self, *, clients: ClientManager, topics: TopicConfigManager,
                 on_group_changed: Callable[[str], None] | None = None,
                 filters: ConsumerFilterManager | None = None, enable_property_filter: bool = False) -> None:
        self.clients = clients
        self.topics = topics
        self.on_group_changed = on_group_changed
        self.filters = filters if filters is not None else ConsumerFilterManager()
        self.enable_property_filter = enable_property_filter

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.HEART_BEAT: self.heart_beat,
            RequestCode.UNREGISTER_CLIENT: self.unregister_client,
            RequestCode.CHECK_CLIENT_CONFIG: self.check_client_config,
        }

    def heart_beat(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        body = bytes(req.body or b"")
        known = self.clients.known_heartbeat(conn, body)
        if known is not None:  # the same as last time: nothing to parse, nothing changed
            for group in known:
                self._retry_topic(group)
            return req.response(ResponseCode.SUCCESS)
        try:
            raw = rd.decode_body(body, req.serialize_type)
        except ValueError as exc:
            raise InvalidHeaderError(f"undecodable heartbeat body: {exc}") from None
        data = parse_heartbeat(raw)
        for consumer in data.consumers:
            self._retry_topic(consumer.group_name)
            self.filters.register(consumer.group_name, consumer.subscriptions)
        language = LanguageCode(req.language).name if req.language in _LANGUAGES else "OTHER"
        for group in self.clients.heartbeat(data, conn, language, req.version):
            log.info("consumer_joined", group=group, client=data.client_id)
            if self.on_group_changed is not None:
                self.on_group_changed(group)
        self.clients.remember(conn, body, data)
        return req.response(ResponseCode.SUCCESS)

    def _retry_topic(self, group: str) -> None:
        """Every consumer group gets its retry topic (one queue) on heartbeat, as RocketMQ does."""
        topic = retry_topic(group)
        if self.topics.get(topic) is None:
            self.topics.create_system_topic(topic, 1, PermName.PERM_READ | PermName.PERM_WRITE)

    def check_client_config(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        try:
            raw = rd.decode_body(bytes(req.body or b""), req.serialize_type) if req.body else None
        except ValueError as exc:
            raise InvalidHeaderError(f"undecodable CHECK_CLIENT_CONFIG body: {exc}") from None
        data = raw.get("subscriptionData") if isinstance(raw, dict) else None
        if not isinstance(data, dict):
            return req.response(ResponseCode.SUCCESS)
        try:
            sub = SubscriptionData.from_json_dict(data)
        except FieldFormatError as exc:
            raise InvalidHeaderError(f"bad subscriptionData: {exc}") from None
        if is_tag_type(sub.expression_type):
            return req.response(ResponseCode.SUCCESS)
        if not self.enable_property_filter:
            return req.response(ResponseCode.SYSTEM_ERROR,
                                f"The broker does not support consumer to filter message by {sub.expression_type}")
        group = raw.get("group") if isinstance(raw, dict) else None
        try:
            self.filters.get(str(group or ""), sub)
        except FilterError as exc:
            return req.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, exc.message)
        return req.response(ResponseCode.SUCCESS)

    def unregister_client(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = UnregisterClientRequestHeader.from_command(req)
        for group in self.clients.unregister(h.client_id, h.producer_group, h.consumer_group):
            if self.on_group_changed is not None:
                self.on_group_changed(group)
        return req.response(ResponseCode.SUCCESS)

    def connection_closed(self, conn: Connection) -> None:
        for group in self.clients.connection_closed(conn):
            if self.on_group_changed is not None:
                self.on_group_changed(group)
