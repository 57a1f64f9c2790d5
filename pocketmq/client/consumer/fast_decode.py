"""The compiled decoder of a pull response body: the records of the common shape read with C integer loads.

:func:`decode_records` gives what :func:`pocketmq.client.core.message_ext.decode_messages` gives, field for field
(``tests/test_compiled.py`` and ``tests/client/consumer/test_decode.py`` compare them), faster when this module
runs compiled (typed Cython pure mode, :data:`common.compiled.MODULES`); :mod:`pocketmq.client.consumer.decode` picks
it only then, so plain Python runs ``decode_messages`` itself.

A record of the common shape (v1 magic, IPv4 born and store hosts, sizes that agree, not compressed) is read
here: header fields by byte loads instead of a ``struct`` unpack, the topic and host fields reused from the
record before when their bytes are the same (one broker, few producers and topics per pull), the
properties decoded straight from the body. Any other record, a body check (``check_crc``) or a compressed
body goes through :func:`pocketmq.common.record.locate_record` and the model's own inflation, record by record, and
every error is raised as ``decode_messages`` raises it (it decodes the body again to say why).
"""

from __future__ import annotations

try:
    import cython
except ImportError:  # an install without Cython: the plain-Python names
    from pocketmq.common import pure_mode as cython

from pocketmq.client.core.message_ext import MessageDecodeError, MessageExt, decode_messages
from pocketmq.common.record import (
    MAX_PROPERTIES_LENGTH,
    MAX_TOPIC_LENGTH,
    MESSAGE_MAGIC_CODE,
    TOPIC_NAMES,
    remember_topic,
)
from pocketmq.common.sysflag import MessageSysFlag
from pocketmq.remoting.command import Body

__all__ = ["decode_records"]

# C constants when compiled (a module global would be a Python object in every comparison).
_HEADER_V4 = cython.declare(cython.Py_ssize_t, 88)
"""Header size of a record with IPv4 born and store hosts (``pocketmq.common.record.HEADER_STRUCTS[0]``)."""
_NOT_COMMON = cython.declare(cython.longlong,
                             MessageSysFlag.COMPRESSED | MessageSysFlag.BORNHOST_V6 | MessageSysFlag.STOREHOST_V6)
_MAGIC = cython.declare(cython.longlong, MESSAGE_MAGIC_CODE)
_MAX_TOPIC = cython.declare(cython.Py_ssize_t, MAX_TOPIC_LENGTH)
_MAX_PROPERTIES = cython.declare(cython.Py_ssize_t, MAX_PROPERTIES_LENGTH)
_TWO_31 = cython.declare(cython.longlong, 1 << 31)
_TWO_32 = cython.declare(cython.longlong, 1 << 32)


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
@cython.locals(data=cython.p_uchar, at=cython.Py_ssize_t)
@cython.returns(cython.longlong)
def _u32(data: bytes, at: int) -> int:
    return ((cython.cast(cython.longlong, data[at]) << 24) | (data[at + 1] << 16) | (data[at + 2] << 8)
            | data[at + 3])


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
@cython.locals(data=cython.p_uchar, at=cython.Py_ssize_t, value=cython.longlong)
@cython.returns(cython.longlong)
def _i32(data: bytes, at: int) -> int:
    value = _u32(data, at)
    return value - _TWO_32 if value >= _TWO_31 else value


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
@cython.locals(data=cython.p_uchar, at=cython.Py_ssize_t, high=cython.longlong)
@cython.returns(cython.longlong)
def _i64(data: bytes, at: int) -> int:
    high = _i32(data, at)
    return high * _TWO_32 + _u32(data, at + 4)


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
@cython.locals(data=cython.p_uchar, a=cython.Py_ssize_t, b=cython.Py_ssize_t, n=cython.Py_ssize_t, i=cython.Py_ssize_t)
@cython.returns(cython.bint)
def _same(data: bytes, a: int, b: int, n: int) -> bool:
    """Whether ``data[a:a+n] == data[b:b+n]`` (without making either slice)."""
    for i in range(n):  # noqa: SIM110 (a C loop when compiled; all() over a generator would not be)
        if data[a + i] != data[b + i]:
            return False
    return True


