"""Client-side message ids (``UNIQ_KEY``) and client ids.

A ``UNIQ_KEY`` is the upper-case hex of 16 bytes for an IPv4 host (28 for an IPv6-only host)::

    offset  size  field
    0       4/16  IP address of this host
    4/16    2     pid, low 16 bits
    6/18    4     a per-process random int (RocketMQ uses its class loader's hashCode)
    10/22   4     milliseconds since the start of the current month (local time), low 32 bits
    14/26   2     counter, wrapping at 65536

The first three fields never change in a process, so their hex is computed once (``prefix``), and the hex of
prefix + time is kept for the current millisecond; an id then costs one clock read, one counter step and two
table lookups (the counter's two bytes as hex), a fraction of a format per id.

A month holds at most 31 days = 2.68e9 ms, which does not fit a signed int: RocketMQ writes the value through a
Java ``int`` cast, and we write the same 32 bits unsigned, so the bytes agree. When the clock crosses into the
next month (or steps back before the current one) the month start is computed again.
"""

from __future__ import annotations

import ipaddress
import itertools
import os
import random
import socket
import time
from collections.abc import Callable
from datetime import datetime
from functools import cache

__all__ = ["UniqIdGenerator", "client_id", "default_generator", "local_ip", "next_uniq_id", "wall_clock_ms"]


def wall_clock_ms() -> int:
    """Milliseconds since the epoch (wall clock: the id encodes a calendar month)."""
    return time.time_ns() // 1_000_000


def _probe_ip(family: socket.AddressFamily, target: str) -> str | None:
    """The local address the OS would route ``target`` from (a UDP connect sends no packet)."""
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            sock.connect((target, 9))
            address: str = sock.getsockname()[0]
            return address
    except OSError:
        return None


@cache
def local_ip() -> str:
    """This host's preferred address: IPv4 if there is a routable one, else IPv6, else ``127.0.0.1``."""
    for family, target in ((socket.AF_INET, "10.255.255.255"), (socket.AF_INET6, "fd00::1")):
        address = _probe_ip(family, target)
        if address and not ipaddress.ip_address(address).is_unspecified:
            return address
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def client_id(
    *, ip: str | None = None, instance_name: str | None = None, unit_name: str | None = None
) -> str:
    """The id a client announces in heartbeats: ``ip@instance`` (instance defaults to the pid), then
    ``@unit`` when a unit name is set, as RocketMQ's ``buildMQClientId`` does."""
    instance = instance_name if instance_name else str(os.getpid())
    base = f"{ip or local_ip()}@{instance}"
    return f"{base}@{unit_name}" if unit_name else base


def _month_bounds(now_ms: int) -> tuple[int, int]:
    """Start of the local-time month containing ``now_ms`` and start of the next one, in epoch ms."""
    moment = datetime.fromtimestamp(now_ms / 1000)
    start = moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    if start.month == 12:
        following = start.replace(year=start.year + 1, month=1)
    else:
        following = start.replace(month=start.month + 1)
    return int(start.timestamp() * 1000), int(following.timestamp() * 1000)


#: Upper-case hex of each byte value: an id's counter is two lookups, not a format.
_HEX_BYTES = tuple(f"{i:02X}" for i in range(256))


class UniqIdGenerator:
    """Makes ``UNIQ_KEY`` values; one per process is enough (:func:`default_generator`).

    Everything is injectable for tests: the address, pid, the per-process int, the clock (epoch ms) and the
    counter's first value.
    """

    __slots__ = ("_clock", "_counter", "_divisor", "_head", "_head_ms", "_month_end", "_month_start", "prefix")

    def __init__(
        self,
        *,
        ip: str | None = None,
        pid: int | None = None,
        process_int: int | None = None,
        clock: Callable[[], int] = wall_clock_ms,
        counter_start: int = 0,
    ) -> None:
        address = ipaddress.ip_address(ip or local_ip())
        pid_bits = (os.getpid() if pid is None else pid) & 0xFFFF
        process_bits = (random.getrandbits(32) if process_int is None else process_int) & 0xFFFFFFFF
        fixed = address.packed + pid_bits.to_bytes(2, "big") + process_bits.to_bytes(4, "big")
        self.prefix: str = fixed.hex().upper()
        # The default clock is read as time.time_ns() // 10**6 inline (no Python-level call per id).
        self._clock, self._divisor = (time.time_ns, 1_000_000) if clock is wall_clock_ms else (clock, 1)
        self._counter = itertools.count(counter_start)
        self._month_start, self._month_end = _month_bounds(clock())
        #: The millisecond whose ``prefix + time`` hex is ``_head`` (-1: none yet).
        self._head_ms = -1
        self._head = ""

    def next_id(self) -> str:
        """A new ``UNIQ_KEY``: the fixed prefix, then month-relative ms and the counter, 12 hex digits."""
        now = self._clock() // self._divisor
        if now != self._head_ms:
            self._new_head(now)
        # next() on itertools.count is atomic under the GIL, so the blocking facade's thread is safe too.
        counter = next(self._counter) & 0xFFFF
        return self._head + _HEX_BYTES[counter >> 8] + _HEX_BYTES[counter & 0xFF]

    def _new_head(self, now: int) -> None:
        """Prefix + time of millisecond ``now``. The head is stored before its millisecond, so a thread that
        sees ``_head_ms == now`` also sees its head (at worst an id carries the previous millisecond)."""
        if not self._month_start <= now < self._month_end:
            self._month_start, self._month_end = _month_bounds(now)
        self._head = f"{self.prefix}{(now - self._month_start) & 0xFFFFFFFF:08X}"
        self._head_ms = now


_default: UniqIdGenerator | None = None


def default_generator() -> UniqIdGenerator:
    """The process-wide generator, created on first use."""
    global _default
    if _default is None:
        _default = UniqIdGenerator()
    return _default


def _forget_default() -> None:
    """After ``fork`` the child has another pid, so its ids need another prefix."""
    global _default
    _default = None


os.register_at_fork(after_in_child=_forget_default)


def next_uniq_id() -> str:
    """A new ``UNIQ_KEY`` from the process-wide generator."""
    return default_generator().next_id()
