"""Process bookkeeping through ``/proc``: CPU time and memory of a set of PIDs, the members of a session we
started, CPU pinning of every thread, free loopback ports.

Everything here addresses processes by PID. The benchmark starts each server in a session of its own
(``start_new_session=True``), so "the server" is the set of processes whose session id is the PID we got
from ``Popen`` — never a name match, which could hit other people's processes.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_PROC = Path("/proc")
#: Fields of ``/proc/<pid>/stat`` after the command name (which may hold spaces and parentheses).
_STAT_STATE, _STAT_SESSION, _STAT_UTIME, _STAT_STIME = 0, 3, 11, 12


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return raw.rsplit(")", 1)[1].split()


def session_members(session_id: int) -> list[int]:
    """PIDs of live processes in session ``session_id`` (a server started with ``start_new_session``)."""
    members = []
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields is not None and fields[_STAT_STATE] != "Z" and int(fields[_STAT_SESSION]) == session_id:
            members.append(int(entry.name))
    return members


def cpu_seconds(pids: Iterable[int]) -> float:
    """User + system CPU seconds of these processes (all their threads); a process gone counts as 0."""
    total = 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        fields = _stat_fields(pid)
        if fields is not None:
            total += (int(fields[_STAT_UTIME]) + int(fields[_STAT_STIME])) / ticks
    return total


def rss_bytes(pids: Iterable[int]) -> int:
    """Resident memory of these processes (VmRSS), summed."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in (_PROC / str(pid) / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
                    break
    return total


def all_cpus() -> set[int]:
    return set(os.sched_getaffinity(0)) | set(range(os.cpu_count() or 1))


def pin_threads(pids: Iterable[int], cpus: set[int]) -> None:
    """Set the CPU affinity of every thread of these processes (``sched_setaffinity(pid)`` alone moves only
    the main thread; threads created later inherit their creator's mask)."""
    for pid in pids:
        try:
            tids = [int(t.name) for t in (_PROC / str(pid) / "task").iterdir()]
        except OSError:
            continue
        for tid in tids:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, cpus)


@dataclass(frozen=True)
class Placement:
    """Where the client and the servers run: one CPU each when ``pinned`` (and there are two or more)."""

    client: set[int]
    server: set[int]

    @staticmethod
    def choose(pinned: bool) -> Placement:
        cpus = sorted(all_cpus())
        if pinned and len(cpus) >= 2:
            return Placement({cpus[0]}, {cpus[-1]})
        return Placement(set(cpus), set(cpus))

    @staticmethod
    def one_cpu() -> Placement:
        """Client and servers on the same CPU: a request hands the CPU straight to the server instead of
        waking an idle one (the other W3 placement)."""
        cpus = sorted(all_cpus())
        return Placement({cpus[0]}, {cpus[0]})

    def apply(self, server_pids: Iterable[int], floating_pids: Iterable[int] = ()) -> None:
        """Pin the servers and this (client) process; ``floating_pids`` may run on any CPU."""
        floating = set(floating_pids)
        pin_threads([pid for pid in server_pids if pid not in floating], self.server)
        pin_threads(floating, all_cpus())
        pin_threads([os.getpid()], self.client)


def free_port() -> int:
    """A loopback port free right now (the server binds it a moment later; a clash shows as a failed start)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def port_open(port: int, timeout: float = 0.5) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=timeout):
        return True
    return False