@cython.locals(data=bytes, p=cython.p_uchar, end=cython.Py_ssize_t, pos=cython.Py_ssize_t, total=cython.longlong,
               body_len=cython.longlong, body_start=cython.Py_ssize_t, body_end=cython.Py_ssize_t,
               topic_len=cython.Py_ssize_t, topic_start=cython.Py_ssize_t, props_start=cython.Py_ssize_t,
               props_len=cython.Py_ssize_t, record_end=cython.Py_ssize_t, sys_flag=cython.longlong,
               last_topic=cython.Py_ssize_t, last_topic_len=cython.Py_ssize_t, last_born=cython.Py_ssize_t,
               last_store=cython.Py_ssize_t, with_suffix=cython.bint)
def decode_records(
    body: Body,
    *,
    decompress: bool = True,
    check_crc: bool = False,
    broker_name: str = "",
    properties_suffix: str = "",
) -> list[MessageExt]:
    """:func:`pocketmq.client.core.message_ext.decode_messages`, same arguments, same messages, same errors."""
    if check_crc or not decompress:
        return decode_messages(body, decompress=decompress, check_crc=check_crc, broker_name=broker_name,
                               properties_suffix=properties_suffix)
    data = body if type(body) is bytes else bytes(body)
    p = data  # compiled: a pointer to the bytes, for the byte loads below
    end = len(data)
    pos = 0
    messages: list[MessageExt] = []
    suffix = properties_suffix
    with_suffix = len(suffix) > 0
    topics = TOPIC_NAMES
    magic = MESSAGE_MAGIC_CODE
    message_ext = MessageExt
    topic = ""
    born: bytes = b""
    store: bytes = b""
    last_topic = -1
    last_topic_len = 0
    last_born = -1
    last_store = -1
    while pos < end:
        if end - pos < _HEADER_V4 + 3:
            break
        total = _i32(p, pos)
        sys_flag = _i32(p, pos + 36)
        body_len = _i32(p, pos + 84)
        record_end = pos + total
        body_start = pos + _HEADER_V4
        body_end = body_start + body_len
        if (_i32(p, pos + 4) != _MAGIC or sys_flag & _NOT_COMMON or body_len < 0
                or record_end > end or body_end + 3 > record_end):
            break
        topic_len = p[body_end]
        topic_start = body_end + 1
        props_start = topic_start + topic_len + 2
        if topic_len == 0 or topic_len > _MAX_TOPIC or props_start > record_end:
            break
        props_len = (p[props_start - 2] << 8) | p[props_start - 1]
        if props_len > _MAX_PROPERTIES or props_start + props_len != record_end:
            break
        if last_topic < 0 or topic_len != last_topic_len or not _same(p, topic_start, last_topic, topic_len):
            raw_topic = data[topic_start:topic_start + topic_len]
            found = topics.get(raw_topic)
            try:
                topic = remember_topic(raw_topic) if found is None else found
            except UnicodeDecodeError:
                break
            last_topic, last_topic_len = topic_start, topic_len
        if last_born < 0 or not _same(p, pos + 48, last_born, 8):
            born = data[pos + 48:pos + 56]
            last_born = pos + 48
        if last_store < 0 or not _same(p, pos + 64, last_store, 8):
            store = data[pos + 64:pos + 72]
            last_store = pos + 64
        try:
            props = data[props_start:record_end].decode() if props_len else ""
        except UnicodeDecodeError:
            break
        if with_suffix:
            props += suffix
        fields = (
            total, magic, _i32(p, pos + 8), _i32(p, pos + 12), _i32(p, pos + 16),
            _i64(p, pos + 20), _i64(p, pos + 28), sys_flag, _i64(p, pos + 40), born, _i64(p, pos + 56),
            store, _i32(p, pos + 72), _i64(p, pos + 76), body_len,
        )  # fmt: skip
        messages.append(message_ext(fields, data[body_start:body_end], topic, props, broker_name))
        pos = record_end
    if pos < end:
        # A record of another shape, or a bad one: the model's decoder takes the rest; an error is raised from
        # the whole body, so that its position is the same as decode_messages gives.
        try:
            messages.extend(decode_messages(data[pos:], decompress=decompress, check_crc=check_crc,
                                            broker_name=broker_name, properties_suffix=properties_suffix))
        except MessageDecodeError:
            return decode_messages(data, decompress=decompress, check_crc=check_crc, broker_name=broker_name,
                                   properties_suffix=properties_suffix)
    return messages
