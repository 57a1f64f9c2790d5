"""Consumer offsets held by the client: the table behind RocketMQ's ``RemoteOffsetStore``, the file-backed
``LocalOffsetStore`` of BROADCASTING consumers, and the :class:`OffsetCommitter` that sends them where they
are kept.

An offset is the next queue offset to consume (one past the last acknowledged message); ``-1`` means "none
known". CLUSTERING consumers keep the table in memory and commit its changed entries to the broker every
5 s, when a queue is taken away, and at shutdown (``UPDATE_CONSUMER_OFFSET``: oneway from the periodic
service, waiting for the answers at shutdown).
BROADCASTING consumers each keep their own offsets in a JSON file::

    ~/.rocketmq_offsets/<clientId>/<group>/offsets.json
    {"offsetTable":[{"topic":"T","brokerName":"broker-a","queueId":0,"offset":12}, ...]}

(a list, because JSON object keys cannot be queues). The file is replaced atomically: written to a temp
file in the same directory, fsynced, renamed over the old one, and the directory fsynced, so a crash
leaves either the old or the new table, never a torn one.

The table is shared between the event loop (updates) and a worker thread (:meth:`LocalOffsetStore.persist`
runs in one, because it blocks on disk), so its methods take a short lock around the dict.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Container, Iterable, Mapping
from pathlib import Path
from typing import Any

from pocketmq.client.consumer.broker_api import ConsumerAPI
from pocketmq.client.core.errors import MQClientError
from pocketmq.client.core.message import MessageQueue
from pocketmq.common.files import write_atomically
from pocketmq.remoting.errors import PocketMQError

__all__ = [
    "DEFAULT_LOCAL_OFFSET_STORE_DIR",
    "LocalOffsetStore",
    "OffsetCommitter",
    "OffsetStoreError",
    "OffsetTable",
    "RemoteOffsetStore",
    "decode_offsets",
    "encode_offsets",
    "local_offset_store_path",
]

#: RocketMQ's ``rocketmq.client.localOffsetStoreDir`` default.
DEFAULT_LOCAL_OFFSET_STORE_DIR = Path.home() / ".rocketmq_offsets"
OFFSETS_FILE_NAME = "offsets.json"
NO_OFFSET = -1


class OffsetStoreError(MQClientError):
    """The local offsets file cannot be read or written, or does not hold an offset table."""

    retriable = False


class OffsetTable:
    """Queue → next offset to consume, with the entries changed since they were last committed.

    :meth:`snapshot` hands out the changed entries without forgetting them; :meth:`mark_committed` forgets
    those whose value has not moved since, so a failed commit is retried next time and an update racing
    with a commit is never lost.
    """

    __slots__ = ("_dirty", "_lock", "_offsets")

    def __init__(self) -> None:
        self._offsets: dict[MessageQueue, int] = {}
        self._dirty: set[MessageQueue] = set()
        self._lock = threading.Lock()

    def update(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> bool:
        """Set ``mq``'s offset; with ``increase_only`` only if it is higher than the one held (committing
        after each acknowledged batch never moves an offset back). Returns whether the value changed."""
        with self._lock:
            current = self._offsets.get(mq)
            if current is not None and (current == offset or (increase_only and offset < current)):
                return False
            self._offsets[mq] = offset
            self._dirty.add(mq)
            return True

    def set_committed(self, mq: MessageQueue, offset: int) -> None:
        """Set an offset read from where it is committed (broker or file): nothing to commit back."""
        with self._lock:
            self._offsets[mq] = offset
            self._dirty.discard(mq)

    def read(self, mq: MessageQueue) -> int:
        """The offset held for ``mq``, or ``-1``."""
        with self._lock:
            return self._offsets.get(mq, NO_OFFSET)

    def __contains__(self, mq: object) -> bool:
        with self._lock:
            return mq in self._offsets

    def remove(self, mq: MessageQueue) -> None:
        """Forget ``mq`` (it was allocated to another consumer; commit it first)."""
        with self._lock:
            self._offsets.pop(mq, None)
            self._dirty.discard(mq)

    def snapshot(self, *, all_entries: bool = False) -> dict[MessageQueue, int]:
        """The entries to commit: the changed ones (or all with ``all_entries``), never negative ones."""
        with self._lock:
            queues: Iterable[MessageQueue] = self._offsets if all_entries else self._dirty
            return {mq: self._offsets[mq] for mq in queues if self._offsets[mq] >= 0}

    def mark_committed(self, committed: Mapping[MessageQueue, int]) -> None:
        """These entries reached their destination; forget the change if the offset is still the same."""
        with self._lock:
            for mq, offset in committed.items():
                if self._offsets.get(mq) == offset:
                    self._dirty.discard(mq)

    def offsets(self, topic: str | None = None) -> dict[MessageQueue, int]:
        """A copy of the table, or of one topic's part (Java ``cloneOffsetTable``)."""
        with self._lock:
            return {mq: off for mq, off in self._offsets.items() if topic is None or mq.topic == topic}

    def __len__(self) -> int:
        with self._lock:
            return len(self._offsets)


class RemoteOffsetStore(OffsetTable):
    """The CLUSTERING consumer's table. The consumer commits :meth:`snapshot` to the broker; for a queue it
    holds no offset for, it asks the broker (QUERY_CONSUMER_OFFSET) and keeps the answer with
    :meth:`set_committed`."""

    __slots__ = ()


