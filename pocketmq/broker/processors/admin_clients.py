"""Admin requests about connected clients: GET_PRODUCER_CONNECTION_LIST (204), GET_CONSUMER_RUNNING_INFO (307)
and CONSUME_MESSAGE_DIRECTLY (309), both forwarded to the named client over its own connection,
INVOKE_BROKER_TO_RESET_OFFSET (222) and INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223).

Reset (RocketMQ's ``Broker2Client.resetOffset``): for each queue of the topic, the offset of the timestamp
(``-1``: the queue's end); it replaces the group's offset when it is lower or ``isForce``. The broker stores
the new offsets itself, so an offline group is reset directly (RocketMQ answers CONSUMER_NOT_ONLINE there
and mqadmin falls back to committing offsets one by one), then tells each live client of the group
(RESET_CONSUMER_CLIENT_OFFSET 220, oneway) to drop what it cached and pull from the new offsets. The
answer's body is the ``ResetOffsetBody``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pocketmq.broker.client_manager import ClientChannel, ClientManager
from pocketmq.broker.metadata import ConsumerOffsetManager
from pocketmq.broker.topic_manager import TopicConfigManager
from pocketmq.common.logs import get_logger
from pocketmq.common.record import SIZE_AND_MAGIC, decode_message_id
from pocketmq.remoting import fastjson
from pocketmq.remoting import route as rd
from pocketmq.remoting.admin_headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    GetProducerConnectionListRequestHeader,
    ResetOffsetRequestHeader,
)
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection, Handler
from pocketmq.remoting.errors import PocketMQError
from pocketmq.remoting.fastjson import MQKey
from pocketmq.store.message_store import MessageStore

log = get_logger("pocketmq.broker.admin_clients")

#: How long the broker waits for a client's answer to a forwarded request (the admin tool waits 5 s).
CLIENT_ANSWER_TIMEOUT = 4.0


def connection_json(channel: ClientChannel) -> dict[str, Any]:
    """RocketMQ's ``Connection`` of one client."""
    return {"clientAddr": channel.connection.remote_addr, "clientId": channel.client_id,
            "language": channel.language, "version": channel.version}


