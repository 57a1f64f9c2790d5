"""Java's value rules as RocketMQ's SQL92 filter applies them (``ComparisonExpression.__compare``).

Runtime values are ``None`` (SQL NULL, a missing property), ``bool``, ``int`` (a Java ``Integer``),
:class:`JavaLong` (a ``Long``: a literal outside the int32 range), ``float`` (a ``Double``) and ``str``
(every message property is a string). Two values of different classes are converted before comparing:

* numbers widen (Integer -> Long -> Double); a string meeting a number is parsed as that number's class
  (``Integer.valueOf``, ``Long.valueOf``, ``Double.valueOf``), and a string that does not parse makes the
  whole evaluation fail (:class:`~pocketmq.common.filter.errors.FilterEvaluationError`: the message does not match);
* a string meeting a boolean is ``Boolean.valueOf`` (``"true"`` in any case, anything else false); a boolean
  meeting a string fails (Java casts the Boolean to String);
* any other pair compares as "less" (-1): never equal.

``float`` order is ``Double.compare``'s: ``-0.0 < 0.0`` and NaN above everything, equal to itself.
"""

from __future__ import annotations

import math
import re

from pocketmq.common.filter.errors import FilterEvaluationError


class JavaLong(int):
    """An integer literal outside the int32 range: Java gives it class ``Long``."""

    __slots__ = ()


INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

# Integer.parseInt: an optional sign and decimal digits (Character.digit accepts any Unicode decimal digit).
_JAVA_INT = re.compile(r"[+-]?\d+")
# Double.valueOf: blanks (chars <= ' ') trimmed; NaN, Infinity, decimal and hexadecimal forms; a d/f suffix.
_JAVA_DOUBLE = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)")
_JAVA_HEX_DOUBLE = re.compile(r"([+-]?)0[xX]((?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?")
_JAVA_BLANKS = "".join(chr(c) for c in range(33))


def parse_java_int(text: str, low: int, high: int) -> int:
    """``Integer.valueOf``/``Long.valueOf``: the value, or FilterEvaluationError (Java's NumberFormatException)."""
    if _JAVA_INT.fullmatch(text) is None:
        raise FilterEvaluationError(f"not an integer: {text!r}")
    try:
        value = int(text)
    except ValueError:  # beyond Python's digit limit for int(): far out of range anyway
        raise FilterEvaluationError(f"integer out of range: {text[:32]!r}...") from None
    if not low <= value <= high:
        raise FilterEvaluationError(f"integer out of range: {text!r}")
    return value


def parse_java_double(text: str) -> float:
    """``Double.valueOf``: the value, or FilterEvaluationError."""
    stripped = text.strip(_JAVA_BLANKS)
    if _JAVA_DOUBLE.fullmatch(stripped) is not None:
        body = stripped.rstrip("fFdD") if not stripped.endswith(("NaN", "Infinity")) else stripped
        if body.endswith("NaN"):
            return math.nan
        if body.endswith("Infinity"):
            return -math.inf if body.startswith("-") else math.inf
        return float(body)
    hexa = _JAVA_HEX_DOUBLE.fullmatch(stripped)
    if hexa is not None:
        value = float.fromhex("0x" + hexa.group(2))
        return -value if hexa.group(1) == "-" else value
    raise FilterEvaluationError(f"not a number: {text!r}")


def java_boolean(text: str) -> bool:
    """``Boolean.valueOf(String)``: true only for ``"true"`` in any case."""
    return len(text) == 4 and text.lower() == "true"


def double_compare(a: float, b: float) -> int:
    """``Double.compare``."""
    if a < b:
        return -1
    if a > b:
        return 1
    a_nan, b_nan = a != a, b != b
    if a_nan or b_nan:
        return (1 if a_nan else 0) - (1 if b_nan else 0)
    a_neg, b_neg = math.copysign(1.0, a) < 0, math.copysign(1.0, b) < 0
    return (1 if b_neg else 0) - (1 if a_neg else 0)


def _same_class_compare(lv: object, rv: object) -> int:
    if type(lv) is float:
        return double_compare(lv, rv)  # type: ignore[arg-type]
    if lv == rv:
        return 0
    return -1 if lv < rv else 1  # type: ignore[operator]


def _to_number_like(text: str, like: object) -> object:
    """A string converted to the class of ``like`` (an Integer, Long or Double)."""
    kind = type(like)
    if kind is float:
        return parse_java_double(text)
    if kind is JavaLong:
        return JavaLong(parse_java_int(text, INT64_MIN, INT64_MAX))
    return parse_java_int(text, INT32_MIN, INT32_MAX)


_NUMBERS = (int, JavaLong, float)


def java_compare(lv: object, rv: object) -> int:
    """``ComparisonExpression.__compare(lv, rv, true)`` for two non-null values (see the module docstring)."""
    lc, rc = type(lv), type(rv)
    if lc is not rc:
        if lc is bool:
            if rc is str:
                raise FilterEvaluationError("a boolean cannot be compared with a string")
            return -1
        if lc in _NUMBERS:
            if rc in _NUMBERS:
                if lc is float or rc is float:
                    return double_compare(float(lv), float(rv))  # type: ignore[arg-type]
                return _same_class_compare(int(lv), int(rv))  # type: ignore[call-overload]
            if rc is str:
                return java_compare(lv, _to_number_like(rv, lv))  # type: ignore[arg-type]
            return -1
        if lc is str:
            if rc is bool:
                return _same_class_compare(java_boolean(lv), rv)  # type: ignore[arg-type]
            if rc in _NUMBERS:
                return java_compare(_to_number_like(lv, rv), rv)  # type: ignore[arg-type]
        return -1
    return _same_class_compare(lv, rv)
