"""Broker configuration: RocketMQ's flat ``broker.properties`` split into broker and store settings.

Keys are RocketMQ's (reference §9). Broker keys are the camelCase names of :class:`BrokerConfig`'s
fields; store keys are those of :data:`pocketmq.store.config.PROPERTY_NAMES`. A key that is neither is an error.
Durations keep RocketMQ's units (``registerNameServerPeriod`` in ms) so existing files mean the same here.
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pocketmq.common.config import ConfigError, config_key, format_config, load_config
from pocketmq.ha.config import PROPERTY_NAMES as HA_PROPERTY_NAMES
from pocketmq.ha.config import HAConfig
from pocketmq.store.config import PROPERTY_NAMES, BrokerRole, FlushDiskType, StoreConfig

__all__ = ["BrokerConfig", "BrokerRole", "FlushDiskType", "format_broker_config", "load_broker_config"]

#: Keys RocketMQ's sample files carry that PocketMQ accepts and ignores (with the reason in the README).
IGNORED_KEYS = frozenset({"brokerIP2", "transientStorePoolEnable", "sendMessageThreadPoolNums",
                          "pullMessageThreadPoolNums", "useReentrantLockWhenPutMessage"})


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerConfig:
    broker_cluster_name: str = "DefaultCluster"
    broker_name: str = field(default_factory=socket.gethostname)
    broker_id: int = 0
    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER
    namesrv_addr: str | None = None
    listen_host: str = "0.0.0.0"
    listen_port: int = 10911
    #: The address registered with name servers and written into records (RocketMQ's brokerIP1).
    broker_ip1: str = field(default="127.0.0.1", metadata={"key": "brokerIP1"})
    auto_create_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    default_topic_queue_nums: int = 8
    broker_permission: int = 6
    register_name_server_period: int = 30_000
    register_broker_timeout_mills: int = 6000
    #: A full registration of many topics goes in RocketMQ's compressed form (see pocketmq.broker.registration).
    compressed_register: bool = True
    #: How often consumer offsets, subscription groups and delay offsets are written (ms).
    flush_consumer_offset_interval: int = 5000
    client_channel_max_idle_time_seconds: int = 120
    slave_read_enable: bool = False
    max_connections: int = 4096
    max_in_flight_per_connection: int = 4096
    max_frame_length: int = 16 * 1024 * 1024
    region_id: str = "DefaultRegion"
    trace_on: bool = True
    #: SQL92 subscriptions (``expressionType=SQL92``) are served only when true, as in RocketMQ (default false).
    enable_property_filter: bool = False
    #: Plain ACL (RocketMQ 4.9): every request is checked against :attr:`plain_acl_file` (reloaded on change).
    acl_enable: bool = False
    #: The ACL file (RocketMQ reads ``$ROCKETMQ_HOME/conf/plain_acl.yml``, or ``-Drocketmq.acl.plain.file``).
    plain_acl_file: str = "conf/plain_acl.yml"
    #: Create the message-trace topic (``msgTraceTopicName``, one queue) at start, as RocketMQ does.
    trace_topic_enable: bool = False
    msg_trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"
    # --- transactions ---
    #: A half message with no outcome this long (ms) after it was born is checked back with its producer.
    transaction_time_out: int = 6000
    #: Check-backs per half message; one more and it is discarded to TRANS_CHECK_MAX_TIME_TOPIC.
    transaction_check_max: int = 15
    #: How often the check-back service scans the half queue (ms).
    transaction_check_interval: int = 60_000
    #: Refuse prepared messages (NO_PERMISSION), as RocketMQ's rejectTransactionMessage.
    reject_transaction_message: bool = False
    # --- end transactions ---
    # --- metrics ---
    #: Port of the Prometheus ``/metrics`` endpoint (``--metrics-port``); None: no metrics at all.
    metrics_port: int | None = None
    # --- end metrics ---
    #: After an abnormal start, a master's whole wait for the name servers and its slave to take back the
    #: commit-log tail it lost (``broker.tail_recovery``, ms; 0 turns it off).
    ha_tail_recovery_timeout_ms: int = 10_000
    store: StoreConfig = field(default_factory=lambda: StoreConfig(store_path_root_dir="store"))
    #: Replication. ``haListenPort`` 0 means listenPort + 1 as RocketMQ forces it (any free port when
    #: listenPort is 0 too).
    ha: HAConfig = field(default_factory=lambda: HAConfig(ha_listen_port=0))

    def __post_init__(self) -> None:
        if self.broker_role is not BrokerRole.SLAVE and self.broker_id != 0:
            object.__setattr__(self, "broker_id", 0)  # RocketMQ forces masters to id 0
        if self.broker_role is BrokerRole.SLAVE and self.broker_id <= 0:
            raise ValueError("a SLAVE needs brokerId > 0")
        if not 0 <= self.listen_port <= 65535:
            raise ValueError(f"listenPort {self.listen_port} out of range")
        if self.register_name_server_period <= 0:
            raise ValueError("registerNameServerPeriod must be positive")
        if self.ha_tail_recovery_timeout_ms < 0:
            raise ValueError("haTailRecoveryTimeoutMs must be >= 0")
        if self.transaction_time_out < 0 or self.transaction_check_max < 0 or self.transaction_check_interval <= 0:
            raise ValueError("transactionTimeOut and transactionCheckMax must be >= 0, transactionCheckInterval > 0")

    @property
    def is_master(self) -> bool:
        return self.broker_role is not BrokerRole.SLAVE


def load_broker_config(props: Mapping[str, str], **overrides: Any) -> BrokerConfig:
    """Build a :class:`BrokerConfig` from ``.properties`` keys plus CLI ``overrides`` (field names).

    Store fields may be overridden with a ``store_`` prefix-free name that StoreConfig has
    (``store_path_root_dir``, ``flush_disk_type``...)."""
    broker_fields = {f.name for f in dataclasses.fields(BrokerConfig)} - {"store", "ha"}
    broker_keys = {config_key(f) for f in dataclasses.fields(BrokerConfig) if f.name not in ("store", "ha")}
    broker_props: dict[str, str] = {}
    store_props: dict[str, str] = {}
    ha_props: dict[str, str] = {}
    for key, value in props.items():
        if key in broker_keys:
            broker_props[key] = value
        if key in PROPERTY_NAMES:
            store_props[key] = value
        if key in HA_PROPERTY_NAMES:
            ha_props[key] = value
        if key not in broker_keys | set(PROPERTY_NAMES) | set(HA_PROPERTY_NAMES) | IGNORED_KEYS:
            known = sorted(broker_keys | set(PROPERTY_NAMES) | set(HA_PROPERTY_NAMES))
            raise ConfigError(f"unknown config key {key!r}; known keys: {', '.join(known)}")
    store_fields = {f.name for f in dataclasses.fields(StoreConfig)}
    ha_fields = {f.name for f in dataclasses.fields(HAConfig)}
    broker_over = {k: v for k, v in overrides.items() if k in broker_fields and v is not None}
    store_over = {k: v for k, v in overrides.items() if k in store_fields and v is not None and k not in broker_fields}
    ha_over = {k: v for k, v in overrides.items() if k in ha_fields and v is not None}
    unknown = set(overrides) - broker_fields - store_fields - ha_fields
    if unknown:
        raise ConfigError(f"unknown config fields {sorted(unknown)}")
    store_props.setdefault("storePathRootDir", "store")
    try:
        base = load_config(BrokerConfig, broker_props, **broker_over)
        store_over["broker_role"] = base.broker_role
        store_over.setdefault("store_host", f"{base.broker_ip1}:{base.listen_port}")
        store = StoreConfig.from_properties(store_props, **store_over)
        if "haListenHost" not in ha_props:
            ha_over.setdefault("ha_listen_host", default_ha_listen_host(base))
        if "haListenPort" not in ha_props:
            ha_over.setdefault("ha_listen_port", 0)  # 0: derived from the bound listen port at start
        ha = HAConfig.from_properties(ha_props, **ha_over)
        return dataclasses.replace(base, store=store, ha=ha)
    except (ValueError, TypeError) as exc:
        raise ConfigError(str(exc)) from None


def default_ha_listen_host(config: BrokerConfig) -> str:
    """``haListenHost`` when not configured: the broker's own address (brokerIP1), so the unauthenticated HA port
    is not opened on every interface by accident; ``listenHost`` when brokerIP1 is not an address of this host
    (a NAT or Docker advertised name), where binding to it would fail."""
    return config.broker_ip1 if _bindable(config.broker_ip1) else config.listen_host


def _bindable(host: str) -> bool:
    """Whether ``host`` is an address of this machine (a bind to it, port 0, succeeds)."""
    try:
        infos = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)
    except OSError:
        return False
    for family, kind, proto, _name, address in infos:
        try:
            with socket.socket(family, kind, proto) as probe:
                probe.bind(address)
            return True
        except OSError:
            continue
    return False


def format_broker_config(config: BrokerConfig) -> str:
    """The effective configuration, broker keys then store keys, as ``.properties`` text."""
    broker_part = format_config(config).splitlines()
    broker_part = [line for line in broker_part if not line.startswith(("store=", "ha="))]
    reverse = {v: k for k, v in PROPERTY_NAMES.items()}
    store_lines = [f"haListenHost={config.ha.ha_listen_host}",
                   f"haListenPort={config.ha.ha_listen_port}", f"haMasterAddress={config.ha.ha_master_address}",
                   f"slaveTimeout={int(config.ha.slave_timeout * 1000)}"]
    for f in dataclasses.fields(config.store):
        key = reverse.get(f.name)
        if key is None or key == "brokerRole":
            continue
        value = getattr(config.store, f.name)
        text = value.value if hasattr(value, "value") else ("true" if value is True else "false" if value is False
                                                           else str(value))
        store_lines.append(f"{key}={text}")
    return "\n".join(broker_part + store_lines) + "\n"
