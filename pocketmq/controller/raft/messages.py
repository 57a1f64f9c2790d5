"""The Raft messages and their wire form: pure dataclasses and a msgpack codec, no I/O.

Every message carries the sender's ``term`` and id. ``sent_at`` is the leader's own monotonic clock when it sent an
append or a snapshot; the follower echoes it back, so the leader knows how recently a majority accepted it as
leader (its read and fencing lease, :meth:`pocketmq.controller.raft.core.RaftCore.lease_valid`) without comparing
clocks of two machines.

Wire form: one msgpack array, ``[kind, term, sender, ...fields]``; entries as ``[term, index, data]``. A body that
does not decode to a known message raises :class:`RaftCodecError` (the transport drops it; Raft tolerates lost
messages).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgpack

__all__ = [
    "AppendRequest", "AppendResponse", "Entry", "Message", "RaftCodecError", "SnapshotRequest", "SnapshotResponse",
    "VoteRequest", "VoteResponse", "decode_message", "encode_message",
]


class RaftCodecError(ValueError):
    """Bytes that are not a Raft message."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One log entry; ``data`` empty is the no-op a new leader appends to commit its term."""

    term: int
    index: int
    data: bytes


@dataclass(frozen=True, slots=True)
class VoteRequest:
    term: int
    sender: str
    last_index: int
    last_term: int
    #: a pre-vote (Ongaro's thesis, chapter 9) asks whether a real election would succeed, changing nobody's term
    pre_vote: bool


@dataclass(frozen=True, slots=True)
class VoteResponse:
    term: int
    sender: str
    granted: bool
    pre_vote: bool


@dataclass(frozen=True, slots=True)
class AppendRequest:
    term: int
    sender: str
    prev_index: int
    prev_term: int
    entries: tuple[Entry, ...]
    commit: int
    sent_at: float


@dataclass(frozen=True, slots=True)
class AppendResponse:
    term: int
    sender: str
    success: bool
    #: on success the follower's last index matching the leader; on failure where the leader should try next
    #: (one less than the first index it should send)
    match_index: int
    sent_at: float


@dataclass(frozen=True, slots=True)
class SnapshotRequest:
    term: int
    sender: str
    index: int
    snapshot_term: int
    data: bytes
    sent_at: float


@dataclass(frozen=True, slots=True)
class SnapshotResponse:
    term: int
    sender: str
    index: int
    sent_at: float


Message = VoteRequest | VoteResponse | AppendRequest | AppendResponse | SnapshotRequest | SnapshotResponse

_KINDS: dict[type, int] = {VoteRequest: 1, VoteResponse: 2, AppendRequest: 3, AppendResponse: 4,
                           SnapshotRequest: 5, SnapshotResponse: 6}


def encode_message(message: Message) -> bytes:
    """The msgpack body of ``message``."""
    fields: list[Any]
    match message:
        case VoteRequest():
            fields = [message.last_index, message.last_term, message.pre_vote]
        case VoteResponse():
            fields = [message.granted, message.pre_vote]
        case AppendRequest():
            fields = [message.prev_index, message.prev_term, [[e.term, e.index, e.data] for e in message.entries],
                      message.commit, message.sent_at]
        case AppendResponse():
            fields = [message.success, message.match_index, message.sent_at]
        case SnapshotRequest():
            fields = [message.index, message.snapshot_term, message.data, message.sent_at]
        case SnapshotResponse():
            fields = [message.index, message.sent_at]
    packed: bytes = msgpack.packb([_KINDS[type(message)], message.term, message.sender, *fields], use_bin_type=True)
    return packed


def decode_message(body: bytes | bytearray | memoryview) -> Message:
    """The message in ``body``; :class:`RaftCodecError` for anything else."""
    try:
        kind, term, sender, *rest = msgpack.unpackb(bytes(body), raw=False, strict_map_key=True)
        if not isinstance(term, int) or not isinstance(sender, str) or term < 0:
            raise RaftCodecError("bad term or sender")
        return _decode(kind, term, sender, rest)
    except RaftCodecError:
        raise
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise RaftCodecError(f"undecodable Raft message: {exc}") from None


def _int(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise RaftCodecError(f"expected a non-negative integer, got {value!r:.40}")
    return value


def _float(value: object) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise RaftCodecError(f"expected a number, got {value!r:.40}")
    return float(value)


def _bool(value: object) -> bool:
    if not isinstance(value, bool):
        raise RaftCodecError(f"expected a boolean, got {value!r:.40}")
    return value


def _bytes(value: object) -> bytes:
    if not isinstance(value, bytes):
        raise RaftCodecError("expected bytes")
    return value


def _entries(value: object) -> tuple[Entry, ...]:
    if not isinstance(value, list):
        raise RaftCodecError("expected a list of entries")
    out = []
    for item in value:
        if not isinstance(item, list) or len(item) != 3:
            raise RaftCodecError("bad entry")
        out.append(Entry(_int(item[0]), _int(item[1]), _bytes(item[2])))
    return tuple(out)


def _decode(kind: object, term: int, sender: str, rest: list[Any]) -> Message:
    match kind, len(rest):
        case 1, 3:
            return VoteRequest(term, sender, _int(rest[0]), _int(rest[1]), _bool(rest[2]))
        case 2, 2:
            return VoteResponse(term, sender, _bool(rest[0]), _bool(rest[1]))
        case 3, 5:
            return AppendRequest(term, sender, _int(rest[0]), _int(rest[1]), _entries(rest[2]), _int(rest[3]),
                                 _float(rest[4]))
        case 4, 3:
            return AppendResponse(term, sender, _bool(rest[0]), _int(rest[1]), _float(rest[2]))
        case 5, 4:
            return SnapshotRequest(term, sender, _int(rest[0]), _int(rest[1]), _bytes(rest[2]), _float(rest[3]))
        case 6, 2:
            return SnapshotResponse(term, sender, _int(rest[0]), _float(rest[1]))
    raise RaftCodecError(f"unknown message kind {kind!r:.20} with {len(rest)} fields")
