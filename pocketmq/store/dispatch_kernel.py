# mypy: disable-error-code="untyped-decorator"
"""The per-record dispatch work, compiled: the index walk (:func:`index_span`) and a slave's consume-queue
requests (:func:`dispatch_requests`).

:func:`index_span` indexes the records of one commit-log file span. For every record it finds its place and
fields (:func:`_good_record_end`: the tests of :func:`~pocketmq.common.record.locate_record`'s good path, read typed
from the mapping; any other record goes to ``locate_record`` itself, which decides: a blank marker, damage,
or a record valid after all), finds its ``UNIQ_KEY`` and ``KEYS`` in one pass over the raw properties (the
last item of a name wins, as :func:`~pocketmq.common.message.get_property` decides), computes the Java
``String.hashCode()`` of each ``topic#key`` straight from the mapped bytes and writes the entries and slots of
:mod:`pocketmq.store.index.file` into the index file's mapping: no bytes object, string, list or ``struct`` call per
key. As plain Python (``POCKETMQ_PURE_PYTHON=1``, no compiler) the same walk calls :func:`key_hashes` and
:meth:`~pocketmq.store.index.file.IndexFile.put_keys` instead (``sum(map(...))`` hashing and ``struct`` writes beat
per-byte Python loops); both builds write the same bytes (``tests/test_compiled.py``). Keys that are not ASCII
(their UTF-16 code units are not their bytes) and topics that are not ASCII take the plain path for that key or
record. The caller (:meth:`pocketmq.store.index.service.IndexService._slice`) keeps the walk's state in a :class:`Walk`,
which this module updates even when the record it stops at raises.

:func:`dispatch_requests` is :func:`~pocketmq.common.record.check_record` (no CRC) for a run of usual records: the
same :class:`~pocketmq.common.record.DispatchRequest` for each, its tag code hashed from the mapped TAGS bytes, up to
the first record of any other kind (the caller asks the commit log's scanner about it, which asks
``check_record``). One call per run: acquiring the typed view of a mapping costs about a microsecond.
"""

from __future__ import annotations

import struct
from typing import Any

try:
    import cython
except ImportError:  # an install without Cython: the plain-Python names
    from pocketmq.common import pure_mode as cython

from pocketmq.common.message import MessageConst, get_property, java_hash, java_hash_after
from pocketmq.common.record import (
    BORN_HOST_OFFSET,
    HEADER_STRUCTS,
    IPV4_HOST_LENGTH,
    IPV6_HOST_LENGTH,
    MAX_PROPERTIES_LENGTH,
    MAX_TOPIC_LENGTH,
    MESSAGE_MAGIC_CODE,
    PHYSICAL_OFFSET_OFFSET,
    QUEUE_ID_OFFSET,
    QUEUE_OFFSET_OFFSET,
    SYS_FLAG_OFFSET,
    TOPIC_NAMES,
    Blank,
    DispatchRequest,
    locate_record,
    remember_topic,
)
from pocketmq.common.sysflag import MessageSysFlag
from pocketmq.common.topic import RMQ_SYS_SCHEDULE_TOPIC
from pocketmq.store.index.file import ENTRY_SIZE, HEADER_SIZE, SLOT_SIZE, IndexFile, key_hash, positive_hash

