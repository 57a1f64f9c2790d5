"""The floors of PocketMQ, checked from the source (docs/design/floors.md).

Every product module's imports are read with ``ast`` — module-level, function-level and ``TYPE_CHECKING``-only
imports alike — and the test fails on

* an import that runs up a floor or sideways to a package the importer may not know
  (``common`` ← ``remoting``, ``store`` ← ``controller`` ← ``namesrv``, ``client``, ``ha``, ``spark_jobs`` ←
  ``broker``; ``admin``, ``console`` and ``benchmarks`` are tools on top of everything);
* an import circle between modules, of any length;
* a product module over 600 lines whose docstring does not say why it is that long;
* product text (code, comments, docstrings, package data) carrying one of the project's issue numbers, a date,
  a pointer outside the repository (``../shared``, "reference §7", "seeds 001/003", "STYLE habit 5", "the
  issue", a README section) or a ``docs/`` page that does not exist. The why stays in the code; dates,
  figures and history go to ``docs/``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

ALLOWED: dict[str, frozenset[str]] = {
    "conf": frozenset(),
    "common": frozenset(),
    "remoting": frozenset({"common"}),
    "store": frozenset({"common"}),
    "controller": frozenset({"common", "remoting"}),
    "namesrv": frozenset({"common", "remoting", "controller"}),
    "client": frozenset({"common", "remoting"}),
    "ha": frozenset({"common", "store"}),
    "spark_jobs": frozenset({"common", "store"}),
    "proxy": frozenset({"common", "remoting", "client"}),
    "broker": frozenset({"common", "remoting", "store", "ha", "proxy"}),
    "admin": frozenset({"conf", "common", "remoting", "store", "controller", "namesrv", "client", "ha", "spark_jobs",
                        "broker", "proxy"}),
    "chaos": frozenset({"conf", "common", "remoting", "store", "client", "admin"}),
    "console": frozenset({"common", "remoting", "namesrv", "client", "admin"}),
    "bench": frozenset(
        {"conf", "common", "remoting", "store", "controller", "namesrv", "client", "ha", "spark_jobs", "broker",
         "admin", "proxy", "console"}
    ),
}
"""Which of our packages each package may import (besides itself)."""

PACKAGE = "pocketmq"
"""The one import name: every product module is ``pocketmq.<package>.…``."""
FACADE = frozenset({"common", "client"})
"""What ``pocketmq/__init__.py`` (the SDK's names at the top) may import."""
OURS = frozenset(ALLOWED)
MAX_LINES = 600
LONG_MODULE_MARK = "longer than 600 lines"
"""A module over ``MAX_LINES`` says why in its docstring, in a sentence containing these words."""


def product_modules() -> dict[str, Path]:
    """Dotted module name → file, for every module of every product package."""
    modules: dict[str, Path] = {PACKAGE: ROOT / PACKAGE / "__init__.py"}
    for package in ALLOWED:
        for path in sorted((ROOT / PACKAGE / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute name a ``from … import`` statement reads from."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def imported_names(module: str, path: Path) -> Iterator[str]:
    """Every name of ours that ``module`` imports: ``a.b`` for ``import a.b`` and, for ``from a import b``,
    ``a.b`` (which is a module or a name defined in ``a``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(module, is_package, node)
            yield source
            for alias in node.names:
                yield f"{source}.{alias.name}"


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module → the product modules it imports (a name inside a module counts as that module)."""
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for target in imported_names(name, path):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                graph[name].add(target)
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components with more than one module (iterative: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _package_of(name: str) -> str:
    """``client`` for ``pocketmq.client.core``; ``pocketmq`` for the top module; the first part of anything
    else (a third party's or a name of ours imported without the package, which the floors then reject)."""
    parts = name.split(".")
    if parts[0] != PACKAGE:
        return parts[0]
    return parts[1] if len(parts) > 1 else PACKAGE


def test_every_import_of_ours_goes_through_the_one_package() -> None:
    """No product or test module imports a component by its old top-level name (``import client``)."""
    wrong = []
    paths = [*product_modules().values(), *sorted((ROOT / "tests").rglob("*.py"))]
    for path in paths:
        for target in imported_names("tests.x" if "tests" in path.parts else PACKAGE + ".x", path):
            if target.split(".")[0] in ALLOWED:
                wrong.append(f"{path.relative_to(ROOT)} imports {target}")
    assert not wrong, "imports outside the pocketmq package:\n" + "\n".join(sorted(set(wrong)))


def test_no_import_runs_up_a_floor() -> None:
    modules = product_modules()
    wrong = []
    for name, path in modules.items():
        package = _package_of(name)
        allowed = FACADE if package == PACKAGE else ALLOWED[package]
        for target in set(imported_names(name, path)):
            other = _package_of(target)
            if other in OURS and other != package and other not in allowed:
                wrong.append(f"{name} imports {target}")
    assert not wrong, "imports against the floors:\n" + "\n".join(sorted(set(wrong)))


def test_no_import_circles() -> None:
    circles = strongly_connected(import_graph(product_modules()))
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_modules_are_short_or_say_why() -> None:
    long = []
    for name, path in product_modules().items():
        text = path.read_text(encoding="utf-8")
        if text.count("\n") <= MAX_LINES:
            continue
        doc = ast.get_docstring(ast.parse(text)) or ""
        if LONG_MODULE_MARK not in doc:
            long.append(f"{name}: {text.count(chr(10))} lines")
    assert not long, "modules over 600 lines that do not say why:\n" + "\n".join(long)


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"b"}, "b": set(), "c": {"b"}}, []),
    ],
)
def test_circle_finder(graph: dict[str, set[str]], expected: list[list[str]]) -> None:
    """The checker itself finds circles of any length and nothing else."""
    assert strongly_connected(graph) == expected


