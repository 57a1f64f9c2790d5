"""What this machine allows a Python broker, measured in the same run as the brokers.

* **asyncio echo round trip** — a uvloop ``Protocol`` echo server in a child process and a uvloop client
  here, one 1 KiB message at a time (:data:`ECHO_ROUNDS`): the floor under W3's latency. Measured with idle
  CPUs and again with every CPU kept busy by a spinning process at nice 19 — on virtual CPUs the wake-up of
  an idle CPU dominates a loopback round trip, and a busy CPU wakes faster.
* **raw loopback TCP throughput** — ``sendall`` of 1 MiB buffers to a child process doing ``recv_into``
  (:data:`TCP_BYTES` at most, :data:`TCP_SECONDS` at most): the ceiling of bytes a client can hand a server.
* **raw appends to a warm mmap** — 1 KiB and 128 B slice assignments into a mapped file whose pages were
  all touched first: the ceiling of a Python store's append loop.

Children are ``multiprocessing`` spawn processes, joined and, if needed, terminated through their handles.
"""

from __future__ import annotations

import asyncio
import contextlib
import mmap
import multiprocessing
import os
import socket
import tempfile
import time
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, cast

import uvloop

from pocketmq.bench.common import percentiles
from pocketmq.bench.compare.proc import Placement, pin_threads

ECHO_ROUNDS = 5_000
ECHO_SIZE = 1024
ECHO_SECONDS = 20.0
TCP_BYTES = 4 << 30
TCP_SECONDS = 3.0
TCP_CHUNK = 1 << 20
MMAP_BYTES = 256 << 20
PAGE = 4096
_SPAWN = multiprocessing.get_context("spawn")


@dataclass(frozen=True)
class Limits:
    """The measured limits; latencies in µs, throughput in bytes/s and appends/s."""

    echo_idle_us: dict[str, float]
    echo_busy_us: dict[str, float]
    tcp_bytes_per_s: float
    mmap_appends_per_s: dict[int, float]

    def tcp_messages_per_s(self, size: int) -> float:
        return self.tcp_bytes_per_s / size

    def as_dict(self) -> dict[str, Any]:
        return {"echo_idle_us": self.echo_idle_us, "echo_busy_us": self.echo_busy_us,
                "tcp_bytes_per_s": self.tcp_bytes_per_s,
                "mmap_appends_per_s": {str(k): v for k, v in self.mmap_appends_per_s.items()}}


# -- echo round trip -----------------------------------------------------------------------------------------


class _EchoServer(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not subclasses

    def data_received(self, data: bytes) -> None:
        self.transport.write(data)


async def _serve_echo(conn: Connection) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_EchoServer, "127.0.0.1", 0)
    conn.send(server.sockets[0].getsockname()[1])
    await loop.run_in_executor(None, conn.poll, ECHO_SECONDS * 3)  # until told to stop, at most this long
    server.close()


def _echo_child(conn: Connection) -> None:
    uvloop.run(_serve_echo(conn))


class _EchoClient(asyncio.Protocol):
    """Completes ``waiter`` when ``expected`` bytes have come back."""

    def __init__(self) -> None:
        self.expected = 0
        self.received = 0
        self.waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not subclasses

    def data_received(self, data: bytes) -> None:
        self.received += len(data)
        if self.received >= self.expected and self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)


async def _echo_rounds(port: int) -> array[float]:
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.create_connection(_EchoClient, "127.0.0.1", port)
    sock = transport.get_extra_info("socket")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    payload = os.urandom(ECHO_SIZE)
    samples = array("d")
    deadline = time.monotonic() + ECHO_SECONDS
    try:
        for _ in range(ECHO_ROUNDS):
            if time.monotonic() >= deadline:
                break
            protocol.expected += ECHO_SIZE
            protocol.waiter = loop.create_future()
            begin = time.perf_counter()
            transport.write(payload)
            await asyncio.wait_for(protocol.waiter, 5.0)
            samples.append((time.perf_counter() - begin) * 1e6)
    finally:
        transport.close()
    return samples


