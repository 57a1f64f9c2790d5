"""``rmq-cluster``: a whole preset (name servers + brokers) as local processes, without Docker.

``rmq-cluster up --preset 2m-2s-sync [--namesrv 2] [--base-dir DIR]`` starts the name servers, then the
masters, then the slaves (a slave learns its master's HA address from its registration, so the master
must be registered first), each with its own store directory under the base dir, and waits until every
broker is registered with every name server and every master has its slaves attached. It prints each
process's output prefixed with its name, writes ``<base-dir>/cluster.json`` (what ``rmq-cluster status``
and ``rmq-cluster down`` read), and on SIGINT/SIGTERM stops the brokers and then the name servers with
SIGTERM, by PID, waiting for each. A child that exits on its own is reported at once (and in the state
file and the exit code), never hidden.

The effective broker config of each broker (preset file + overrides) is written to
``<base-dir>/conf/<name>.properties``, so what ran is on disk next to its store.

:class:`LocalCluster` is the same thing as a library (the demo and the tests use it to kill and restart
single processes).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from pocketmq.admin.api import AdminClient, AdminError
from pocketmq.common.config import load_properties
from pocketmq.common.logs import configure_logging
from pocketmq.conf import presets_dir

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CONF_DIR = presets_dir()
STATE_FILE = "cluster.json"
#: First name-server port of a preset; the n-th name server listens on this + n.
NAMESRV_BASE_PORT = 9876
#: How long a child may take to print its readiness line, and the cluster to become registered.
START_TIMEOUT = 60.0
STOP_TIMEOUT = 20.0
#: Lines kept per child (for crash reports); output beyond this is still printed, just not kept.
KEEP_LINES = 200


class ClusterError(Exception):
    """The cluster could not be started or is not in the expected state."""


@dataclass(slots=True)
class ChildSpec:
    """How to start one process of the cluster."""

    name: str
    kind: str  # "namesrv" or "broker"
    args: list[str]
    ready_prefix: str
    broker_name: str = ""
    broker_id: int = 0
    role: str = ""
    store_dir: str = ""


@dataclass(slots=True)
class Child:
    """A running (or exited) child process with its output pump and exit watcher."""

    spec: ChildSpec
    process: asyncio.subprocess.Process
    addr: str = ""
    ready: asyncio.Future[str] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    lines: list[str] = field(default_factory=list)
    returncode: int | None = None
    expected_exit: bool = False
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.returncode is None


def preset_files(conf_dir: Path, preset: str) -> list[Path]:
    """The broker ``.properties`` files of a preset, masters first (then by file name)."""
    directory = conf_dir / preset
    if not directory.is_dir():
        known = sorted(p.name for p in conf_dir.iterdir() if p.is_dir()) if conf_dir.is_dir() else []
        raise ClusterError(f"no preset {preset!r} in {conf_dir} (known: {', '.join(known) or 'none'})")
    files = sorted(directory.glob("*.properties"))
    if not files:
        raise ClusterError(f"preset {preset!r} has no .properties files")

    def order(path: Path) -> tuple[int, str]:
        role = load_properties(path).get("brokerRole", "ASYNC_MASTER")
        return (1 if role == "SLAVE" else 0, path.name)

    return sorted(files, key=order)


def parse_overrides(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ClusterError(f"--set takes key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


class LocalCluster:
    """Name servers and the brokers of a preset as child processes of this one."""

    def __init__(self, preset: str, *, base_dir: Path, namesrv_count: int = 2, conf_dir: Path = DEFAULT_CONF_DIR,
                 ephemeral_ports: bool = False, host: str = "127.0.0.1", overrides: dict[str, str] | None = None,
                 log_format: str = "console", echo: TextIO | None = None,
                 on_crash: Callable[[Child], None] | None = None, metrics_base_port: int | None = None,
                 namesrv_overrides: dict[str, str] | None = None) -> None:
        if namesrv_count < 1:
            raise ClusterError("--namesrv must be at least 1")
        self.preset = preset
        self.base_dir = base_dir.resolve()
        self.namesrv_count = namesrv_count
        self.conf_dir = conf_dir
        self.ephemeral_ports = ephemeral_ports
        self.host = host
        self.overrides = overrides or {}
        #: Name server properties (``scanNotActiveBrokerInterval``, ``brokerChannelExpiredTime``...), passed
        #: to every name server as a ``-c`` file; fault drills shorten the expiry with them.
        self.namesrv_overrides = namesrv_overrides or {}
        self.log_format = log_format
        self.echo = echo
        self.on_crash = on_crash
        self.metrics_base_port = metrics_base_port
        self.files = preset_files(conf_dir, preset)
        self.children: dict[str, Child] = {}
        self.specs: dict[str, ChildSpec] = {}
        self.crashed: list[str] = []
        self._stopping = False

    # -- addresses -----------------------------------------------------------------------------------------

    @property
    def namesrv_addrs(self) -> list[str]:
        return [c.addr for c in self.children.values() if c.spec.kind == "namesrv" and c.addr]

    @property
    def namesrv_addr(self) -> str:
        return ";".join(self.namesrv_addrs)

    def brokers(self) -> list[Child]:
        return [c for c in self.children.values() if c.spec.kind == "broker"]

    def broker(self, name: str) -> Child:
        return self.children[name]

    # -- specs ---------------------------------------------------------------------------------------------

    def _metrics_args(self, index: int) -> list[str]:
        if self.metrics_base_port is None:
            return []
        return ["--metrics-port", str(0 if self.ephemeral_ports else self.metrics_base_port + index)]

    def _namesrv_spec(self, index: int) -> ChildSpec:
        name = f"namesrv-{index}"
        port = 0 if self.ephemeral_ports else NAMESRV_BASE_PORT + index
        kv = self.base_dir / name / "kvConfig.json"
        args = ["-m", "pocketmq.namesrv.main", "--listen", self.host, "--port", str(port), "--kv-config-path", str(kv),
                "--log-format", self.log_format, *self._metrics_args(index)]
        if self.namesrv_overrides:
            effective = self.base_dir / "conf" / f"{name}.properties"
            effective.parent.mkdir(parents=True, exist_ok=True)
            effective.write_text("".join(f"{k}={v}\n" for k, v in self.namesrv_overrides.items()), encoding="utf-8")
            args += ["-c", str(effective)]
        return ChildSpec(name, "namesrv", args, "NAMESRV READY")

    def _broker_spec(self, index: int, path: Path) -> ChildSpec:
        name = path.stem
        props = {**load_properties(path), **self.overrides}
        store_dir = self.base_dir / name / "store"
        props["storePathRootDir"] = str(store_dir)
        props["namesrvAddr"] = self.namesrv_addr
        props["brokerIP1"] = self.host
        if self.ephemeral_ports:
            props["listenPort"] = "0"
            props.pop("haListenPort", None)
        effective = self.base_dir / "conf" / f"{name}.properties"
        effective.parent.mkdir(parents=True, exist_ok=True)
        effective.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
        args = ["-m", "pocketmq.broker.main", "-c", str(effective), "--listen-host", self.host, "--log-format",
                self.log_format, *self._metrics_args(self.namesrv_count + index)]
        return ChildSpec(name, "broker", args, "BROKER READY", broker_name=props.get("brokerName", name),
                         broker_id=int(props.get("brokerId", "0")), role=props.get("brokerRole", "ASYNC_MASTER"),
                         store_dir=str(store_dir))

    # -- lifecycle -----------------------------------------------------------------------------------------

    async def start(self, timeout: float = START_TIMEOUT) -> None:
        """Name servers, then masters, then slaves; then wait for registration and HA attachment."""
        deadline = time.monotonic() + timeout
        self.base_dir.mkdir(parents=True, exist_ok=True)
        try:
            namesrvs = [self._namesrv_spec(i) for i in range(self.namesrv_count)]
            await self._start_group(namesrvs, deadline)
            specs = [self._broker_spec(i, p) for i, p in enumerate(self.files)]
            await self._start_group([s for s in specs if s.role != "SLAVE"], deadline)
            await self._start_group([s for s in specs if s.role == "SLAVE"], deadline)
            await self.wait_registered(deadline - time.monotonic())
            await self.wait_replicating(deadline - time.monotonic())
        except BaseException:
            await self.stop()
            raise
        self.write_state()

    async def _start_group(self, specs: list[ChildSpec], deadline: float) -> None:
        for spec in specs:
            await self.spawn(spec)
        for spec in specs:
            await self.wait_ready(spec.name, deadline - time.monotonic())

    async def spawn(self, spec: ChildSpec) -> Child:
        """Start one child (or restart it, with the same arguments) and pump its output."""
        self.specs[spec.name] = spec
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        # A new session: a terminal's Ctrl-C reaches only us, and we stop the children in order.
        process = await asyncio.create_subprocess_exec(
            sys.executable, *spec.args, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, env=env, cwd=str(self.base_dir), start_new_session=True,
        )
        child = Child(spec, process)
        self.children[spec.name] = child
        loop = asyncio.get_running_loop()
        child.tasks = [loop.create_task(self._pump(child), name=f"pump-{spec.name}")]
        self._say(f"started {spec.name} (pid {child.pid})")
        return child

    async def restart(self, name: str, timeout: float = START_TIMEOUT) -> Child:
        """Start ``name`` again with the arguments it had (after it was killed or stopped)."""
        old = self.children.get(name)
        if old is not None and old.alive:
            raise ClusterError(f"{name} is still running (pid {old.pid})")
        child = await self.spawn(self.specs[name])
        await self.wait_ready(name, timeout)
        self.write_state()
        return child

    async def wait_ready(self, name: str, timeout: float) -> str:
        child = self.children[name]
        try:
            return await asyncio.wait_for(asyncio.shield(child.ready), max(timeout, 0.1))
        except TimeoutError:
            tail = "\n".join(child.lines[-20:])
            raise ClusterError(f"{name} printed no readiness line within the start timeout:\n{tail}") from None

    async def _pump(self, child: Child) -> None:
        """Copy the child's output with a name prefix; notice readiness and exit."""
        stream = child.process.stdout
        assert stream is not None
        prefix = f"{child.spec.name:<12}| "
        while True:
            try:
                raw = await stream.readline()
            except ValueError:  # a line over the stream limit: drop it, keep going
                continue
            if not raw:
                break
            line = raw.decode(errors="replace").rstrip("\n")
            if len(child.lines) >= KEEP_LINES:
                del child.lines[: KEEP_LINES // 2]
            child.lines.append(line)
            if self.echo is not None:
                self.echo.write(prefix + line + "\n")
                self.echo.flush()
            if line.startswith(child.spec.ready_prefix + " ") and not child.ready.done():
                child.addr = line.split()[-1]
                child.ready.set_result(child.addr)
        child.returncode = await child.process.wait()
        if not child.ready.done():
            child.ready.set_exception(ClusterError(
                f"{child.spec.name} exited with code {child.returncode} before it was ready:\n"
                + "\n".join(child.lines[-20:])))
            child.ready.exception()  # retrieved here so an unawaited failure is not logged as lost
        if not child.expected_exit and not self._stopping:
            self.crashed.append(child.spec.name)
            self._say(f"!! {child.spec.name} (pid {child.pid}) exited unexpectedly with code {child.returncode}")
            with contextlib.suppress(OSError):
                self.write_state()
            if self.on_crash is not None:
                self.on_crash(child)

    async def wait_registered(self, timeout: float) -> None:
        """Until every name server lists every running broker's address."""
        wanted = {c.addr for c in self.brokers() if c.alive}
        async with AdminClient(self.namesrv_addrs, timeout=2.0) as admin:
            deadline = time.monotonic() + max(timeout, 0.1)
            missing: dict[str, set[str]] = {}
            while time.monotonic() < deadline:
                missing = {}
                for ns in self.namesrv_addrs:
                    try:
                        info = await admin.cluster_info(ns)
                    except AdminError:
                        missing[ns] = wanted
                        continue
                    seen = {a for bd in info.broker_addr_table.values() for a in bd.broker_addrs.values()}
                    if wanted - seen:
                        missing[ns] = wanted - seen
                if not missing:
                    return
                await asyncio.sleep(0.1)
        raise ClusterError(f"brokers not registered in time: {missing}")

    async def wait_replicating(self, timeout: float) -> None:
        """Until each master reports as many attached slaves as it has running (haConnectionCount)."""
        slaves: dict[str, int] = {}
        for c in self.brokers():
            if c.spec.role == "SLAVE" and c.alive:
                slaves[c.spec.broker_name] = slaves.get(c.spec.broker_name, 0) + 1
        masters = [c for c in self.brokers() if c.spec.role != "SLAVE" and c.alive and c.spec.broker_name in slaves]
        if not masters:
            return
        deadline = time.monotonic() + max(timeout, 0.1)
        async with AdminClient(self.namesrv_addrs, timeout=2.0) as admin:
            pending = list(masters)
            while pending and time.monotonic() < deadline:
                still = []
                for m in pending:
                    try:
                        info = await admin.runtime_info(m.addr)
                    except AdminError:
                        still.append(m)
                        continue
                    if int(info.get("haConnectionCount", "0")) < slaves[m.spec.broker_name]:
                        still.append(m)
                pending = still
                if pending:
                    await asyncio.sleep(0.1)
        if pending:
            raise ClusterError(f"slaves not attached in time to: {[m.spec.name for m in pending]}")

    def signal(self, name: str, sig: int) -> None:
        """Send ``sig`` to one child by PID (SIGKILL/SIGSTOP/SIGCONT for fault drills)."""
        child = self.children[name]
        if sig in (signal.SIGKILL, signal.SIGTERM):
            child.expected_exit = True
        if child.alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, sig)

    async def wait_exit(self, name: str, timeout: float) -> int:
        child = self.children[name]
        await asyncio.wait_for(asyncio.shield(child.tasks[0]), timeout)
        assert child.returncode is not None
        return child.returncode

    async def stop_child(self, name: str, timeout: float = STOP_TIMEOUT) -> int:
        """SIGTERM by PID, wait; SIGKILL after ``timeout`` (reported)."""
        child = self.children[name]
        child.expected_exit = True
        if child.alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGCONT)  # a stopped (SIGSTOP) child cannot handle SIGTERM
                os.kill(child.pid, signal.SIGTERM)
        try:
            return await self.wait_exit(name, timeout)
        except TimeoutError:
            self._say(f"!! {name} (pid {child.pid}) did not stop within {timeout:.0f}s; killing it")
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGKILL)
            return await self.wait_exit(name, 10.0)

    async def stop(self) -> dict[str, int]:
        """Brokers first (they unregister from the name servers), then name servers."""
        self._stopping = True
        codes: dict[str, int] = {}
        for kind in ("broker", "namesrv"):
            names = [n for n, c in self.children.items() if c.spec.kind == kind]
            results = await asyncio.gather(*(self.stop_child(n) for n in names), return_exceptions=True)
            for n, r in zip(names, results, strict=True):
                codes[n] = r if isinstance(r, int) else -1
        for child in self.children.values():
            for task in child.tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        with contextlib.suppress(OSError):
            self.write_state(stopped=True)
        return codes

    # -- state ---------------------------------------------------------------------------------------------

    def state(self, *, stopped: bool = False) -> dict[str, Any]:
        processes = []
        for c in self.children.values():
            entry: dict[str, Any] = {"name": c.spec.name, "kind": c.spec.kind, "pid": c.pid, "addr": c.addr,
                                     "alive": c.alive and not stopped, "returncode": c.returncode}
            if c.spec.kind == "broker":
                entry.update(brokerName=c.spec.broker_name, brokerId=c.spec.broker_id, role=c.spec.role,
                             storeDir=c.spec.store_dir)
            processes.append(entry)
        return {"preset": self.preset, "pid": os.getpid(), "baseDir": str(self.base_dir),
                "namesrvAddr": self.namesrv_addr, "stopped": stopped, "crashed": list(self.crashed),
                "updated": int(time.time()), "processes": processes}

    def write_state(self, *, stopped: bool = False) -> None:
        path = self.base_dir / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state(stopped=stopped), indent=2) + "\n", encoding="utf-8")
        tmp.replace(path)

    def _say(self, text: str) -> None:
        if self.echo is not None:
            print(f"rmq-cluster | {text}", file=self.echo, flush=True)

    def summary(self) -> str:
        lines = [f"cluster {self.preset} ready; base dir {self.base_dir}", f"  NAMESRV_ADDR={self.namesrv_addr}"]
        for c in self.brokers():
            lines.append(f"  {c.spec.name:<12} {c.spec.role:<13} {c.spec.broker_name}#{c.spec.broker_id:<3} "
                         f"{c.addr:<21} pid {c.pid}")
        return "\n".join(lines)


