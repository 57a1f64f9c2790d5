"""Controller mode on the slave's side of replication: the epoch handshake, the cut it decides, the epoch file kept
as the copied data reaches each epoch.

On every connection the slave first sends its broker id (:func:`pocketmq.ha.wire.encode_slave_handshake`); the master
answers with its epoch entries and max offset. :meth:`SlaveEpochs.plan` compares them with the slave's own epoch file
(:func:`pocketmq.ha.epoch_file.find_consistent_point`, RocketMQ 5's rule): what the slave holds past the last point
both logs agree on was written by a master whose tail did not survive, and is cut before anything is copied. The
slave's epoch file is then its own entries up to there, and each later entry of the master's is recorded once the
copied data goes past its start (:meth:`SlaveEpochs.record`) — so the file always describes exactly what the log holds,
and the slave can become a master that other replicas compare with.

A slave whose epoch file is empty (a new replica, or a log from before controller mode) cuts nothing. One that shares
no epoch with the master, or would have to cut before its own oldest data, is refused (logged): it needs its store
wiped, as in RocketMQ.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from pocketmq.ha.epoch_file import Epoch, EpochFileCache, find_consistent_point
from pocketmq.ha.wire import HandshakeError, encode_slave_handshake

__all__ = ["SlaveEpochs"]


class SlaveEpochs:
    """See the module docstring. ``epochs`` is the slave's epoch file (the broker loaded it)."""

    def __init__(self, broker_id: int, epochs: EpochFileCache) -> None:
        self.broker_id = broker_id
        self.epochs = epochs
        #: the master's entries the copied data has not reached yet
        self.pending: list[Epoch] = []
        #: the master's epoch as its handshake said (0 before one)
        self.master_epoch = 0
        #: told the master's epoch once the log agrees with that master's (after any cut)
        self.on_adopted: Callable[[int], None] | None = None

    def hello(self) -> bytes:
        return encode_slave_handshake(self.broker_id)

    def plan(self, master: list[tuple[int, int]], master_max: int, local_max: int, local_min: int) -> int | None:
        """Where the slave's log must be cut (None: nowhere). Raises :class:`HandshakeError` when the logs share no
        epoch or the cut would fall before the slave's oldest data."""
        entries = [Epoch(e, s) for e, s in master]
        local = self.epochs.entries
        if not local or local_max == 0:
            return None
        point = find_consistent_point(local, local_max, entries, master_max)
        if point < 0:
            raise HandshakeError(f"no epoch in common with the master (ours {local[-3:]}, the master's "
                                 f"{entries[-3:]}): this replica's store must be emptied")
        if point >= local_max:
            return None
        if point < local_min:
            raise HandshakeError(f"the logs part at {point}, before this replica's oldest data ({local_min})")
        return point

    async def adopt(self, master: list[tuple[int, int]], master_epoch: int, log_max: int) -> None:
        """After any cut (the log now ends at ``log_max``): our entries up to there, the master's later ones pending,
        those the log already reaches recorded."""
        self.master_epoch = master_epoch
        kept = [e for e in self.epochs.entries if e.start_offset < log_max] if log_max else []
        last = kept[-1].epoch if kept else -1
        self.pending = [Epoch(e, s) for e, s in master if e > last]
        if kept != self.epochs.entries:
            await asyncio.to_thread(self.epochs.replace_all, kept)
        await self.record(log_max)
        if self.on_adopted is not None:
            self.on_adopted(master_epoch)

    def due(self, max_offset: int) -> bool:
        """True when the copied data went past the start of a pending entry."""
        return bool(self.pending) and self.pending[0].start_offset < max_offset

    async def record(self, max_offset: int) -> None:
        """Write the pending entries the data now reaches (in a thread)."""
        reached = []
        while self.pending and self.pending[0].start_offset < max_offset:
            reached.append(self.pending.pop(0))
        if reached:
            await asyncio.to_thread(self._append_all, reached)

    def _append_all(self, entries: list[Epoch]) -> None:
        for entry in entries:
            self.epochs.append(entry)
