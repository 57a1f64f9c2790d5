"""Prometheus metrics for PocketMQ processes (``--metrics-port``), on ``prometheus_client``.

Shared by the name server and the broker, so it knows neither: a process builds a :class:`Metrics`,
registers callback gauges that read its own tables at scrape time (nothing to keep in sync on hot
paths), wraps its request handlers with :meth:`Metrics.instrument` (latency by request code) and serves
``/metrics`` with :class:`MetricsServer`, a small asyncio HTTP responder (no thread, bounded request size).

Metrics are off unless a port is given: without ``--metrics-port`` no handler is wrapped and nothing runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from pocketmq.common.logs import get_logger
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection, Handler, HandlerResult

__all__ = ["GaugeSource", "Metrics", "MetricsServer"]

log = get_logger("pocketmq.remoting.metrics")

#: Request latency buckets (seconds): sends answer in well under a millisecond, SYNC_MASTER waits up to
#: slaveTimeout (3 s),
#: long-polling pulls are held up to 15-30 s.
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                   15.0, 30.0)
#: Largest HTTP request head we read before answering (a scrape is one short GET).
MAX_REQUEST_HEAD = 8192

GaugeSource = Callable[[], Iterable[tuple[Sequence[str], float]]]
"""A callback returning ``(label values, value)`` pairs, read at every scrape."""


class _CallbackCollector(Collector):
    """Gauges computed at scrape time from callbacks."""

    def __init__(self) -> None:
        self._gauges: list[tuple[str, str, tuple[str, ...], GaugeSource]] = []

    def add(self, name: str, documentation: str, labels: Sequence[str], source: GaugeSource) -> None:
        self._gauges.append((name, documentation, tuple(labels), source))

    def collect(self) -> Iterator[GaugeMetricFamily]:
        for name, documentation, labels, source in self._gauges:
            family = GaugeMetricFamily(name, documentation, labels=list(labels))
            try:
                for values, value in source():
                    family.add_metric([str(v) for v in values], float(value))
            except Exception:  # a failing source must not break the whole scrape
                continue
            yield family


class Metrics:
    """One process's registry with the request-latency histogram every process has."""

    def __init__(self, process: str) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.process = process
        self.request_latency = Histogram(
            "pocketmq_request_latency_seconds", "Time from a request's dispatch to its response, by request code",
            ["process", "code"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.requests_failed = Counter(
            "pocketmq_requests_failed", "Requests whose handler raised, by request code", ["process", "code"],
            registry=self.registry)
        self._callbacks = _CallbackCollector()
        self.registry.register(self._callbacks)

    def counter(self, name: str, documentation: str, labels: Sequence[str]) -> Counter:
        return Counter(name, documentation, list(labels), registry=self.registry)

    def gauge(self, name: str, documentation: str, labels: Sequence[str], source: GaugeSource) -> None:
        self._callbacks.add(name, documentation, labels, source)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def instrument(self, handlers: dict[int, Handler],
                   on_response: Callable[[RemotingCommand, RemotingCommand | None], None] | None = None) -> None:
        """Wrap every handler in ``handlers`` (in place) to time it; ``on_response`` sees each answer."""
        for code in list(handlers):
            handlers[code] = self._wrap(code, handlers[code], on_response)

    def _wrap(self, code: int, handler: Handler,
              on_response: Callable[[RemotingCommand, RemotingCommand | None], None] | None) -> Handler:
        observe = self.request_latency.labels(self.process, str(code)).observe  # bound once, not per request
        failed = self.requests_failed.labels(self.process, str(code))

        async def finish(req: RemotingCommand, pending: Awaitable[RemotingCommand | None],
                         started: float) -> RemotingCommand | None:
            try:
                resp = await pending
            except Exception:
                failed.inc()
                raise
            finally:
                observe(time.perf_counter() - started)
            if on_response is not None:
                on_response(req, resp)
            return resp

        def timed(req: RemotingCommand, conn: Connection) -> HandlerResult:
            started = time.perf_counter()
            try:
                result = handler(req, conn)
            except Exception:
                failed.inc()
                observe(time.perf_counter() - started)
                raise
            if result is None or isinstance(result, RemotingCommand):
                observe(time.perf_counter() - started)
                if on_response is not None:
                    on_response(req, result)
                return result
            if inspect.isawaitable(result):
                return finish(req, result, started)
            return result

        return timed


class MetricsServer:
    """``GET /metrics`` (any path, in fact) answered with the registry's text exposition."""

    def __init__(self, metrics: Metrics, host: str, port: int) -> None:
        self.metrics = metrics
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None

    @property
    def bound_port(self) -> int:
        assert self._server is not None and self._server.sockets
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        """Listen; logs ``metrics_listening`` with the bound port (tools read it when they asked for port 0)."""
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        log.info("metrics_listening", process=self.metrics.process, port=self.bound_port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5.0)
            if len(head) > MAX_REQUEST_HEAD:
                raise ValueError("request head too large")
            method = head.split(b" ", 1)[0]
            if method not in (b"GET", b"HEAD"):
                writer.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            else:
                body = self.metrics.render()
                writer.write(f"HTTP/1.1 200 OK\r\nContent-Type: {CONTENT_TYPE_LATEST}\r\n"
                             f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode())
                if method == b"GET":
                    writer.write(body)
            await asyncio.wait_for(writer.drain(), 5.0)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError, OSError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