# -- commands --------------------------------------------------------------------------------------------


async def run_up(args: argparse.Namespace) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    cluster = LocalCluster(
        args.preset, base_dir=Path(args.base_dir), namesrv_count=args.namesrv, conf_dir=Path(args.conf_dir),
        ephemeral_ports=args.ephemeral_ports, host=args.host, overrides=parse_overrides(args.set),
        log_format=args.log_format, echo=sys.stdout, metrics_base_port=args.metrics_base_port,
        on_crash=(lambda _c: stop.set()) if args.exit_on_crash else None,
    )
    start = loop.create_task(cluster.start())
    waiter = loop.create_task(stop.wait())
    await asyncio.wait({start, waiter}, return_when=asyncio.FIRST_COMPLETED)
    if not start.done():  # interrupted while starting
        start.cancel()
        with contextlib.suppress(asyncio.CancelledError, ClusterError):
            await start
        await cluster.stop()
        return 130
    waiter.cancel()
    try:
        start.result()
    except ClusterError as exc:
        print(f"rmq-cluster: {exc}", file=sys.stderr)
        return 1
    print(cluster.summary(), flush=True)
    sys.stderr.write(f"CLUSTER READY {cluster.namesrv_addr}\n")  # one write: log lines of threads cannot split it
    sys.stderr.flush()
    await stop.wait()
    cluster._say("stopping: brokers, then name servers")
    codes = await cluster.stop()
    bad = {n: c for n, c in codes.items() if c != 0 and n not in cluster.crashed}
    for name in cluster.crashed:
        print(f"rmq-cluster: {name} crashed (exit code {cluster.children[name].returncode})", file=sys.stderr)
    for name, code in bad.items():
        print(f"rmq-cluster: {name} exited with code {code} on stop", file=sys.stderr)
    cluster._say("stopped")
    return 1 if cluster.crashed or bad else 0


