"""The compiled pull-body decoder (:func:`pocketmq.client.consumer.fast_decode.decode_records`) against the model's
(:func:`pocketmq.client.core.message_ext.decode_messages`): the same messages, field for field, or the same error at the
same position, for good bodies of every shape and for damaged ones. Runs against whichever build is active
(the compiled one in ``make test``, the typed source under ``POCKETMQ_PURE_PYTHON=1``)."""

from __future__ import annotations

import os
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pocketmq.client.consumer import pull_result
from pocketmq.client.consumer.fast_decode import decode_records
from pocketmq.client.core.message_ext import MessageDecodeError, MessageExt, decode_messages
from pocketmq.common import compiled
from tests.client.pull_records import MAGIC_V2, Record, body_of

_SUFFIX = "\x02MIN_OFFSET\x010\x02MAX_OFFSET\x01123"


def _fields(msg: MessageExt) -> dict[str, Any]:
    return {name: getattr(msg, name) for name in MessageExt.__slots__} | {
        "properties": dict(msg.properties), "msg_id": msg.msg_id, "born_host": msg.born_host,
        "store_host": msg.store_host,
    }


def _outcome(decoder: Any, data: bytes | bytearray | memoryview, **options: Any) -> Any:
    try:
        return [_fields(msg) for msg in decoder(data, **options)]
    except MessageDecodeError as exc:
        return ("error", str(exc), exc.position)


def _same(data: bytes | bytearray | memoryview, **options: Any) -> Any:
    expected = _outcome(decode_messages, data, **options)
    assert _outcome(decode_records, data, **options) == expected
    return expected


_SHAPES = [
    Record(),
    Record(queue_offset=43, physical_offset=1 << 40, born_timestamp=-5, queue_id=2**31 - 1, flag=-1,
           reconsume_times=3, prepared_offset=2**63 - 1, body_crc=2**31 - 1),
    Record(queue_offset=44, born_host="10.0.0.10:53001", topic="Other", properties=""),
    Record(queue_offset=45, store_host="192.168.58.129:10911", body=b""),
    Record(queue_offset=46, born_host="[::1]:9", sys_flag=0x10),
    Record(queue_offset=47, store_host="[fe80::1]:10911", sys_flag=0x20),
    Record(queue_offset=48, body=zlib.compress(b"q" * 300), sys_flag=0x1),
    Record(queue_offset=49, topic="T\u00e9", properties="K\x01v\u00e9\x02TAGS\x01a"),
    Record(queue_offset=50, magic=MAGIC_V2),
    Record(queue_offset=51, topic="x" * 127),
]


@pytest.mark.parametrize("shape", range(len(_SHAPES)))
@pytest.mark.parametrize("options", [{}, {"broker_name": "b", "properties_suffix": _SUFFIX},
                                     {"decompress": False}, {"check_crc": True}])
def test_each_shape_alone_and_between_common_records(shape: int, options: dict[str, Any]) -> None:
    common = Record(queue_offset=1)
    for data in (_SHAPES[shape].encode(), body_of(common, _SHAPES[shape], Record(queue_offset=99))):
        _same(data, **options)


def test_a_whole_pull_of_every_shape_from_any_buffer_type() -> None:
    data = body_of(*_SHAPES, *_SHAPES)
    for buffer in (data, bytearray(data), memoryview(data)):
        assert len(_same(buffer, broker_name="b", properties_suffix=_SUFFIX)) == 2 * len(_SHAPES)
    assert _same(b"") == []


_VALID = body_of(Record(queue_offset=1), Record(queue_offset=2, properties="TAGS\x01x\x02"),
                 Record(queue_offset=3, born_host="[::1]:9", sys_flag=0x10), Record(queue_offset=4))


@settings(max_examples=400)
@given(st.lists(st.tuples(st.integers(0, len(_VALID) - 1), st.integers(0, 255)), max_size=6),
       st.integers(0, len(_VALID)))
def test_damaged_bodies_give_the_same_messages_or_the_same_error(flips: list[tuple[int, int]], cut: int) -> None:
    buf = bytearray(_VALID)
    for at, value in flips:
        buf[at] = value
    _same(bytes(buf[:cut]) if cut else bytes(buf), properties_suffix=_SUFFIX)


def test_the_pull_path_uses_the_compiled_decoder_only_when_it_is_loaded() -> None:
    from pocketmq.client.consumer import fast_decode

    expected = decode_records if compiled.loaded_from_extension(fast_decode) else decode_messages
    assert pull_result._decode is expected


def test_without_cython_installed_the_plain_build_decodes_with_the_model() -> None:
    # The typed source imports the `cython` shim, which only the build requires: a plain install without Cython
    # falls back to decode_messages instead of failing to import.
    probe = (
        "import sys\n"
        "class NoCython:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'cython': raise ImportError('no cython here')\n"
        "sys.meta_path.insert(0, NoCython())\n"
        "from pocketmq.client.consumer import pull_result\n"
        "from pocketmq.client.core.message_ext import decode_messages\n"
        "assert pull_result._decode is decode_messages, pull_result._decode\n"
    )
    env = {k: v for k, v in os.environ.items() if k != compiled.PURE_ENV} | {compiled.PURE_ENV: "1"}
    subprocess.run([sys.executable, "-c", probe], cwd=Path(__file__).resolve().parents[3], env=env, check=True,
                   timeout=60)
