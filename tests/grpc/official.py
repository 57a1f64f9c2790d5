"""The official RocketMQ 5 Python client, unmodified, in the environment of its own that
:func:`pocketmq.bench.official_client.official_python` makes once under ``.cache/`` (never beside the C++ binding
``rocketmq==0.4.4`` of the dev extra, which has the same top-level package name); :func:`run` runs a scenario of
``official_client.py`` in it, in a subprocess under a hard timeout, with ``HOME`` in the test's directory (the client
writes its logs under it)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from pocketmq.bench.official_client import official_python

SCRIPT = Path(__file__).resolve().parent / "official_client.py"


class ClientFailed(AssertionError):
    """A scenario that exited with an error or timed out (its stderr and the client's log tail attached)."""


async def run(scenario: str, args: dict[str, Any], *, home: Path, timeout: float = 60.0,
              env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run one scenario of ``official_client.py`` (``env`` added to its environment) and return what it printed."""
    python = await asyncio.to_thread(official_python)
    env = {"PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1", "GRPC_ENABLE_FORK_SUPPORT": "false", **(env or {})}
    return await run_script([str(python), str(SCRIPT)], scenario, args, home=home, timeout=timeout, env=env,
                            log=home / "logs" / "rocketmq_python" / "rocketmq_client.log")


async def run_script(command: list[str], scenario: str, args: dict[str, Any], *, home: Path, timeout: float,
                     env: dict[str, str], log: Path) -> dict[str, Any]:
    """``command scenario 'json args'`` in ``home`` (also its ``HOME``: a client's logs go under it, ``log`` is the
    one shown when it fails), killed after ``timeout`` seconds; the JSON object of its last stdout line."""
    await asyncio.to_thread(home.mkdir, parents=True, exist_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), **env}
    proc = await asyncio.create_subprocess_exec(
        *command, scenario, json.dumps(args), stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=str(home), env=env)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        raise ClientFailed(f"{scenario} did not finish within {timeout} s\n{_log_tail(log)}") from None
    if proc.returncode != 0:
        raise ClientFailed(f"{scenario} exited {proc.returncode}:\n{err.decode()[-4000:]}\n{_log_tail(log)}")
    lines = out.decode().strip().splitlines()
    if not lines:
        raise ClientFailed(f"{scenario} printed nothing:\n{err.decode()[-4000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _log_tail(log: Path) -> str:
    try:
        return "client log tail:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-40:])
    except OSError:
        return "(no client log)"


if __name__ == "__main__":
    sys.stdout.write(f"{official_python()}\n")
