"""Tolerant readers of decoded JSON/msgpack values, for the model's JSON forms and ``remoting``'s bodies.

Brokers, name servers and clients of several RocketMQ versions and languages write the same shapes slightly
differently: numbers as strings, booleans as ``0``/``1`` or ``"true"``, optional fields missing or ``null``,
old field spellings (:func:`pick` takes the first present). Each reader accepts every form that is seen in
practice and raises :class:`~pocketmq.common.errors.FieldFormatError` naming the field (``what``) for anything else.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pocketmq.common.errors import FieldFormatError


def pick(d: Mapping[str, Any], *names: str) -> Any:
    """The value of the first of ``names`` present (and not ``None``) in ``d``; ``None`` if none is."""
    for name in names:
        value = d.get(name)
        if value is not None:
            return value
    return None


def as_dict(value: Any, what: str) -> dict[Any, Any]:
    """An object; ``None`` reads as an empty one."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise FieldFormatError(f"{what}: expected an object, got {type(value).__name__}")
    return value


def as_list(value: Any, what: str) -> list[Any]:
    """An array (a msgpack tuple too); ``None`` reads as an empty one."""
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise FieldFormatError(f"{what}: expected an array, got {type(value).__name__}")
    return list(value)


def as_int(value: Any, what: str, default: int | None = None) -> int:
    """An integer or a string of one; ``None`` reads as ``default`` when there is one. Booleans are refused."""
    if value is None and default is not None:
        return default
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    raise FieldFormatError(f"{what}: expected an integer, got {value!r:.40}")


def as_str(value: Any, what: str) -> str:
    """A string (nothing is converted to one)."""
    if isinstance(value, str):
        return value
    raise FieldFormatError(f"{what}: expected a string, got {value!r:.40}")


def as_opt_str(value: Any, what: str) -> str | None:
    """A string or ``None``."""
    return None if value is None else as_str(value, what)


def as_str_list(value: Any, what: str) -> list[str]:
    """An array of strings; ``None`` reads as an empty one."""
    return [as_str(item, what) for item in as_list(value, what)]


def as_bool(value: Any, what: str) -> bool:
    """A boolean, ``0``/``1``, or ``"true"``/``"false"`` in any case; ``None`` reads as ``False``."""
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise FieldFormatError(f"{what}: expected a boolean, got {value!r:.40}")
