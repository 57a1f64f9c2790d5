"""Generate ``docs/configuration.md`` from the configuration dataclasses.

Run ``.venv/bin/python scripts/gen_config_reference.py`` (or ``make docs``) after adding or changing a
configuration field; ``--check`` only compares and exits 1 when the file is out of date
(``tests/test_config_reference.py`` does the same).

What is read, and from where:

* the keys: ``NamesrvConfig``, ``BrokerConfig`` and ``ControllerConfig`` fields
  (``pocketmq.common.config.config_key``: the camelCase name, or ``metadata={"key": ...}``), and the store's and
  replication's ``PROPERTY_NAMES`` tables, which map
  RocketMQ's property names to ``StoreConfig`` / ``HAConfig`` fields; the broker's ignored keys;
* the description: the field's ``#:`` comment lines right above it, or the string right after it;
* the default: the field's default, or ``metadata={"default": "..."}`` where the default is computed at run
  time (the host's name, the user's home) or set by the broker rather than the dataclass;
* the unit: ``metadata={"unit": ...}`` (``""`` for none), else the field's name (:data:`UNIT_RULES`), else a
  millisecond replication property (``PROPERTY_NAMES`` kind ``ms``); booleans, strings and enums have none.

A key without a description, or a number without a unit, is reported by :func:`problems` (the test fails).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import enum
import inspect
import re
import sys
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pocketmq.broker.config import IGNORED_KEYS, BrokerConfig  # noqa: E402
from pocketmq.common.config import config_key  # noqa: E402
from pocketmq.controller.config import ControllerConfig  # noqa: E402
from pocketmq.ha.config import PROPERTY_NAMES as HA_PROPERTY_NAMES  # noqa: E402
from pocketmq.ha.config import HAConfig  # noqa: E402
from pocketmq.namesrv.config import NamesrvConfig  # noqa: E402
from pocketmq.proxy.config import ProxyConfig  # noqa: E402
from pocketmq.store.config import PROPERTY_NAMES as STORE_PROPERTY_NAMES  # noqa: E402
from pocketmq.store.config import StoreConfig  # noqa: E402

OUTPUT = ROOT / "docs" / "configuration.md"

UNIT_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"_(ms|mills|millis)$"), "ms"),
    (re.compile(r"_seconds$"), "s"),
    (re.compile(r"_hours$"), "h"),
    (re.compile(r"_ratio$"), "%"),
    (re.compile(r"_port$"), ""),
    (re.compile(r"(^|_)(size|length|bytes)(_|$)"), "bytes"),
    (re.compile(r"(^|_)pages(_|$)"), "pages"),
    (re.compile(r"(^|_)(num|nums|count)(_|$)"), "count"),
    (re.compile(r"(^|_)connections$"), "count"),
)
"""Units the field's name says, first match wins (``_port``: a port number, no unit)."""


@dataclass(frozen=True)
class Key:
    """One documented key."""

    key: str
    field: str
    default: str
    """The value as a ``.properties`` file writes it, or (``default_is_text``) words where it is computed."""
    unit: str | None
    """``None``: a number whose unit nothing says (a problem); ``""``: no unit."""
    description: str
    default_is_text: bool = False


@dataclass(frozen=True)
class Section:
    title: str
    intro: str
    keys: tuple[Key, ...]


# -- reading the dataclasses -----------------------------------------------------------------------------------


def field_comments(cls: type) -> dict[str, str]:
    """Field name → its description: the ``#:`` lines right above it, or the string statement right after it."""
    source = Path(inspect.getfile(cls)).read_text(encoding="utf-8")
    lines = source.splitlines()
    tree = ast.parse(source)
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls.__name__)
    found: dict[str, str] = {}
    for i, stmt in enumerate(node.body):
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        comment: list[str] = []
        row = stmt.lineno - 2
        while row >= 0 and lines[row].strip().startswith("#:"):
            comment.insert(0, lines[row].strip()[2:].strip())
            row -= 1
        text = " ".join(comment)
        following = node.body[i + 1] if i + 1 < len(node.body) else None
        if (not text and isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)):
            text = following.value.value
        found[stmt.target.id] = to_markdown(text)
    return found


