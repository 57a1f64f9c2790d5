"""``RecallMessageProcessor``: RECALL_MESSAGE (370), RocketMQ 5.3's recall of a timer message before it is due.

The handle (:mod:`pocketmq.common.recall`) came with the send's answer. The checks and answers are RocketMQ's
``RecallMessageProcessor``: off unless ``recallMessageEnable``; a slave answers SLAVE_NOT_AVAILABLE; the topic must
exist; a handle that does not decode, names another topic or broker, or a time not ahead (or beyond
``timerMaxDelaySec``) is ILLEGAL_OPERATION. Then a marker is stored on the handle's topic, queue 0, as a timer
message due at the handle's time, through the store's one put path: the timer service drops the original when it
is due (``broker.timer``). The answer's ``msgId`` is the recalled message's id; a recall that comes after the
message was delivered succeeds and changes nothing, as in RocketMQ.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from pocketmq.broker.processors.send import SendMessageProcessor
from pocketmq.common.message import MessageConst, encode_properties
from pocketmq.common.recall import RecallHandle, delete_key
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection, Handler
from pocketmq.remoting.headers import RecallMessageRequestHeader
from pocketmq.store.message import MessageExtBrokerInner
from pocketmq.store.results import PutMessageResult

RECALL_TAG = "_RECALL_TAG_"
"""The marker's tag (RocketMQ's)."""
_NOT_AVAILABLE = "recall failed, broker service not available"


class RecallMessageProcessor:
    """RECALL_MESSAGE for one broker; ``send`` lends its live role, host and store."""

    def __init__(self, *, send: SendMessageProcessor, enabled: Callable[[], bool]) -> None:
        self.send = send
        self.enabled = enabled

    def handlers(self) -> dict[int, Handler]:
        return {RequestCode.RECALL_MESSAGE: self.recall}

    def recall(self, req: RemotingCommand, conn: Connection) -> RemotingCommand | Awaitable[RemotingCommand]:
        header = RecallMessageRequestHeader.from_command(req)
        refusal = self._refusal(req, header)
        if isinstance(refusal, RemotingCommand):
            return refusal
        handle = refusal
        now = int(time.time() * 1000)
        properties = encode_properties({
            MessageConst.PROPERTY_TAGS: RECALL_TAG,
            MessageConst.PROPERTY_TIMER_DEL_UNIQKEY: delete_key(handle.topic, handle.message_id),
            MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: handle.message_id,
            MessageConst.PROPERTY_TIMER_DELIVER_MS: handle.timestamp,
            MessageConst.PROPERTY_PRODUCER_GROUP: header.producer_group,
        })
        marker = MessageExtBrokerInner(topic=handle.topic, body=b"0", queue_id=0, properties=properties,
                                       born_timestamp=now, born_host=self.send.born_host(conn))
        stored = self.send.store.put(marker)
        if isinstance(stored, PutMessageResult):
            return _answer(req, stored, handle)
        return self._answer_when_stored(req, stored, handle)

    def _refusal(self, req: RemotingCommand, header: RecallMessageRequestHeader) -> RemotingCommand | RecallHandle:
        """RocketMQ's checks in its order: the answer that refuses the recall, else the decoded handle."""
        if not self.enabled():
            return req.response(ResponseCode.NO_PERMISSION, "recall failed, operation is forbidden")
        if self.send.is_slave:
            return req.response(ResponseCode.SLAVE_NOT_AVAILABLE, _NOT_AVAILABLE)
        if self.send.topics.get(header.topic) is None:
            return req.response(ResponseCode.TOPIC_NOT_EXIST, f"recall failed, the topic[{header.topic}] not exist")
        try:
            handle = RecallHandle.decode(header.recall_handle)
        except ValueError as exc:
            return req.response(ResponseCode.ILLEGAL_OPERATION, str(exc))
        if handle.topic != header.topic:
            return req.response(ResponseCode.ILLEGAL_OPERATION, "recall failed, topic not match")
        if handle.broker_name != self.send.broker_name:
            return req.response(ResponseCode.ILLEGAL_OPERATION, _NOT_AVAILABLE)
        left = handle.deliver_ms - int(time.time() * 1000)
        if left <= 0 or left >= self.send.store.config.timer_max_delay_sec * 1000:
            return req.response(ResponseCode.ILLEGAL_OPERATION, "recall failed, timestamp invalid")
        return handle

    @staticmethod
    async def _answer_when_stored(req: RemotingCommand, stored: Awaitable[PutMessageResult],
                                  handle: RecallHandle) -> RemotingCommand:
        return _answer(req, await stored, handle)


def _answer(req: RemotingCommand, result: PutMessageResult, handle: RecallHandle) -> RemotingCommand:
    if not result.status.is_stored:
        return req.response(ResponseCode.SYSTEM_ERROR, "recall failed, execute error")
    return req.response(ResponseCode.SUCCESS, None, ext_fields={"msgId": handle.message_id})
