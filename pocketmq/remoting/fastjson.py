"""JSON as RocketMQ's fastjson writes and reads it.

Two differences from standard JSON matter on the wire:

* fastjson writes the keys of a ``Map<Long, String>`` **unquoted**: ``{0:"10.0.0.1:10911"}``. That is not
  JSON, but the Go client parses ``brokerAddrs`` by hand and expects exactly this compact form, and every
  Java client accepts it. Its "BrowserCompatible" mode quotes those keys and escapes non-ASCII as
  ``\\uXXXX``; newer clients ask for that form.
* fastjson omits ``null`` fields of beans, so ``None`` values of dicts are left out here.
* A ``Map<MessageQueue, X>`` (the admin bodies ``TopicStatsTable``, ``ConsumeStats``, ``ResetOffsetBody``,
  ``GetConsumerStatusBody``, ``ConsumerRunningInfo.mqTable``) is written with each key as the key object's
  own JSON, fields sorted, **unquoted** (apache/rocketmq#1506, apache/rocketmq#3389)::

      {"offsetTable":{{"brokerName":"broker-a","queueId":2,"topic":"test"}:{"lastUpdateTimestamp":0}}}

  Such keys are :class:`MQKey` here, both ways.

Output is always compact (no spaces after ``,`` or ``:``): the Go client splits ``brokerAddrs`` on ``,`` and
``:`` and would misread ids written with spaces.

Reading accepts standard JSON, the unquoted integer keys and the object keys; an unquoted key comes back as an
``int``, an object key as an :class:`MQKey`, a quoted key as a ``str``, so ``loads(dumps(x)) == x`` for dicts
with ``int``, ``str`` and :class:`MQKey` keys. Both functions
are pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from json.encoder import encode_basestring, encode_basestring_ascii
from typing import Any, NamedTuple, NoReturn

__all__ = ["MAX_DEPTH", "FastJsonDecodeError", "MQKey", "dumps", "loads"]

#: Deepest nesting :func:`loads` accepts; deeper input is refused rather than exhausting the stack.
MAX_DEPTH = 256


class FastJsonDecodeError(ValueError):
    """The input is neither JSON nor fastjson's unquoted-key dialect of it."""