def to_markdown(text: str) -> str:
    """reST in docstrings to one line of Markdown: ``x`` → `x`, :role:`~a.b.c` → `c`, whitespace collapsed."""
    text = re.sub(r":[a-z]+:`~([^`]+)`", lambda m: "`" + m.group(1).rsplit(".", 1)[-1] + "`", text)
    text = re.sub(r":[a-z]+:`([^`]+)`", r"`\1`", text)
    text = text.replace("``", "`")
    text = " ".join(text.split())
    return text.replace("|", "\\|")


def render_value(value: Any) -> str:
    """A default as a ``.properties`` value."""
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if value == "":
        return "(empty)"
    return str(value)


def is_number(hint: Any) -> bool:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(is_number(a) for a in typing.get_args(hint) if a is not type(None))
    return hint in (int, float)


def unit_of(f: dataclasses.Field[Any], hint: Any, millis: bool = False) -> str | None:
    if "unit" in f.metadata:
        return str(f.metadata["unit"])
    if millis:
        return "ms"
    if not is_number(hint):
        return ""
    for rule, unit in UNIT_RULES:
        if rule.search(f.name):
            return unit
    return None


def default_of(f: dataclasses.Field[Any], millis: bool = False, given: Mapping[str, Any] | None = None) -> str:
    if "default" in f.metadata:
        return str(f.metadata["default"])
    if given is not None and f.name in given:
        value = given[f.name]
    elif f.default is not dataclasses.MISSING:
        value = f.default
    else:
        return "(required)"
    if millis and isinstance(value, int | float):
        value = round(value * 1000)
    return render_value(value)


def keys_of(cls: type, names: Mapping[str, tuple[str, bool]], skip: frozenset[str] = frozenset(),
            given: Mapping[str, Any] | None = None) -> tuple[Key, ...]:
    """The keys ``names`` maps to ``cls``'s fields (key → (field, the property is in ms and the field in s))."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    comments = field_comments(cls)
    out = []
    for key, (name, millis) in names.items():
        if key in skip:
            continue
        f = fields[name]
        out.append(Key(key, name, default_of(f, millis, given), unit_of(f, hints[name], millis),
                       comments.get(name, ""), "default" in f.metadata))
    return tuple(sorted(out, key=lambda k: k.key.lower()))


def own_keys(cls: type, exclude: frozenset[str] = frozenset()) -> dict[str, tuple[str, bool]]:
    """``cls``'s own camelCase keys (``load_config``'s mapping)."""
    return {config_key(f): (f.name, False) for f in dataclasses.fields(cls) if f.name not in exclude}


def sections() -> tuple[Section, ...]:
    broker_keys = own_keys(BrokerConfig, frozenset({"store", "ha"}))
    broker_ha = BrokerConfig().ha  # the replication defaults as a broker holds them
    return (
        Section("Broker", "`rmq-broker -c broker.properties`: the broker's own keys.",
                keys_of(BrokerConfig, broker_keys)),
        Section("Store", "Also in `broker.properties`: the message store (RocketMQ's `MessageStoreConfig`).",
                keys_of(StoreConfig, {k: (v, False) for k, v in STORE_PROPERTY_NAMES.items()},
                        skip=frozenset(broker_keys))),
        Section("Replication (HA)", "Also in `broker.properties`: master/slave replication. Durations are "
                "milliseconds in the file, as in RocketMQ.",
                keys_of(HAConfig, {k: (name, kind == "ms") for k, (name, kind) in HA_PROPERTY_NAMES.items()},
                        given=dataclasses.asdict(broker_ha))),
        Section("Name server", "`rmq-namesrv -c namesrv.properties`.", keys_of(NamesrvConfig, own_keys(NamesrvConfig))),
        Section("Controller", "`rmq-controller -c controller.properties`, or in `namesrv.properties` with "
                "`enableControllerInNamesrv=true` (RocketMQ 5's `ControllerConfig` keys; see "
                "[the controller guide](controller.md)).", keys_of(ControllerConfig, own_keys(ControllerConfig))),
        Section("gRPC proxy", "`rmq-proxy -c proxy.properties`, or a broker's `proxyConfigFile` (docs/grpc-proxy.md).",
                keys_of(ProxyConfig, own_keys(ProxyConfig))),
    )


# -- checking and writing --------------------------------------------------------------------------------------


def problems(all_sections: Sequence[Section]) -> list[str]:
    """Keys without a description, and numbers whose unit neither their name nor their metadata says."""
    found = []
    for section in all_sections:
        for k in section.keys:
            if not k.description:
                found.append(f"{section.title}: {k.key} ({k.field}) has no description: add a `#:` comment above "
                             "the field, or a string after it")
            if k.unit is None:
                found.append(f"{section.title}: {k.key} ({k.field}) has no unit: add metadata={{'unit': ...}} "
                             "('' for none)")
    return found


HEADER = """# Configuration reference

