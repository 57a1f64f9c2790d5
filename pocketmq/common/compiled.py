"""Which build of the hot path runs: the Cython-compiled extension modules or the plain ``.py`` sources.

:data:`MODULES` lists the modules that ``make setup`` / ``pip install`` compile (``setup.py`` reads this list,
so the build and the runtime agree). Each extension is built beside its source, under the same name
(``pocketmq/common/record.py`` and ``record.cpython-311-x86_64-linux-gnu.so``), and Python's own path finder
prefers the extension: a plain ``import`` runs the compiled build whenever there is one. Only two cases need
the source instead, and only then does this module put :class:`SourceFinder` on ``sys.meta_path`` (before any
of those modules can be imported: ``pocketmq/__init__.py`` imports this module first):

* ``POCKETMQ_PURE_PYTHON=1`` (any value but ``""`` and ``"0"``) is set in the environment, or
* a source is newer than its extension (an edit since the last in-place build: a stale extension would run
  old code).

An installed package with no such variable leaves the import system as it found it. With no compiler, a
failed build or no build at all, there is no extension and the sources run as they always did (their
``import cython`` falls back to :mod:`pocketmq.common.pure_mode`). :data:`ACTIVE` says what this process runs
(the broker logs it at start and reports it as ``compiledBuild`` in GET_BROKER_RUNTIME_INFO). This module
imports only the standard library.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from importlib.machinery import EXTENSION_SUFFIXES, ExtensionFileLoader, ModuleSpec, PathFinder
from importlib.util import spec_from_file_location
from pathlib import Path
from types import ModuleType

MODULES: tuple[str, ...] = (
    "pocketmq.common.record",
    "pocketmq.common.record_encoder",
    "pocketmq.remoting.frame",
    "pocketmq.remoting.serialization",
    "pocketmq.client.consumer.fast_decode",
    "pocketmq.store.dispatch_kernel",
)
"""The compiled modules: the per-message modules that ran measurably faster compiled (docs/design/compiled.md
lists what else was tried and why it was left as Python)."""

PURE_ENV = "POCKETMQ_PURE_PYTHON"
STALE_SLACK_S = 2.0
"""A source counts as edited after the build only when it is this much newer than its extension (an installed
wheel writes both within the same moment, in any order)."""

_ROOT = Path(__file__).resolve().parents[2]


def pure_requested() -> bool:
    """True when ``POCKETMQ_PURE_PYTHON`` asks for the plain sources."""
    return os.environ.get(PURE_ENV, "") not in ("", "0")


def source_path(name: str) -> Path:
    """The ``.py`` file of a module of :data:`MODULES`."""
    return _ROOT.joinpath(*name.split(".")).with_suffix(".py")


def extension_path(name: str) -> Path | None:
    """The built extension beside the module's source, or ``None`` when there is none for this interpreter."""
    source = source_path(name)
    for suffix in EXTENSION_SUFFIXES:
        candidate = source.with_suffix(suffix)
        if candidate.is_file():
            return candidate
    return None


def is_stale(source: Path, extension: Path) -> bool:
    """True when ``source`` was edited after ``extension`` was built from it."""
    try:
        return source.stat().st_mtime > extension.stat().st_mtime + STALE_SLACK_S
    except OSError:
        return False


class SourceFinder:
    """A meta-path finder for the modules of :data:`MODULES`: the ``.py`` source instead of the extension
    when the pure build is asked for or the extension is stale, else that extension. It answers nothing for
    any other module."""

    def __init__(self, pure: bool) -> None:
        self.pure = pure
        self._names = frozenset(MODULES)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if path is None or fullname not in self._names:
            return None
        spec = PathFinder.find_spec(fullname, path)
        if spec is None or spec.origin is None or not isinstance(spec.loader, ExtensionFileLoader):
            return None
        extension = Path(spec.origin)
        source = extension.parent / (fullname.rpartition(".")[2] + ".py")
        if source.is_file() and (self.pure or is_stale(source, extension)):
            return spec_from_file_location(fullname, source)
        return spec


def _compiled_count() -> tuple[int, int]:
    """How many modules of :data:`MODULES` have an extension, and how many of those are up to date."""
    built = fresh = 0
    for name in MODULES:
        extension = extension_path(name)
        if extension is not None:
            built += 1
            fresh += not is_stale(source_path(name), extension)
    return built, fresh


def _install() -> str:
    pure = pure_requested()
    built, fresh = _compiled_count()
    needed = built > 0 and (pure or fresh < built)
    if needed and not any(isinstance(finder, SourceFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, SourceFinder(pure))
    if pure or fresh == 0:
        return "pure"
    return "cython" if fresh == len(MODULES) else "partial"


ACTIVE: str = _install()
"""``"cython"`` when every module of :data:`MODULES` runs compiled, ``"pure"`` when none does (the
environment variable, no build), ``"partial"`` for a build that compiled only some of them or went stale."""


def loaded_from_extension(module: ModuleType) -> bool:
    """True when ``module`` was loaded from a compiled extension rather than from its source."""
    return isinstance(getattr(module, "__loader__", None), ExtensionFileLoader)