class MQKey(NamedTuple):
    """A ``MessageQueue`` used as a map key (written as an unquoted object key, see the module docstring)."""

    topic: str
    broker_name: str
    queue_id: int

    def to_json_dict(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_json_dict(cls, d: Any) -> MQKey:
        if not isinstance(d, dict):
            raise FastJsonDecodeError("a message queue must be an object")
        try:
            return cls(str(d["topic"]), str(d["brokerName"]), int(d["queueId"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise FastJsonDecodeError(f"bad message queue {d!r}: {exc}") from None


# -- writing ---------------------------------------------------------------------------------------------

_StrEncoder = Callable[[str], str]


def dumps(obj: Any, *, quote_int_keys: bool = False) -> bytes:
    """Compact UTF-8 JSON of ``obj``; ``int`` dict keys unquoted unless ``quote_int_keys``.

    With ``quote_int_keys=True`` the output is standard JSON in fastjson's BrowserCompatible form: integer
    keys quoted and every non-ASCII character escaped as ``\\uXXXX``. ``None`` dict values are omitted
    (``None`` inside lists stays ``null``). Raises ``TypeError`` for values JSON cannot hold and
    ``ValueError`` for NaN/infinity.
    """
    if _is_plain(obj):
        # Fast path: nothing fastjson-specific, so the C encoder writes exactly what fastjson would.
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=quote_int_keys, allow_nan=False).encode()
    parts: list[str] = []
    encode_str: _StrEncoder = encode_basestring_ascii if quote_int_keys else encode_basestring
    _write(obj, parts, encode_str, quote_int_keys)
    return "".join(parts).encode()


def _is_plain(obj: Any) -> bool:
    """True when ``obj`` has no non-``str`` dict key and no ``None`` dict value anywhere."""
    if isinstance(obj, dict):
        return all(type(key) is str and value is not None and _is_plain(value) for key, value in obj.items())
    if isinstance(obj, MQKey):
        return False
    if isinstance(obj, list | tuple):
        return all(_is_plain(item) for item in obj)
    return True


def _write(obj: Any, parts: list[str], encode_str: _StrEncoder, quote_int_keys: bool) -> None:
    if isinstance(obj, str):
        parts.append(encode_str(obj))
    elif type(obj) is int:
        parts.append(str(obj))
    elif isinstance(obj, dict | list | tuple) and _is_plain(obj):
        # A plain branch (the values of a map keyed by MessageQueue, say): the C encoder writes it at once.
        parts.append(json.dumps(obj, separators=(",", ":"), ensure_ascii=quote_int_keys, allow_nan=False))
    elif isinstance(obj, dict):
        _write_dict(obj, parts, encode_str, quote_int_keys)
    elif isinstance(obj, MQKey):
        _write_dict(obj.to_json_dict(), parts, encode_str, quote_int_keys)
    elif isinstance(obj, list | tuple):
        parts.append("[")
        for i, item in enumerate(obj):
            if i:
                parts.append(",")
            _write(item, parts, encode_str, quote_int_keys)
        parts.append("]")
    else:
        # Scalars (bool, int, float, None): the standard encoder's spelling is fastjson's too.
        parts.append(json.dumps(obj, allow_nan=False))


def _write_dict(obj: dict[Any, Any], parts: list[str], encode_str: _StrEncoder, quote_int_keys: bool) -> None:
    parts.append("{")
    first = True
    for key, value in obj.items():
        if value is None:
            continue
        if not first:
            parts.append(",")
        first = False
        parts.append(_key(key, encode_str, quote_int_keys))
        parts.append(":")
        _write(value, parts, encode_str, quote_int_keys)
    parts.append("}")


def _key(key: Any, encode_str: _StrEncoder, quote_int_keys: bool) -> str:
    if isinstance(key, str):
        return encode_str(key)
    if isinstance(key, bool):
        return '"true"' if key else '"false"'
    if isinstance(key, int):
        return f'"{key}"' if quote_int_keys else str(key)
    if isinstance(key, MQKey):
        # to_json_dict()'s fields in its order, written directly: admin bodies hold thousands of these keys.
        return (f'{{"brokerName":{encode_str(key.broker_name)},"queueId":{int(key.queue_id)},'
                f'"topic":{encode_str(key.topic)}}}')
    raise TypeError(f"keys must be str, int or MQKey, not {type(key).__name__}")


# -- reading ---------------------------------------------------------------------------------------------

_WS = re.compile(r"[ \t\n\r]*")
#: A JSON string literal; escapes are validated by ``json.loads`` on the matched token.
_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\.)*"', re.DOTALL)
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
#: fastjson's unquoted key: a (possibly negative) decimal integer.
_INT_KEY = re.compile(r"-?[0-9]+")
_NUMBER_START = frozenset("-0123456789")
_LITERALS = (("true", True), ("false", False), ("null", None))


def _refuse_constant(name: str) -> Any:
    raise FastJsonDecodeError(f"{name} is not JSON")


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse standard JSON or fastjson's dialect with unquoted integer and MessageQueue keys.

    Raises :class:`FastJsonDecodeError` (a ``ValueError``) for anything else, including invalid UTF-8,
    NaN/Infinity and nesting deeper than :data:`MAX_DEPTH`.
    """
    try:
        text = data if isinstance(data, str) else bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FastJsonDecodeError(f"not UTF-8: {exc}") from None
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise FastJsonDecodeError("nesting too deep") from None
    except json.JSONDecodeError:
        pass  # perhaps fastjson's unquoted keys: parse it ourselves below
    return _Parser(text).parse_document()


class _Parser:
    """A small recursive-descent parser for JSON plus unquoted integer and object keys."""

    __slots__ = ("pos", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def parse_document(self) -> Any:
        value = self._value(0)
        self._skip_ws()
        if self.pos != len(self.text):
            self._fail("extra data")
        return value

    def _fail(self, what: str) -> NoReturn:
        raise FastJsonDecodeError(f"{what} at offset {self.pos}")

    def _skip_ws(self) -> None:
        match = _WS.match(self.text, self.pos)
        assert match is not None  # the pattern matches the empty string
        self.pos = match.end()

    def _peek(self) -> str:
        self._skip_ws()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def _value(self, depth: int) -> Any:
        if depth > MAX_DEPTH:
            self._fail("nesting too deep")
        char = self._peek()
        if char == "{":
            return self._object(depth + 1)
        if char == "[":
            return self._array(depth + 1)
        if char == '"':
            return self._string()
        if char and char in _NUMBER_START:
            return self._number()
        for word, value in _LITERALS:
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return value
        self._fail("expected a value")

    def _string(self) -> str:
        match = _STRING.match(self.text, self.pos)
        if match is None:
            self._fail("bad string")
        try:
            value = json.loads(match.group())
        except json.JSONDecodeError:
            self._fail("bad string escape")
        self.pos = match.end()
        return str(value)

    def _number(self) -> int | float:
        match = _NUMBER.match(self.text, self.pos)
        if match is None:
            self._fail("bad number")
        self.pos = match.end()
        token = match.group()
        try:
            return float(token) if match.group(1) or match.group(2) else int(token)
        except ValueError:  # e.g. more digits than int() accepts
            self._fail("number out of range")

    def _key(self, depth: int) -> str | int | MQKey:
        char = self._peek()
        if char == '"':
            return self._string()
        if char == "{":
            if depth > MAX_DEPTH:
                self._fail("nesting too deep")
            return MQKey.from_json_dict(self._object(depth + 1))
        match = _INT_KEY.match(self.text, self.pos)
        if match is None:
            self._fail("expected an object key")
        self.pos = match.end()
        try:
            return int(match.group())
        except ValueError:
            self._fail("key out of range")

    def _expect(self, char: str) -> None:
        if self._peek() != char:
            self._fail(f"expected {char!r}")
        self.pos += 1

    def _object(self, depth: int) -> dict[Any, Any]:
        self._expect("{")
        result: dict[Any, Any] = {}
        if self._peek() == "}":
            self.pos += 1
            return result
        while True:
            key = self._key(depth)
            self._expect(":")
            result[key] = self._value(depth)
            if self._peek() == ",":
                self.pos += 1
                continue
            self._expect("}")
            return result

    def _array(self, depth: int) -> list[Any]:
        self._expect("[")
        result: list[Any] = []
        if self._peek() == "]":
            self.pos += 1
            return result
        while True:
            result.append(self._value(depth))
            if self._peek() == ",":
                self.pos += 1
                continue
            self._expect("]")
            return result
