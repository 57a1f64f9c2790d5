"""The official RocketMQ 5 Node.js client (``rocketmq-client-nodejs``, unmodified), installed with ``npm ci`` from the
lock file in ``tests/grpc/nodejs/`` into ``.cache/rocketmq5-node/`` (git ignores it) once, and reused while the
lock file is the same; :func:`run` runs a scenario of ``nodejs/scenarios.js`` with it, as
:func:`tests.grpc.official.run` runs the Python client's. ``make install-node`` puts Node.js and npm on a machine
without them (Debian's packages)."""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tests.grpc.official import run_script

SOURCE = Path(__file__).resolve().parent / "nodejs"
SCRIPT = SOURCE / "scenarios.js"
CACHE = Path(__file__).resolve().parents[2] / ".cache" / "rocketmq5-node"
INSTALL_TIMEOUT = 600.0
MANIFESTS = ("package.json", "package-lock.json")


def node_modules(where: Path = CACHE) -> Path:
    """The ``node_modules`` of the client's installation at ``where``, made (under a file lock) when missing or
    when the lock file changed."""
    modules = where / "node_modules"
    marker = where / "installed.txt"
    lock_hash = hashlib.sha256((SOURCE / "package-lock.json").read_bytes()).hexdigest()
    where.parent.mkdir(parents=True, exist_ok=True)
    with open(where.parent / f"{where.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.is_file() and marker.read_text().strip() == lock_hash and modules.is_dir():
            return modules
        npm = shutil.which("npm")
        if npm is None or shutil.which("node") is None:
            raise RuntimeError("Node.js and npm are needed for the Node.js client's tests: run `make install-node`")
        shutil.rmtree(where, ignore_errors=True)
        where.mkdir()
        for name in MANIFESTS:
            shutil.copyfile(SOURCE / name, where / name)
        # --ignore-scripts: the client runs as published; no package of the lock needs an install step.
        done = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=where,
                              capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"npm ci of the Node.js client failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
        marker.write_text(lock_hash + "\n")
    return modules


async def run(scenario: str, args: dict[str, Any], *, home: Path, timeout: float = 60.0,
              env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run one scenario of ``scenarios.js`` (``env`` added to its environment) and return what it printed."""
    modules = await asyncio.to_thread(node_modules)
    node = shutil.which("node") or "node"
    return await run_script([node, str(SCRIPT)], scenario, args, home=home, timeout=timeout,
                            env={"NODE_PATH": str(modules), **(env or {})},
                            log=home / "logs" / "rocketmq" / "rocketmq_client_nodejs.log")
