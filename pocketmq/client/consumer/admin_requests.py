"""What a broker asks a consumer client on an administrator's behalf, and the SDK's answers.

* ``RESET_CONSUMER_CLIENT_OFFSET`` (220, body ``ResetOffsetBody``): the push consumer stops pulling each
  reset queue it holds, drops its process queue (messages in flight are not acknowledged), commits the new
  offset to the broker and rebalances at once, which re-adds the queue and pulls from the reset point.
* ``GET_CONSUMER_STATUS_FROM_CLIENT`` (221): ``GetConsumerStatusBody`` with the offsets held for a topic.
* ``GET_CONSUMER_RUNNING_INFO`` (307): ``ConsumerRunningInfo`` (properties, subscriptions, one
  ``ProcessQueueInfo`` per queue, ``statusTable``).
* ``CONSUME_MESSAGE_DIRECTLY`` (309): the stored message in the body is given to the handler once, and
  ``ConsumeMessageDirectlyResult`` says how that went.

:func:`install` registers the four handlers on a client instance's remoting client (once per instance);
each looks the named group up with :meth:`MQClientInstance.consumer` and answers SYSTEM_ERROR when this
client has no such consumer (or, for a consumer that cannot answer, such as a lite pull consumer).
Maps keyed by ``MessageQueue`` use fastjson's object-key form (:mod:`pocketmq.remoting.fastjson`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pocketmq.client.consumer.process_queue import ProcessQueue
from pocketmq.client.core.message import MessageQueue
from pocketmq.client.core.message_ext import MessageExt, decode_messages
from pocketmq.common.logs import get_logger
from pocketmq.remoting import fastjson
from pocketmq.remoting.admin_headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    ResetOffsetRequestHeader,
)
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection
from pocketmq.remoting.errors import PocketMQError
from pocketmq.remoting.fastjson import MQKey

if TYPE_CHECKING:
    from pocketmq.client.core.instance import MQClientInstance

log = get_logger("pocketmq.client.admin_requests")

#: Largest reset table a client takes (a topic has at most a few thousand queues).
MAX_RESET_QUEUES = 65_536


@runtime_checkable
class AdminAnswering(Protocol):
    """What a consumer offers the broker's admin requests (the push consumer implements it)."""

    group: str

    def running_info(self) -> dict[str, Any]: ...

    def held_offsets(self, topic: str) -> dict[MessageQueue, int]: ...

    async def reset_offsets(self, topic: str, offsets: dict[MessageQueue, int]) -> None: ...

    async def consume_directly(self, msg: MessageExt) -> str: ...


def mq_key(mq: MessageQueue) -> MQKey:
    return MQKey(mq.topic, mq.broker_name, mq.queue_id)


def install(instance: MQClientInstance) -> None:
    """Register the handlers on ``instance`` (idempotent: registering again replaces them)."""
    remoting = instance.remoting
    remoting.register(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, lambda r, c: _reset(instance, r, c))
    remoting.register(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, lambda r, c: _status(instance, r, c))
    remoting.register(RequestCode.GET_CONSUMER_RUNNING_INFO, lambda r, c: _running_info(instance, r, c))
    remoting.register(RequestCode.CONSUME_MESSAGE_DIRECTLY, lambda r, c: _consume_directly(instance, r, c))


def _consumer(instance: MQClientInstance, group: str) -> AdminAnswering | None:
    consumer = instance.consumer(group)
    return consumer if isinstance(consumer, AdminAnswering) else None


def _no_consumer(req: RemotingCommand, group: str) -> RemotingCommand:
    return req.response(ResponseCode.SYSTEM_ERROR, f"The Consumer Group <{group}> not exist in this consumer")


def decode_offset_table(body: bytes | bytearray | memoryview | None) -> dict[MessageQueue, int]:
    """A ``ResetOffsetBody``'s ``offsetTable`` (object keys, or a list of entries as some tools send)."""
    raw = fastjson.loads(bytes(body or b"{}"))
    table = raw.get("offsetTable") if isinstance(raw, dict) else None
    out: dict[MessageQueue, int] = {}
    if isinstance(table, dict):
        for key, offset in table.items():
            if isinstance(key, MQKey):
                out[MessageQueue(key.topic, key.broker_name, key.queue_id)] = int(offset)
    if len(out) > MAX_RESET_QUEUES:
        raise ValueError(f"more than {MAX_RESET_QUEUES} queues in a reset")
    return out


