#!/usr/bin/env python3
"""Run ``rmq-analytics`` on a real Spark standalone cluster: one master and one worker on 127.0.0.1, started
from the pip package's ``sbin/spark-daemon.sh`` (the package has no start-master.sh/start-worker.sh), the job
submitted with ``spark-submit --py-files``, then both daemons stopped by the PIDs they wrote.

::

    .venv/bin/python scripts/spark_cluster.py [--input EXPORT ...] [--out DIR] [--keep-logs]

Without ``--input`` a small export is generated first (20,000 messages, see ``pocketmq/bench/spark_bench.py``).
Everything (logs, PID files, worker scratch) lives in one temporary directory; every port is a free one
picked on 127.0.0.1; the master's REST server is off. Every wait has a deadline. Exit status: the job's.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from pocketmq.admin.cluster import pid_alive

ROOT = Path(__file__).resolve().parent.parent
LOOPBACK = "127.0.0.1"
START_TIMEOUT = 90.0
STOP_TIMEOUT = 20.0
JOB_TIMEOUT = 900.0
MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def spark_home() -> Path:
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    if not (home / "sbin" / "spark-daemon.sh").exists():
        raise SystemExit(f"{home}/sbin/spark-daemon.sh is missing: is pyspark installed from PyPI?")
    return home


class Cluster:
    """The two daemons, their environment and their files."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.home = spark_home()
        self.master_port, self.worker_port = free_port(), free_port()
        self.env = {
            **os.environ,
            "SPARK_HOME": str(self.home),
            "SPARK_LOCAL_IP": LOOPBACK,            # every listener, web UIs included, on loopback
            "SPARK_MASTER_HOST": LOOPBACK,
            "SPARK_LOG_DIR": str(work / "logs"),
            "SPARK_PID_DIR": str(work / "pids"),
            "SPARK_WORKER_DIR": str(work / "worker"),
            "SPARK_IDENT_STRING": f"pocketmq-{os.getpid()}",
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
        }
        self.url = f"spark://{LOOPBACK}:{self.master_port}"

    def _daemon(self, action: str, cls: str, *args: str) -> None:
        subprocess.run([str(self.home / "sbin" / "spark-daemon.sh"), action, cls, "1", *args], env=self.env,
                       check=True, timeout=60, stdout=subprocess.DEVNULL)

    def _log(self, cls: str) -> Path:
        logs = sorted((self.work / "logs").glob(f"*{cls}*.out"))
        return logs[-1] if logs else self.work / "logs" / "missing"

    def pid(self, cls: str) -> int | None:
        files = list((self.work / "pids").glob(f"*{cls}*.pid"))
        return int(files[0].read_text().strip()) if files else None

    def _wait_for(self, cls: str, text: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            log = self._log(cls)
            if log.exists() and text in log.read_text(errors="replace"):
                return
            pid = self.pid(cls)
            if pid is not None and not pid_alive(pid):
                break
            time.sleep(0.25)
        tail = self._log(cls).read_text(errors="replace")[-3000:] if self._log(cls).exists() else "(no log)"
        raise RuntimeError(f"{cls} did not report {text!r} within {START_TIMEOUT:.0f} s:\n{tail}")

    def start(self) -> None:
        self._daemon("start", MASTER, "--host", LOOPBACK, "--port", str(self.master_port),
                     "--webui-port", str(free_port()))
        self._wait_for(MASTER, "I have been elected leader")
        self._daemon("start", WORKER, "--host", LOOPBACK, "--port", str(self.worker_port),
                     "--webui-port", str(free_port()), "--cores", "2", "--memory", "1g", self.url)
        self._wait_for(WORKER, "Successfully registered with master")

    def stop(self) -> None:
        """SIGTERM each daemon by the PID it wrote, SIGKILL after a deadline."""
        for cls in (WORKER, MASTER):
            pid = self.pid(cls)
            if pid is None or not pid_alive(pid):
                continue
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + STOP_TIMEOUT
            while pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)

    def submit(self, inputs: list[str], out: str) -> int:
        """``spark-submit`` the job in client mode with the project's code as ``--py-files``."""
        package = self.work / "pocketmq-spark.zip"
        sys.path.insert(0, str(ROOT))
        from pocketmq.spark_jobs.package import build_zip

        build_zip(package)
        argv = [str(self.home / "bin" / "spark-submit"), "--master", self.url, "--deploy-mode", "client",
                "--py-files", str(package),
                "--conf", f"spark.driver.host={LOOPBACK}", "--conf", f"spark.driver.bindAddress={LOOPBACK}",
                "--conf", "spark.ui.enabled=false", "--conf", f"spark.pyspark.python={sys.executable}",
                "--conf", "spark.log.level=WARN",
                "--conf", "spark.executor.memory=768m", "--conf", "spark.sql.shuffle.partitions=4",
                str(ROOT / "pocketmq" / "spark_jobs" / "job.py")]
        for path in inputs:
            argv += ["--input", path]
        argv += ["--out", out]
        print("+ " + " ".join(argv), flush=True)
        return subprocess.run(argv, env=self.env, cwd=str(self.work), timeout=JOB_TIMEOUT, check=False).returncode


@contextlib.contextmanager
def running_cluster(work: Path) -> Iterator[Cluster]:
    cluster = Cluster(work)
    try:
        cluster.start()
        print(f"standalone cluster up: {cluster.url} (master pid {cluster.pid(MASTER)}, worker pid "
              f"{cluster.pid(WORKER)})", flush=True)
        yield cluster
    finally:
        cluster.stop()


def sample_export(work: Path) -> str:
    sys.path.insert(0, str(ROOT))
    from pocketmq.admin.export import BrokerIdentity, export_commit_log
    from pocketmq.bench.spark_bench import write_synthetic_store

    write_synthetic_store(work / "store", messages=20_000, file_size=4 << 20, minutes=15)
    export_commit_log(work / "store", work / "export", identity=BrokerIdentity(broker="sample-a", broker_id=0,
                                                                              role="ASYNC_MASTER"))
    return str(work / "export")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", action="append", help="export directory (default: a generated one)")
    parser.add_argument("--out", help="job output directory (default: in the temporary directory)")
    parser.add_argument("--keep-logs", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="pocketmq-spark-cluster-"))
    try:
        inputs = args.input or [sample_export(work)]
        out = args.out or str(work / "out")
        started = time.monotonic()
        with running_cluster(work) as cluster:
            code = cluster.submit([str(Path(p).resolve()) for p in inputs], str(Path(out).resolve()))
        print(f"job on the standalone cluster: exit {code} in {time.monotonic() - started:.1f} s "
              f"(cluster start and stop included); report: {Path(out) / 'report.html'}", flush=True)
        return code
    finally:
        if args.keep_logs or args.out:
            print(f"logs and files kept in {work}")
        else:
            import shutil

            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
