"""What a user installs, tested as a user runs it: the sdist built from this checkout, a wheel built from that
sdist, installed into a fresh virtual environment outside the checkout, then every console script and a whole
cluster run from that environment (docs/install.md, "The installed-package test").

The wheel is built as on a machine without a compiler (``POCKETMQ_PURE_PYTHON=1``: no extension module) and the
environment has no Cython, so the same run proves that every process starts with no build-only package at run
time. Every process gets the environment's own ``PATH``, no ``PYTHONPATH`` and a working directory in the
temporary tree; the checkout is never written to. pip's cache is reused, so after the first run the dependencies
install without downloads (PyPI must be reachable for the first).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pocketmq.admin.cluster import pid_alive
from tests.procs import TEST_STORE_PROPERTIES, Proc, wait_exit

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ("rmq-namesrv", "rmq-broker", "rmq-cluster", "rmq-admin", "rmq-analytics", "rmq-bench", "rmq-chaos",
           "rmq-proxy", "rmq-controller", "rmq-console")
#: Environment variables that would point a process back at the checkout or change the build under test.
DROPPED_ENV = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP", "POCKETMQ_PURE_PYTHON",
               "POCKETMQ_REQUIRE_COMPILED")
#: What the sdist may hold at its top (MANIFEST.in): the package, the build files, the README and the licence.
SDIST_TOP = {"pocketmq", "pocketmq.egg-info", "setup.py", "setup.cfg", "pyproject.toml", "MANIFEST.in", "README.md",
             "LICENSE", "PKG-INFO"}
BUILD_TIMEOUT = 300
INSTALL_TIMEOUT = 300
COMMAND_TIMEOUT = 60
MESSAGES = 16

pytestmark = pytest.mark.timeout(900)


@dataclass(frozen=True)
class Installed:
    """The artifacts and the environment they were installed into."""

    tmp: Path
    sdist: Path
    wheel: Path
    venv: Path
    env: dict[str, str]

    def bin(self, name: str) -> str:
        return str(self.venv / "bin" / name)

    def run(self, *argv: str, timeout: float = COMMAND_TIMEOUT) -> subprocess.CompletedProcess[str]:
        """Run a program of the environment from the temporary tree (never from the checkout)."""
        return subprocess.run(list(argv), cwd=self.tmp, env=self.env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)


def _user_env(venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
    env["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", "")])
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _copy_source(dest: Path) -> None:
    """The files a clone has (plus uncommitted edits), without what a build or a run left in the checkout."""
    ignored = shutil.ignore_patterns(".*", "build", "dist", "*.egg-info", "__pycache__", "*.so", "*.c", "*.pyc")
    shutil.copytree(ROOT, dest, ignore=ignored)


def _checked(done: subprocess.CompletedProcess[str], what: str) -> subprocess.CompletedProcess[str]:
    assert done.returncode == 0, f"{what} exited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    before = sorted(os.listdir(ROOT))
    tmp = tmp_path_factory.mktemp("installed")
    assert ROOT not in tmp.parents
    try:
        yield _build_and_install(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    assert not tmp.exists()
    assert sorted(os.listdir(ROOT)) == before, "the test wrote into the checkout"


def _build_and_install(tmp: Path) -> Installed:
    source, dist, venv = tmp / "src", tmp / "dist", tmp / "venv"
    _copy_source(source)
    env = _user_env(venv)
    # ``python -m build`` makes the sdist, then the wheel from that sdist, each in its own isolated environment.
    _checked(subprocess.run([sys.executable, "-m", "build", "--outdir", str(dist), str(source)], cwd=tmp,
                            env={**env, "POCKETMQ_PURE_PYTHON": "1"}, capture_output=True, text=True,
                            timeout=BUILD_TIMEOUT), "python -m build")
    shutil.rmtree(source)
    (sdist,) = dist.glob("pocketmq-*.tar.gz")
    (wheel,) = dist.glob("pocketmq-*.whl")
    _checked(subprocess.run([sys.executable, "-m", "venv", str(venv)], cwd=tmp, env=env, capture_output=True,
                            text=True, timeout=INSTALL_TIMEOUT), "python -m venv")
    _checked(subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], cwd=tmp,
                            env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT), "pip install")
    return Installed(tmp=tmp, sdist=sdist, wheel=wheel, venv=venv, env=env)


# ------------------------------------------------------------------------------------------- artifacts


def test_the_wheel_and_the_sdist_hold_only_pocketmq(installed: Installed) -> None:
    assert installed.wheel.name.endswith("-py3-none-any.whl"), installed.wheel.name  # pure: no compiler used
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = wheel.namelist()
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/RECORD"))
        record = wheel.read(f"{info}/RECORD").decode().splitlines()
        top_level = wheel.read(f"{info}/top_level.txt").decode().split()
        metadata = wheel.read(f"{info}/METADATA").decode()
        entry_points = wheel.read(f"{info}/entry_points.txt").decode()
    assert {line.split(",")[0].split("/")[0] for line in record} == {"pocketmq", info}
    assert top_level == ["pocketmq"]
    assert not [n for n in names if n.endswith((".so", ".c", ".pyc"))]
    assert {"pocketmq/py.typed", "pocketmq/conf/presets/2m-2s-sync/broker-a.properties",
            "pocketmq/conf/plain_acl.example.yml", "pocketmq/conf/grafana/pocketmq-rocketmq.json",
            "pocketmq/console/templates/base.html", "pocketmq/console/static/app.js",
            "pocketmq/console/static/vendor/htmx.min.js", "pocketmq/console/static/vendor/LICENSE.uPlot"} <= set(names)
    assert f"{info}/licenses/LICENSE" in names
    for line in ("License-Expression: Apache-2.0", "Requires-Python: >=3.11",
                 "Description-Content-Type: text/markdown", "Classifier: Typing :: Typed"):
        assert line in metadata.splitlines(), line
    # Run-time requirements are pyproject's dependencies, no build tool among them (Spark and the rest: extras).
    required = [line.split(": ", 1)[1] for line in metadata.splitlines()
                if line.startswith("Requires-Dist: ") and "extra ==" not in line]
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert sorted(required) == sorted(declared)
    assert not [r for r in required if r.lower().startswith(("cython", "setuptools", "pyspark"))]
    assert all(f"{script} = " in entry_points for script in SCRIPTS)
    with tarfile.open(installed.sdist) as sdist:
        tops = {name.split("/")[1] for name in sdist.getnames() if name.count("/") >= 1}
    assert tops <= SDIST_TOP, tops - SDIST_TOP


def test_the_environment_holds_pocketmq_once_and_no_build_tools(installed: Installed) -> None:
    probe = (
        "import json, sys, importlib.util\n"
        "from importlib.metadata import distribution, distributions\n"
        "d = distribution('pocketmq')\n"
        "files = [str(f) for f in d.files]\n"
        "import pocketmq, pocketmq.common.compiled as c\n"
        "print(json.dumps({'files': files, 'file': pocketmq.__file__, 'active': c.ACTIVE,\n"
        "    'dists': sorted(x.metadata['Name'].lower() for x in distributions()),\n"
        "    'cython': importlib.util.find_spec('cython') or importlib.util.find_spec('Cython')}, default=str))\n"
    )
    out = json.loads(_checked(installed.run(installed.bin("python"), "-c", probe), "probe").stdout)
    site = Path(out["file"]).parents[1]
    assert site.is_relative_to(installed.venv) and "site-packages" in site.parts
    inside = {f.split("/")[0] for f in out["files"] if not f.startswith("..")}
    infos = [name for name in inside if name.endswith(".dist-info")]
    assert len(infos) == 1 and infos[0].startswith("pocketmq-") and inside == {"pocketmq", infos[0]}
    scripts = sorted(Path(f).name for f in out["files"] if f.startswith(".."))
    assert scripts == sorted(SCRIPTS)
    assert out["active"] == "pure"
    assert out["cython"] is None and "cython" not in out["dists"]


def test_every_console_script_starts_outside_the_checkout(installed: Installed) -> None:
    for script in SCRIPTS:
        done = _checked(installed.run(installed.bin(script), "--help"), f"{script} --help")
        assert "usage:" in done.stdout, script
    missing = installed.run(installed.bin("rmq-analytics"), "--input", str(installed.tmp), "--out",
                            str(installed.tmp / "analytics"))
    assert missing.returncode == 2 and "pocketmq[spark]" in missing.stderr  # no Spark extra: says what to install


# ------------------------------------------------------------------------------------------- processes


def _pids_under(path: Path) -> list[int]:
    """Processes whose command line names ``path`` (what this module started, and nothing else)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(path) in cmdline:
            found.append(int(entry.name))
    return found


