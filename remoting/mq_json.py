"""fastjson's form of maps keyed by ``MessageQueue``: ``{{"brokerName":"b","queueId":0,"topic":"t"}:{...}}``.

RocketMQ's admin bodies (``TopicStatsTable``, ``ConsumeStats``, ``ResetOffsetBody``, ``GetConsumerStatusBody``,
``ConsumerRunningInfo.mqTable``, ``QueryConsumeTimeSpanBody``) hold ``Map<MessageQueue, X>``. fastjson writes
such a key as the key object's own JSON, **unquoted**, fields sorted (apache/rocketmq#1506, #3389)::

    {"offsetTable":{{"brokerName":"broker-a","queueId":2,"topic":"test"}:{"lastUpdateTimestamp":0,...}}}

That is not JSON, but it is what the Java admin tools, the dashboard and the exporter (all fastjson) read
and write, so we write exactly it and read it back. :func:`dumps` writes any mix of ``str``/``int``/
:class:`MQKey` keys (``int`` keys unquoted, as fastjson does; ``None`` values of dicts left out);
:func:`loads` reads standard JSON plus both fastjson key forms, giving :class:`MQKey` for object keys and
``int`` for unquoted integer keys. Pure functions, no I/O.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

__all__ = ["MAX_DEPTH", "MQJsonError", "MQKey", "dumps", "loads"]

MAX_DEPTH = 64
"""Deepest nesting :func:`loads` accepts (admin bodies are four levels deep)."""


class MQJsonError(ValueError):
    """The input is neither JSON nor fastjson's object-key / integer-key dialect of it."""


class MQKey(NamedTuple):
    """A ``MessageQueue`` used as a map key."""

    topic: str
    broker_name: str
    queue_id: int

    def to_json_dict(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_json_dict(cls, d: Any) -> MQKey:
        if not isinstance(d, dict):
            raise MQJsonError("a message queue must be an object")
        try:
            return cls(str(d["topic"]), str(d["brokerName"]), int(d["queueId"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise MQJsonError(f"bad message queue {d!r}: {exc}") from None


# -- writing -------------------------------------------------------------------------------------------------


def dumps(obj: Any) -> bytes:
    parts: list[str] = []
    _write(obj, parts)
    return "".join(parts).encode()


def _write(obj: Any, parts: list[str]) -> None:
    if isinstance(obj, dict):
        parts.append("{")
        first = True
        for key, value in obj.items():
            if value is None:
                continue
            if not first:
                parts.append(",")
            first = False
            parts.append(_key(key))
            parts.append(":")
            _write(value, parts)
        parts.append("}")
    elif isinstance(obj, (list, tuple)) and not isinstance(obj, MQKey):
        parts.append("[")
        for i, item in enumerate(obj):
            if i:
                parts.append(",")
            _write(item, parts)
        parts.append("]")
    elif isinstance(obj, MQKey):
        _write(obj.to_json_dict(), parts)
    else:
        parts.append(json.dumps(obj, ensure_ascii=False, allow_nan=False))


def _key(key: Any) -> str:
    if isinstance(key, MQKey):
        return json.dumps(key.to_json_dict(), separators=(",", ":"), ensure_ascii=False)
    if isinstance(key, bool):
        return '"true"' if key else '"false"'
    if isinstance(key, int):
        return str(key)
    if isinstance(key, str):
        return json.dumps(key, ensure_ascii=False)
    raise TypeError(f"keys must be str, int or MQKey, not {type(key).__name__}")


# -- reading -------------------------------------------------------------------------------------------------

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\.)*"', re.DOTALL)
_LITERALS = (("true", True), ("false", False), ("null", None))


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    try:
        text = data if isinstance(data, str) else bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MQJsonError(f"not UTF-8: {exc}") from None
    value, pos = _value(text, _skip(text, 0), 0)
    if _skip(text, pos) != len(text):
        raise MQJsonError(f"extra data at {pos}")
    return value


def _skip(text: str, pos: int) -> int:
    match = _WS.match(text, pos)
    return match.end() if match else pos


def _value(text: str, pos: int, depth: int) -> tuple[Any, int]:
    if depth > MAX_DEPTH:
        raise MQJsonError("nested too deeply")
    if pos >= len(text):
        raise MQJsonError("unexpected end of input")
    char = text[pos]
    if char == "{":
        return _object(text, pos + 1, depth + 1)
    if char == "[":
        return _array(text, pos + 1, depth + 1)
    if char == '"':
        match = _STRING.match(text, pos)
        if match is None:
            raise MQJsonError(f"unterminated string at {pos}")
        try:
            string: str = json.loads(match.group())
        except ValueError as exc:
            raise MQJsonError(str(exc)) from None
        return string, match.end()
    for literal, value in _LITERALS:
        if text.startswith(literal, pos):
            return value, pos + len(literal)
    match = _NUMBER.match(text, pos)
    if match is None:
        raise MQJsonError(f"unexpected {char!r} at {pos}")
    number = match.group()
    return (float(number) if match.group(1) or match.group(2) else int(number)), match.end()


def _object(text: str, pos: int, depth: int) -> tuple[dict[Any, Any], int]:
    out: dict[Any, Any] = {}
    pos = _skip(text, pos)
    if text.startswith("}", pos):
        return out, pos + 1
    while True:
        key: Any
        key, pos = _value(text, pos, depth)
        if isinstance(key, dict):
            key = MQKey.from_json_dict(key)
        elif isinstance(key, float) or not isinstance(key, (str, int)) or isinstance(key, bool):
            raise MQJsonError(f"bad object key {key!r}")
        pos = _skip(text, pos)
        if not text.startswith(":", pos):
            raise MQJsonError(f"expected ':' at {pos}")
        out[key], pos = _value(text, _skip(text, pos + 1), depth)
        pos = _skip(text, pos)
        if text.startswith(",", pos):
            pos = _skip(text, pos + 1)
            continue
        if text.startswith("}", pos):
            return out, pos + 1
        raise MQJsonError(f"expected ',' or '}}' at {pos}")


def _array(text: str, pos: int, depth: int) -> tuple[list[Any], int]:
    out: list[Any] = []
    pos = _skip(text, pos)
    if text.startswith("]", pos):
        return out, pos + 1
    while True:
        item, pos = _value(text, pos, depth)
        out.append(item)
        pos = _skip(text, pos)
        if text.startswith(",", pos):
            pos = _skip(text, pos + 1)
            continue
        if text.startswith("]", pos):
            return out, pos + 1
        raise MQJsonError(f"expected ',' or ']' at {pos}")
