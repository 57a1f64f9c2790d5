"""The workload: producers of the Python SDK at a fixed, bounded rate and one push-consumer group.

Each of ``producers`` :class:`~pocketmq.client.Producer` objects (its own client instance) runs ``streams`` sending
tasks; a stream has one send in flight at a time and paces itself to ``rate / streams`` sends per second
(a stream that fell behind — a send that took seconds — does not burst to catch up). Every message carries
a unique id (``p<producer>-s<stream>-<seq>``) as its body and its key; every send's outcome is recorded
with its start and end time (:class:`~pocketmq.chaos.events.SendEvent`). With ``auto_batch`` the SDK may merge the
concurrent sends of one producer into batches.

The consumer group (``consumers`` :class:`~pocketmq.client.PushConsumer` objects, CLUSTERING) records each delivery
with its time, queue and offset. Every list is bounded (:data:`MAX_EVENTS`); past it events are counted,
not kept, and the run says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

from pocketmq.chaos.events import Delivery, SendEvent
from pocketmq.client import (
    ConsumeFromWhere,
    ConsumeResult,
    Message,
    MessageExt,
    MessageHandler,
    Producer,
    PushConsumer,
    SendStatus,
)
from pocketmq.client.core.errors import SendFailedError
from pocketmq.common.record import decode_message_id
from pocketmq.remoting.errors import PocketMQError

__all__ = ["MAX_EVENTS", "Workload", "WorkloadConfig"]


def _stored_at(offset_msg_id: str) -> tuple[str, int]:
    """The storing broker's ``ip:port`` and the commit-log offset in an offset message id ("", -1 if it is none)."""
    try:
        ip, port, offset = decode_message_id(offset_msg_id.rsplit(",", 1)[-1])
    except ValueError:
        return "", -1
    return f"{ip}:{port}", offset

MAX_EVENTS = 3_000_000
PRODUCER_GROUP = "chaos-pg"
CONSUMER_GROUP = "chaos-cg"


@dataclass(frozen=True, slots=True)
class WorkloadConfig:
    namesrv_addr: str
    topic: str
    producers: int = 4
    streams: int = 4
    rate: float = 50.0
    consumers: int = 2
    auto_batch: bool = False
    send_timeout: float = 3.0


