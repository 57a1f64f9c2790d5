"""The official RocketMQ 5 Python client (``rocketmq-python-client``), unmodified, in a virtual environment of its
own, for the gRPC benchmark and the tests that drive the proxy with it. It installs a top-level ``rocketmq`` package,
as the C++ binding ``rocketmq==0.4.4`` of the dev extra does, so the two never share an environment. The environment
is made once (``pip install`` from PyPI) under ``.cache/`` in the checkout, which git ignores, and reused while its
marker names the same package."""

from __future__ import annotations

import fcntl
import subprocess
import venv
from pathlib import Path

PACKAGE = "rocketmq-python-client==5.1.2"
DEFAULT_VENV = Path(__file__).resolve().parents[2] / ".cache" / "rocketmq5-venv"
INSTALL_TIMEOUT = 600.0


def official_python(where: Path = DEFAULT_VENV) -> Path:
    """The interpreter of the official client's environment at ``where``, made (under a file lock) when missing."""
    python = where / "bin" / "python"
    marker = where / "installed.txt"
    where.parent.mkdir(parents=True, exist_ok=True)
    with open(where.parent / f"{where.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.is_file() and marker.read_text().strip() == PACKAGE and python.is_file():
            return python
        venv.EnvBuilder(with_pip=True, clear=True).create(where)
        done = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", PACKAGE],
                              capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"installing {PACKAGE} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
        marker.write_text(PACKAGE + "\n")
    return python