@contextlib.contextmanager
def _busy_cpus(enabled: bool) -> Iterator[None]:
    """One spinning process per CPU at nice 19 while the block runs (none when not ``enabled``)."""
    spinners = [_SPAWN.Process(target=_spin, args=(ECHO_SECONDS * 2,), daemon=True)
                for _ in range(os.cpu_count() or 1)] if enabled else []
    for spinner in spinners:
        spinner.start()
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.terminate()
            spinner.join(5)


def _spin(seconds: float) -> None:
    os.nice(19)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def echo_round_trip(*, busy: bool) -> dict[str, float]:
    """p50/p99/... of the echo round trip in µs, idle or with every CPU busy at nice 19."""
    parent, child_end = _SPAWN.Pipe()
    server = _SPAWN.Process(target=_echo_child, args=(child_end,), daemon=True)
    server.start()
    try:
        if not parent.poll(30):
            raise RuntimeError("the echo server did not start")
        port = parent.recv()
        with _busy_cpus(busy):
            samples = uvloop.run(_echo_rounds(port))
        return percentiles(samples)
    finally:
        parent.send("stop")
        server.join(5)
        if server.is_alive():
            server.terminate()
            server.join(5)


# -- loopback TCP throughput ---------------------------------------------------------------------------------


def _sink_child(conn: Connection) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        conn.send(listener.getsockname()[1])
        listener.settimeout(30)
        peer, _ = listener.accept()
        buffer = bytearray(TCP_CHUNK)
        total = 0
        with peer:
            while True:
                n = peer.recv_into(buffer)
                if not n:
                    break
                total += n
        conn.send(total)


def tcp_throughput(placement: Placement) -> float:
    """Bytes/s from this process to a child process over one loopback TCP connection."""
    parent, child_end = _SPAWN.Pipe()
    sink = _SPAWN.Process(target=_sink_child, args=(child_end,), daemon=True)
    sink.start()
    try:
        if not parent.poll(30):
            raise RuntimeError("the TCP sink did not start")
        port = parent.recv()
        assert sink.pid is not None
        placement.apply([sink.pid])
        chunk = memoryview(os.urandom(TCP_CHUNK))
        sent = 0
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            begin = time.perf_counter()
            deadline = time.monotonic() + TCP_SECONDS
            while sent < TCP_BYTES and time.monotonic() < deadline:
                sock.sendall(chunk)
                sent += TCP_CHUNK
            sock.shutdown(socket.SHUT_WR)
            if not parent.poll(30):
                raise RuntimeError("the TCP sink did not report")
            received = int(parent.recv())
            elapsed = time.perf_counter() - begin
        return received / elapsed
    finally:
        sink.join(5)
        if sink.is_alive():
            sink.terminate()
            sink.join(5)


# -- warm mmap appends ---------------------------------------------------------------------------------------


def mmap_appends(sizes: tuple[int, ...] = (1024, 128), directory: str | None = None) -> dict[int, float]:
    """Appends/s of ``size``-byte slice assignments into a warm ``MMAP_BYTES`` mapping, per size."""
    rates = {}
    with tempfile.TemporaryDirectory(prefix="rmq-bench-mmap-", dir=directory) as tmp:
        path = Path(tmp) / "commitlog"
        with path.open("w+b") as handle:
            handle.truncate(MMAP_BYTES)
            with mmap.mmap(handle.fileno(), MMAP_BYTES) as mapped:
                for offset in range(0, MMAP_BYTES, PAGE):  # warm: every page faulted in and dirty
                    mapped[offset] = 1
                for size in sizes:
                    rates[size] = _append_loop(mapped, os.urandom(size))
    return rates


def _append_loop(mapped: mmap.mmap, payload: bytes) -> float:
    size = len(payload)
    end = MMAP_BYTES - size
    position = 0
    count = 0
    begin = time.perf_counter()
    while position <= end:
        mapped[position:position + size] = payload
        position += size
        count += 1
    return count / (time.perf_counter() - begin)


def measure(placement: Placement) -> Limits:
    """All the limits; the echo round trips run unpinned (like W3), the TCP throughput with ``placement``."""
    pin_threads([os.getpid()], Placement.choose(False).client)
    idle = echo_round_trip(busy=False)
    busy = echo_round_trip(busy=True)
    tcp = tcp_throughput(placement)
    appends = mmap_appends()
    return Limits(idle, busy, tcp, appends)