class Workload:
    """Producers and consumers of one run; times are seconds since ``t0`` (``time.monotonic()``)."""

    def __init__(self, config: WorkloadConfig, t0: float) -> None:
        self.config = config
        self.t0 = t0
        self.sends: list[SendEvent] = []
        self.deliveries: list[Delivery] = []
        self.dropped_events = 0
        #: store address ("ip:port") -> the highest commit-log offset a SEND_OK named (from its offset msg id):
        #: with SYNC_FLUSH that record was on disk when the broker answered (what a power loss must keep).
        self.acked_offsets: dict[str, int] = {}
        self._producers: list[Producer] = []
        self._consumers: list[PushConsumer] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._stop = asyncio.Event()

    def now(self) -> float:
        return time.monotonic() - self.t0

    async def start_consumers(self) -> None:
        for i in range(self.config.consumers):
            consumer = PushConsumer(CONSUMER_GROUP, namesrv_addr=self.config.namesrv_addr,
                                    instance_name=f"chaos-c{i}", consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
            consumer.subscribe(self.config.topic, "*")
            consumer.register_handler(self._handler(f"c{i}"))
            await consumer.start()
            self._consumers.append(consumer)

    def _handler(self, name: str) -> MessageHandler:
        async def handle(msg: MessageExt) -> ConsumeResult:
            if len(self.deliveries) < MAX_EVENTS:
                self.deliveries.append(Delivery(self.now(), name, msg.body.decode(errors="replace"),
                                                msg.broker_name, msg.queue_id, msg.queue_offset))
            else:
                self.dropped_events += 1
            return ConsumeResult.SUCCESS
        return handle

    async def start_producers(self, max_seconds: float) -> None:
        """Start sending; every stream stops by itself after ``max_seconds`` at the latest."""
        cfg = self.config
        for p in range(cfg.producers):
            producer = Producer(PRODUCER_GROUP, namesrv_addr=cfg.namesrv_addr, instance_name=f"chaos-p{p}",
                                send_msg_timeout=cfg.send_timeout, auto_batch=cfg.auto_batch)
            await producer.start()
            self._producers.append(producer)
            for s in range(cfg.streams):
                self._tasks.append(asyncio.ensure_future(self._stream(producer, f"p{p}-s{s}", max_seconds)))

    async def _stream(self, producer: Producer, stream: str, max_seconds: float) -> None:
        interval = self.config.streams / self.config.rate
        deadline = time.monotonic() + max_seconds
        next_at = time.monotonic()
        seq = 0
        while not self._stop.is_set() and time.monotonic() < deadline:
            msg_id = f"{stream}-{seq}"
            seq += 1
            await self._send_one(producer, msg_id)
            next_at += interval
            now = time.monotonic()
            if next_at < now - 1.0:
                next_at = now  # fell behind (a slow send): do not burst to catch up
            if next_at > now:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), next_at - now)

    async def _send_one(self, producer: Producer, msg_id: str) -> None:
        start = self.now()
        message = Message(self.config.topic, msg_id.encode(), keys=msg_id)
        try:
            result = await producer.send(message)
        except SendFailedError as exc:
            event = SendEvent(msg_id, start, self.now(), "FAILED", error=str(exc)[:200], timed_out=exc.timed_out)
        except (PocketMQError, OSError) as exc:
            event = SendEvent(msg_id, start, self.now(), "FAILED", error=f"{type(exc).__name__}: {exc}"[:200])
        else:
            mq = result.message_queue
            store_addr, commit_offset = _stored_at(result.offset_msg_id)
            event = SendEvent(msg_id, start, self.now(), result.status.name, mq.broker_name, mq.queue_id,
                              result.queue_offset, store_addr=store_addr, commit_offset=commit_offset)
            if result.status is SendStatus.SEND_OK and commit_offset >= 0:
                self._note_acked(store_addr, commit_offset)
        if len(self.sends) < MAX_EVENTS:
            self.sends.append(event)
        else:
            self.dropped_events += 1

    def _note_acked(self, addr: str, offset: int) -> None:
        if offset > self.acked_offsets.get(addr, -1):
            self.acked_offsets[addr] = offset

    async def stop_producers(self) -> None:
        self._stop.set()
        if self._tasks:
            await asyncio.wait_for(asyncio.gather(*self._tasks), 30)
        for producer in self._producers:
            await producer.shutdown()
        self._producers.clear()

    async def drain(self, timeout: float, quiet: float = 10.0) -> bool:
        """Until every id a broker said it stored has been delivered; gives up after ``timeout`` or after
        ``quiet`` seconds without any new delivery. Returns whether everything arrived."""
        wanted = {s.msg_id for s in self.sends if not s.failed}
        deadline = time.monotonic() + timeout
        last_count, last_change = -1, time.monotonic()
        while time.monotonic() < deadline:
            delivered = {d.msg_id for d in self.deliveries}
            if wanted <= delivered:
                return True
            if len(self.deliveries) != last_count:
                last_count, last_change = len(self.deliveries), time.monotonic()
            elif time.monotonic() - last_change > quiet:
                return False
            await asyncio.sleep(0.5)
        return False

    async def stop_consumers(self, timeout: float) -> bool:
        """Shut the consumers down; False when that took longer than ``timeout`` (then it is abandoned: a
        hung shutdown is a finding, reported by the caller, not a reason to hang the run)."""
        stopping = asyncio.ensure_future(asyncio.gather(*(c.shutdown() for c in self._consumers)))
        done, _ = await asyncio.wait({stopping}, timeout=timeout)
        self._consumers.clear()
        if stopping not in done:
            stopping.cancel()
            return False
        stopping.result()
        return True
