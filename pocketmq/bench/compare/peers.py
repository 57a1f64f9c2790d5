"""The peer brokers as local server processes: NATS JetStream, Redis Streams, RabbitMQ.

Each server is started from its Debian package on 127.0.0.1, with its data, logs and configuration in the
working directory the runner gives it, in a session of its own, with a unique ``PMQ_BENCH_TAG`` in its
environment. Stopping it signals the session leader by PID, then any process left in that session or
carrying that tag (a daemon that detached, such as an ``epmd``) — never a process found by name.

* **NATS JetStream** — ``nats-server -a 127.0.0.1 -p PORT -js -sd DIR`` (file storage; JetStream's default
  fsync interval, like PocketMQ's ASYNC_FLUSH).
* **Redis** — ``redis-server`` with ``appendonly yes`` and ``appendfsync everysec``, RDB snapshots off
  (``save ""``, so no fork every 10,000 writes disturbs the run), bound to 127.0.0.1.
* **RabbitMQ** — the node started as a plain process (``/usr/lib/rabbitmq/bin/rabbitmq-server``) with
  ``RABBITMQ_MNESIA_BASE`` / ``RABBITMQ_LOG_BASE`` / ``RABBITMQ_NODENAME=rabbit-bench@localhost`` /
  ``RABBITMQ_NODE_PORT`` and a config file in the working directory, no plugins (so no management plugin),
  and an ``epmd`` of its own on a free port (``ERL_EPMD_PORT``), started by us first and stopped by PID.

The client modules (``nats_load``, ``redis_load``, ``rabbit_load``) are imported only when a peer starts, so
a missing Python package is reported as "not installed" like a missing server.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pocketmq.bench.compare.proc import free_port, port_open, session_members
from pocketmq.bench.compare.target import Client, Server, Target, Unavailable
from pocketmq.bench.compare.workload import Workload

#: Where Debian puts server binaries that are not on a user's PATH.
_EXTRA_PATH = ("/usr/sbin", "/usr/lib/rabbitmq/bin")
INSTALL_HINT = "run scripts/install_peers.sh"
TAG_VARIABLE = "PMQ_BENCH_TAG"


def find_binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for directory in _EXTRA_PATH:
        candidate = Path(directory) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def require_binary(name: str, package: str) -> str:
    path = find_binary(name)
    if path is None:
        raise Unavailable("not installed", f"{name} not found (Debian package {package}; {INSTALL_HINT})")
    return path


def require_module(module: str, package: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise Unavailable("not installed", f"Python package {package} missing ({exc}); "
                                           f"pip install '.[compare]'") from None


def tagged_pids(tag: str) -> list[int]:
    """Live processes whose environment carries ``PMQ_BENCH_TAG=tag`` (ours, even if they detached)."""
    needle = f"{TAG_VARIABLE}={tag}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
    return found


def _command_output(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({exc})"
    return (done.stdout or done.stderr).strip().splitlines()[0] if (done.stdout or done.stderr).strip() else "unknown"


class ServerProcess:
    """One server process tree we started: output to ``log``, its own session, measured and stopped by PID."""

    def __init__(self, argv: list[str], *, log: Path, env: dict[str, str] | None = None,
                 cwd: Path | None = None) -> None:
        self.tag = uuid.uuid4().hex
        self.log = log
        full_env = {**os.environ, **(env or {}), TAG_VARIABLE: self.tag}
        with log.open("ab") as out:
            self.popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                          env=full_env, cwd=cwd, start_new_session=True)

    def pids(self) -> list[int]:
        return sorted(set(session_members(self.popen.pid)) | set(tagged_pids(self.tag)))

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def wait_port(self, port: int, timeout: float, what: str) -> None:
        """Until ``port`` accepts connections; a process that exits or a timeout is ``failed to start``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise Unavailable("failed to start", f"{what} exited with {self.popen.returncode}:\n"
                                                     f"{self.log_tail()}")
            if port_open(port):
                return
            time.sleep(0.2)
        self.stop()
        raise Unavailable("failed to start", f"{what} did not listen on {port} in {timeout:.0f} s:\n{self.log_tail()}")

    def stop(self, grace: float = 30.0) -> None:
        """SIGTERM to the leader and wait; then SIGTERM, and after 5 s SIGKILL, to any process of ours left."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(grace)
        for sig, pause in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 2.0)):
            left = [pid for pid in self.pids() if pid != self.popen.pid]
            if not left and self.popen.poll() is not None:
                return
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
            if self.popen.poll() is None:
                self.popen.send_signal(sig)
            deadline = time.monotonic() + pause
            while time.monotonic() < deadline and (self.pids() or self.popen.poll() is None):
                time.sleep(0.1)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(1)


class PeerServer:
    """A started peer: its processes and a factory for its client."""

    def __init__(self, processes: list[ServerProcess], client: Client) -> None:
        self.processes = processes
        self._client = client

    def pids(self) -> list[int]:
        return [pid for process in self.processes for pid in process.pids()]

    def floating_pids(self) -> list[int]:
        return []

    def client(self) -> Client:
        return self._client

    def log_tail(self) -> str:
        return "\n".join(process.log_tail(8) for process in self.processes)

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()


# -- NATS JetStream -----------------------------------------------------------------------------------------


def start_nats(workdir: Path, *, tuned: bool = True) -> PeerServer:
    binary = require_binary("nats-server", "nats-server")
    module = require_module("pocketmq.bench.compare.nats_load", "nats-py")
    port = free_port()
    store = workdir / "jetstream"
    store.mkdir(parents=True, exist_ok=True)
    server = ServerProcess([binary, "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(store)],
                           log=workdir / "nats-server.log", cwd=workdir)
    server.wait_port(port, 20.0, "nats-server")
    return PeerServer([server], module.NatsClient(f"nats://127.0.0.1:{port}", tuned=tuned))


# -- Redis Streams ------------------------------------------------------------------------------------------


def start_redis(workdir: Path, *, tuned: bool = True) -> PeerServer:
    binary = require_binary("redis-server", "redis-server")
    module = require_module("pocketmq.bench.compare.redis_load", "redis")
    port = free_port()
    data = workdir / "redis"
    data.mkdir(parents=True, exist_ok=True)
    argv = [binary, "--bind", "127.0.0.1", "--port", str(port), "--dir", str(data), "--appendonly", "yes",
            "--appendfsync", "everysec", "--save", "", "--daemonize", "no", "--protected-mode", "yes",
            "--logfile", ""]
    server = ServerProcess(argv, log=workdir / "redis-server.log", cwd=data)
    server.wait_port(port, 20.0, "redis-server")
    return PeerServer([server], module.RedisClient("127.0.0.1", port, tuned=tuned))


# -- RabbitMQ -----------------------------------------------------------------------------------------------

RABBIT_NODE = "rabbit-bench@localhost"
RABBIT_BOOT_TIMEOUT = 120.0


def _rabbit_files(workdir: Path, port: int) -> dict[str, str]:
    """Config, plugins and env files in ``workdir``; returns the environment that points the node at them."""
    for sub in ("mnesia", "log", "plugins-expand"):
        (workdir / sub).mkdir(parents=True, exist_ok=True)
    (workdir / "rabbitmq.conf").write_text(
        f"listeners.tcp.default = 127.0.0.1:{port}\n"
        "log.console = false\nlog.file.level = warning\n"
        "disk_free_limit.absolute = 100MB\n"
    )
    (workdir / "enabled_plugins").write_text("[].\n")  # no management plugin, no plugin at all
    (workdir / "rabbitmq-env.conf").write_text("")  # so /etc/rabbitmq/rabbitmq-env.conf is not read
    return {
        "HOME": str(workdir),  # the Erlang cookie goes here, not into root's home
        "RABBITMQ_MNESIA_BASE": str(workdir / "mnesia"),
        "RABBITMQ_LOG_BASE": str(workdir / "log"),
        "RABBITMQ_NODENAME": RABBIT_NODE,
        "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
        "RABBITMQ_NODE_PORT": str(port),
        "RABBITMQ_DIST_PORT": str(free_port()),
        "RABBITMQ_CONFIG_FILE": str(workdir / "rabbitmq.conf"),
        "RABBITMQ_ADVANCED_CONFIG_FILE": str(workdir / "advanced.config"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(workdir / "enabled_plugins"),
        "RABBITMQ_PLUGINS_EXPAND_DIR": str(workdir / "plugins-expand"),
        "RABBITMQ_CONF_ENV_FILE": str(workdir / "rabbitmq-env.conf"),
        "RABBITMQ_PID_FILE": str(workdir / "rabbit.pid"),
        "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-start_epmd false -kernel inet_dist_use_interface {127,0,0,1}",
    }


def start_rabbitmq(workdir: Path, *, tuned: bool = True) -> PeerServer:
    script = find_binary("rabbitmq-server")
    direct = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")
    if script is None:
        raise Unavailable("not installed", f"rabbitmq-server not found (Debian package rabbitmq-server; "
                                           f"{INSTALL_HINT})")
    epmd_binary = require_binary("epmd", "erlang-base")
    module = require_module("pocketmq.bench.compare.rabbit_load", "aio-pika")
    epmd_port = free_port()
    epmd_env = {"ERL_EPMD_PORT": str(epmd_port), "ERL_EPMD_ADDRESS": "127.0.0.1"}
    # Our own epmd in the foreground: it is our child, so it is stopped by its PID like the node.
    epmd = ServerProcess([epmd_binary, "-port", str(epmd_port), "-address", "127.0.0.1"], env=epmd_env,
                         log=workdir / "epmd.log", cwd=workdir)
    epmd.wait_port(epmd_port, 10.0, "epmd")
    port = free_port()
    env = {**epmd_env, **_rabbit_files(workdir, port)}
    # The Debian wrapper in /usr/sbin switches to the rabbitmq user and /var/lib/rabbitmq; the script under
    # /usr/lib/rabbitmq/bin runs the node as the current user with only our environment.
    argv = [str(direct) if direct.exists() else script]
    try:
        node = ServerProcess(argv, env=env, log=workdir / "rabbitmq-server.log", cwd=workdir)
        node.wait_port(port, RABBIT_BOOT_TIMEOUT, "rabbitmq-server")
    except BaseException:
        epmd.stop()
        raise
    return PeerServer([epmd, node], module.RabbitClient(f"amqp://guest:guest@127.0.0.1:{port}/", tuned=tuned))


# -- versions and the table of peers -----------------------------------------------------------------------


def nats_version() -> str:
    binary = find_binary("nats-server")
    return _command_output([binary, "--version"]) if binary else "not installed"


def redis_version() -> str:
    binary = find_binary("redis-server")
    return _command_output([binary, "--version"]).split(" sha=")[0] if binary else "not installed"


def rabbitmq_version() -> str:
    if find_binary("rabbitmq-server") is None:
        return "not installed"
    return "rabbitmq-server " + _command_output(["dpkg-query", "-W", "-f", "${Version}", "rabbitmq-server"])


def _naive(start: Callable[..., PeerServer]) -> Callable[[Path], Server]:
    return functools.partial(start, tuned=False)


#: The workloads where a peer's naive usage differs from its tuned one (W3 is one send at a time and W5 its
#: own batching in both styles, so the naive rows skip them).
NAIVE_STREAMS = frozenset({Workload.W1, Workload.W2, Workload.W4})
NAIVE_QUEUE = frozenset({Workload.W1, Workload.W2})

PEERS = (
    Target("nats", "NATS JetStream (publish_async)", True, start_nats, nats_version),
    Target("nats-naive", "NATS JetStream (naive client)", True, _naive(start_nats), nats_version, NAIVE_STREAMS),
    Target("redis", "Redis Streams (pipelined)", True, start_redis, redis_version),
    Target("redis-naive", "Redis Streams (naive client)", True, _naive(start_redis), redis_version, NAIVE_STREAMS),
    Target("rabbitmq", "RabbitMQ quorum (confirms in batches)", True, start_rabbitmq, rabbitmq_version),
    Target("rabbitmq-naive", "RabbitMQ quorum (naive client)", True, _naive(start_rabbitmq), rabbitmq_version,
           NAIVE_QUEUE),
)
