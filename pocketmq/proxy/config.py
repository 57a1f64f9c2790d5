"""Proxy configuration (``rmq-proxy --config FILE`` takes these keys, RocketMQ's ``ProxyConfig`` names where the
concept is the same; a broker serving the endpoint in-process reads the same keys from its own file)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pocketmq.proxy.convert import Limits


@dataclass(frozen=True, slots=True)
class ProxyConfig:
    #: Name servers (``a:9876;b:9876``) the proxy reads routes from.
    namesrv_addr: str = "127.0.0.1:9876"
    #: Address the gRPC endpoint binds to.
    grpc_server_host: str = "0.0.0.0"
    #: Its port; 0 picks a free one (RocketMQ's default is 8081).
    grpc_server_port: int = 8081
    #: The address QueryRoute gives clients as the endpoint; empty: the address the client used to reach us.
    proxy_advertised_addr: str = ""
    # --- TLS: both files set means TLS on (plaintext otherwise) ---
    #: PEM certificate chain of the endpoint.
    tls_cert_path: str = ""
    #: PEM private key of the endpoint.
    tls_key_path: str = ""
    # --- limits of SendMessage (the Java proxy's defaults) ---
    #: Largest message body accepted (clients learn it as ``publishing.max_body_size``).
    max_message_size: int = field(default=4 * 1024 * 1024, metadata={"unit": "bytes"})
    #: Largest total of a message's user property names and values, tag and keys.
    max_user_property_size: int = field(default=16 * 1024, metadata={"unit": "bytes"})
    #: Most user properties one message may carry.
    user_property_max_num: int = field(default=128, metadata={"unit": "count"})
    #: A message group must be shorter than this.
    max_message_group_size: int = field(default=64, metadata={"unit": "bytes"})
    #: Farthest delivery time ahead.
    max_delay_time_mills: int = field(default=24 * 3600 * 1000, metadata={"unit": "ms"})
    #: Longest ``orphaned_transaction_recovery_duration`` a transactional message may ask for.
    max_transaction_recovery_second: int = field(default=3600, metadata={"unit": "s"})
    #: Refuse a message whose type the topic's ``message.type`` attribute does not accept.
    enable_topic_message_type_check: bool = True
    # --- consumers ---
    #: Shortest invisible time a receive may ask for.
    min_invisible_time_mills_for_recv: int = field(default=10_000, metadata={"unit": "ms"})
    #: Longest invisible time a receive or a change of invisible duration may ask for.
    max_invisible_time_mills: int = field(default=12 * 3600 * 1000, metadata={"unit": "ms"})
    #: Invisible time of a receive with ``auto_renew`` (push consumers), renewed while the client holds it.
    default_invisible_time_mills: int = field(default=60_000, metadata={"unit": "ms"})
    #: Keep the messages of ``auto_renew`` receives invisible while their client holds them (RocketMQ's default).
    enable_proxy_auto_renew: bool = True
    #: A held message's invisible time is renewed this long before it runs out.
    renew_ahead_time_millis: int = field(default=10_000, metadata={"unit": "ms"})
    #: A message is renewed for at most this long.
    renew_max_time_millis: int = field(default=3 * 3600 * 1000, metadata={"unit": "ms"})
    #: How often held messages are looked at for renewal.
    renew_schedule_period_millis: int = field(default=5_000, metadata={"unit": "ms"})
    #: The invisible time left to the messages a departed client held.
    invisible_time_millis_when_clear: int = field(default=1_000, metadata={"unit": "ms"})
    #: Messages renewed at once, in all; beyond, a message comes back at its deadline.
    max_renewed_handles: int = field(default=100_000, metadata={"unit": "count"})
    #: A receive long-polls at least this long (a shorter deadline is ILLEGAL_POLLING_TIME).
    grpc_client_consumer_min_long_polling_timeout_millis: int = field(default=5_000, metadata={"unit": "ms"})
    #: A receive long-polls at most this long (push consumers are told this as their long-polling timeout).
    grpc_client_consumer_max_long_polling_timeout_millis: int = field(default=20_000, metadata={"unit": "ms"})
    #: Time a receive keeps back from its deadline for the answer to travel.
    long_polling_reserve_time_in_millis: int = field(default=100, metadata={"unit": "ms"})
    #: Send attempts producers are told to make.
    grpc_client_producer_max_attempts: int = field(default=3, metadata={"unit": "count"})
    #: Producers' first back-off between attempts.
    grpc_client_producer_backoff_initial_millis: int = field(default=10, metadata={"unit": "ms"})
    #: Producers' longest back-off between attempts.
    grpc_client_producer_backoff_max_millis: int = field(default=1000, metadata={"unit": "ms"})
    #: Factor of producers' exponential back-off.
    grpc_client_producer_backoff_multiplier: int = field(default=2, metadata={"unit": ""})
    #: Delivery attempts of a group no broker has a config for (a group's are its ``retryMaxTimes`` + 1).
    default_max_delivery_attempts: int = field(default=17, metadata={"unit": "count"})
    # --- clients ---
    #: A client neither heard from this long nor connected by Telemetry is forgotten (at the brokers too).
    grpc_client_idle_time_mills: int = field(default=120_000, metadata={"unit": "ms"})
    #: Clients tracked at once; more are refused with TOO_MANY_REQUESTS.
    max_clients: int = field(default=10_000, metadata={"unit": "count"})
    #: How often the proxy heartbeats the brokers on behalf of its clients.
    heartbeat_broker_interval_mills: int = field(default=10_000, metadata={"unit": "ms"})
    #: Timeout of one request to a broker.
    broker_request_timeout_mills: int = field(default=3_000, metadata={"unit": "ms"})
    #: Topic and group metadata (``message.type``, FIFO groups) is read again after this long.
    metadata_cache_ttl_mills: int = field(default=20_000, metadata={"unit": "ms"})
    # --- ACL ---
    #: Check each call's ``authorization`` (MQv2-HMAC-SHA1) against plain_acl.yml, as brokers do for remoting.
    acl_enable: bool = False
    #: The ACL file; empty: ``$ROCKETMQ_HOME/conf/plain_acl.yml``, then ``./conf/plain_acl.yml``.
    plain_acl_file: str = ""
    #: Keys the proxy signs its own requests to brokers with (brokers with ``aclEnable=true``); empty: unsigned.
    proxy_access_key: str = ""
    #: The secret key of ``proxyAccessKey``.
    proxy_secret_key: str = field(default="", repr=False)
    # --- metrics ---
    #: Port of the Prometheus ``/metrics`` endpoint (``--metrics-port``); None: no metrics endpoint.
    metrics_port: int | None = None
    # --- end metrics ---

    def __post_init__(self) -> None:
        if not 0 <= self.grpc_server_port <= 65535:
            raise ValueError(f"grpcServerPort {self.grpc_server_port} out of range")
        if bool(self.tls_cert_path) != bool(self.tls_key_path):
            raise ValueError("TLS needs both tlsCertPath and tlsKeyPath")
        if self.max_message_size <= 0:
            raise ValueError("maxMessageSize must be positive")
        if not 0 < self.grpc_client_consumer_min_long_polling_timeout_millis <= \
                self.grpc_client_consumer_max_long_polling_timeout_millis:
            raise ValueError("long polling bounds must satisfy 0 < min <= max")
        if self.max_clients <= 0 or self.heartbeat_broker_interval_mills <= 0:
            raise ValueError("maxClients and heartbeatBrokerIntervalMills must be positive")

    @property
    def tls(self) -> bool:
        return bool(self.tls_cert_path)

    def limits(self) -> Limits:
        return Limits(max_body_size=self.max_message_size, max_user_property_size=self.max_user_property_size,
                      user_property_max_num=self.user_property_max_num,
                      max_message_group_size=self.max_message_group_size, max_delay_ms=self.max_delay_time_mills,
                      max_transaction_recovery_s=self.max_transaction_recovery_second)
