"""fastjson dialect: unquoted integer keys, omitted nulls, compact output; byte literals and round trips."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pocketmq.remoting import fastjson
from pocketmq.remoting.fastjson import FastJsonDecodeError, dumps, loads

# -- dumps -----------------------------------------------------------------------------------------------


def test_int_keys_are_written_unquoted() -> None:
    obj = {"brokerAddrs": {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}}
    assert dumps(obj) == b'{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}}'


def test_quote_int_keys_gives_standard_json() -> None:
    obj = {"brokerAddrs": {0: "10.0.0.1:10911", -1: "x"}}
    out = dumps(obj, quote_int_keys=True)
    assert out == b'{"brokerAddrs":{"0":"10.0.0.1:10911","-1":"x"}}'
    assert json.loads(out) == {"brokerAddrs": {"0": "10.0.0.1:10911", "-1": "x"}}


def test_non_ascii_raw_utf8_by_default_and_escaped_when_browser_compatible() -> None:
    obj = {"name": "主题-é😀", 7: "ü"}
    assert dumps(obj) == '{"name":"主题-é😀",7:"ü"}'.encode()
    assert dumps(obj, quote_int_keys=True) == b'{"name":"\\u4e3b\\u9898-\\u00e9\\ud83d\\ude00","7":"\\u00fc"}'
    # Plain objects take the fast path; the spelling is the same.
    assert dumps({"name": "é"}) == '{"name":"é"}'.encode()
    assert dumps({"name": "é"}, quote_int_keys=True) == b'{"name":"\\u00e9"}'


def test_none_values_omitted_from_dicts_but_kept_in_lists() -> None:
    assert dumps({"a": None, "b": [None, 1], "c": {"d": None}}) == b'{"b":[null,1],"c":{}}'
    assert dumps({0: None, 1: "x"}) == b'{1:"x"}'


def test_scalars_and_compact_separators() -> None:
    obj = {"t": True, "f": False, "i": -12, "x": 1.5, "s": 'q"\\\n', "l": [1, "a"], "e": {}, "z": []}
    expected = b'{"t":true,"f":false,"i":-12,"x":1.5,"s":"q\\"\\\\\\n","l":[1,"a"],"e":{},"z":[]}'
    assert dumps(obj) == expected
    assert dumps({**obj, 3: 4}) == expected[:-1] + b",3:4}"


def test_fast_path_matches_json_dumps_for_plain_objects() -> None:
    obj = {"topicList": ["A", "B"], "n": 3, "nested": [{"k": "v"}]}
    assert dumps(obj) == json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def test_unencodable_values_raise() -> None:
    with pytest.raises(TypeError):
        dumps({1.5: "x"})
    with pytest.raises(TypeError):
        dumps({"s": {1, 2}})
    with pytest.raises(TypeError):
        dumps({0: {"s": object()}})
    with pytest.raises(ValueError):
        dumps({"x": float("nan")})
    with pytest.raises(ValueError):
        dumps({0: float("inf")})


# -- loads -----------------------------------------------------------------------------------------------


def test_loads_unquoted_integer_keys() -> None:
    data = b'{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"broker-a"}'
    assert loads(data) == {
        "brokerAddrs": {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"},
        "brokerName": "broker-a",
    }


def test_loads_standard_json_keeps_quoted_keys_as_strings() -> None:
    assert loads(b'{"brokerAddrs":{"0":"a:1"}}') == {"brokerAddrs": {"0": "a:1"}}
    assert loads('[1, 2.5, true, false, null, "x"]') == [1, 2.5, True, False, None, "x"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Strings that look like unquoted keys must stay strings.
        ('{0:"{1:\\"x\\",2:3}"}', {0: '{1:"x",2:3}'}),
        ('{"a,0:b":{0:"c:1,d"}}', {"a,0:b": {0: "c:1,d"}}),
        ('{ -5 : "neg" , 12345678901234567890 : [ ] }', {-5: "neg", 12345678901234567890: []}),
        ('{"k\\"0:":{7:"\\u00e9\\n"}}', {'k"0:': {7: "é\n"}}),
        ('{0:{1:{2:[{3:"deep"}]}}}', {0: {1: {2: [{3: "deep"}]}}}),
        ('{1:"a","1":"b"}', {1: "a", "1": "b"}),
        ("{0:1e3,1:-0.5,2:0}", {0: 1000.0, 1: -0.5, 2: 0}),
        ("\n {0:true}\t", {0: True}),
    ],
)
def test_loads_fastjson_tricky_inputs(text: str, expected: Any) -> None:
    assert loads(text) == expected
    assert loads(text.encode()) == expected


@pytest.mark.parametrize(
    "text",
    [
        b"",
        b"{",
        b"{0:}",
        b'{0:"a"',
        b'{0:"a",}',
        b'{0 "a"}',
        b"{a:1}",
        b"{0.5:1}",
        b'{0:"a"}}',
        b'{0:"a"} x',
        b"[1,]",
        b'{0:"\\x"}',
        b'{0:"tab\there"}',
        b"{0:NaN}",
        b"NaN",
        b"{0:01x}",
        b"{0:tru}",
        b"\xff\xfe",
        b'{0:"\xc3"}',
    ],
)
def test_loads_rejects_malformed_input(text: bytes) -> None:
    with pytest.raises(FastJsonDecodeError):
        loads(text)


def test_loads_bounds_nesting_depth() -> None:
    deep = "{0:" * (fastjson.MAX_DEPTH + 5) + "1" + "}" * (fastjson.MAX_DEPTH + 5)
    with pytest.raises(FastJsonDecodeError):
        loads(deep)
    with pytest.raises(FastJsonDecodeError):
        loads("[" * 100_000 + "]" * 100_000)
    ok = "{0:" * 50 + "1" + "}" * 50
    assert isinstance(loads(ok), dict)


def test_decode_error_is_a_value_error() -> None:
    assert issubclass(FastJsonDecodeError, ValueError)


# -- properties ------------------------------------------------------------------------------------------

_tricky_text = st.text(
    alphabet=st.sampled_from(list('{}[],:"\\0123456789 -éü主😀\n\t')) | st.characters(codec="utf-8")
)
_scalars = st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | _tricky_text
_keys = st.integers(min_value=-(2**63), max_value=2**63) | _tricky_text


def _values(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(children | st.none(), max_size=5) | st.dictionaries(_keys, children, max_size=5)


_documents = st.recursive(_scalars, _values, max_leaves=30)


@settings(max_examples=300)
@given(_documents)
def test_round_trip_with_unquoted_int_keys(obj: Any) -> None:
    assert loads(dumps(obj)) == obj


def _stringify_keys(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _stringify_keys(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_stringify_keys(v) for v in obj]
    return obj


@settings(max_examples=200)
@given(_documents)
def test_quoted_form_is_standard_ascii_json(obj: Any) -> None:
    out = dumps(obj, quote_int_keys=True)
    assert out.isascii()
    assert json.loads(out) == _stringify_keys(obj)
    assert loads(out) == _stringify_keys(obj)


@settings(max_examples=200)
@given(_documents)
def test_slow_parser_agrees_with_json_on_standard_json(obj: Any) -> None:
    text = json.dumps(_stringify_keys(obj), ensure_ascii=False, indent=1)
    assert fastjson._Parser(text).parse_document() == json.loads(text)


@settings(max_examples=300)
@given(st.binary(max_size=64) | _tricky_text.map(str.encode))
def test_random_input_only_raises_the_named_error(data: bytes) -> None:
    with contextlib.suppress(FastJsonDecodeError):
        loads(data)


@settings(max_examples=200)
@given(_documents, st.data())
def test_mutated_documents_only_raise_the_named_error(obj: Any, data: st.DataObject) -> None:
    encoded = bytearray(dumps(obj))
    if encoded:
        pos = data.draw(st.integers(0, len(encoded) - 1))
        encoded[pos] = data.draw(st.sampled_from(b'{}[],:"0 -a\\'))
    with contextlib.suppress(FastJsonDecodeError):
        loads(bytes(encoded))
