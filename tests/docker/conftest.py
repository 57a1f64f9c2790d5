"""The container tests' marker: ``pytest -m docker`` runs them alone, ``-m 'not docker'`` leaves them out."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "docker: starts a private Docker engine (root, Debian's docker.io); "
                                       "skipped with the reason where none can run")