def test_namesrv_and_broker_scripts_serve(installed: Installed) -> None:
    """``rmq-namesrv`` and ``rmq-broker`` from the environment's bin directory: serve, register, stop cleanly."""
    base = installed.tmp / "single"
    conf = base / "broker.properties"
    conf.parent.mkdir()
    conf.write_text("".join(f"{k}={v}\n" for k, v in {
        **TEST_STORE_PROPERTIES, "brokerName": "solo", "listenPort": "0", "storePathRootDir": str(base / "store"),
        "brokerRole": "ASYNC_MASTER"}.items()))
    ns = Proc([installed.bin("rmq-namesrv"), "--listen", "127.0.0.1", "--port", "0", "--kv-config-path",
               str(base / "kvConfig.json")], "NAMESRV READY", env=installed.env, cwd=base, from_checkout=False)
    broker = None
    try:
        ns_addr = ns.wait_ready(COMMAND_TIMEOUT)
        broker = Proc([installed.bin("rmq-broker"), "-c", str(conf), "-n", ns_addr, "--listen-host", "127.0.0.1",
                       "--log-format", "json"], "BROKER READY", env=installed.env, cwd=base, from_checkout=False)
        broker.wait_ready(COMMAND_TIMEOUT)
        listed = _checked(installed.run(installed.bin("rmq-admin"), "clusterList", "-n", ns_addr, "--json"),
                          "rmq-admin clusterList")
        assert [(b["brokerName"], b["role"]) for b in json.loads(listed.stdout)] == [("solo", "ASYNC_MASTER")]
        assert '"event": "broker_started"' in broker.stderr_text()  # the process's structured log
    finally:
        codes = [p.terminate(30) for p in (broker, ns) if p is not None]
    assert codes == [0] * len(codes)
    assert _pids_under(base) == []


