"""``docs/configuration.md`` is what ``scripts/gen_config_reference.py`` generates from the configuration
dataclasses: every key the broker and the name server accept, with a description, a unit where it is a number,
and a default the loaders really take. When this fails after a configuration change, run
``.venv/bin/python scripts/gen_config_reference.py`` (or ``make docs``) and commit the result."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pocketmq.broker.config import load_broker_config
from pocketmq.common.config import ConfigError, load_config
from pocketmq.namesrv.config import NamesrvConfig

ROOT = Path(__file__).resolve().parent.parent
RERUN = "run .venv/bin/python scripts/gen_config_reference.py (make docs) and commit docs/configuration.md"


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_config_reference", ROOT / "scripts" / "gen_config_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


gen = _load_generator()
VALUE_DEFAULTS = ("(none)", "(empty)", "(required)")


def section(title: str) -> Any:
    return next(s for s in gen.sections() if s.title == title)


def test_reference_matches_the_code() -> None:
    written = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert written == gen.generate(), f"docs/configuration.md is out of date: {RERUN}"


def test_every_key_has_a_description_and_every_number_a_unit() -> None:
    assert gen.problems(gen.sections()) == []


def _known_keys(error: ConfigError) -> set[str]:
    match = re.search(r"known keys: (.*)$", str(error))
    assert match, str(error)
    return set(match.group(1).split(", "))


def test_every_key_the_loaders_accept_is_documented() -> None:
    """The loaders' own lists of known keys (from their error for an unknown one) against the reference."""
    with pytest.raises(ConfigError) as broker_error:
        load_broker_config({"noSuchKey": "1"})
    documented = {k.key for title in ("Broker", "Store", "Replication (HA)") for k in section(title).keys}
    assert _known_keys(broker_error.value) == documented
    with pytest.raises(ConfigError) as namesrv_error:
        load_config(NamesrvConfig, {"noSuchKey": "1"})
    assert _known_keys(namesrv_error.value) == {k.key for k in section("Name server").keys}


def _broker_value(config: Any, key_field: str) -> Any:
    for part in (config, config.store, config.ha):
        if key_field in {f.name for f in dataclasses.fields(part)}:
            return getattr(part, key_field)
    raise AssertionError(key_field)


@pytest.mark.parametrize("title", ["Broker", "Store", "Replication (HA)"])
def test_documented_broker_defaults_are_what_the_broker_takes(title: str) -> None:
    """Each documented value, written into a properties file, gives what no file gives."""
    base = load_broker_config({})
    for k in section(title).keys:
        if k.default_is_text or k.default in VALUE_DEFAULTS:
            continue
        loaded = load_broker_config({k.key: k.default})
        assert _broker_value(loaded, k.field) == _broker_value(base, k.field), k.key


def test_documented_namesrv_defaults_are_what_the_name_server_takes() -> None:
    base = NamesrvConfig()
    for k in section("Name server").keys:
        if k.default_is_text or k.default in VALUE_DEFAULTS:
            continue
        assert getattr(load_config(NamesrvConfig, {k.key: k.default}), k.field) == getattr(base, k.field), k.key


@dataclass(frozen=True)
class _Sample:
    #: Documented above.
    timeout_ms: int = 1000
    length: int = 16
    """Documented below."""
    undocumented: bool = False
    widgets: int = 3
    """A number whose unit neither its name nor its metadata says."""
    spelled: int = field(default=5, metadata={"unit": "", "key": "spelledOut"})
    """Explicitly no unit, and an irregular key."""


def test_the_generator_reads_comments_units_and_reports_what_is_missing() -> None:
    names = {"timeoutMs": ("timeout_ms", False), "length": ("length", False), "undocumented": ("undocumented", False),
             "widgets": ("widgets", False), "spelledOut": ("spelled", False)}
    keys = {k.key: k for k in gen.keys_of(_Sample, names)}
    assert (keys["timeoutMs"].description, keys["timeoutMs"].unit, keys["timeoutMs"].default) == (
        "Documented above.", "ms", "1000")
    assert (keys["length"].description, keys["length"].unit) == ("Documented below.", "bytes")
    assert keys["spelledOut"].unit == ""
    found = gen.problems([gen.Section("Sample", "", tuple(keys.values()))])
    assert len(found) == 2
    assert "undocumented" in found[0] and "no description" in found[0]
    assert "widgets" in found[1] and "no unit" in found[1]
