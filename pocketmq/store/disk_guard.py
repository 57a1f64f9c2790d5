"""``DiskGuard``: whether the store may take puts as far as its disk is concerned, and why not.

Two causes stop puts, each logged once per transition: the disk above ``diskSpaceWarningLevelRatio`` (the
retention service's check, :mod:`pocketmq.store.retention`), and a reservation or a file creation that met a full disk
(ENOSPC, reported from any thread by the allocators and the put path). Every retention run re-checks: after a
full disk, once there is room for a window, the commit log's reservation is tried again and puts are taken
again when it succeeds. The guard keeps the last :class:`~pocketmq.store.retention.DiskState` for runtime info and the
refusal's remark. The owner (:class:`~pocketmq.store.message_store.MessageStore`) is told of every change through
``on_change`` and combines the guard with its own running/slave state.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from pocketmq.store.commitlog import CommitLog
from pocketmq.store.retention import DiskState


class DiskGuard:
    """The disk's part of "writable" (see the module docstring)."""

    def __init__(self, commit_log: CommitLog, commit_log_dir: str, warning_ratio: float, log: Any,
                 on_change: Callable[[], None]) -> None:
        self._commit_log = commit_log
        self._dir = commit_log_dir
        self._warning_ratio = warning_ratio
        self._log = log
        self._on_change = on_change
        self._above_ratio = False
        #: why puts stopped after a reservation or a creation met a full disk (None: they did not)
        self._no_space: str | None = None
        #: the store's file system at the last check (start, then every retention run)
        self.disk: DiskState | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """The loop that owns the store's state (reports from other threads are handed to it)."""
        self._loop = loop
        self._loop_thread = threading.get_ident()

    @property
    def ok(self) -> bool:
        return not self._above_ratio and self._no_space is None

    @property
    def full(self) -> bool:
        """True while puts are refused for want of disk (a full disk met, or above the warning ratio)."""
        return not self.ok

    def reason(self) -> str | None:
        """The refusal's remark while the disk stops puts, else None."""
        if self._no_space is not None:
            return f"the broker's disk is full: {self._no_space}"
        if self._above_ratio:
            ratio = f"{self.disk.ratio:.1%}" if self.disk is not None else "above the limit"
            return (f"the broker's disk is full: {self._dir} is {ratio} used, above "
                    f"diskSpaceWarningLevelRatio={self._warning_ratio}")
        return None

    def on_ratio(self, above: bool) -> None:
        """The retention service's verdict on the warning ratio."""
        self._above_ratio = above
        self._on_change()

    def no_space_seen(self, path: str, exc: OSError) -> None:
        """A reservation or a file creation met a full disk (called from any thread)."""
        reason = f"no space left on the disk of {path or self._dir} ({exc.strerror or exc})"
        loop = self._loop
        if loop is None or threading.get_ident() == self._loop_thread:
            self._set_no_space(reason)
        elif not loop.is_closed():
            loop.call_soon_threadsafe(self._set_no_space, reason)

    def _set_no_space(self, reason: str | None) -> None:
        """Enter or leave the full-disk state, logged once per transition."""
        if (reason is None) != (self._no_space is None):
            if reason is not None:
                self._log.error("disk_full_refusing_puts", reason=reason)
            else:
                self._log.warning("disk_space_recovered_accepting_puts", dir=self._dir)
        self._no_space = reason
        self._on_change()

    async def recheck(self, disk: DiskState) -> None:
        """Each retention run: remember the disk's state and, after a full disk, try the reservation again
        once there is room for a window; puts are taken again when it succeeds."""
        self.disk = disk
        queue = self._commit_log.queue
        if self._no_space is None or disk.available < queue.window:
            return
        last = queue.last
        try:
            if last is not None and not last.is_full:
                await queue.wait_room(last, min(last.file_size, last.wrote_position + queue.window // 2))
        except OSError as exc:
            self._log.warning("disk_still_full", error=str(exc), available=disk.available)
            return
        self._set_no_space(None)


__all__ = ["DiskGuard"]