class AdminClientsProcessor:
    def __init__(self, *, store: MessageStore, topics: TopicConfigManager, clients: ClientManager,
                 offsets: ConsumerOffsetManager, broker_name: str,
                 client_timeout: Callable[[], float] = lambda: CLIENT_ANSWER_TIMEOUT) -> None:
        self.store = store
        self.topics = topics
        self.clients = clients
        self.offsets = offsets
        self.broker_name = broker_name
        self.client_timeout = client_timeout

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.GET_PRODUCER_CONNECTION_LIST: self.producer_connections,
            RequestCode.GET_CONSUMER_RUNNING_INFO: self.consumer_running_info,
            RequestCode.CONSUME_MESSAGE_DIRECTLY: self.consume_message_directly,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
            RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: self.consumer_status,
        }

    # -- producers -----------------------------------------------------------------------------------------

    def producer_connections(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = GetProducerConnectionListRequestHeader.from_command(req)
        channels = [ch for _cid, ch in sorted(self.clients.producers.get(h.producer_group, {}).items())
                    if not ch.connection.is_closed]
        if not channels:
            return req.response(ResponseCode.SYSTEM_ERROR, f"the producer group[{h.producer_group}] not exist")
        body = {"connectionSet": [connection_json(ch) for ch in channels]}
        return req.response(ResponseCode.SUCCESS, body=rd.encode_body(body, req.serialize_type))

    # -- forwarded to one client ---------------------------------------------------------------------------

    async def _forward(self, req: RemotingCommand, group: str, client_id: str,
                       body: bytes | None = None) -> RemotingCommand:
        channel = self.clients.consumer_channel(group, client_id)
        if channel is None:
            return req.response(ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
        forward = RemotingCommand.request(req.code, dict(req.ext_fields or {}), body if body is not None else req.body)
        try:
            answer = await channel.connection.request(forward, self.client_timeout())
        except (PocketMQError, TimeoutError) as exc:
            return req.response(ResponseCode.SYSTEM_ERROR, f"invoke the consumer <{client_id}> failed: {exc}")
        return req.response(answer.code, answer.remark, body=answer.body)

    async def consumer_running_info(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = GetConsumerRunningInfoRequestHeader.from_command(req)
        return await self._forward(req, h.consumer_group, h.client_id)

    async def consume_message_directly(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        """The stored message named by ``msgId`` (an offset message id) goes to the client as the body."""
        h = ConsumeMessageDirectlyResultRequestHeader.from_command(req)
        if not h.client_id or not h.msg_id:
            return req.response(ResponseCode.SYSTEM_ERROR, "clientId and msgId are required")
        try:
            _ip, _port, offset = decode_message_id(h.msg_id)
        except ValueError as exc:
            return req.response(ResponseCode.SYSTEM_ERROR, str(exc))
        data = self.store.get_commit_log_data(offset) if offset >= 0 else None
        size = SIZE_AND_MAGIC.unpack_from(data, 0)[0] if data is not None and len(data) >= SIZE_AND_MAGIC.size else 0
        if data is None or not 0 < size <= len(data):
            return req.response(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}")
        return await self._forward(req, h.consumer_group, h.client_id, bytes(data[:size]))

    # -- offsets -------------------------------------------------------------------------------------------

    def reset_table(self, h: ResetOffsetRequestHeader) -> dict[MQKey, int] | str:
        """The group's new offset per queue of the topic on this broker, or why there is none."""
        config = self.topics.get(h.topic)
        if config is None:
            return f"[reset-offset] reset offset failed, no topic in this broker. topic={h.topic}"
        table: dict[MQKey, int] = {}
        for queue_id in range(config.write_queue_nums):
            if h.timestamp == -1:
                target = self.store.get_max_offset_in_queue(h.topic, queue_id)
            else:
                target = self.store.get_offset_in_queue_by_time(h.topic, queue_id, h.timestamp)
            current = self.offsets.query_offset(h.group, h.topic, queue_id)
            table[MQKey(h.topic, self.broker_name, queue_id)] = (
                target if h.is_force or current < 0 or target < current else current)
        return table

    def reset_offset(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = ResetOffsetRequestHeader.from_command(req)
        table = self.reset_table(h)
        if isinstance(table, str):
            return req.response(ResponseCode.SYSTEM_ERROR, table)
        self.offsets.reset_offsets(h.group, h.topic, {mq.queue_id: offset for mq, offset in table.items()})
        body = fastjson.dumps({"offsetTable": table})
        channels = self.clients.live_consumer_channels(h.group)
        for channel in channels:
            notice = RemotingCommand.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, h.to_fields(), body,
                                             oneway=True)
            try:
                channel.connection.send(notice)
            except PocketMQError as exc:
                log.warning("reset_notice_failed", group=h.group, client=channel.client_id, error=str(exc))
        log.info("offsets_reset", group=h.group, topic=h.topic, timestamp=h.timestamp, force=h.is_force,
                 clients=len(channels), by=conn.remote_addr)
        return req.response(ResponseCode.SUCCESS, body=body)

    async def consumer_status(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        """Ask each live client of the group (or the one at ``clientAddr``) for the offsets it holds."""
        h = GetConsumerStatusRequestHeader.from_command(req)
        channels = [ch for ch in self.clients.live_consumer_channels(h.group)
                    if not h.client_addr or ch.connection.remote_addr == h.client_addr]
        if not channels:
            return req.response(ResponseCode.SYSTEM_ERROR,
                                f"No Any Consumer online in the consumer group: [{h.group}]")
        table: dict[str, Any] = {}
        for channel in channels:
            ask = RemotingCommand.request(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, h.to_fields())
            try:
                answer = await channel.connection.request(ask, self.client_timeout())
                if answer.code != ResponseCode.SUCCESS:
                    continue
                raw = fastjson.loads(bytes(answer.body or b"{}"))
            except (PocketMQError, TimeoutError, ValueError) as exc:
                log.warning("consumer_status_failed", group=h.group, client=channel.client_id, error=str(exc))
                continue
            queues = raw.get("messageQueueTable") if isinstance(raw, dict) else None
            table[channel.client_id] = queues if isinstance(queues, dict) else {}
        body = {"consumerTable": table, "messageQueueTable": {}}
        return req.response(ResponseCode.SUCCESS, body=fastjson.dumps(body))
