"""What each part of replication is given, as narrow :class:`typing.Protocol` interfaces.

Replication reaches the store and its own parts only through these, so that a part sees what it needs and
nothing it could misuse, and so that no two ``ha`` modules need each other:

* :class:`CommitLogView` — the master's commit log, read-only: its bounds, where an abnormal start's
  recovery left it, a zero-copy read of written bytes within one file, and its file size (a slave
  reporting 0 joins at the start of the last file). A connection is given this, not the store.
* :class:`MasterLog` — what the master's :class:`pocketmq.ha.service.HAService` needs: the view plus the growth
  listener that wakes (and eagerly feeds) the senders.
* :class:`SlaveLog` — what the slave's :class:`pocketmq.ha.client.HAClient` needs: its bounds, appending raw bytes
  from the master, indexing them, restarting the log at a file boundary, and cutting it back to a record.
* :class:`ReplicaHub` — what a master's connection needs from whoever keeps the connections: to be
  registered, to be forgotten when it closes, and to record a validated acknowledgement (which may release
  SYNC_MASTER puts). :class:`pocketmq.ha.service.HAService` is the hub.

:class:`pocketmq.store.MessageStore` satisfies the three log interfaces as it is; this module imports nothing of ours,
so every ``ha`` module may import it (the import graph of ``ha`` has no circle, type-only imports included).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar


class CommitLogGeometry(Protocol):
    """The commit log's file size (every file holds this many bytes; files start at multiples of it)."""

    @property
    def mapped_file_size_commit_log(self) -> int: ...


class CommitLogView(Protocol):
    """The master's commit log as a connection's two halves read it (nothing here writes)."""

    @property
    def config(self) -> CommitLogGeometry: ...

    @property
    def max_phy_offset(self) -> int:
        """Offset just past the last record."""
        ...

    @property
    def min_phy_offset(self) -> int:
        """Oldest offset still on disk."""
        ...

    @property
    def recovered_max(self) -> int | None:
        """After an abnormal start, the max offset right after recovery (a slave may hold other bytes past
        it); None after a clean start."""
        ...

    def get_commit_log_data(self, offset: int, max_bytes: int | None = None) -> memoryview | None:
        """Written bytes from ``offset`` to the end of its file (at most ``max_bytes``), as a view of the mapped
        file; None when ``offset`` is not in the log (deleted, or not yet written)."""
        ...


class MasterLog(CommitLogView, Protocol):
    """The master's commit log as the replication service uses it."""

    def add_commitlog_growth_listener(self, listener: Callable[[int], None]) -> None:
        """Call ``listener(max_offset)`` after each append."""
        ...


class SlaveLog(Protocol):
    """The slave's commit log as the replication client writes it."""

    @property
    def config(self) -> CommitLogGeometry: ...

    @property
    def max_phy_offset(self) -> int: ...

    @property
    def min_phy_offset(self) -> int: ...

    def append_to_commit_log(self, offset: int, data: bytes | memoryview, *, dispatch: bool = True) -> bool:
        """Append bytes received from the master at ``offset`` (the log's max offset); False when refused."""
        ...

    def dispatch_replicated(self) -> bool:
        """Check and index what was appended since the last call; False when it is not valid records (they
        are cut)."""
        ...

    def commit_log_room(self, offset: int, size: int) -> bool:
        """True when appending ``size`` bytes at ``offset`` will not block; otherwise await
        :meth:`wait_commit_log_room` first. Never blocks."""
        ...

    async def wait_commit_log_room(self, offset: int, size: int) -> None:
        """Wait until :meth:`commit_log_room` holds (raises OSError)."""
        ...

    @property
    def dispatch_waiting(self) -> bool:
        """True when the last dispatch stopped before a record that needs :meth:`prepare_dispatch`."""
        ...

    async def prepare_dispatch(self) -> None:
        """Make what the stopped dispatch needs, off the event loop (raises OSError)."""
        ...

    def reset_commit_log(self, offset: int) -> bool:
        """Drop the log and restart it empty at ``offset``, a file boundary at or past its max offset."""
        ...

    async def truncate_commit_log(self, offset: int) -> bool:
        """Cut the log (and its consume queues) back to ``offset``, a record start it holds before its max
        offset; False (nothing changes) for any other offset."""
        ...


ConnectionT_contra = TypeVar("ConnectionT_contra", contravariant=True)


class ReplicaHub(Protocol[ConnectionT_contra]):
    """Keeper of a master's slave connections, as a connection sees it."""

    def register(self, connection: ConnectionT_contra) -> bool:
        """A slave connected; False when it must be closed at once (stopping, or too many slaves)."""
        ...

    def forget(self, connection: ConnectionT_contra) -> None:
        """The connection closed: it no longer counts (called once, from the connection's one close path)."""
        ...

    def acknowledged(self, offset: int) -> None:
        """A connection's slave acknowledged ``offset``, already validated by the connection (never beyond
        the master's max offset, never backwards, never beyond what it was sent)."""
        ...

    @property
    def handshake_required(self) -> bool:
        """Controller mode: slaves open with the epoch handshake."""
        ...

    def handshake_reply(self) -> bytes:
        """The master's half of the epoch handshake."""
        ...
