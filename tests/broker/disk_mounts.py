"""Small file systems for full-disk tests: a loop-mounted ext4 image or a size-limited tmpfs, made under the
test's ``tmp_path`` and always unmounted and removed afterwards. Mounting needs root (CAP_SYS_ADMIN) and, for
ext4, ``mkfs.ext4`` and a free loop device; where any of that is missing the test is skipped with the reason."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def _need(done: subprocess.CompletedProcess[str], what: str) -> None:
    if done.returncode != 0:
        pytest.skip(f"{what} is not permitted here: {done.stderr.strip() or done.stdout.strip()}")


@contextlib.contextmanager
def mounted(kind: str, where: Path, size_mib: int) -> Iterator[Path]:
    """A ``kind`` ("ext4" or "tmpfs") file system of ``size_mib`` MiB mounted at ``where/disk``."""
    mount_point = where / "disk"
    mount_point.mkdir()
    image = where / "disk.img"
    try:
        if kind == "ext4":
            with open(image, "wb") as f:
                f.truncate(size_mib << 20)
            try:
                made = run("mkfs.ext4", "-q", "-F", "-m", "0", str(image))  # -m 0: no blocks kept for root
            except OSError as exc:
                pytest.skip(f"cannot run mkfs.ext4: {exc}")
            _need(made, "making an ext4 image")
            argv: tuple[str, ...] = ("mount", "-o", "loop", str(image), str(mount_point))
        else:
            argv = ("mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "tmpfs", str(mount_point))
        try:
            done = run(*argv)
        except OSError as exc:
            pytest.skip(f"cannot run mount: {exc}")
        _need(done, f"mounting a {size_mib} MiB {kind}")
        try:
            yield mount_point
        finally:
            unmount(mount_point)
    finally:
        mount_point.rmdir()
        image.unlink(missing_ok=True)


def unmount(mount_point: Path, timeout: float = 10.0) -> None:
    """Unmount, waiting a little for files still closing; a mount still busy then is detached anyway (so nothing
    is left behind) and the test fails: something kept a file of it open."""
    deadline = time.monotonic() + timeout
    while (done := run("umount", str(mount_point))).returncode != 0:
        if time.monotonic() > deadline:
            run("umount", "-l", str(mount_point))
            raise AssertionError(f"{mount_point} still busy at teardown: {done.stderr.strip()}")
        time.sleep(0.1)


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def fill(path: Path, size: int) -> None:
    """A file of ``size`` real (allocated) bytes."""
    chunk = bytes(1 << 20)
    with open(path, "wb") as f:
        while size > 0:
            size -= f.write(chunk[:min(size, len(chunk))])
        f.flush()
        os.fsync(f.fileno())


def fill_up(path: Path) -> None:
    """A file that takes every byte the file system has left (another program's, as far as a broker knows)."""
    with open(path, "wb", buffering=0) as f:
        for size in (1 << 20, 4096, 1):
            chunk = bytes(size)
            with contextlib.suppress(OSError):  # ENOSPC: on to the smaller pieces
                while True:
                    f.write(chunk)
