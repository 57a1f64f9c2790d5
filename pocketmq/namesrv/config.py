"""Name server configuration (``rmq-namesrv --config FILE`` takes these keys in camelCase)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True, slots=True)
class NamesrvConfig:
    #: Address the name server binds to (``--listen``).
    listen_host: str = "0.0.0.0"
    #: Its port (``--port``); 0 picks a free one.
    listen_port: int = 9876
    # Units as RocketMQ's keys have them, so its .properties files read the same: milliseconds, except where
    # the key says Seconds.
    #: How often the liveness scan runs, ms (RocketMQ 4: every 10 s).
    scan_not_active_broker_interval: int = field(default=10_000, metadata={"unit": "ms"})
    #: A broker silent this long is dropped, ms (RocketMQ's BROKER_CHANNEL_EXPIRED_TIME, 120 s).
    broker_channel_expired_time: int = field(default=120_000, metadata={"unit": "ms"})
    #: Client connections silent this long are closed, s.
    server_channel_max_idle_time_seconds: int = 120
    #: Where the KV configuration (``PUT_KV_CONFIG``) is kept across restarts.
    kv_config_path: str = field(default=str(Path.home() / "namesrv" / "kvConfig.json"),
                                metadata={"default": "~/namesrv/kvConfig.json"})
    #: Put the ORDER_TOPIC_CONFIG KV value into routes, as RocketMQ's ``orderMessageEnable``.
    order_message_enable: bool = False
    #: Connections served at once; more are closed when accepted.
    max_connections: int = 4096
    #: Largest frame accepted; a bigger one is answered with an error and the connection closed.
    max_frame_length: int = 16 * 1024 * 1024
    # --- metrics ---
    #: Port of the Prometheus ``/metrics`` endpoint (``--metrics-port``); None: no metrics at all.
    metrics_port: int | None = None
    # --- end metrics ---

    def __post_init__(self) -> None:
        if not 0 <= self.listen_port <= 65535:
            raise ValueError(f"listenPort {self.listen_port} out of range")
        if self.scan_not_active_broker_interval <= 0 or self.broker_channel_expired_time <= 0:
            raise ValueError("scan interval and broker expiry must be positive")
