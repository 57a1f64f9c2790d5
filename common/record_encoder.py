"""Writing the commit-log record whose layout :mod:`common.record` sets out (the decoder lives there).

:func:`encode_record_into` writes one record into a buffer (the reference for the commit log's inlined append,
which :class:`store.commitlog.CommitLog` keeps for its hot path), :func:`encode_record` builds one as ``bytes``
for tests and tools, :func:`encode_blank_into` writes the end-of-file marker, and :func:`topic_field` checks and
encodes TOPICLENGTH + TOPIC. Pure functions over bytes, no I/O.
"""

from __future__ import annotations

from common.record import (
    BLANK_MAGIC_CODE,
    HEADER_STRUCTS,
    MAX_TOPIC_LENGTH,
    MESSAGE_MAGIC_CODE,
    PROPERTIES_LENGTH,
    SIZE_AND_MAGIC,
    Buffer,
    body_crc,
    host_sys_flags,
    host_variant,
    record_size,
)
from common.sysflag import MessageSysFlag

_HOST_V6_BITS = MessageSysFlag.BORNHOST_V6 | MessageSysFlag.STOREHOST_V6


def encode_record_into(
    buf: Buffer | bytearray,
    pos: int,
    *,
    total_size: int,
    body_crc_value: int,
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: bytes,
    store_timestamp: int,
    store_host: bytes,
    reconsume_times: int,
    prepared_transaction_offset: int,
    body: Buffer,
    topic_field: bytes,
    properties: bytes,
) -> None:
    """Write one record at ``buf[pos:pos + total_size]``.

    ``topic_field`` is the TOPICLENGTH byte followed by the topic (see :func:`topic_field`); ``sys_flag``
    must carry the host bits that match the host lengths (see :func:`host_sys_flags`). The commit log has
    an inlined copy of this for its hot path; this one is the reference and what tests and tools use.
    """
    header = HEADER_STRUCTS[host_variant(sys_flag)]
    header.pack_into(
        buf, pos, total_size, MESSAGE_MAGIC_CODE, body_crc_value, queue_id, flag, queue_offset,
        physical_offset, sys_flag, born_timestamp, born_host, store_timestamp, store_host, reconsume_times,
        prepared_transaction_offset, len(body),
    )
    p = pos + header.size
    end = p + len(body)
    buf[p:end] = body  # type: ignore[index]
    p, end = end, end + len(topic_field)
    buf[p:end] = topic_field  # type: ignore[index]
    PROPERTIES_LENGTH.pack_into(buf, end, len(properties))
    p = end + 2
    buf[p:p + len(properties)] = properties  # type: ignore[index]


def topic_field(topic: str) -> bytes:
    """TOPICLENGTH byte + UTF-8 topic; ``ValueError`` when longer than 127 bytes."""
    raw = topic.encode()
    if not raw or len(raw) > MAX_TOPIC_LENGTH:
        raise ValueError(f"topic of {len(raw)} bytes (1..{MAX_TOPIC_LENGTH} allowed)")
    return bytes((len(raw),)) + raw


def encode_record(
    *,
    topic: str,
    body: bytes,
    properties: str = "",
    queue_id: int = 0,
    flag: int = 0,
    queue_offset: int = 0,
    physical_offset: int = 0,
    sys_flag: int = 0,
    born_timestamp: int = 0,
    born_host: bytes = b"\x7f\x00\x00\x01\x00\x00\x00\x00",
    store_timestamp: int = 0,
    store_host: bytes = b"\x7f\x00\x00\x01\x00\x00\x2a\x9f",
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
) -> bytes:
    """One whole record as ``bytes`` (tests, tools). Host bits of ``sys_flag`` are set from the hosts."""
    sys_flag = (sys_flag & ~_HOST_V6_BITS) | host_sys_flags(born_host, store_host)
    tfield = topic_field(topic)
    props = properties.encode()
    size = record_size(sys_flag, len(body), len(tfield) - 1, len(props))
    out = bytearray(size)
    encode_record_into(
        out, 0, total_size=size, body_crc_value=body_crc(body), queue_id=queue_id, flag=flag,
        queue_offset=queue_offset, physical_offset=physical_offset, sys_flag=sys_flag,
        born_timestamp=born_timestamp, born_host=born_host, store_timestamp=store_timestamp,
        store_host=store_host, reconsume_times=reconsume_times,
        prepared_transaction_offset=prepared_transaction_offset, body=body, topic_field=tfield,
        properties=props,
    )
    return bytes(out)


def encode_blank_into(buf: Buffer | bytearray, pos: int, size: int) -> None:
    """The 8-byte end-of-file marker claiming the ``size`` bytes left in the file."""
    SIZE_AND_MAGIC.pack_into(buf, pos, size, BLANK_MAGIC_CODE)
