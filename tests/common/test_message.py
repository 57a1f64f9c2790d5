"""Message properties (reference §4.1): the two string forms, which items count, one-property lookups that
agree with the full parse (the last item of a name wins), and the tag code (Java ``String.hashCode``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.common.message import (
    MessageConst,
    encode_properties,
    get_property,
    java_string_hash,
    join_properties,
    parse_properties,
    tags_code_of,
    tags_code_of_bytes,
)


def test_encode_properties_has_no_trailing_separator() -> None:
    assert encode_properties({"TAGS": "a", "KEYS": "k1 k2"}) == "TAGS\x01a\x02KEYS\x01k1 k2"
    assert encode_properties({}) == ""
    with pytest.raises(TypeError):
        encode_properties({"a": 1})  # type: ignore[dict-item]


@pytest.mark.parametrize(
    "text",
    ["TAGS\x01a\x02KEYS\x01k1 k2", "TAGS\x01a\x02KEYS\x01k1 k2\x02"],
    ids=["4.9.3+", "trailing-separator"],
)
def test_parse_reads_both_forms(text: str) -> None:
    assert parse_properties(text) == {"TAGS": "a", "KEYS": "k1 k2"}


def test_round_trip() -> None:
    props = {"TAGS": "t", "UNIQ_KEY": "ABC", "x": "", "ünï": "cödé"}
    assert parse_properties(encode_properties(props)) == props


def test_which_items_count() -> None:
    assert parse_properties("") == {}
    assert parse_properties("junk\x02A\x01b") == {"A": "b"}
    assert parse_properties("A\x01b\x01c") == {"A": "b\x01c"}
    assert parse_properties("junk\x02a\x01") == {"a": ""}
    assert parse_properties("\x01v\x02A\x01b") == {"A": "b"}  # an empty name is skipped
    assert parse_properties("A\x011\x02B\x012\x02A\x013") == {"A": "3", "B": "2"}  # the last A wins


def test_single_lookups() -> None:
    assert get_property("XTAGS\x01no\x02TAGS\x01yes", "TAGS") == "yes"
    assert get_property("TAGS\x01yes\x02", "TAGS") == "yes"
    assert get_property("KEYS\x01k", "TAGS") is None
    assert get_property("TAGS\x01first\x02TAGS\x01last", "TAGS") == "last"
    assert get_property("KEYS\x01TAGS\x01no", "TAGS") is None  # inside a value, not an item
    assert get_property("\x01v", "") is None
    assert get_property(b"DELAY\x013\x02REAL_TOPIC\x01T", b"DELAY") == b"3"
    assert get_property(b"", b"DELAY") is None
    assert join_properties("a\x011", "b\x012") == "a\x011\x02b\x012"
    assert join_properties("a\x011\x02", "b\x012") == "a\x011\x02b\x012"
    assert join_properties("", "b\x012") == "b\x012"
    assert join_properties("a\x011", "") == "a\x011"


_text = st.text(alphabet=st.sampled_from(["A", "B", "T", "S", "\x01", "\x02", "é"]), max_size=30)
_names = st.sampled_from(["A", "B", "T", "AB", "TAGS", ""])


@given(text=_text, name=_names)
def test_single_lookups_agree_with_the_full_parse(text: str, name: str) -> None:
    expected = parse_properties(text).get(name)
    assert get_property(text, name) == expected
    raw = get_property(text.encode(), name.encode())
    assert (raw.decode() if raw is not None else None) == expected


@given(parts=st.lists(st.sampled_from(["TAGS", "KEYS", "a", "é", "\x01", "\x02"]), max_size=12))
def test_tags_code_agrees_with_the_full_parse(parts: list[str]) -> None:
    text = "".join(parts)
    tags = parse_properties(text).get(MessageConst.PROPERTY_TAGS)
    expected = java_string_hash(tags) if tags else 0
    assert tags_code_of(text) == expected
    assert tags_code_of_bytes(text.encode()) == expected


def test_tags_code() -> None:
    code = java_string_hash("TagA")
    for props in ("TAGS\x01TagA", "KEYS\x01k\x02TAGS\x01TagA\x02", "XTAGS\x01B\x02TAGS\x01TagA"):
        assert tags_code_of(props) == code
        assert tags_code_of_bytes(props.encode()) == code
    assert tags_code_of("KEYS\x01TAGS") == 0
    assert tags_code_of("TAGS\x01") == 0
    assert tags_code_of_bytes(b"") == 0
    assert tags_code_of_bytes(b"TAGS\x01\xff") == java_string_hash("\ufffd")


# Values printed by a JVM (``String.hashCode()``). "TagA" is 84*31^3 + 97*31^2 + 103*31 + 65.
JAVA_HASHES = {
    "": 0,
    "a": 97,
    "abc": 96354,
    "TagA": 2598919,
    "tagA": 3552231,
    "TagB": 2598920,
    "hello": 99162322,
    "TopicTest": -1902610879,
    "Hello World": -862545276,
    "a" * 20: 1542361408,
    "é": 233,
    "日本": 26085 * 31 + 26412,
    "\U0001f600": 1772899,  # outside the BMP: two UTF-16 code units, as in Java
}


@pytest.mark.parametrize(("text", "expected"), JAVA_HASHES.items())
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def _reference_hash(text: str) -> int:
    """The formula as written: s[0]*31^(n-1) + ... + s[n-1], then wrapped to a signed 32-bit int."""
    raw = text.encode("utf-16-be")
    units = [int.from_bytes(raw[i : i + 2], "big") for i in range(0, len(raw), 2)]
    n = len(units)
    total: int = sum(unit * 31 ** (n - 1 - i) for i, unit in enumerate(units)) % 2**32
    return total - 2**32 if total >= 2**31 else total


@given(st.text(max_size=40))
def test_java_string_hash_matches_the_formula(text: str) -> None:
    assert java_string_hash(text) == _reference_hash(text)


def test_java_field_names() -> None:
    assert (MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, MessageConst.PROPERTY_WAIT_STORE_MSG_OK,
            MessageConst.PROPERTY_DELAY_TIME_LEVEL, MessageConst.PROPERTY_REAL_QUEUE_ID,
            MessageConst.PROPERTY_TRANSACTION_PREPARED, MessageConst.KEY_SEPARATOR) == (
        "UNIQ_KEY", "WAIT", "DELAY", "REAL_QID", "TRAN_MSG", " ")