_TXN_MASK = cython.declare(cython.int, MessageSysFlag.TRANSACTION_MASK)
_ROLLBACK = cython.declare(cython.int, MessageSysFlag.TRANSACTION_ROLLBACK_TYPE)
_INT_MAX = cython.declare(cython.longlong, 0x7FFFFFFF)
_HEADER = cython.declare(cython.Py_ssize_t, HEADER_SIZE)
_SLOT = cython.declare(cython.Py_ssize_t, SLOT_SIZE)
_ENTRY = cython.declare(cython.Py_ssize_t, ENTRY_SIZE)
_MAGIC = cython.declare(cython.int, MESSAGE_MAGIC_CODE)
_MAX_TOPIC = cython.declare(cython.Py_ssize_t, MAX_TOPIC_LENGTH)
_MAX_PROPERTIES = cython.declare(cython.Py_ssize_t, MAX_PROPERTIES_LENGTH)
_SYS_FLAG_AT = cython.declare(cython.Py_ssize_t, SYS_FLAG_OFFSET)
_PHYS_AT = cython.declare(cython.Py_ssize_t, PHYSICAL_OFFSET_OFFSET)
_QUEUE_ID_AT = cython.declare(cython.Py_ssize_t, QUEUE_ID_OFFSET)
_QUEUE_OFFSET_AT = cython.declare(cython.Py_ssize_t, QUEUE_OFFSET_OFFSET)
_HOST_BITS_AT = cython.declare(cython.Py_ssize_t, SYS_FLAG_OFFSET + 3)
_BORN_HOST_AT = cython.declare(cython.Py_ssize_t, BORN_HOST_OFFSET)
_V4_HOST = cython.declare(cython.Py_ssize_t, IPV4_HOST_LENGTH)
_V6_HOST = cython.declare(cython.Py_ssize_t, IPV6_HOST_LENGTH)
_FIXED = cython.declare(cython.Py_ssize_t, HEADER_STRUCTS[0].size - 2 * IPV4_HOST_LENGTH)
"""Bytes of the fixed fields but the two hosts (BORNHOST's and STOREHOST's lengths depend on SYSFLAG)."""
_TAGS_NAME = MessageConst.PROPERTY_TAGS.encode()
_new_tuple = tuple.__new__
_UNIQ_NAME = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX.encode()
_KEYS_NAME = MessageConst.PROPERTY_KEYS.encode()
TOPIC_SEEDS_MAX = 4096
_SEEDS: dict[str, int] = {}
"""``hash(topic + "#")`` by topic, for the plain build (bounded: cleared at :data:`TOPIC_SEEDS_MAX`)."""


class Walk:
    """Where a walk is: ``pos`` (in the file span), ``last`` (commit-log offset of the last record indexed,
    or skipped as a rollback), ``done`` (records met this slice) against ``budget``, ``room`` (entries that
    may be written now), ``touched`` (records that put keys), and why a span ended: ``need`` (> 0: the next
    record needs that many entries, which have no room), ``blank`` (the file's end marker)."""

    __slots__ = ("blank", "budget", "done", "last", "need", "pos", "room", "touched")

    def __init__(self, last: int, room: int, budget: int) -> None:
        self.pos = 0
        self.last = last
        self.room = room
        self.budget = budget
        self.done = 0
        self.touched = 0
        self.need = 0
        self.blank = False


def topic_seed(raw: bytes) -> int:
    """``hash(topic + "#")`` of a record's raw topic (bad UTF-8 raises ``UnicodeDecodeError``)."""
    topic = TOPIC_NAMES.get(raw) or remember_topic(raw)
    seed = _SEEDS.get(topic)
    if seed is None:
        if len(_SEEDS) >= TOPIC_SEEDS_MAX:
            _SEEDS.clear()
        seed = _SEEDS[topic] = java_hash(topic + "#")
    return seed


def key_hashes(topic: str, topic_hash: int, properties: bytes, most: int) -> list[int]:
    """The :func:`~pocketmq.store.index.file.key_hash` of each index key (``topic#key``) of a record's raw properties,
    its UNIQ_KEY then each key of KEYS, at most ``most``; ``topic_hash`` is ``hash(topic + "#")``. ASCII keys
    are hashed from their bytes (no string is built), others as the decoded ``topic#key``."""
    found = []
    uniq = get_property(properties, _UNIQ_NAME)
    if uniq:
        found.append(_hash_of(topic, topic_hash, uniq))
    keys = get_property(properties, _KEYS_NAME)
    if keys:
        found.extend(_hash_of(topic, topic_hash, key) for key in keys.split(b" ") if key)
    return found if len(found) <= most else found[:most]


def _hash_of(topic: str, topic_hash: int, key: bytes) -> int:
    if key.isascii():
        return positive_hash(java_hash_after(topic_hash, key))
    return key_hash(f"{topic}#{key.decode(errors='replace')}")


def slow_key_hash(seed: int, key: bytes) -> int:
    """The index hash of ``topic#key`` from ``seed = hash(topic + "#")`` and the key's raw bytes, decoded as
    the index always did (bad UTF-8 replaced), over its UTF-16 code units."""
    units = key.decode(errors="replace").encode("utf-16-be")
    return positive_hash(java_hash_after(seed, struct.unpack(f">{len(units) // 2}H", units)))


