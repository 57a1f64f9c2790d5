"""Files that ship inside the package: the cluster presets ``rmq-cluster`` starts, the Grafana dashboard and an
example ACL file. Read them through these functions (``importlib.resources``), never by a path relative to
the checkout: an installed wheel has no checkout.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def _path(*parts: str) -> Path:
    # A wheel is installed unzipped, so the resource is a real file on disk that a child process can read.
    return Path(str(files(__name__).joinpath(*parts)))


def presets_dir() -> Path:
    """The directory holding one directory of ``.properties`` files per preset (``2m-2s-sync``, ...)."""
    return _path("presets")


def grafana_dashboard() -> Path:
    """The Grafana dashboard over the broker's and name server's ``/metrics``."""
    return _path("grafana", "pocketmq-rocketmq.json")


def example_acl() -> Path:
    """An example ``plain_acl.yml``: accounts only, no whitelisted address."""
    return _path("plain_acl.example.yml")