def read_state(base_dir: Path) -> dict[str, Any]:
    path = base_dir / STATE_FILE
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ClusterError(f"no cluster state in {path} (start one with rmq-cluster up)") from None
    return data


def pid_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, exited but not yet reaped by its parent, does not)."""
    with contextlib.suppress(OSError):  # no /proc (not Linux): signal 0 alone decides
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return isinstance(exc, PermissionError)  # another user's process is alive
    return True


async def cluster_status(base_dir: Path) -> dict[str, Any]:
    """The state file, with liveness checked by PID and registration asked of the name servers."""
    state = read_state(base_dir)
    registered: set[str] = set()
    ns_ok: dict[str, bool] = {}
    addrs = [a for a in str(state.get("namesrvAddr", "")).split(";") if a]
    if addrs:
        async with AdminClient(addrs, timeout=2.0) as admin:
            for ns in addrs:
                try:
                    info = await admin.cluster_info(ns)
                except AdminError:
                    ns_ok[ns] = False
                    continue
                ns_ok[ns] = True
                registered |= {a for bd in info.broker_addr_table.values() for a in bd.broker_addrs.values()}
    for p in state["processes"]:
        p["alive"] = bool(not state.get("stopped") and p.get("returncode") is None and pid_alive(int(p["pid"])))
        if p["kind"] == "broker":
            p["registered"] = p["addr"] in registered
        else:
            p["answering"] = ns_ok.get(p["addr"], False)
    state["launcherAlive"] = pid_alive(int(state["pid"])) and not state.get("stopped")
    return state


def format_status(state: dict[str, Any]) -> str:
    lines = [f"preset {state['preset']}  base dir {state['baseDir']}  launcher pid {state['pid']} "
             f"({'running' if state['launcherAlive'] else 'not running'})",
             f"NAMESRV_ADDR={state['namesrvAddr']}",
             f"{'NAME':<12} {'KIND':<8} {'ROLE':<13} {'ADDR':<21} {'PID':>7}  STATE"]
    for p in state["processes"]:
        if p["kind"] == "broker":
            health = "registered" if p.get("registered") else "NOT registered"
        else:
            health = "answering" if p.get("answering") else "NOT answering"
        alive = "up" if p["alive"] else f"DOWN (exit {p.get('returncode')})"
        lines.append(f"{p['name']:<12} {p['kind']:<8} {p.get('role', ''):<13} {p['addr']:<21} {p['pid']:>7}  "
                     f"{alive}, {health if p['alive'] else '-'}")
    return "\n".join(lines)


def run_down(base_dir: Path, timeout: float) -> int:
    """SIGTERM the launcher (which stops its children in order), or the children if it is gone."""
    state = read_state(base_dir)
    launcher = int(state["pid"])
    if pid_alive(launcher) and not state.get("stopped"):
        targets = [launcher]
    else:
        targets = [int(p["pid"]) for p in state["processes"] if pid_alive(int(p["pid"]))]
    for pid in targets:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(pid_alive(p) for p in targets):
        time.sleep(0.1)
    left = [p for p in targets if pid_alive(p)]
    if left:
        print(f"rmq-cluster: still running after {timeout:.0f}s: pids {left}", file=sys.stderr)
        return 1
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="rmq-cluster", description="run a PocketMQ cluster preset as local processes")
    sub = p.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start a preset and keep it running until Ctrl-C / SIGTERM")
    up.add_argument("--preset", default="2m-2s-sync", help="a directory of conf/ (default 2m-2s-sync)")
    up.add_argument("--namesrv", type=int, default=2, help="number of name servers (default 2)")
    up.add_argument("--base-dir", default=".rmq-cluster", help="stores, effective configs and the state file")
    up.add_argument("--conf-dir", default=str(DEFAULT_CONF_DIR), help="where the presets are")
    up.add_argument("--host", default="127.0.0.1", help="address to bind and advertise")
    up.add_argument("--ephemeral-ports", action="store_true", help="let every process pick a free port")
    up.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a broker property")
    up.add_argument("--metrics-base-port", type=int, help="expose metrics on this port and up (one per process)")
    up.add_argument("--exit-on-crash", action="store_true", help="stop the whole cluster when one process dies")
    up.add_argument("--log-format", choices=("console", "json"), default="console")
    for name, text in (("status", "show the processes of the cluster in --base-dir"),
                       ("down", "stop the cluster in --base-dir")):
        s = sub.add_parser(name, help=text)
        s.add_argument("--base-dir", default=".rmq-cluster")
        if name == "status":
            s.add_argument("--json", action="store_true")
        else:
            s.add_argument("--timeout", type=float, default=30.0)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging("console", "WARNING")  # its admin client's records: problems only, on stderr
    try:
        if args.command == "up":
            return asyncio.run(run_up(args))
        if args.command == "status":
            state = asyncio.run(cluster_status(Path(args.base_dir)))
            print(json.dumps(state, indent=2) if args.json else format_status(state))
            alive = all(p["alive"] for p in state["processes"])
            return 0 if alive and state["launcherAlive"] else 3
        return run_down(Path(args.base_dir), args.timeout)
    except ClusterError as exc:
        print(f"rmq-cluster: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