def index_span(walk: Walk, view: memoryview, limit: int, file_size: int, base: int, index: IndexFile | None,
               most: int) -> None:
    """Index the records of ``view`` (a commit-log file starting at commit-log offset ``base``) from
    ``walk.pos`` up to ``limit``, at most ``walk.budget - walk.done`` of them, keys up to ``most`` per record
    (see the module docstring). Raises what :func:`~pocketmq.common.record.locate_record` raises, ``walk`` then at
    the record that raised."""
    if cython.compiled and not view.readonly:  # a read-only buffer (a tool's) takes the plain walk
        _span_typed(walk, view, limit, file_size, base, index, most)
    else:
        _span_plain(walk, view, limit, file_size, base, index, most)


def _span_plain(walk: Walk, view: memoryview, limit: int, file_size: int, base: int, index: IndexFile | None,
                most: int) -> None:
    pos, last, done, budget, room, touched = walk.pos, walk.last, walk.done, walk.budget, walk.room, walk.touched
    try:
        while pos < limit and done < budget:
            parts = locate_record(view, pos, limit, False, None, False)
            if isinstance(parts, Blank):
                walk.blank = True
                pos = file_size
                break
            fields, _body_start, _body_end, topic_start, props_start = parts
            end = pos + fields[0]
            phys = base + pos
            if phys > last and fields[7] & _TXN_MASK != _ROLLBACK:
                raw_topic = bytes(view[topic_start:props_start - 2])
                topic = TOPIC_NAMES.get(raw_topic) or remember_topic(raw_topic)
                keys = key_hashes(topic, topic_seed(raw_topic), bytes(view[props_start:end]), most)
                if keys:
                    if index is None or len(keys) > room:
                        walk.need = len(keys)
                        break
                    index.put_keys(keys, phys, fields[10])
                    room -= len(keys)
                    touched += 1
                last = phys
            pos = end
            done += 1
    finally:
        walk.pos, walk.last, walk.done, walk.room, walk.touched = pos, last, done, room, touched


@cython.cfunc
@cython.inline
@cython.locals(lv=cython.uchar[::1], at=cython.Py_ssize_t, end=cython.Py_ssize_t)
@cython.returns(cython.Py_ssize_t)
def _item_end(lv: Any, at: Any, end: Any) -> cython.Py_ssize_t:
    """Where the property item starting at ``at`` ends (its ``\\x02`` separator, or ``end``)."""
    while at < end and lv[at] != 2:
        at += 1
    return at


@cython.cfunc
@cython.inline
@cython.locals(lv=cython.uchar[::1], at=cython.Py_ssize_t, stop=cython.Py_ssize_t, i=cython.Py_ssize_t,
               n=cython.Py_ssize_t)
@cython.returns(cython.bint)
def _is_item(lv: Any, at: Any, stop: Any, name: bytes) -> cython.bint:
    """True when the property item ``lv[at:stop]`` is named ``name`` (``name\\x01value``)."""
    n = len(name)
    if stop - at <= n or lv[at + n] != 1:
        return False
    for i in range(n):  # noqa: SIM110 (a typed loop: all() would build a generator)
        if lv[at + i] != name[i]:
            return False
    return True


@cython.cfunc
@cython.locals(lv=cython.uchar[::1], at=cython.Py_ssize_t, stop=cython.Py_ssize_t, i=cython.Py_ssize_t,
               h=cython.uint, c=cython.uchar, s=cython.int, seed=cython.int)
@cython.returns(cython.longlong)
def _key_hash(view: Any, lv: Any, at: Any, stop: Any, seed: Any) -> cython.longlong:
    """The index hash of the key ``lv[at:stop]`` after a topic of hash ``seed`` (non-ASCII: the plain path)."""
    h = cython.cast(cython.uint, seed)
    for i in range(at, stop):
        c = lv[i]
        if c >= 0x80:
            return slow_key_hash(seed, bytes(view[at:stop]))
        h = h * 31 + c
    s = cython.cast(cython.int, h)
    if s == -0x7FFFFFFF - 1:
        return 0
    return -s if s < 0 else s


@cython.cfunc
@cython.inline
@cython.locals(lv=cython.uchar[::1], at=cython.Py_ssize_t)
@cython.returns(cython.int)
def _get32(lv: Any, at: Any) -> cython.int:
    return cython.cast(cython.int, (cython.cast(cython.uint, lv[at]) << 24)
                       | (cython.cast(cython.uint, lv[at + 1]) << 16)
                       | (cython.cast(cython.uint, lv[at + 2]) << 8) | lv[at + 3])


