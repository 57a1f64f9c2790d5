"""RocketMQ-style ``.properties`` configuration for every PocketMQ process.

A component's configuration is a frozen dataclass. :func:`load_config` builds one from defaults, then a
``.properties`` file (keys are the camelCase forms of the field names, as RocketMQ's setters are), then
explicit overrides (CLI flags). Unknown keys and values of the wrong type are errors, never silently
ignored: a typo in ``brokerRole`` must stop the broker, not start it as the wrong role.

Library components that read only their own keys out of a shared file (the store, HA) use
:func:`from_named_properties`: RocketMQ's irregular key names mapped to fields, other keys left to the caller,
values converted by the same rules (:func:`convert_value`).
"""

from __future__ import annotations

import dataclasses
import enum
import re
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration file or flag is invalid."""


def camel(name: str) -> str:
    """``listen_port`` → ``listenPort``."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def config_key(f: dataclasses.Field[Any]) -> str:
    """A field's ``.properties`` key: ``metadata={"key": ...}`` where RocketMQ's spelling is irregular
    (``brokerIP1``), else the camelCase field name."""
    key = f.metadata.get("key")
    return key if isinstance(key, str) else camel(f.name)


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text: ``key=value`` or ``key: value``, ``#``/``!`` comments,
    trailing-backslash continuation lines."""
    props: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        for i, ch in enumerate(line):
            if ch in "=:":
                props[line[:i].strip()] = line[i + 1 :].strip()
                break
        else:
            props[line] = ""
    return props


def load_properties(path: str | Path) -> dict[str, str]:
    try:
        return parse_properties(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None


def convert_value(key: str, raw: str, hint: Any) -> Any:
    """``raw`` as the type ``hint`` names (bool, int, float, str, an enum by name, or an optional of one);
    :class:`ConfigError` naming ``key`` when it is not one."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if raw == "":
            return None
        hint = args[0]
    try:
        if hint is bool:
            lowered = raw.strip().lower()
            if lowered not in ("true", "false"):
                raise ValueError(raw)
            return lowered == "true"
        if hint is int:
            return int(raw)
        if hint is float:
            return float(raw)
        if hint is str:
            return raw
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            return hint[raw.strip().upper()]
    except (ValueError, KeyError):
        raise ConfigError(f"bad value for {key}: {raw!r} (expected {getattr(hint, '__name__', hint)})") from None
    raise ConfigError(f"unsupported config type for {key}: {hint!r}")


def load_config(cls: type[T], props: dict[str, str] | None = None, **overrides: Any) -> T:
    """Build ``cls`` from its defaults, ``props`` (camelCase keys) and ``overrides`` (field names, typed).

    ``None`` overrides are skipped so CLI flags that were not given leave the file's value in place.
    """
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    by_key = {config_key(f): name for name, f in fields.items()}
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for key, raw in (props or {}).items():
        name = by_key.get(key)
        if name is None:
            raise ConfigError(f"unknown config key {key!r}; known keys: {', '.join(sorted(by_key))}")
        values[name] = convert_value(key, raw, hints[name])
    for name, value in overrides.items():
        if name not in fields:
            raise ConfigError(f"unknown config field {name!r}")
        if value is not None:
            values[name] = value
    try:
        return cls(**values)
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc)) from None


def format_config(config: object) -> str:
    """The effective configuration as ``.properties`` text (for ``--print-config`` and the start log)."""
    lines = []
    for f in dataclasses.fields(config):  # type: ignore[arg-type]
        value = getattr(config, f.name)
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif value is None:
            text = ""
        elif hasattr(value, "name") and not isinstance(value, str | int):
            text = value.name
        else:
            text = str(value)
        lines.append(f"{config_key(f)}={text}")
    return "\n".join(lines) + "\n"


def from_named_properties(
    cls: type[T],
    properties: Mapping[str, str],
    names: Mapping[str, str],
    overrides: Mapping[str, Any],
    *,
    millis_to_seconds: frozenset[str] = frozenset(),
) -> T:
    """Build ``cls`` from the keys of ``properties`` that ``names`` maps to its fields (others are ignored:
    the caller decides what an unknown key means), then ``overrides`` (field names, typed, they win). Fields in
    ``millis_to_seconds`` are RocketMQ millisecond properties kept in seconds."""
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for key, raw in properties.items():
        name = names.get(key)
        if name is None:
            continue
        if name in millis_to_seconds:
            values[name] = convert_value(key, raw.strip(), int) / 1000
        else:
            values[name] = convert_value(key, raw.strip(), hints[name])
    values.update(overrides)
    return cls(**values)


DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
"""RocketMQ's ``messageDelayLevel``: the delay of levels 1..18."""

_DELAY_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DELAY_ITEM = re.compile(r"([0-9]+)(ms|s|m|h|d)")


class DelayLevelError(ConfigError):
    """A ``messageDelayLevel`` string is empty or has an item that is not ``<integer><unit>``."""


def parse_delay_levels(text: str = DEFAULT_DELAY_LEVELS) -> tuple[int, ...]:
    """Delays in ms, index 0 for level 1: ``"1s 5s 10s"`` → ``(1000, 5000, 10000)``.

    Units are RocketMQ's ``s``, ``m``, ``h``, ``d``, and ``ms`` (ours: short levels for tests). Raises
    :class:`DelayLevelError` for an empty string or any other item.
    """
    items = text.split()
    if not items:
        raise DelayLevelError("messageDelayLevel is empty")
    delays = []
    for item in items:
        match = _DELAY_ITEM.fullmatch(item)
        if match is None:
            raise DelayLevelError(f"bad delay level {item!r} in {text!r}: not <integer><ms|s|m|h|d>")
        delays.append(int(match.group(1)) * _DELAY_UNITS_MS[match.group(2)])
    return tuple(delays)
