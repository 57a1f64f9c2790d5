"""Per-call metrics of the proxy: latency and count by method and ``apache.rocketmq.v2.Code``
(``pocketmq_proxy_rpc_latency_seconds``), the clients connected by type (``pocketmq_proxy_clients``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from prometheus_client import Histogram

from pocketmq.proxy.apis import definition_pb2 as pb
from pocketmq.remoting.metrics import LATENCY_BUCKETS, Metrics

Timer = Callable[[int, float], None]
"""``timer(code, seconds)``: one finished call."""


class CallMetrics:
    """The proxy's metrics in a :class:`~pocketmq.remoting.metrics.Metrics` registry (its own, or the broker's in
    local mode)."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self.latency = Histogram("pocketmq_proxy_rpc_latency_seconds",
                                 "Time to answer a gRPC call, by method and apache.rocketmq.v2.Code",
                                 ["method", "code"], buckets=LATENCY_BUCKETS, registry=metrics.registry)

    def timer(self, method: str) -> Timer:
        children: dict[int, Callable[[float], None]] = {}

        def observe(code: int, seconds: float) -> None:
            child = children.get(code)
            if child is None:
                name = pb.Code.Name(code) if code in pb.Code.values() else str(code)
                child = children[code] = self.latency.labels(method, name).observe
            child(seconds)

        return observe

    def clients_gauge(self, source: Callable[[], Iterable[str]]) -> None:
        """``pocketmq_proxy_clients{type}`` read from ``source`` (each client's type name) at scrape time."""

        def samples() -> Iterable[tuple[Sequence[str], float]]:
            return [((kind,), float(count)) for kind, count in sorted(Counter(source()).items())]

        self.metrics.gauge("pocketmq_proxy_clients", "gRPC clients this proxy serves, by client type", ["type"],
                           samples)
