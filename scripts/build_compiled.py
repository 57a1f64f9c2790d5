"""Build the compiled hot path: the modules of :data:`common.compiled.MODULES`, compiled by Cython in
pure-Python mode into extension modules beside their ``.py`` sources (``setup.py`` uses the same options, so
``pip install .`` ships them in the wheel and ``pip install -e .`` builds them in place).

``python scripts/build_compiled.py`` builds in place (what ``make setup`` runs; the ``.so`` files are
git-ignored, the generated C stays under ``build/cython``). A module whose source has not changed is not
rebuilt. Nothing here is required: without Cython, without a C compiler, when one module fails to compile, or
with ``POCKETMQ_PURE_PYTHON=1``, the build says so on stderr and the sources run as plain Python
(:mod:`common.compiled` decides at import time).

Why Cython in pure-Python mode and not mypyc (measured on :mod:`common.record`, README "Compiled hot path"):

* speed: on ``locate_record``, ``decode_record`` and ``check_record`` Cython was 6-17 % faster than the
  plain source, mypyc 12 % slower to 5 % faster: the hot code is typed with unions (``bytes | bytearray |
  memoryview``) and ``Any`` tuples, which mypyc handles through generic boxed operations plus runtime type
  checks, while the real work is in C already (``struct``, slicing, ``zlib``);
* compatibility: Cython keeps Python semantics (classes stay ordinary classes, so tests may monkeypatch or
  subclass them; dataclasses, ``NamedTuple``, ``tuple.__new__`` and generated code work unchanged; module
  globals are looked up as before), so modules other engineers own compile unchanged. mypyc turns classes
  into native classes (no monkeypatching, no interpreted subclasses, no new attributes) and adds runtime
  checks of every annotation: a behaviour change on bad input;
* annotations are not used for typing (``annotation_typing=False``): an ``int`` annotation does not become a
  C type or an exact-type check, so compiled and pure code accept exactly the same values;
* cost: Cython is a build-time dependency only (``[build-system] requires``; the Makefile installs it in the
  dev venv); mypyc would have needed none (mypy is a dev dependency already) but needs the whole typed
  program at build time. Both built ``common/record.py`` in about 10 s.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
C_BUILD_DIR = "build/cython"
COMPILE_ARGS = ["-O2", "-g0"]
"""-g0: no debug info, a third less compile time; -O2 as Python's own build."""


@functools.cache
def _compiled_module() -> Any:
    """:mod:`common.compiled` loaded from its file alone (importing the ``common`` package is not needed)."""
    spec = importlib.util.spec_from_file_location("_pocketmq_compiled_list", ROOT / "common" / "compiled.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def module_names() -> tuple[str, ...]:
    """The modules to compile."""
    names: tuple[str, ...] = _compiled_module().MODULES
    return names


def build_options() -> dict[str, Any]:
    """``setup()`` keywords that build the extensions: empty (a pure-Python package) when the pure build is
    asked for or Cython is missing."""
    switch = _compiled_module()
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
    extensions = [
        extension_class(name, [str(Path(*name.split(".")).with_suffix(".py"))], extra_compile_args=COMPILE_ARGS)
        for name in module_names()
    ]
    directives = {"language_level": "3", "annotation_typing": False, "binding": True}
    compiled = cythonize(extensions, build_dir=C_BUILD_DIR, compiler_directives=directives, quiet=True,
                         nthreads=os.cpu_count() or 1)
    for extension in compiled:
        extension.optional = True  # cythonize does not carry it over
    return {
        "ext_modules": compiled,
        "cmdclass": {"build_ext": optional_build_ext()},
    }


def optional_build_ext() -> type:
    """A ``build_ext`` that reports a module it cannot compile and goes on: that module runs from source (the
    extensions are ``optional``, so the in-place copy skips what was not built)."""
    build_ext = importlib.import_module("setuptools.command.build_ext").build_ext

    class OptionalBuildExt(build_ext):  # type: ignore[misc,valid-type]
        def run(self) -> None:
            try:
                super().run()
            except Exception as exc:  # no compiler at all (DistutilsPlatformError and friends)
                print(f"pocketmq: cannot build extension modules ({exc}); plain Python", file=sys.stderr)

        def build_extension(self, ext: Any) -> None:
            try:
                super().build_extension(ext)
            except Exception as exc:  # CompileError, CCompilerError, a linker's error
                print(f"pocketmq: {ext.name} not compiled ({exc}); it runs from source", file=sys.stderr)
                # No older build of it may be copied in place or shipped: the module runs from source.
                for stale in (Path(self.get_ext_fullpath(ext.name)), ROOT / self.get_ext_filename(ext.name)):
                    stale.unlink(missing_ok=True)

    return OptionalBuildExt


def main() -> int:
    """Build every extension in place (``setup.py build_ext --inplace``, in parallel)."""
    jobs = str(os.cpu_count() or 1)
    command = [sys.executable, "setup.py", "-q", "build_ext", "--inplace", "--parallel", jobs]
    return subprocess.call(command, cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main())
