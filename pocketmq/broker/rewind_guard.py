"""``RewindGuard``: after an abnormal start, a consumer group's first pull of each queue from beyond the queue's
recovered end is moved back to that end.

A power loss can take the unflushed tail of a master's log; recovery then ends each consume queue at what
survived (``M``), and new messages reuse the offsets from ``M`` on. A consumer group that had consumed past
``M`` before the loss still pulls from its old offset, and once new messages pass it, that offset is inside the
queue again: the messages stored between ``M`` and it would be skipped for good (the chaos harness found 128 and
272 such messages in two runs; RocketMQ 4.x corrects an offset only while it is beyond the queue's max at the
time of the pull, so it has the same race). Every connection after a restart is new, so the first pull of each
(group, topic, queue) tells: an offset above ``M`` is from before the loss, and it is answered PULL_OFFSET_MOVED
to ``M`` (the SDK, like the Java client, then commits ``M`` and reads on from there: the lost range is gone,
everything after it is delivered). Pulls after the first one, and every pull after a clean start, cost one
``None`` check. The set of groups seen is bounded; past it the guard stops (as without it).
"""

from __future__ import annotations

from pocketmq.common.logs import get_logger

log = get_logger("pocketmq.broker.rewind")

#: (group, topic, queue) first pulls remembered at most; beyond it the guard is dropped.
MAX_SEEN = 100_000


class RewindGuard:
    """See the module docstring. ``ends``: each queue's max offset right after recovery."""

    def __init__(self, ends: dict[tuple[str, int], int]) -> None:
        self._ends = ends
        self._seen: set[tuple[str, str, int]] = set()
        self.active = True

    def moved_to(self, group: str, topic: str, queue_id: int, offset: int) -> int | None:
        """The offset a group's first pull of a queue must move to (None: pull as asked)."""
        key = (group, topic, queue_id)
        if not self.active or key in self._seen:
            return None
        if len(self._seen) >= MAX_SEEN:
            self.active = False
            log.warning("rewind_guard_stopped", seen=len(self._seen))
            return None
        self._seen.add(key)
        end = self._ends.get((topic, queue_id))
        if end is None or offset <= end:
            return None
        log.warning("pull_from_before_power_loss_moved", group=group, topic=topic, queue_id=queue_id,
                    offset=offset, recovered_end=end)
        return end


__all__ = ["MAX_SEEN", "RewindGuard"]
