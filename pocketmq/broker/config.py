"""Broker configuration: RocketMQ's flat ``broker.properties`` split into broker and store settings.

Keys are RocketMQ's. Broker keys are the camelCase names of :class:`BrokerConfig`'s
fields; store keys are those of :data:`pocketmq.store.config.PROPERTY_NAMES`. A key that is neither is an error.
Durations keep RocketMQ's units (``registerNameServerPeriod`` in ms) so existing files mean the same here.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pocketmq.common.config import ConfigError, config_key, format_config, load_config
from pocketmq.ha.config import PROPERTY_NAMES as HA_PROPERTY_NAMES
from pocketmq.ha.config import HAConfig
from pocketmq.store.config import PROPERTY_NAMES, BrokerRole, FlushDiskType, StoreConfig

__all__ = ["BrokerConfig", "BrokerRole", "FlushDiskType", "format_broker_config", "ha_address_host",
           "load_broker_config", "resolve_broker_ips"]

#: Keys RocketMQ's sample files carry that PocketMQ accepts and ignores (docs/design/decisions.md says why).
IGNORED_KEYS = frozenset({"transientStorePoolEnable", "sendMessageThreadPoolNums",
                          "pullMessageThreadPoolNums", "useReentrantLockWhenPutMessage"})


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerConfig:
    #: The cluster the broker registers under (``clusterList`` groups brokers by it).
    broker_cluster_name: str = "DefaultCluster"
    #: The broker group: a master and its slaves share it.
    broker_name: str = field(default_factory=socket.gethostname, metadata={"default": "the host's name"})
    #: 0 for a master (forced, as RocketMQ does), above 0 for a slave.
    broker_id: int = field(default=0, metadata={"unit": ""})
    #: ASYNC_MASTER, SYNC_MASTER (a send waits for a slave's acknowledgement) or SLAVE.
    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER
    #: Name servers to register with, ``;``-separated (``-n`` on the command line).
    namesrv_addr: str | None = None
    #: Address the broker's remoting port binds to.
    listen_host: str = "0.0.0.0"
    #: The broker's remoting port; 0 picks a free one.
    listen_port: int = 10911
    #: The address registered with name servers and written into records (RocketMQ's brokerIP1); a host name is
    #: resolved once at start and the address it resolves to is the one registered.
    broker_ip1: str = field(default="127.0.0.1", metadata={"key": "brokerIP1"})
    #: The address a master's slaves replicate from (RocketMQ's brokerIP2; empty: brokerIP1), a host name resolved
    #: at start as brokerIP1 is.
    broker_ip2: str | None = field(default=None, metadata={"key": "brokerIP2"})
    #: A send to an unknown topic creates it from ``TBW102`` (changeable at run time).
    auto_create_topic_enable: bool = True
    #: A consumer group is created on first use (changeable at run time).
    auto_create_subscription_group: bool = True
    #: Queues of an auto-created topic (at most what the client asks for).
    default_topic_queue_nums: int = 8
    #: PERM bits of the whole broker: 6 read and write, 4 read only, 2 write only (changeable at run time).
    broker_permission: int = field(default=6, metadata={"unit": ""})
    #: How often the broker registers with every name server.
    register_name_server_period: int = field(default=30_000, metadata={"unit": "ms"})
    #: Timeout of one registration request.
    register_broker_timeout_mills: int = 6000
    #: A full registration of 100 topics or more goes in RocketMQ's compressed form (Java name servers read it).
    compressed_register: bool = True
    #: How often consumer offsets, subscription groups and delay offsets are written (ms).
    flush_consumer_offset_interval: int = field(default=5000, metadata={"unit": "ms"})
    #: Client connections silent this long are closed.
    client_channel_max_idle_time_seconds: int = 120
    #: A master suggests pulling from a slave when a consumer reads data older than the memory share
    #: ``accessMessageInMemoryMaxRatio`` allows.
    slave_read_enable: bool = False
    #: Client connections served at once; more are closed when accepted.
    max_connections: int = 4096
    #: Requests of one connection handled at once; more are answered SYSTEM_BUSY.
    max_in_flight_per_connection: int = field(default=4096, metadata={"unit": "count"})
    #: Largest frame accepted; a bigger one is answered with an error and the connection closed.
    max_frame_length: int = 16 * 1024 * 1024
    #: ``MSG_REGION`` in every send response.
    region_id: str = "DefaultRegion"
    #: ``TRACE_ON`` in every send response.
    trace_on: bool = True
    #: SQL92 subscriptions (``expressionType=SQL92``) are served only when true, as in RocketMQ (default false).
    enable_property_filter: bool = False
    #: Plain ACL (RocketMQ 4.9): every request is checked against :attr:`plain_acl_file` (reloaded on change).
    acl_enable: bool = False
    #: The ACL file; empty: ``$ROCKETMQ_HOME/conf/plain_acl.yml`` (where RocketMQ reads it), then
    #: ``./conf/plain_acl.yml``, and no start without one (see :mod:`pocketmq.remoting.plain_acl.service`).
    plain_acl_file: str = ""
    #: Create the message-trace topic (``msgTraceTopicName``, one queue) at start, as RocketMQ does.
    trace_topic_enable: bool = False
    #: The message-trace topic.
    msg_trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"
    # --- transactions ---
    #: A half message with no outcome this long (ms) after it was born is checked back with its producer.
    transaction_time_out: int = field(default=6000, metadata={"unit": "ms"})
    #: Check-backs per half message; one more and it is discarded to TRANS_CHECK_MAX_TIME_TOPIC.
    transaction_check_max: int = field(default=15, metadata={"unit": "count"})
    #: How often the check-back service scans the half queue (ms).
    transaction_check_interval: int = field(default=60_000, metadata={"unit": "ms"})
    #: Refuse prepared messages (NO_PERMISSION), as RocketMQ's rejectTransactionMessage.
    reject_transaction_message: bool = False
    # --- end transactions ---
    #: RECALL_MESSAGE is served (a timer message recalled before it is due), off by default as in RocketMQ.
    recall_message_enable: bool = False
    # --- POP (RocketMQ 5) ---
    #: Queues of the revive topic ``rmq_sys_REVIVE_LOG_<cluster>`` (POP's check points and acks).
    revive_queue_num: int = field(default=8, metadata={"unit": "count"})
    #: How often expired POP messages are looked for and revived (ms).
    revive_interval: int = field(default=200, metadata={"unit": "ms"})
    #: Percent of pops that read the POP retry topic before the topic itself.
    pop_from_retry_probability: int = field(default=20, metadata={"unit": "%"})
    #: Messages of one queue a group may hold in flight; a queue past it is skipped by pops.
    pop_inflight_message_threshold: int = field(default=10_000, metadata={"unit": "count"})
    #: Pops parked per (topic, group, queue); beyond, POLLING_FULL.
    pop_polling_size: int = field(default=1024, metadata={"unit": "count"})
    #: Pops parked in all; beyond, POLLING_FULL.
    max_pop_polling_size: int = field(default=100_000, metadata={"unit": "count"})
    #: The shortest invisible time a pop may ask for (ms); a change of invisible time may go down to 0.
    min_invisible_time_mills_for_recv: int = field(default=1000, metadata={"unit": "ms"})
    #: The longest invisible time a pop or a change of invisible time may ask for (ms).
    max_invisible_time_mills: int = field(default=12 * 3600 * 1000, metadata={"unit": "ms"})
    #: How often the POP state snapshot is written when something changed (ms).
    pop_state_snapshot_interval: int = field(default=1000, metadata={"unit": "ms"})
    # --- end POP ---
    # --- gRPC proxy in the broker's process (RocketMQ 5 clients, "local mode") ---
    #: Serve ``apache.rocketmq.v2.MessagingService`` in this process (RocketMQ's ``mqbroker --enable-proxy``).
    enable_grpc_proxy: bool = False
    #: The gRPC port; 0 picks a free one (the start logs ``proxy_started`` with the address).
    grpc_server_port: int = 8081
    #: A ``rmq-proxy`` properties file with the proxy's other settings (its name servers and port are the broker's).
    proxy_config_file: str = ""
    # --- end gRPC proxy ---
    # --- metrics ---
    #: Port of the Prometheus ``/metrics`` endpoint (``--metrics-port``); None: no metrics at all.
    metrics_port: int | None = None
    # --- end metrics ---
    # --- controller mode ---
    #: Controller mode (RocketMQ 5, RIP-44): the controllers decide which replica of the group is the master;
    #: ``brokerId`` is then this replica's id in the group (>= 1; -1: the controller assigns one) and ``brokerRole``
    #: is ignored.
    enable_controller_mode: bool = False
    #: Every controller, ``host:port;host:port`` (the name servers' addresses when they carry it).
    controller_addr: str = ""
    #: How often a broker tells every controller it is alive (ms; RocketMQ's default is 1000).
    broker_heartbeat_interval: int = field(default=500, metadata={"unit": "ms"})
    #: A broker silent this long (ms) is dead for the controllers (RocketMQ's default is 10000).
    controller_heart_beat_timeout_mills: int = 3000
    #: How often a broker asks the controller for its group's state (ms; notifications come at once anyway).
    sync_broker_metadata_period: int = field(default=1000, metadata={"unit": "ms"})
    #: How often a master checks whether its SyncStateSet must shrink or grow (ms; RocketMQ's default is 5000).
    check_sync_state_set_period: int = field(default=1000, metadata={"unit": "ms"})
    #: How often a broker asks any controller who leads them (ms).
    sync_controller_metadata_period: int = field(default=10_000, metadata={"unit": "ms"})
    #: Lower wins an election among equally up-to-date replicas.
    broker_election_priority: int = field(default=2**31 - 1, metadata={"unit": ""})
    #: How often a slave copies its master's metadata (topics, groups, offsets...; ms). PocketMQ's key.
    slave_synchronize_interval: int = field(default=10_000, metadata={"unit": "ms"})
    # --- end controller mode ---
    #: After an abnormal start, a master's whole wait for the name servers and its slave to take back the
    #: commit-log tail it lost (``broker.tail_recovery``, ms; 0 turns it off).
    ha_tail_recovery_timeout_ms: int = 10_000
    #: Request-reply: also store each reply delivered to its requester, in ``<cluster>_REPLY_TOPIC`` (a reply
    #: that could not be delivered is never stored). RocketMQ 4.9 defaults to true; PocketMQ to false, so that
    #: replies cost no disk and no consumer of the reply topic ever sees them (changeable at run time).
    store_reply_message_enable: bool = False
    store: StoreConfig = field(default_factory=lambda: StoreConfig(store_path_root_dir="store"))
    #: Replication. ``haListenPort`` 0 means listenPort + 1 as RocketMQ forces it (any free port when
    #: listenPort is 0 too).
    ha: HAConfig = field(default_factory=lambda: HAConfig(ha_listen_port=0))

    def __post_init__(self) -> None:
        if self.enable_controller_mode:
            self._check_controller_mode()
        elif self.broker_role is not BrokerRole.SLAVE and self.broker_id != 0:
            object.__setattr__(self, "broker_id", 0)  # RocketMQ forces masters to id 0
        if self.broker_role is BrokerRole.SLAVE and self.broker_id <= 0 and not self.enable_controller_mode:
            raise ValueError("a SLAVE needs brokerId > 0")
        if not 0 <= self.listen_port <= 65535:
            raise ValueError(f"listenPort {self.listen_port} out of range")
        if self.register_name_server_period <= 0:
            raise ValueError("registerNameServerPeriod must be positive")
        if self.ha_tail_recovery_timeout_ms < 0:
            raise ValueError("haTailRecoveryTimeoutMs must be >= 0")
        if self.transaction_time_out < 0 or self.transaction_check_max < 0 or self.transaction_check_interval <= 0:
            raise ValueError("transactionTimeOut and transactionCheckMax must be >= 0, transactionCheckInterval > 0")
        if self.revive_queue_num <= 0 or self.revive_interval <= 0 or self.pop_state_snapshot_interval <= 0:
            raise ValueError("reviveQueueNum, reviveInterval and popStateSnapshotInterval must be positive")
        if not 0 <= self.min_invisible_time_mills_for_recv <= self.max_invisible_time_mills:
            raise ValueError("need 0 <= minInvisibleTimeMillsForRecv <= maxInvisibleTimeMills")

    def _check_controller_mode(self) -> None:
        if not self.controller_addr.strip():
            raise ValueError("enableControllerMode=true needs controllerAddr")
        if self.broker_id == 0 or self.broker_id < -1:
            raise ValueError("in controller mode brokerId is this replica's id (>= 1), or -1 to have one assigned")
        if self.broker_heartbeat_interval <= 0 or self.controller_heart_beat_timeout_mills <= \
                2 * self.broker_heartbeat_interval:
            raise ValueError("controllerHeartBeatTimeoutMills must exceed twice brokerHeartbeatInterval")
        for name in ("sync_broker_metadata_period", "check_sync_state_set_period", "sync_controller_metadata_period",
                     "slave_synchronize_interval"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")

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
        base = resolve_broker_ips(load_config(BrokerConfig, broker_props, **broker_over))
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
    host = ha_address_host(config)
    return host if _bindable(host) else config.listen_host


def ha_address_host(config: BrokerConfig) -> str:
    """The host of the HA address a master registers (brokerIP2, else brokerIP1, as RocketMQ)."""
    return config.broker_ip2 or config.broker_ip1


def resolve_broker_ips(config: BrokerConfig) -> BrokerConfig:
    """``config`` with brokerIP1 and brokerIP2 as addresses: a host name (a container's service name, a
    Kubernetes pod's DNS name) is resolved here, once, because the address is written into every record and
    message id and clients connect to exactly what is registered."""
    ip2 = resolve_advertised("brokerIP2", config.broker_ip2) if config.broker_ip2 else None
    return dataclasses.replace(config, broker_ip1=resolve_advertised("brokerIP1", config.broker_ip1), broker_ip2=ip2)


def resolve_advertised(key: str, host: str) -> str:
    """``host`` if it is an IP address, else the address it resolves to (IPv4 first); :class:`ConfigError`
    naming ``key`` when it resolves to none."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise ConfigError(f"{key} {host!r} is neither an IP address nor a host name that resolves ({exc})") from None
    addresses = [str(info[4][0]) for info in infos]
    ipv4 = [a for a in addresses if ipaddress.ip_address(a).version == 4]
    return (ipv4 or addresses)[0]


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
