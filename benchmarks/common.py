"""Shared pieces of the benchmarks: child server processes, waiting for them to go idle, percentiles."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
READY_TIMEOUT = 30.0


class Child:
    """A child process whose stderr is drained by a thread; ``ready`` is the address on its readiness line."""

    def __init__(self, argv: list[str], ready_prefix: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self.popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, env=env, cwd=ROOT)
        self.prefix = ready_prefix
        self.addr = ""
        self.tail: list[str] = []
        self._ready = threading.Event()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.popen.stderr is not None
        for raw in self.popen.stderr:
            line = raw.decode(errors="replace").rstrip()
            self.tail = [*self.tail[-19:], line]
            if line.startswith(self.prefix) and not self._ready.is_set():
                self.addr = line[len(self.prefix):].strip()
                self._ready.set()
        self._ready.set()

    def wait_ready(self) -> str:
        if not self._ready.wait(READY_TIMEOUT) or not self.addr:
            self.stop()
            raise RuntimeError(f"{self.popen.args!r} did not become ready:\n" + "\n".join(self.tail))
        return self.addr

    def cpu_seconds(self) -> float | None:
        try:
            fields = Path(f"/proc/{self.popen.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(15)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)


def wait_idle(child: Child, *, limit: float = 60.0, busy: float = 0.2) -> None:
    """Wait until the child uses less than ``busy`` of a CPU (a new broker preallocates its commit-log files
    first, which takes seconds of CPU), at most ``limit`` seconds."""
    deadline = time.monotonic() + limit
    last = child.cpu_seconds()
    while last is not None and time.monotonic() < deadline:
        time.sleep(0.5)
        now = child.cpu_seconds()
        if now is None or now - last < busy * 0.5:
            return
        last = now


def percentiles(values: Any) -> dict[str, float]:
    if not len(values):
        return {}
    ordered = sorted(values)
    n = len(ordered)

    def at(q: float) -> float:
        return float(ordered[min(n - 1, int(q * n))])

    return {"p50": at(0.50), "p90": at(0.90), "p99": at(0.99), "p999": at(0.999), "max": float(ordered[-1]),
            "mean": sum(ordered) / n}