@cython.cfunc
@cython.inline
@cython.locals(lv=cython.uchar[::1], at=cython.Py_ssize_t)
@cython.returns(cython.longlong)
def _get64(lv: Any, at: Any) -> cython.longlong:
    return cython.cast(cython.longlong, (cython.cast(cython.ulonglong, cython.cast(cython.uint, _get32(lv, at))) << 32)
                       | cython.cast(cython.uint, _get32(lv, at + 4)))


@cython.cfunc
@cython.inline
@cython.locals(host_bits=cython.uchar)
@cython.returns(cython.Py_ssize_t)
def _header_size(host_bits: Any) -> cython.Py_ssize_t:
    """Bytes of a record's fixed fields (up to BODYLENGTH), by the host bits of SYSFLAG's last byte."""
    return (_FIXED + (_V6_HOST if host_bits & 0x10 else _V4_HOST)
            + (_V6_HOST if host_bits & 0x20 else _V4_HOST))


@cython.cfunc
@cython.locals(lv=cython.uchar[::1], pos=cython.Py_ssize_t, lim=cython.Py_ssize_t, size=cython.Py_ssize_t,
               end=cython.Py_ssize_t, body=cython.Py_ssize_t, tstart=cython.Py_ssize_t, tlen=cython.Py_ssize_t,
               pstart=cython.Py_ssize_t, plen=cython.Py_ssize_t)
@cython.returns(cython.Py_ssize_t)
def _good_record_end(lv: Any, pos: Any, lim: Any) -> cython.Py_ssize_t:
    """Where the record at ``pos`` ends when it passes every test of ``locate_record``'s good path (magic,
    sizes within ``lim``, topic and properties lengths; no CRC, no expected offset): else 0, and the
    caller asks ``locate_record`` itself (a blank marker, damage, or a variant this does not take)."""
    if lim - pos < _HOST_BITS_AT + 1:
        return 0
    size = _header_size(lv[pos + _HOST_BITS_AT])
    if lim - pos < size or _get32(lv, pos + 4) != _MAGIC:
        return 0
    end = pos + _get32(lv, pos)
    body = _get32(lv, pos + size - 4)
    tstart = pos + size + body + 1
    if body < 0 or end > lim or tstart > end:
        return 0
    tlen = lv[tstart - 1]
    pstart = tstart + tlen + 2
    if tlen <= 0 or tlen > _MAX_TOPIC or pstart > end:
        return 0
    plen = (cython.cast(cython.Py_ssize_t, lv[pstart - 2]) << 8) | lv[pstart - 1]
    if plen > _MAX_PROPERTIES or pstart + plen != end:
        return 0
    return end


@cython.cfunc
@cython.inline
@cython.locals(iv=cython.uchar[::1], at=cython.Py_ssize_t, value=cython.longlong, v=cython.uint)
def _put32(iv: Any, at: Any, value: Any) -> None:
    v = cython.cast(cython.uint, value)
    iv[at] = (v >> 24) & 0xFF
    iv[at + 1] = (v >> 16) & 0xFF
    iv[at + 2] = (v >> 8) & 0xFF
    iv[at + 3] = v & 0xFF


@cython.cfunc
@cython.locals(lv=cython.uchar[::1], iv=cython.uchar[::1], pos=cython.Py_ssize_t, lim=cython.Py_ssize_t,
               end=cython.Py_ssize_t, i=cython.Py_ssize_t, j=cython.Py_ssize_t, tstart=cython.Py_ssize_t,
               tstop=cython.Py_ssize_t, pstart=cython.Py_ssize_t, ustart=cython.Py_ssize_t, ustop=cython.Py_ssize_t,
               kstart=cython.Py_ssize_t, kstop=cython.Py_ssize_t, slot_at=cython.Py_ssize_t,
               entry_at=cython.Py_ssize_t, entries_at=cython.Py_ssize_t, last=cython.longlong,
               phys=cython.longlong, stamp=cython.longlong, begin=cython.longlong, diff=cython.longlong,
               h=cython.longlong, done=cython.Py_ssize_t, budget=cython.Py_ssize_t, room=cython.Py_ssize_t,
               touched=cython.Py_ssize_t, n=cython.Py_ssize_t, wanted=cython.Py_ssize_t, most_c=cython.Py_ssize_t,
               count=cython.longlong, used=cython.longlong, previous=cython.int, slots=cython.longlong,
               seed_u=cython.uint, seed=cython.int, sysflag=cython.int, ascii_topic=cython.bint, c=cython.uchar,
               k=cython.int, p=cython.ulonglong,
               end_phys=cython.longlong, end_stamp=cython.longlong,
               hsize=cython.Py_ssize_t)
