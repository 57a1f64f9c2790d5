"""setuptools entry point: the project's metadata lives in ``pyproject.toml``; this file adds the optional
compiled hot path, the modules of :data:`pocketmq.common.compiled.MODULES` compiled by Cython in pure-Python
mode into extension modules beside their ``.py`` sources (docs/design/compiled.md says why Cython and how).

``python setup.py build_ext --inplace`` builds them in place (``make compiled``). Nothing here is required:
without Cython, without a C compiler, when one module fails to compile, or with ``POCKETMQ_PURE_PYTHON=1``, the
build says so on stderr and the package installs as plain Python (:mod:`pocketmq.common.compiled` decides at
import time which build runs). This file imports only the standard library and setuptools, so an sdist builds
a wheel with nothing of the checkout but what the sdist holds.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import sysconfig
import tempfile
from collections.abc import Iterable
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from types import ModuleType
from typing import Any

from setuptools import setup

ROOT = Path(__file__).resolve().parent
C_BUILD_DIR = "build/cython"
COMPILE_ARGS = ["-O2", "-g0"]
"""-g0: no debug info, a third less compile time; -O2 as Python's own build."""


def compiled_switch() -> ModuleType:
    """:mod:`pocketmq.common.compiled` loaded from its file alone: the list of modules and the pure switch,
    without importing the package (whose dependencies a build environment does not have)."""
    path = ROOT / "pocketmq" / "common" / "compiled.py"
    spec = importlib.util.spec_from_file_location("_pocketmq_compiled_list", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_options() -> dict[str, Any]:
    """``setup()`` keywords that build the extensions: empty (a pure-Python package) when the pure build is
    asked for, Cython is missing or no C compiler works."""
    switch = compiled_switch()
    if switch.pure_requested():
        print(f"pocketmq: {switch.PURE_ENV} set, building no extension modules", file=sys.stderr)
        return {}
    try:
        # Imported by name: neither ships type information, and only the build needs them.
        cythonize = importlib.import_module("Cython.Build").cythonize
        extension_class = importlib.import_module("setuptools").Extension
    except ImportError as exc:
        print(f"pocketmq: {exc}; the hot path stays plain Python", file=sys.stderr)
        return {}
    problem = compiler_problem()
    if problem is not None:
        # No extension modules at all: the wheel is then tagged pure (py3-none-any), installable anywhere.
        print(f"pocketmq: {problem}; building the pure-Python package", file=sys.stderr)
        return {}
    extensions = [
        extension_class(name, [str(Path(*name.split(".")).with_suffix(".py"))], extra_compile_args=COMPILE_ARGS)
        for name in switch.MODULES
    ]
    directives = {"language_level": "3", "annotation_typing": False, "binding": True}
    compiled = cythonize(extensions, build_dir=C_BUILD_DIR, compiler_directives=directives, quiet=True,
                         nthreads=os.cpu_count() or 1)
    for extension in compiled:
        extension.optional = True  # cythonize does not carry it over
    return {"ext_modules": compiled, "cmdclass": {"build_ext": optional_build_ext()}}


def compiler_problem() -> str | None:
    """``None`` when the C compiler that ``build_ext`` would use compiles against this Python's headers (a
    one-line probe), else what went wrong: without one, no extension is declared and the wheel is pure."""
    ccompiler = importlib.import_module("distutils.ccompiler")  # setuptools' own copy, imported by setuptools
    compiler = ccompiler.new_compiler()
    importlib.import_module("distutils.sysconfig").customize_compiler(compiler)
    with tempfile.TemporaryDirectory(prefix="pocketmq-cc-") as scratch:
        probe = Path(scratch, "probe.c")
        probe.write_text("#include <Python.h>\nint pocketmq_probe(void) { return 0; }\n", encoding="ascii")
        try:
            compiler.compile([str(probe)], output_dir=scratch, include_dirs=[sysconfig.get_paths()["include"]])
        except Exception as exc:  # CompileError, DistutilsExecError, a compiler that is not there
            return f"no working C compiler ({exc})"
    return None


def optional_build_ext() -> type:
    """A ``build_ext`` that reports a module it cannot compile and goes on: that module runs from source."""
    build_ext = importlib.import_module("setuptools.command.build_ext").build_ext

    class OptionalBuildExt(build_ext):  # type: ignore[misc,valid-type]
        def run(self) -> None:
            try:
                super().run()
            except Exception as exc:  # no compiler at all (DistutilsPlatformError and friends)
                print(f"pocketmq: cannot build extension modules ({exc}); plain Python", file=sys.stderr)
            if self.inplace:
                remove_stray_extensions()

        def build_extension(self, ext: Any) -> None:
            try:
                super().build_extension(ext)
            except Exception as exc:  # CompileError, CCompilerError, a linker's error
                print(f"pocketmq: {ext.name} not compiled ({exc}); it runs from source", file=sys.stderr)
                # No older build of it may be copied in place or shipped: the module runs from source.
                for stale in (Path(self.get_ext_fullpath(ext.name)), ROOT / self.get_ext_filename(ext.name)):
                    stale.unlink(missing_ok=True)

    return OptionalBuildExt


def remove_stray_extensions(root: Path = ROOT, modules: Iterable[str] | None = None) -> list[str]:
    """Delete in-place extensions of modules no longer compiled (Python would load one before its source);
    the modules whose extension went."""
    wanted = set(compiled_switch().MODULES if modules is None else modules)
    found = {path for suffix in EXTENSION_SUFFIXES for path in (root / "pocketmq").rglob("*" + suffix)}
    removed = []
    for path in sorted(found):
        # A module's name has no dot, so its extension's name is the module's up to the first one.
        name = ".".join((*path.relative_to(root).parent.parts, path.name.partition(".")[0]))
        if name not in wanted:
            print(f"pocketmq: removing {path.relative_to(root)} ({name} is no longer compiled)", file=sys.stderr)
            path.unlink()
            removed.append(name)
    return removed


if __name__ == "__main__":  # how pip, build and `python setup.py` run it; a test imports it for its functions
    setup(**build_options())