Generated from the configuration dataclasses by `scripts/gen_config_reference.py`: do not edit by hand. After
changing a configuration field, run `.venv/bin/python scripts/gen_config_reference.py` (or `make docs`);
`tests/test_config_reference.py` fails while this file and the code disagree.

Keys are RocketMQ's property names, in RocketMQ's units, so a RocketMQ `broker.properties` means the same
here. An unknown key is an error; command-line flags (`rmq-broker --help`, `rmq-namesrv --help`) override the
file, and `--print-config` prints the effective configuration.
"""


BINARY_UNITS = ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))


def render_default(k: Key) -> str:
    """The table cell: a value in code, with its binary size for bytes; words as they are."""
    if k.default_is_text or k.default in ("(none)", "(empty)", "(required)"):
        return k.default
    cell = f"`{k.default}`"
    if k.unit == "bytes" and k.default.isdigit():
        value = int(k.default)
        for size, name in BINARY_UNITS:
            if value >= size and value % size == 0:
                return f"{cell} ({value // size} {name})"
    return cell


def render(all_sections: Sequence[Section]) -> str:
    out = [HEADER]
    for section in all_sections:
        out += [f"## {section.title}", "", section.intro, "",
                "| key | default | unit | description | field |", "|---|---|---|---|---|"]
        for k in section.keys:
            out.append(f"| `{k.key}` | {render_default(k)} | {k.unit or '—'} | {k.description} | `{k.field}` |")
        out.append("")
    out += ["## Keys accepted and ignored", "",
            "RocketMQ's sample files carry these; PocketMQ reads them without error and ignores them "
            "([design/decisions.md](design/decisions.md#keys-accepted-and-ignored) says why): "
            + ", ".join(f"`{key}`" for key in sorted(IGNORED_KEYS)) + ".", ""]
    return "\n".join(out)


def generate() -> str:
    return render(sections())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write docs/configuration.md from the configuration dataclasses.")
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when the file is out of date")
    args = parser.parse_args(argv)
    all_sections = sections()
    for problem in problems(all_sections):
        print(f"warning: {problem}", file=sys.stderr)
    text = render(all_sections)
    current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.is_file() else ""
    if args.check:
        if current != text:
            print(f"{OUTPUT.relative_to(ROOT)} is out of date: run .venv/bin/python scripts/gen_config_reference.py",
                  file=sys.stderr)
            return 1
        return 0
    if current != text:
        OUTPUT.write_text(text, encoding="utf-8")
        print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


def iter_keys(all_sections: Sequence[Section]) -> Iterator[tuple[Section, Key]]:
    for section in all_sections:
        for k in section.keys:
            yield section, k


if __name__ == "__main__":
    sys.exit(main())