def _span_typed(walk: Walk, view: memoryview, limit: int, file_size: int, base: int, index: IndexFile | None,
                most: int) -> None:
    lv = view
    lim = limit
    pos, last, done, budget, room, touched = walk.pos, walk.last, walk.done, walk.budget, walk.room, walk.touched
    most_c = most
    have_index = index is not None
    count = used = slots = entries_at = 0
    begin = 0
    if have_index:
        iv = index.mapped.view  # type: ignore[union-attr]
        count, used, begin = index.index_count, index.hash_slot_count, index.begin_timestamp  # type: ignore[union-attr]
        slots, entries_at = index.slot_num, index.entries_at  # type: ignore[union-attr]
    count0 = count
    end_phys = end_stamp = 0
    try:
        while pos < lim and done < budget:
            end = _good_record_end(lv, pos, lim)
            if end > 0:
                sysflag = _get32(lv, pos + _SYS_FLAG_AT)
                stamp = _get64(lv, pos + _BORN_HOST_AT + (_V6_HOST if lv[pos + _HOST_BITS_AT] & 0x10 else _V4_HOST))
                hsize = _header_size(lv[pos + _HOST_BITS_AT])
                tstart = pos + hsize + _get32(lv, pos + hsize - 4) + 1
                pstart = tstart + lv[tstart - 1] + 2
            else:  # anything but a plain valid record: the commit log's own check decides
                parts = locate_record(view, pos, limit, False, None, False)
                if isinstance(parts, Blank):
                    walk.blank = True
                    pos = file_size
                    break
                fields = parts[0]
                end = pos + fields[0]
                sysflag, stamp = fields[7], fields[10]
                tstart, pstart = parts[3], parts[4]
            phys = base + pos
            if phys > last and (sysflag & _TXN_MASK) != _ROLLBACK:
                tstop = pstart - 2
                # hash(topic + "#"), from the bytes when ASCII
                seed_u = 0
                ascii_topic = True
                for i in range(tstart, tstop):
                    c = lv[i]
                    if c >= 0x80:
                        ascii_topic = False
                        break
                    seed_u = seed_u * 31 + c
                if ascii_topic:
                    seed = cython.cast(cython.int, seed_u * 31 + 35)
                else:
                    seed = topic_seed(bytes(view[tstart:tstop]))
                # the last UNIQ_KEY and KEYS items, one pass
                ustart = ustop = kstart = kstop = -1
                i = pstart
                while i < end:
                    j = _item_end(lv, i, end)
                    if _is_item(lv, i, j, _UNIQ_NAME):
                        ustart, ustop = i + 9, j
                    elif _is_item(lv, i, j, _KEYS_NAME):
                        kstart, kstop = i + 5, j
                    i = j + 1
                wanted = 1 if ustop > ustart else 0
                i = kstart
                while i < kstop:
                    if lv[i] != 32 and (i == kstart or lv[i - 1] == 32):
                        wanted += 1
                    i += 1
                if wanted > most_c:
                    wanted = most_c
                if wanted > 0:
                    if not have_index or wanted > room:
                        walk.need = wanted
                        break
                    if count <= 1:
                        begin = stamp
                        index.begin_timestamp = stamp  # type: ignore[union-attr]
                        index.begin_phy_offset = phys  # type: ignore[union-attr]
                    diff = 0 if begin <= 0 else (stamp - begin) // 1000
                    if diff < 0:
                        diff = 0
                    elif diff > _INT_MAX:
                        diff = _INT_MAX
                    n = 0
                    i = kstart
                    j = ustart
                    while n < wanted:
                        if j >= 0:  # UNIQ_KEY first
                            h = _key_hash(view, lv, ustart, ustop, seed)
                            j = -1
                        else:
                            while lv[i] == 32:
                                i += 1
                            j = i
                            while j < kstop and lv[j] != 32:
                                j += 1
                            h = _key_hash(view, lv, i, j, seed)
                            i = j
                            j = -1
                        slot_at = _HEADER + (h % slots) * _SLOT
                        previous = _get32(iv, slot_at)
                        if previous <= 0 or previous > count:
                            previous = 0
                            used += 1
                        entry_at = entries_at + count * _ENTRY
                        _put32(iv, entry_at, h)
                        p = cython.cast(cython.ulonglong, phys)
                        for k in range(8):
                            iv[entry_at + 4 + k] = (p >> (56 - 8 * k)) & 0xFF
                        _put32(iv, entry_at + 12, diff)
                        _put32(iv, entry_at + 16, previous)
                        _put32(iv, slot_at, count)
                        count += 1
                        n += 1
                    room -= wanted
                    touched += 1
                    end_phys, end_stamp = phys, stamp
                last = phys
            pos = end
            done += 1
    finally:
        walk.pos, walk.last, walk.done, walk.room, walk.touched = pos, last, done, room, touched
        if have_index and count != count0:
            index.index_count, index.hash_slot_count = count, used  # type: ignore[union-attr]
            index.end_phy_offset, index.end_timestamp = end_phys, end_stamp  # type: ignore[union-attr]


