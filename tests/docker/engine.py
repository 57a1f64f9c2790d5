"""A private Docker engine for the container tests, and a Python base image made without a registry.

:class:`Engine` starts Debian's ``dockerd`` as a child of the test with everything of its own under one temporary
directory: data root, exec root, socket, pid file, client configuration. It never talks to, or starts, a system
engine. Its network set-up leaves the host's firewall and sysctls alone (no iptables rules, no default bridge, no
IP forwarding): containers reach each other on their Compose network's bridge, the host reaches them there and
through the published ports (``docker-proxy`` listens on the host), and image builds that download use the host's
network.

:func:`python_base_image` stands in for the official ``python:3.11-slim`` image, which cannot be pulled where no
registry is reachable: ``debootstrap --variant=minbase`` of Debian bookworm with ``python3`` and ``python3-venv``,
imported with ``docker import``, plus the host's CA bundle (downloads may pass a TLS-inspecting proxy that only
the host's bundle trusts) and a virtual environment on ``PATH`` that provides ``python`` and ``pip`` as the
official image does. The debootstrap tarball is cached under the project's ``.cache/`` (git-ignored): only the
first run pays for it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE_DIR = ROOT / ".cache" / "docker"
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
PACKAGES = ("python3", "python3-venv")
#: Part of the cached tarball's name: change it when the recipe below changes, and the next run makes a new one.
RECIPE = "v1"
#: Where the stand-in image's virtual environment lives (it is first on PATH, like /usr/local/bin in python:3.11).
VENV = "/opt/python"
#: Tried in order: overlay2 where the kernel allows it inside this sandbox, vfs (full copies, always works) else.
STORAGE_DRIVERS = ("overlay2", "vfs")
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: Unpacked but never read in an image: documentation, manual pages, translations, apt's download caches.
TRIM = ("var/cache/apt", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/locale",
        "usr/share/info")
INSTALL_HINT = "`make docker-engine` installs Debian's docker.io, docker-compose and debootstrap"


class EngineUnavailable(Exception):
    """No engine can run here; the message says why."""


@dataclass(frozen=True)
class Tools:
    dockerd: str
    docker: str
    compose: tuple[str, ...]
    debootstrap: str


def find_tools() -> Tools:
    """The engine, its client, Compose and debootstrap; :class:`EngineUnavailable` naming what is missing."""
    if os.geteuid() != 0:
        raise EngineUnavailable("starting dockerd and running debootstrap need root")
    path = f"{os.environ.get('PATH', '')}:{SYSTEM_PATH}"
    dockerd = shutil.which("dockerd", path=path)
    debootstrap = shutil.which("debootstrap", path=path)
    # The client shipped beside dockerd speaks its API version; another one on PATH may not build the same way.
    sibling = Path(dockerd).resolve().parent.parent / "bin" / "docker" if dockerd else None
    docker = str(sibling) if sibling and sibling.exists() else shutil.which("docker", path=path)
    compose_v1 = shutil.which("docker-compose", path=path)
    compose: tuple[str, ...] | None = (compose_v1,) if compose_v1 else None
    if compose is None and docker and subprocess.run([docker, "compose", "version"], capture_output=True,
                                                     timeout=30, check=False).returncode == 0:
        compose = (docker, "compose")
    missing = [name for name, found in (("dockerd", dockerd), ("docker", docker), ("docker-compose", compose),
                                        ("debootstrap", debootstrap)) if not found]
    if missing:
        raise EngineUnavailable(f"{', '.join(missing)} not installed: {INSTALL_HINT}")
    assert dockerd and docker and compose and debootstrap
    return Tools(dockerd, docker, compose, debootstrap)


class Engine:
    """``dockerd`` run by this process under ``root`` (a fresh temporary directory), stopped by its PID."""

    def __init__(self, tools: Tools, root: Path) -> None:
        self.tools = tools
        self.root = root
        self.socket = root / "docker.sock"
        self.log_path = root / "dockerd.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.storage_driver = ""
        (root / "client").mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DOCKER_", "COMPOSE_"))}
        env.pop("ADVERTISED_HOST", None)  # the compose file is tested with its defaults
        env.update(DOCKER_HOST=f"unix://{self.socket}", DOCKER_CONFIG=str(root / "client"), DOCKER_BUILDKIT="0",
                   PATH=f"{env.get('PATH', '')}:{SYSTEM_PATH}")
        self.env = env

    def start(self, timeout: float = 90.0) -> None:
        """Start the engine with the first storage driver that works; :class:`EngineUnavailable` with each
        driver's last log lines when none does."""
        failures = []
        for driver in STORAGE_DRIVERS:
            try:
                self._start_with(driver, timeout)
                self.storage_driver = driver
                return
            except EngineUnavailable as exc:
                failures.append(f"{driver}: {exc}")
                self.stop_daemon()
        raise EngineUnavailable("dockerd did not start: " + " | ".join(failures))

    def _start_with(self, driver: str, timeout: float) -> None:
        data = self.root / f"data-{driver}"
        cmd = [self.tools.dockerd, "--data-root", str(data), "--exec-root", str(self.root / "exec"),
               "--pidfile", str(self.root / "dockerd.pid"), "--host", f"unix://{self.socket}",
               "--storage-driver", driver, "--bridge", "none", "--iptables=false", "--ip6tables=false",
               "--ip-forward=false", "--ip-masq=false", "--log-level", "warn"]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=self.env, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise EngineUnavailable(f"exited with {self.proc.returncode}: {self.log_tail()}")
            probe = self.docker("info", "--format", "{{.Driver}}", check=False, timeout=30)
            if probe.returncode == 0:
                return
            time.sleep(0.5)
        raise EngineUnavailable(f"not answering after {timeout:.0f}s: {self.log_tail()}")

    def log_tail(self, lines: int = 8) -> str:
        try:
            return " / ".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def docker(self, *args: str, check: bool = True, timeout: float = 300.0,
               stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
        return run([self.tools.docker, *args], self.env, check=check, timeout=timeout, stdin=stdin)

    def compose(self, project_dir: Path, project: str, *args: str, check: bool = True,
                timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
        return run([*self.tools.compose, "--project-directory", str(project_dir), "-f",
                    str(project_dir / "docker-compose.yml"), "-p", project, *args], self.env, check=check,
                   timeout=timeout)

    def stop_daemon(self, timeout: float = 60.0) -> None:
        """Remove every container still there (so no shim outlives the engine), then stop dockerd by PID:
        SIGTERM, SIGKILL after ``timeout``; the containerd it started goes with it, or is stopped by its PID."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            left = self.docker("ps", "-aq", check=False, timeout=60).stdout.split()
            if left:
                self.docker("rm", "-f", "-v", *left, check=False, timeout=120)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        containerd_pid = self.root / "exec" / "containerd" / "containerd.pid"
        if containerd_pid.exists():
            stop_pid(int(containerd_pid.read_text().strip() or 0))
        self.proc = None

    def close(self) -> None:
        """Stop the engine and remove everything it stored."""
        self.stop_daemon()
        remove_tree(self.root)


def run(cmd: Sequence[str], env: dict[str, str], *, check: bool = True, timeout: float = 300.0,
        stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``cmd``; with ``check``, a failure raises with the command's own output in the message."""
    result = subprocess.run(cmd, env=env, capture_output=True, timeout=timeout, check=False,
                            input=stdin.decode() if stdin is not None else None, text=True)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {result.returncode}:\n{result.stdout[-3000:]}\n"
                             f"{result.stderr[-3000:]}")
    return result


def stop_pid(pid: int, timeout: float = 30.0) -> None:
    """SIGTERM ``pid`` (a process this test started), SIGKILL if still there after ``timeout``."""
    if pid <= 0:
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def remove_tree(root: Path) -> None:
    """Unmount whatever is still mounted under ``root`` (an engine's layers, debootstrap's /proc), deepest
    first, then delete it."""
    prefix = str(root.resolve()) + "/"
    with open("/proc/self/mounts", encoding="utf-8") as mounts:
        points = [line.split()[1] for line in mounts if line.split()[1].startswith(prefix)]
    for point in sorted(points, key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, timeout=60, check=False)
    shutil.rmtree(root, ignore_errors=True)


def ca_bundle() -> Path | None:
    """The CA bundle this host's downloads trust (``PIP_CERT``, ``SSL_CERT_FILE``, else Debian's)."""
    for candidate in (os.environ.get("PIP_CERT"), os.environ.get("SSL_CERT_FILE"),
                      "/etc/ssl/certs/ca-certificates.crt"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def base_tarball(tools: Tools, work: Path, cache_dir: Path = CACHE_DIR) -> Path:
    """The root file system of the stand-in image as a tar.gz, from the cache, else made with debootstrap in
    ``work`` (a few minutes) and cached."""
    tarball = cache_dir / f"{SUITE}-minbase-{'-'.join(PACKAGES)}-{RECIPE}.tar.gz"
    if tarball.exists():
        return tarball
    cache_dir.mkdir(parents=True, exist_ok=True)
    with cache_lock(cache_dir):  # CI makes it beside the other tests (``prefetch``): wait for that one
        if not tarball.exists():
            _make_tarball(tools, work, tarball)
    return tarball


@contextlib.contextmanager
def cache_lock(cache_dir: Path, timeout: float = 1500.0) -> Iterator[None]:
    """An exclusive lock on the cache, waited for at most ``timeout`` seconds."""
    with open(cache_dir / ".lock", "w") as handle:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the base-image cache {cache_dir} stayed locked for {timeout:.0f} s") from None
                time.sleep(1.0)  # pacing the poll of another process's lock
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _make_tarball(tools: Tools, work: Path, tarball: Path) -> None:
    rootfs = work / "rootfs"
    env = {**os.environ, "PATH": f"{os.environ.get('PATH', '')}:{SYSTEM_PATH}"}
    try:
        run([tools.debootstrap, "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, str(rootfs),
             MIRROR], env, timeout=1200)
        run(["chroot", str(rootfs), "/usr/bin/python3", "-m", "venv", VENV], env, timeout=300)
        for part in TRIM:
            target = rootfs / part
            if target.is_dir():
                shutil.rmtree(target)
                target.mkdir()
        partial = tarball.with_suffix(f".partial-{os.getpid()}")
        run(["sh", "-c", f'tar --numeric-owner -C "{rootfs}" -c . | gzip -1 > "{partial}"'], env, timeout=600)
        os.replace(partial, tarball)
    finally:
        remove_tree(rootfs)


def python_base_image(engine: Engine, tarball: Path, work: Path, tag: str) -> str:
    """Import ``tarball`` and add the host's CA bundle and the ``python`` on PATH; returns ``tag``."""
    rootfs_tag = f"{tag}-rootfs"
    engine.docker("import", str(tarball), rootfs_tag, timeout=600)
    context = work / "base-context"
    context.mkdir(parents=True, exist_ok=True)
    bundle = ca_bundle()
    lines = [f"FROM {rootfs_tag}"]
    if bundle is not None:
        shutil.copyfile(bundle, context / "ca-certificates.crt")
        lines += ["COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt",
                  "ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"]
    lines += [f"ENV PATH={VENV}/bin:{SYSTEM_PATH}", 'CMD ["python"]']
    (context / "Dockerfile").write_text("\n".join(lines) + "\n")
    engine.docker("build", "-q", "-t", tag, str(context), timeout=300)
    return tag


def prefetch() -> int:
    """``python -m tests.docker.engine``: make the cached base tarball now (CI starts this beside the other tests so
    the container test finds it ready); nothing to do where no engine can run."""
    try:
        tools = find_tools()
    except EngineUnavailable as exc:
        print(f"prefetch: {exc}")
        return 0
    with tempfile.TemporaryDirectory(prefix="pocketmq-base-") as work:
        print(f"prefetch: {base_tarball(tools, Path(work))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(prefetch())
