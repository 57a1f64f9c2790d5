"""The README's producer and consumer (``examples/``) run against a cluster started the way the README says:
``rmq-cluster up`` (free ports, small files, a temporary directory), then each example as its own process; and
the README shows them as they are."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.procs import TEST_STORE_PROPERTIES

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
RMQ_CLUSTER = Path(sys.executable).parent / "rmq-cluster"
COUNT = 10

pytestmark = pytest.mark.timeout(240)


class Cluster:
    """``rmq-cluster up`` as a child process: its output drained by a thread, stopped by PID."""

    def __init__(self, base_dir: Path) -> None:
        settings = [arg for key, value in TEST_STORE_PROPERTIES.items() for arg in ("--set", f"{key}={value}")]
        self.popen = subprocess.Popen(
            [str(RMQ_CLUSTER), "up", "--preset", "2m-2s-sync", "--namesrv", "1", "--ephemeral-ports",
             "--base-dir", str(base_dir), "--log-format", "json", *settings],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=base_dir,
        )
        self.lines: list[str] = []
        self.namesrv = ""
        self._ready = threading.Event()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.popen.stdout is not None
        for raw in self.popen.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            if len(self.lines) < 20_000:
                self.lines.append(line)
            if line.startswith("CLUSTER READY ") and not self._ready.is_set():
                self.namesrv = line.split()[2]
                self._ready.set()
        self._ready.set()

    def wait_ready(self, timeout: float) -> str:
        if not self._ready.wait(timeout) or not self.namesrv:
            raise AssertionError("rmq-cluster up was not ready:\n" + "\n".join(self.lines[-40:]))
        return self.namesrv

    def stop(self, timeout: float = 60.0) -> int:
        if self.popen.poll() is None:
            os.kill(self.popen.pid, signal.SIGTERM)
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.popen.pid, signal.SIGKILL)
            self.popen.wait(10)
            raise AssertionError("rmq-cluster did not stop on SIGTERM:\n" + "\n".join(self.lines[-40:])) from None


def run_example(name: str, *args: str, timeout: float) -> list[str]:
    """Run ``examples/<name>`` with this interpreter; its stdout lines (it must exit 0)."""
    done = subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, check=False)
    assert done.returncode == 0, f"{name} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout.splitlines()


def test_readme_producer_and_consumer_against_rmq_cluster(tmp_path: Path) -> None:
    assert RMQ_CLUSTER.is_file(), f"{RMQ_CLUSTER} is not installed (pip install -e .)"
    cluster = Cluster(tmp_path)
    try:
        namesrv = cluster.wait_ready(120)
        common = (namesrv, "ExampleOrders", str(COUNT))
        sent = [line for line in run_example("producer.py", *common, timeout=60) if line.startswith("SEND")]
        assert len(sent) == COUNT and all(line.startswith("SEND_OK ") for line in sent), sent

        received = run_example("consumer.py", *common, timeout=90)
        bodies = {line.split(" ", 3)[3] for line in received if line.startswith("ExampleOrders created order-")}
        assert bodies == {f"order {i}" for i in range(COUNT)}, received
    finally:
        assert cluster.stop() == 0, "\n".join(cluster.lines[-40:])
    assert "stopped" in cluster.lines[-1]


def test_readme_shows_the_examples_as_they_are() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    for name in ("producer.py", "consumer.py"):
        code = (EXAMPLES / name).read_text(encoding="utf-8")
        assert code in blocks, f"README.md does not show examples/{name} as it is"
