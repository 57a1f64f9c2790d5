"""The floors of PocketMQ, checked from the source (README, "Architecture").

Every product module's imports are read with ``ast`` — module-level, function-level and ``TYPE_CHECKING``-only
imports alike — and the test fails on

* an import that runs up a floor or sideways to a package the importer may not know
  (``common`` ← ``remoting``, ``store`` ← ``namesrv``, ``client``, ``ha``, ``spark_jobs`` ← ``broker``;
  ``admin``, ``console`` and ``benchmarks`` are tools on top of everything);
* an import circle between modules, of any length;
* a product module over 600 lines whose docstring does not say why it is that long.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

ALLOWED: dict[str, frozenset[str]] = {
    "conf": frozenset(),
    "common": frozenset(),
    "remoting": frozenset({"common"}),
    "store": frozenset({"common"}),
    "namesrv": frozenset({"common", "remoting"}),
    "client": frozenset({"common", "remoting"}),
    "ha": frozenset({"common", "store"}),
    "spark_jobs": frozenset({"common", "store"}),
    "broker": frozenset({"common", "remoting", "store", "ha"}),
    "admin": frozenset({"conf", "common", "remoting", "store", "namesrv", "client", "ha", "spark_jobs", "broker"}),
    "chaos": frozenset({"conf", "common", "remoting", "store", "client", "admin"}),
    "console": frozenset({"common", "remoting", "namesrv", "client", "admin"}),
    "bench": frozenset(
        {"conf", "common", "remoting", "store", "namesrv", "client", "ha", "spark_jobs", "broker", "admin", "console"}
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
