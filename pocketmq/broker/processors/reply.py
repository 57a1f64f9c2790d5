"""``ReplyMessageProcessor``: SEND_REPLY_MESSAGE (324) and SEND_REPLY_MESSAGE_V2 (325), request-reply's second
half (RocketMQ 4.6+).

A requester sends an ordinary message carrying ``CORRELATION_ID``, ``REPLY_TO_CLIENT`` (its client id) and
``TTL``; the consumer that handles it builds the reply (``MSG_TYPE=reply``, the same three properties, topic
``<cluster>_REPLY_TOPIC``) and sends it with one of these codes, headers as a send's. The reply is not a message
for consumers: the broker finds the requester's live connection by its client id (any heartbeat registers it,
:meth:`~pocketmq.broker.client_manager.ClientManager.find_channel`) and pushes the reply there with
PUSH_REPLY_MESSAGE_TO_CLIENT (326: :class:`~pocketmq.remoting.headers.ReplyMessageRequestHeader`, the reply's body),
adding ``PUSH_REPLY_TIME``. The replier's answer is a send's: SUCCESS with ``msgId`` ``0`` and ``queueOffset`` 0
(nothing was stored), or the reason the reply could not be delivered:

* no ``REPLY_TO_CLIENT`` or no ``CORRELATION_ID`` — MESSAGE_ILLEGAL: the reply cannot be matched to a request
  (RocketMQ answers SYSTEM_ERROR for the first and does not check the second);
* the requester is not connected to this broker — SYSTEM_ERROR "channel of <id> not found" (a sending client
  retries it on another broker of the cluster, which may hold the requester's connection);
* the requester refused or did not answer the push within :data:`PUSH_REPLY_TIMEOUT` — SYSTEM_ERROR with its
  reason (a PocketMQ requester refuses a reply whose request is no longer waiting: timed out, TTL passed).

The checks before the push are a send's (broker writable, topic name, topic exists or is auto-created, queue
id in range). Only with ``storeReplyMessageEnable`` is a delivered reply also stored, in the reply topic, and
the answer then carries its real message id and offset; a reply that could not be delivered is never stored.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from pocketmq.broker.client_manager import ClientChannel, ClientManager
from pocketmq.broker.processors.send import SendHeader, SendMessageProcessor, strip_wait
from pocketmq.common.logs import get_logger
from pocketmq.common.message import MessageConst, get_property, join_properties
from pocketmq.common.record import MAX_PROPERTIES_LENGTH
from pocketmq.remoting.codes import RequestCode, ResponseCode, SerializeType
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection, Handler
from pocketmq.remoting.errors import PocketMQError
from pocketmq.remoting.headers import ReplyMessageRequestHeader, SendMessageRequestHeader, SendMessageRequestHeaderV2
from pocketmq.store.message import MessageExtBrokerInner
from pocketmq.store.results import PutMessageResult

__all__ = ["PUSH_REPLY_TIMEOUT", "ReplyMessageProcessor"]

log = get_logger("pocketmq.broker.reply")

PUSH_REPLY_TIMEOUT = 3.0
"""How long the broker waits for the requester to take a pushed reply (s). RocketMQ waits 10 s; this is shorter
than a replier's default send timeout (3 s plus the SDK's answer grace), so the replier hears the broker's
reason rather than its own timeout."""

_REPLY_TO = MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT
_CORRELATION_ID = MessageConst.PROPERTY_CORRELATION_ID


class ReplyMessageProcessor:
    """Serves the two reply codes for one broker (see the module docstring)."""

    def __init__(
        self,
        *,
        send: SendMessageProcessor,
        clients: ClientManager,
        broker_addr: Callable[[], str],
        store_reply: Callable[[], bool],
        region_id: str,
        trace_on: bool,
        push_timeout: float = PUSH_REPLY_TIMEOUT,
    ) -> None:
        self.send = send
        self.clients = clients
        self.broker_addr = broker_addr
        #: ``storeReplyMessageEnable``, read per reply (it may change at run time)
        self.store_reply = store_reply
        self.push_timeout = push_timeout
        self._extra_fields = {MessageConst.PROPERTY_MSG_REGION: region_id,
                              MessageConst.PROPERTY_TRACE_SWITCH: "true" if trace_on else "false"}
        #: Replies pushed to their requester, and those that could not be (for the admin's broker stats).
        self.pushed = 0
        self.failed = 0

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.SEND_REPLY_MESSAGE: self.reply,
            RequestCode.SEND_REPLY_MESSAGE_V2: self.reply,
        }

    def reply(self, req: RemotingCommand, conn: Connection) -> RemotingCommand | Awaitable[RemotingCommand]:
        header: SendHeader = (SendMessageRequestHeader.from_command(req) if req.code == RequestCode.SEND_REPLY_MESSAGE
                              else SendMessageRequestHeaderV2.from_command(req).to_v1())
        refusal = self.send.check(req, header, conn)
        if refusal is not None:
            return refusal
        queue_id = self.send.destination_queue(req, header, header.topic, header.queue_id, conn)
        if isinstance(queue_id, RemotingCommand):
            return queue_id
        if not req.body:
            return req.response(ResponseCode.MESSAGE_ILLEGAL, "the message body is empty")
        properties = header.properties or ""
        for name in (_REPLY_TO, _CORRELATION_ID):
            if not get_property(properties, name):
                self.failed += 1
                return req.response(ResponseCode.MESSAGE_ILLEGAL, f"reply message properties[{name}] is null")
        requester = get_property(properties, _REPLY_TO) or ""
        channel = self.clients.find_channel(requester)
        if channel is None:
            self.failed += 1
            log.info("reply_requester_not_found", requester=requester, replier=conn.remote_addr)
            return req.response(ResponseCode.SYSTEM_ERROR,
                                f"push reply message fail, channel of <{requester}> not found.")
        properties = join_properties(properties, f"{MessageConst.PROPERTY_PUSH_REPLY_TIME}\x01{_now_ms()}")
        return self._push(req, header, queue_id, properties, channel, conn)

    async def _push(self, req: RemotingCommand, header: SendHeader, queue_id: int, properties: str,
                    channel: ClientChannel, conn: Connection) -> RemotingCommand:
        push = RemotingCommand.request(
            RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, self._push_header(header, properties, conn).to_fields(),
            req.body, serialize_type=SerializeType.JSON)  # JSON: what every RocketMQ client reads
        requester = channel.client_id
        try:
            answer = await channel.connection.request(push, self.push_timeout)
        except PocketMQError as exc:
            self.failed += 1
            log.info("reply_push_failed", requester=requester, error=str(exc))
            return req.response(ResponseCode.SYSTEM_ERROR, f"push reply message to <{requester}> fail: {exc}")
        if answer.code != ResponseCode.SUCCESS:
            self.failed += 1
            log.info("reply_push_refused", requester=requester, code=answer.code, remark=answer.remark)
            return req.response(ResponseCode.SYSTEM_ERROR,
                                f"push reply message to <{requester}> fail: {answer.remark or answer.code}")
        self.pushed += 1
        if self.store_reply():
            return await self._store(req, header, queue_id, properties, conn)
        fields = {"msgId": "0", "queueId": str(queue_id), "queueOffset": "0", **self._extra_fields}
        return req.response(ResponseCode.SUCCESS, None, ext_fields=fields)

    def _push_header(self, header: SendHeader, properties: str, conn: Connection) -> ReplyMessageRequestHeader:
        return ReplyMessageRequestHeader(
            producer_group=header.producer_group, topic=header.topic, default_topic=header.default_topic,
            default_topic_queue_nums=header.default_topic_queue_nums, queue_id=header.queue_id,
            sys_flag=header.sys_flag, born_timestamp=header.born_timestamp, flag=header.flag,
            born_host=conn.remote_addr, store_host=self.broker_addr(), store_timestamp=_now_ms(),
            properties=properties, reconsume_times=header.reconsume_times, unit_mode=bool(header.unit_mode),
        )

    async def _store(self, req: RemotingCommand, header: SendHeader, queue_id: int, properties: str,
                     conn: Connection) -> RemotingCommand:
        """``storeReplyMessageEnable``: the delivered reply is also stored in the reply topic; a store that
        fails is logged and the reply still counts as sent, as in RocketMQ (the requester has it)."""
        properties, wait = strip_wait(properties)
        fields = {"msgId": "0", "queueId": str(queue_id), "queueOffset": "0", **self._extra_fields}
        if len(properties.encode()) > MAX_PROPERTIES_LENGTH:
            log.warning("reply_not_stored", topic=header.topic, reason="properties longer than 32767 bytes")
            return req.response(ResponseCode.SUCCESS, None, ext_fields=fields)
        msg = MessageExtBrokerInner(
            topic=header.topic, body=bytes(req.body or b""), queue_id=queue_id, flag=header.flag,
            properties=properties, sys_flag=header.sys_flag, born_timestamp=header.born_timestamp,
            born_host=self.send.born_host(conn), reconsume_times=header.reconsume_times or 0, wait_store_msg_ok=wait,
        )
        stored = self.send.store.put(msg)
        result = stored if isinstance(stored, PutMessageResult) else await stored
        if not result.status.is_stored:
            log.warning("reply_not_stored", topic=header.topic, status=result.status.name)
            return req.response(ResponseCode.SUCCESS, None, ext_fields=fields)
        response = self.send.respond(req, result, queue_id)
        response.code, response.remark = ResponseCode.SUCCESS, None  # delivered: a slow flush does not undo that
        return response

    def runtime_info(self) -> dict[str, str]:
        """Keys of GET_BROKER_RUNTIME_INFO: replies pushed to their requesters, and refused, since start."""
        return {"replyPushedCount": str(self.pushed), "replyFailedCount": str(self.failed)}


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