def local_offset_store_path(client_id: str, group: str, base_dir: str | os.PathLike[str] | None = None) -> Path:
    """``<base_dir>/<clientId>/<group>/offsets.json``, ``base_dir`` defaulting to ``~/.rocketmq_offsets``."""
    base = Path(base_dir) if base_dir is not None else DEFAULT_LOCAL_OFFSET_STORE_DIR
    return base / client_id / group / OFFSETS_FILE_NAME


def _entry(mq: MessageQueue, offset: int) -> dict[str, Any]:
    return {"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": offset}


def encode_offsets(offsets: Mapping[MessageQueue, int]) -> bytes:
    """The offsets file's content, queues in sorted order (stable output)."""
    table = [_entry(mq, offsets[mq]) for mq in sorted(offsets)]
    return json.dumps({"offsetTable": table}, indent=1, ensure_ascii=False).encode()


def decode_offsets(data: bytes) -> dict[MessageQueue, int]:
    """Parse an offsets file. Raises :class:`OffsetStoreError` unless it is the shape :func:`encode_offsets`
    writes."""
    try:
        document = json.loads(data)
        return {
            MessageQueue(str(e["topic"]), str(e["brokerName"]), int(e["queueId"])): int(e["offset"])
            for e in document["offsetTable"]
        }
    except (ValueError, KeyError, TypeError) as exc:
        raise OffsetStoreError(f"not an offsets file: {exc}") from None


class LocalOffsetStore(OffsetTable):
    """A BROADCASTING consumer's offsets, kept in a local JSON file.

    :meth:`load` and :meth:`persist` block on the disk: from the event loop run them with
    ``await asyncio.to_thread(store.persist)``. Updates may go on meanwhile; :meth:`persist` writes the
    table as it was when it started and marks only those values committed.
    """

    __slots__ = ("_persist_lock", "path")

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__()
        self.path = Path(path)
        # Two overlapping persists must not let the older table's rename land last.
        self._persist_lock = threading.Lock()

    @classmethod
    def for_client(cls, client_id: str, group: str, base_dir: str | os.PathLike[str] | None = None) -> LocalOffsetStore:
        return cls(local_offset_store_path(client_id, group, base_dir))

    @classmethod
    async def opened(cls, client_id: str, group: str, base_dir: str | os.PathLike[str] | None) -> LocalOffsetStore:
        """A BROADCASTING consumer's store, its file loaded in a thread (raises :class:`OffsetStoreError`)."""
        local = cls.for_client(client_id, group, base_dir)
        await asyncio.to_thread(local.load)
        return local

    def load(self) -> None:
        """Read the file into the table (a missing file is an empty table). Raises :class:`OffsetStoreError`
        for a file that cannot be read or parsed."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise OffsetStoreError(f"cannot read {self.path}: {exc}") from None
        for queue, value in decode_offsets(data).items():
            self.set_committed(queue, value)

    def persist(self) -> None:
        """Write every non-negative offset to the file atomically (blocking; run it in a thread)."""
        with self._persist_lock:
            table = self.snapshot(all_entries=True)
            try:
                write_atomically(self.path, encode_offsets(table))
            except OSError as exc:
                raise OffsetStoreError(f"cannot write {self.path}: {exc}") from None
            self.mark_committed(table)


class OffsetCommitter:
    """Sends a push consumer's offsets where they are kept: the local file (BROADCASTING) or the brokers
    (CLUSTERING: only queues still assigned, each to the master of its broker group, or to any member when
    it has none). A failed commit is logged and retried with the next one."""

    def __init__(self, offsets: OffsetTable, api: ConsumerAPI, log: Any) -> None:
        self.offsets = offsets
        self._api = api
        self._log = log

    async def commit_all(self, assigned: Container[MessageQueue], *, final: bool) -> None:
        """Commit the offsets that moved, of the ``assigned`` queues; ``final`` waits for the answers."""
        if isinstance(self.offsets, LocalOffsetStore):
            try:
                await asyncio.to_thread(self.offsets.persist)
            except PocketMQError as exc:
                self._log.warning("persist_local_offsets_failed", error=str(exc))
            return
        snapshot = self.offsets.snapshot()
        for mq in [mq for mq in snapshot if mq not in assigned]:
            del snapshot[mq]  # committed when the queue was taken away
        if not snapshot:
            return
        results = await asyncio.gather(*(self._commit(mq, offset, oneway=not final)
                                         for mq, offset in snapshot.items()))
        self.offsets.mark_committed({mq: off for (mq, off), ok in zip(snapshot.items(), results, strict=True) if ok})

    async def commit_queue(self, mq: MessageQueue) -> None:
        """Commit one queue's offset now (it is being taken away, or its offset was corrected)."""
        if isinstance(self.offsets, LocalOffsetStore):
            return  # persisted with the whole file
        offset = self.offsets.read(mq)
        if offset >= 0 and await self._commit(mq, offset, oneway=True):
            self.offsets.mark_committed({mq: offset})

    async def _commit(self, mq: MessageQueue, offset: int, *, oneway: bool) -> bool:
        try:
            await self._api.update_consumer_offset(mq, offset, oneway=oneway)
        except PocketMQError as exc:
            self._log.warning("commit_offset_failed", topic=mq.topic, broker=mq.broker_name, queue_id=mq.queue_id,
                              offset=offset, error=str(exc))
            return False
        return True