@cython.locals(lv=cython.uchar[::1], pos=cython.Py_ssize_t, lim=cython.Py_ssize_t, most_c=cython.Py_ssize_t)
def dispatch_requests(view: memoryview, pos: int, limit: int, base: int, most: int) -> list[DispatchRequest]:
    """What :func:`~pocketmq.common.record.check_record` (no CRC) returns for each of the records from ``view[pos:]``
    (a file starting at commit-log offset ``base``), at most ``most``, up to the first that is not a plain
    valid record of a topic seen before (not the delay topic) with ASCII TAGS, or ``limit``: the caller asks
    the commit log's scanner about that one. The plain build always answers with no record."""
    found: list[DispatchRequest] = []
    if not cython.compiled or view.readonly:
        return found
    lv = view
    lim = limit
    most_c = most
    while len(found) < most_c:
        request = _request_at(lv, view, pos, lim, base)
        if request is None:
            break
        found.append(request)
        pos += request[3]
    return found


@cython.cfunc
@cython.locals(lv=cython.uchar[::1], pos=cython.Py_ssize_t, lim=cython.Py_ssize_t, end=cython.Py_ssize_t,
               hsize=cython.Py_ssize_t, tstart=cython.Py_ssize_t, pstart=cython.Py_ssize_t, i=cython.Py_ssize_t,
               j=cython.Py_ssize_t, gstart=cython.Py_ssize_t, gstop=cython.Py_ssize_t, h=cython.uint,
               c=cython.uchar, tags=cython.longlong, host_bits=cython.uchar, base=cython.longlong)
def _request_at(lv: Any, view: memoryview, pos: Any, lim: Any, base: Any) -> DispatchRequest | None:
    end = _good_record_end(lv, pos, lim)
    if end <= 0 or _get64(lv, pos + _PHYS_AT) != base + pos:
        return None
    host_bits = lv[pos + _HOST_BITS_AT]
    hsize = _header_size(host_bits)
    tstart = pos + hsize + _get32(lv, pos + hsize - 4) + 1
    pstart = tstart + lv[tstart - 1] + 2
    topic = TOPIC_NAMES.get(bytes(view[tstart:pstart - 2]))
    if topic is None or topic == RMQ_SYS_SCHEDULE_TOPIC:
        return None
    gstart = gstop = -1  # the last TAGS item's value
    i = pstart
    while i < end:
        j = _item_end(lv, i, end)
        if _is_item(lv, i, j, _TAGS_NAME):
            gstart, gstop = i + 5, j
        i = j + 1
    tags = 0
    if gstop > gstart:
        h = 0
        for i in range(gstart, gstop):
            c = lv[i]
            if c >= 0x80:
                return None
            h = h * 31 + c
        tags = cython.cast(cython.int, h)
    return _new_tuple(DispatchRequest, (
        topic, _get32(lv, pos + _QUEUE_ID_AT), base + pos, end - pos, tags,
        _get64(lv, pos + _BORN_HOST_AT + (_V6_HOST if host_bits & 0x10 else _V4_HOST)),
        _get64(lv, pos + _QUEUE_OFFSET_AT), _get32(lv, pos + _SYS_FLAG_AT), 0))
