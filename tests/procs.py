"""Real PocketMQ processes for process-level tests: start, read the readiness line, stop by PID."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class Proc:
    """A child process whose stderr is drained by a thread (so the pipe never fills) and kept."""

    def __init__(self, args: Sequence[str], ready_prefix: str, *, env: dict[str, str] | None = None,
                 cwd: Path | None = None, from_checkout: bool = True) -> None:
        """``from_checkout=False``: ``env`` is the whole environment (no PYTHONPATH to this checkout), for a
        process of an installed package; ``cwd`` defaults to the checkout."""
        self.args = list(args)
        self.ready_prefix = ready_prefix
        base = {**os.environ, "PYTHONPATH": str(ROOT)} if from_checkout else {}
        full_env = {**base, **(env or {})}
        self.popen = subprocess.Popen(
            self.args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env=full_env, cwd=cwd or ROOT,
        )
        self.lines: list[str] = []
        self._ready = threading.Event()
        self.addr = ""
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    @property
    def pid(self) -> int:
        return self.popen.pid

    def _drain(self) -> None:
        assert self.popen.stderr is not None
        for raw in self.popen.stderr:
            line = raw.decode(errors="replace").rstrip("\n")
            if len(self.lines) < 10_000:
                self.lines.append(line)
            if line.startswith(self.ready_prefix) and not self._ready.is_set():
                self.addr = line[len(self.ready_prefix):].strip()
                self._ready.set()
        self._ready.set()

    def wait_ready(self, timeout: float = 20.0) -> str:
        if not self._ready.wait(timeout) or not self.addr:
            self.kill()
            raise AssertionError(f"{self.args} not ready within {timeout}s; stderr:\n" + "\n".join(self.lines[-40:]))
        return self.addr

    def signal(self, sig: int) -> None:
        if self.popen.poll() is None:
            os.kill(self.popen.pid, sig)

    def terminate(self, timeout: float = 10.0) -> int:
        self.signal(signal.SIGTERM)
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.args} did not stop on SIGTERM within {timeout}s") from None

    def kill(self) -> None:
        if self.popen.poll() is None:
            os.kill(self.popen.pid, signal.SIGKILL)
            self.popen.wait(10)

    def stderr_text(self) -> str:
        return "\n".join(self.lines)


def start_namesrv(*extra: str, kv_dir: Path) -> Proc:
    proc = Proc(
        [sys.executable, "-m", "pocketmq.namesrv.main", "--listen", "127.0.0.1", "--port", "0",
         "--kv-config-path", str(kv_dir / "kvConfig.json"), "--log-format", "json", *extra],
        "NAMESRV READY",
    )
    proc.wait_ready()
    return proc


def wait_exit(proc: Proc, timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = proc.popen.poll()
        if code is not None:
            return code
        time.sleep(0.02)
    return None


#: Small files for test brokers: RocketMQ's defaults (1 GiB commit-log files, pre-allocated) would put 2 GiB per
#: broker on the disk of whoever runs the tests. And how full that disk is must not make a test broker delete
#: files or refuse puts.
TEST_COMMIT_LOG_FILE_SIZE = 4 * 1024 * 1024
TEST_STORE_PROPERTIES = {
    "mappedFileSizeCommitLog": str(TEST_COMMIT_LOG_FILE_SIZE),
    "diskMaxUsedSpaceRatio": "100", "diskSpaceCleanForciblyRatio": "100", "diskSpaceWarningLevelRatio": "100",
}


def effective_config(store_dir: Path, config: Path | None) -> Path:
    """A properties file beside ``store_dir``: the small-store defaults, then ``config``'s own lines."""
    lines = [f"{key}={value}" for key, value in TEST_STORE_PROPERTIES.items()]
    if config is not None:
        lines.append(config.read_text())
    path = store_dir.parent / f"{store_dir.name}.test.properties"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def start_broker(*extra: str, namesrv: str, store_dir: Path, name: str = "broker-a", config: Path | None = None,
                 env: dict[str, str] | None = None) -> Proc:
    args = [sys.executable, "-m", "pocketmq.broker.main", "-n", namesrv, "--listen-host", "127.0.0.1",
            "--listen-port", "0",
            "--broker-name", name, "--store-dir", str(store_dir), "--log-format", "json",
            "-c", str(effective_config(store_dir, config))]
    proc = Proc([*args, *extra], "BROKER READY", env=env)
    proc.wait_ready()
    return proc
