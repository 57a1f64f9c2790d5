"""The official RocketMQ 5 Python client (``rocketmq-python-client==5.1.2``), unmodified, in a virtual environment of
its own: it installs a top-level ``rocketmq`` package, as the C++ binding ``rocketmq==0.4.4`` of the dev extra does,
so the two never share an environment. The environment is made once under ``.cache/`` in the checkout (git-ignored)
and reused while its marker names the same package; :func:`run` runs a scenario of ``official_client.py`` in it, in a
subprocess under a hard timeout, with ``HOME`` in the test's directory (the client writes its logs under it)."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "rocketmq-python-client==5.1.2"
VENV = ROOT / ".cache" / "rocketmq5-venv"
MARKER = VENV / "installed.txt"
SCRIPT = Path(__file__).resolve().parent / "official_client.py"
INSTALL_TIMEOUT = 600.0


def official_python() -> Path:
    """The interpreter of the official client's environment, made (under a file lock) when missing."""
    python = VENV / "bin" / "python"
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(VENV.parent / "rocketmq5-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if MARKER.is_file() and MARKER.read_text().strip() == PACKAGE and python.is_file():
            return python
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
        done = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", PACKAGE],
                              capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"installing {PACKAGE} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
        MARKER.write_text(PACKAGE + "\n")
    return python


class ClientFailed(AssertionError):
    """A scenario that exited with an error or timed out (its stderr and the client's log tail attached)."""


async def run(scenario: str, args: dict[str, Any], *, home: Path, timeout: float = 60.0) -> dict[str, Any]:
    """Run one scenario of ``official_client.py`` and return the JSON it printed."""
    python = await asyncio.to_thread(official_python)
    await asyncio.to_thread(home.mkdir, parents=True, exist_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "PYTHONUNBUFFERED": "1",
           "PYTHONDONTWRITEBYTECODE": "1", "GRPC_ENABLE_FORK_SUPPORT": "false"}
    proc = await asyncio.create_subprocess_exec(
        str(python), str(SCRIPT), scenario, json.dumps(args), stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=str(home), env=env)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        raise ClientFailed(f"{scenario} did not finish within {timeout} s\n{_log_tail(home)}") from None
    if proc.returncode != 0:
        raise ClientFailed(f"{scenario} exited {proc.returncode}:\n{err.decode()[-4000:]}\n{_log_tail(home)}")
    lines = out.decode().strip().splitlines()
    if not lines:
        raise ClientFailed(f"{scenario} printed nothing:\n{err.decode()[-4000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _log_tail(home: Path) -> str:
    log = home / "logs" / "rocketmq_python" / "rocketmq_client.log"
    try:
        return "client log tail:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-40:])
    except OSError:
        return "(no client log)"


if __name__ == "__main__":
    sys.stdout.write(f"{official_python()}\n")
