"""``ClientManageProcessor``: HEART_BEAT (34) and UNREGISTER_CLIENT (35)."""

from __future__ import annotations

from collections.abc import Callable

from broker.client_manager import ClientManager, parse_heartbeat
from broker.topic_manager import TopicConfigManager
from common.logs import get_logger
from common.topic import retry_topic
from common.topic_config import PermName
from remoting import route as rd
from remoting.codes import LanguageCode, RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.connection import Connection, Handler
from remoting.errors import InvalidHeaderError
from remoting.headers import UnregisterClientRequestHeader

log = get_logger("broker.client_manage")
_LANGUAGES = frozenset(int(c) for c in LanguageCode)


class ClientManageProcessor:
    def __init__(self, *, clients: ClientManager, topics: TopicConfigManager,
                 on_group_changed: Callable[[str], None] | None = None) -> None:
        self.clients = clients
        self.topics = topics
        self.on_group_changed = on_group_changed

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.HEART_BEAT: self.heart_beat,
            RequestCode.UNREGISTER_CLIENT: self.unregister_client,
        }

    def heart_beat(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        try:
            raw = rd.decode_body(bytes(req.body or b""), req.serialize_type)
        except ValueError as exc:
            raise InvalidHeaderError(f"undecodable heartbeat body: {exc}") from None
        data = parse_heartbeat(raw)
        for consumer in data.consumers:
            # Every consumer group gets its retry topic (one queue) on heartbeat, as RocketMQ does.
            self.topics.create_system_topic(retry_topic(consumer.group_name), 1,
                                            PermName.PERM_READ | PermName.PERM_WRITE)
        language = LanguageCode(req.language).name if req.language in _LANGUAGES else "OTHER"
        for group in self.clients.heartbeat(data, conn, language, req.version):
            log.info("consumer_joined", group=group, client=data.client_id)
            if self.on_group_changed is not None:
                self.on_group_changed(group)
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