SDK_CHECK = r"""
import asyncio, json, sys
import pocketmq
from pocketmq import ConsumeFromWhere, ConsumeResult, Message, Producer, PushConsumer

async def main(namesrv, topic, count):
    got, done = set(), asyncio.Event()
    async with Producer("InstalledPG", namesrv_addr=namesrv) as producer:
        sent = [await producer.send(Message(topic, f"m{i}".encode(), keys=f"k{i}")) for i in range(count)]

    async def handle(message):
        got.add(message.body.decode())
        if len(got) >= count:
            done.set()
        return ConsumeResult.SUCCESS

    consumer = PushConsumer("InstalledCG", namesrv_addr=namesrv, consume_from_where=ConsumeFromWhere.FIRST_OFFSET,
                            rebalance_interval=1.0)
    consumer.subscribe(topic, "*")
    consumer.register_handler(handle)
    await consumer.start()
    try:
        await asyncio.wait_for(done.wait(), 60)
    finally:
        await consumer.shutdown()
    print(json.dumps({"file": pocketmq.__file__, "status": sorted({r.status.name for r in sent}),
                      "brokers": sorted({r.message_queue.broker_name for r in sent}), "received": sorted(got),
                      "build_tools": sorted(m for m in sys.modules if m.split(".")[0].lower() == "cython")}))

asyncio.run(main(*sys.argv[1:3], int(sys.argv[3])))
"""


def test_a_cluster_from_the_installed_package(installed: Installed) -> None:
    """``rmq-cluster up --preset 2m-2s-sync``, a topic, sends and a push consumer with the installed SDK,
    ``rmq-admin clusterList`` (2 masters, 2 slaves), ``rmq-cluster down``: every process gone, by PID."""
    base = installed.tmp / "cluster"
    overrides = [f"--set={key}={value}" for key, value in TEST_STORE_PROPERTIES.items()]
    launcher = Proc([installed.bin("rmq-cluster"), "up", "--preset", "2m-2s-sync", "--namesrv", "1",
                     "--ephemeral-ports", "--base-dir", str(base), "--log-format", "json", *overrides],
                    "CLUSTER READY", env=installed.env, cwd=installed.tmp, from_checkout=False)
    pids: list[int] = []
    try:
        namesrv = launcher.wait_ready(120)
        state = json.loads((base / "cluster.json").read_text())
        pids = [int(p["pid"]) for p in state["processes"]]
        assert len(pids) == 5 and all(pid_alive(pid) for pid in pids)
        listed = json.loads(_checked(installed.run(installed.bin("rmq-admin"), "clusterList", "-n", namesrv,
                                                   "--json"), "rmq-admin clusterList").stdout)
        roles = sorted(b["role"] for b in listed)
        assert roles == ["SLAVE", "SLAVE", "SYNC_MASTER", "SYNC_MASTER"], listed
        _checked(installed.run(installed.bin("rmq-admin"), "updateTopic", "-n", namesrv, "-t", "InstalledT",
                               "-r", "2", "-w", "2", "--json"), "rmq-admin updateTopic")
        script = installed.tmp / "sdk_check.py"
        script.write_text(SDK_CHECK)
        done = _checked(installed.run(installed.bin("python"), str(script), namesrv, "InstalledT", str(MESSAGES),
                                      timeout=120), "the SDK script")
        lines = done.stdout.splitlines()
        assert len(lines) == 1, done.stdout  # the SDK wrote nothing of its own to stdout
        result = json.loads(lines[0])
        assert Path(result["file"]).is_relative_to(installed.venv)
        assert result["status"] == ["SEND_OK"] and result["brokers"] == ["broker-a", "broker-b"]
        assert result["received"] == sorted(f"m{i}" for i in range(MESSAGES))
        assert result["build_tools"] == []
        _checked(installed.run(installed.bin("rmq-cluster"), "down", "--base-dir", str(base), timeout=90),
                 "rmq-cluster down")
        assert wait_exit(launcher, 30) == 0, launcher.stderr_text()[-3000:]
    finally:
        if launcher.popen.poll() is None:
            launcher.signal(signal.SIGTERM)
            wait_exit(launcher, 30)
            launcher.kill()
    assert [pid for pid in pids if pid_alive(pid)] == []
    assert _pids_under(installed.tmp) == []
    assert json.loads((base / "cluster.json").read_text())["stopped"] is True
