"""setuptools entry point for the compiled hot path: the project's metadata lives in pyproject.toml, the
extension modules (Cython, see scripts/build_compiled.py) are added here. Without Cython or a C compiler the
package installs as plain Python."""

import sys
from pathlib import Path

from setuptools import setup

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scripts.build_compiled import build_options

setup(**build_options())