def test_checker_sees_type_only_and_relative_imports(tmp_path: Path) -> None:
    source = tmp_path / "mod.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from pocketmq.broker.controller import BrokerController\n"
        "def f() -> None:\n    import pocketmq.ha.service\n"
        "from . import sibling\n",
        encoding="utf-8",
    )
    names = set(imported_names("pocketmq.store.mod", source))
    assert {"pocketmq.broker.controller.BrokerController", "pocketmq.ha.service", "pocketmq.store.sibling"} <= names


PRODUCT_TEXT_SUFFIXES = frozenset({".py", ".pyx", ".pxd", ".properties", ".yml", ".yaml", ".json", ".toml", ".cfg",
                                   ".txt", ".md", ".sh"})
"""Files of the product whose text is checked for pointers (compiled extensions and caches are not text)."""

POINTER_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("an issue number", re.compile(r"\bissues? #?\d+", re.IGNORECASE)),
    ("an issue number", re.compile(r"(?<![\w/\"':#&-])#\d+\b")),
    ("a pointer to an issue", re.compile(r"\bthe issue(?:'s)?\b", re.IGNORECASE)),
    ("a date", re.compile(r"\b(?:19|20)\d\d-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])\b")),
    ("a path outside the repository", re.compile(r"\.\./shared|/work/|\bshared/(?:seeds|reference)\b")),
    ("a pointer to the reference notes", re.compile(r"\breference §|§\s*\d")),
    ("a pointer to the seed articles", re.compile(r"\bseeds? 0\d\d\b", re.IGNORECASE)),
    ("a pointer to the team's notes",
     re.compile(r"\bSTYLE habit|\bhabit \d+\b|\b(?:STYLE|DESIGN)\.md\b|spark-notes\.md")),
    ("a pointer to a README section (docs/ pages are the place)", re.compile(r"\bREADME\b")),
)
"""What product text may not carry. Upstream references in full (``apache/rocketmq#1094``) are public and stay:
the lookbehind of the bare ``#123`` rule lets ``owner/repo#123`` (and CSS colours such as ``"#555"``) through."""

DOCS_LINK = re.compile(r"\bdocs/[\w./-]+\.md\b")


def pointer_problems(text: str, root: Path = ROOT) -> list[str]:
    """Each line of ``text`` that carries something :data:`POINTER_RULES` rejects, or names a ``docs/`` page
    that does not exist under ``root``: ``"<line>: <what>: <the text found>"``."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for what, rule in POINTER_RULES:
            match = rule.search(line)
            if match:
                found.append(f"{number}: {what}: {match.group(0)!r}")
        for link in DOCS_LINK.findall(line):
            if not (root / link).is_file():
                found.append(f"{number}: a docs page that does not exist: {link!r}")
    return found


def product_text_files() -> list[Path]:
    """Every text file of the product (``pocketmq/``, with its package data), ``setup.py`` and ``scripts/``."""
    paths = [*(ROOT / PACKAGE).rglob("*"), ROOT / "setup.py", *(ROOT / "scripts").rglob("*")]
    return sorted(p for p in paths
                  if p.is_file() and p.suffix in PRODUCT_TEXT_SUFFIXES and "__pycache__" not in p.parts)


def test_product_text_carries_no_dates_issue_numbers_or_outside_pointers() -> None:
    wrong = []
    for path in product_text_files():
        for problem in pointer_problems(path.read_text(encoding="utf-8")):
            wrong.append(f"{path.relative_to(ROOT)}:{problem}")
    assert not wrong, ("product text that belongs in docs/ (keep the one-line why in the code):\n" + "\n".join(wrong))


@pytest.mark.parametrize(
    "line",
    [
        "# p50 dropped after the fix (issue 15)",
        "see issues 9 and 15",
        "RocketMQ bug #7779",
        "Stop is the reverse, as the issue asks:",
        "one of the issue's targets",
        "# measured on 2026-11-25",
        "Design: ../shared/DESIGN.md",
        "(reference §7, last bullets)",
        "defaults (§4.2)",
        "(seeds 001/003/004)",
        "(seed 000 §3)",
        "(STYLE habit 5)",
        "see the README's architecture section",
        'the sweep in README "W4"',
        "settings measured in spark-notes.md",
        "details: docs/design/no-such-page.md",
    ],
)
def test_pointer_checker_rejects(line: str) -> None:
    """The checker itself: each sample is one of the things product code may not carry."""
    assert pointer_problems(line), line


@pytest.mark.parametrize(
    "line",
    [
        "(apache/rocketmq#1094: offsets merged by maximum)",
        'COLORS = {"kill": "#d62728", "stop": "#555"}',
        "body{color:#222}",
        "python -m pocketmq.chaos --seed 1",
        "Issue sends on a schedule; issued += 1",
        "START_MS = 1_714_557_600_000  # 1 May 2024, 10:00 UTC",
        "the full tables: docs/perf/compare-results.md",
        "RocketMQ 4.9.4's complete list",
    ],
)
def test_pointer_checker_accepts(line: str) -> None:
    """Upstream references, colours, seeds of our own tools, the verb "issue" and existing docs pages pass."""
    assert pointer_problems(line) == [], line
