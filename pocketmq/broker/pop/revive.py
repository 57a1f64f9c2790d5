"""``PopReviveService``: messages popped and not acked in time come back (RocketMQ's ``PopReviveService``).

Every ``reviveInterval`` ms it takes the check points whose deadline has passed (at most ``_BATCH`` messages a
tick, the rest the next tick) and writes each message they still own to the group's POP retry topic
``%RETRY%<group>_<topic>`` (reconsume times + 1), or to ``%DLQ%<group>`` once its reconsume times reached the
group's ``retryMaxTimes``; once that is stored, an ack record settles the original. A crash between the two
writes revives the message twice: at least once, never lost. A FIFO check point is not revived: its expiry
unblocks the queue, whose next FIFO pop hands the messages out again. Revived messages are visible at once, so
a message comes back within one tick (plus the put) of its deadline.
"""

from __future__ import annotations

import asyncio

from pocketmq.broker.pop.redeliver import dead_letter_message, retry_message
from pocketmq.broker.pop.revive_log import now_ms
from pocketmq.broker.pop.service import PopService
from pocketmq.broker.pop.state import LiveCheckPoint
from pocketmq.common.logs import get_logger
from pocketmq.common.service import PeriodicService

log = get_logger("pocketmq.broker.pop.revive")

_BATCH = 2048
"""Messages revived per tick at most (each is a put; the rest wait for the next tick)."""
DEFAULT_RETRY_MAX_TIMES = 16
"""RocketMQ's ``retryMaxTimes`` of a group with no config."""
_RETRY_AFTER_MS = 1000
"""A revive whose put failed (disk full, a slave missing on a SYNC_MASTER) is tried again this much later."""


class PopReviveService(PeriodicService):
    name = "pop-revive"

    def __init__(self, pop: PopService, interval_ms: int) -> None:
        super().__init__(interval_ms / 1000, initial_delay=0)
        self.pop = pop

    async def tick(self) -> None:
        await self.revive_due()

    async def revive_due(self, now: int | None = None) -> int:
        """Revive what is due by ``now``; returns how many messages were written back."""
        now = now_ms() if now is None else now
        due = self.pop.state.due(now, _BATCH)
        revived = 0
        plain = []
        for live in due:
            if live.ck.order:
                self.pop.hold.wake(live.ck.topic, live.ck.group)  # the FIFO queue is free again
            else:
                plain.append(live)
        if plain:
            counts = await asyncio.gather(*(self._revive(live, now) for live in plain))
            revived = sum(counts)
        return revived

    async def _revive(self, live: LiveCheckPoint, now: int) -> int:
        pop = self.pop
        ck = live.ck
        # A deleted topic or group does not drop the message: it still goes to the retry topic (or the DLQ).
        config = pop.groups.find_or_create(ck.group)
        max_times = config.retry_max_times if config is not None else DEFAULT_RETRY_MAX_TIMES
        done: list[int] = []
        for offset in pop.state.owned_offsets(live):
            record = pop.log.record_at(ck.topic, ck.queue_id, offset)
            if record is None:  # deleted by retention meanwhile: nothing to bring back
                log.warning("pop_revive_message_gone", topic=ck.topic, queue_id=ck.queue_id, offset=offset)
                done.append(offset)
                continue
            dead = record.reconsume_times >= max_times
            msg = dead_letter_message(record, ck, pop.topics) if dead else retry_message(record, ck, pop.topics)
            put = await pop.log.put(msg)
            if not put.status.is_stored:
                log.warning("pop_revive_not_stored", status=put.status.name, topic=ck.topic, offset=offset)
                pop.state.watch(live, now + _RETRY_AFTER_MS)
                break
            pop.counters["dead_lettered" if dead else "revived"] += 1
            done.append(offset)
        if done:
            settled = pop.settle(live, done)
            if not isinstance(settled, bool):
                await settled
        return len(done)