async def _reset(instance: MQClientInstance, req: RemotingCommand, conn: Connection) -> RemotingCommand | None:
    try:
        h = ResetOffsetRequestHeader.from_command(req)
        offsets = decode_offset_table(req.body)
    except (PocketMQError, ValueError) as exc:
        log.warning("reset_offset_refused", peer=conn.remote_addr, error=str(exc))
        return None if req.is_oneway else req.response(ResponseCode.SYSTEM_ERROR, str(exc))
    consumer = _consumer(instance, h.group)
    if consumer is None:
        return None if req.is_oneway else _no_consumer(req, h.group)
    log.info("reset_offset", group=h.group, topic=h.topic, timestamp=h.timestamp, queues=len(offsets),
             peer=conn.remote_addr)
    try:
        await consumer.reset_offsets(h.topic, {mq: o for mq, o in offsets.items() if mq.topic == h.topic})
    except PocketMQError as exc:  # stopped meanwhile: the broker holds the new offsets anyway
        log.warning("reset_offset_failed", group=h.group, topic=h.topic, error=str(exc))
        return None if req.is_oneway else req.response(ResponseCode.SYSTEM_ERROR, str(exc))
    return None if req.is_oneway else req.response(ResponseCode.SUCCESS)


def _status(instance: MQClientInstance, req: RemotingCommand, conn: Connection) -> RemotingCommand:
    h = GetConsumerStatusRequestHeader.from_command(req)
    consumer = _consumer(instance, h.group)
    if consumer is None:
        return _no_consumer(req, h.group)
    table = {mq_key(mq): offset for mq, offset in sorted(consumer.held_offsets(h.topic).items())}
    body = {"consumerTable": {}, "messageQueueTable": table}
    return req.response(ResponseCode.SUCCESS, body=fastjson.dumps(body))


def _running_info(instance: MQClientInstance, req: RemotingCommand, conn: Connection) -> RemotingCommand:
    h = GetConsumerRunningInfoRequestHeader.from_command(req)
    consumer = _consumer(instance, h.consumer_group)
    if consumer is None:
        return _no_consumer(req, h.consumer_group)
    try:
        info = consumer.running_info()
    except PocketMQError as exc:
        return req.response(ResponseCode.SYSTEM_ERROR, str(exc))
    if h.jstack_enable:
        info["jstack"] = "(a Python client: no Java thread stacks)"
    return req.response(ResponseCode.SUCCESS, body=fastjson.dumps(info))


async def _consume_directly(instance: MQClientInstance, req: RemotingCommand, conn: Connection) -> RemotingCommand:
    h = ConsumeMessageDirectlyResultRequestHeader.from_command(req)
    consumer = _consumer(instance, h.consumer_group)
    if consumer is None:
        return _no_consumer(req, h.consumer_group)
    try:
        messages = decode_messages(bytes(req.body or b""), broker_name=h.broker_name or "")
    except PocketMQError as exc:
        return req.response(ResponseCode.SYSTEM_ERROR, f"undecodable message: {exc}")
    if len(messages) != 1:
        return req.response(ResponseCode.SYSTEM_ERROR, f"expected one message, got {len(messages)}")
    started = time.monotonic()
    result = await consumer.consume_directly(messages[0])
    body = {"autoCommit": True, "consumeResult": result, "order": False,
            "remark": None, "spentTimeMills": int((time.monotonic() - started) * 1000)}
    return req.response(ResponseCode.SUCCESS, body=fastjson.dumps(body))


def mq_table(process_queues: Mapping[MessageQueue, ProcessQueue], held: Mapping[MessageQueue, int]) -> dict[MQKey, Any]:
    """``ConsumerRunningInfo.mqTable``: each queue's ``ProcessQueueInfo`` with the offset held for it."""
    return {mq_key(mq): process_queue_info(pq, held.get(mq, -1)) for mq, pq in sorted(process_queues.items())}


def process_queue_info(pq: ProcessQueue, commit_offset: int) -> dict[str, Any]:
    """RocketMQ's ``ProcessQueueInfo`` of one process queue."""
    low = pq.min_offset
    to_epoch_ms = time.time() * 1000 - time.monotonic() * 1000  # the process queue keeps monotonic seconds

    def epoch(stamp: float) -> int:
        return int(to_epoch_ms + stamp * 1000)

    return {
        "cachedMsgCount": pq.msg_count, "cachedMsgMaxOffset": max(pq.queue_offset_max, 0),
        "cachedMsgMinOffset": low if low is not None else 0, "cachedMsgSizeInMiB": pq.msg_size // (1024 * 1024),
        "commitOffset": commit_offset, "droped": pq.dropped, "lastConsumeTimestamp": epoch(pq.last_consume_timestamp),
        "lastLockTimestamp": epoch(pq.last_lock_timestamp), "lastPullTimestamp": epoch(pq.last_pull_timestamp),
        "locked": pq.locked, "transactionMsgCount": 0, "transactionMsgMaxOffset": 0, "transactionMsgMinOffset": 0,
        "tryUnlockTimes": pq.try_unlock_times,
    }


def consume_result_name(success: bool) -> str:
    """``CMResult`` of a direct consumption."""
    return "CR_SUCCESS" if success else "CR_LATER"
