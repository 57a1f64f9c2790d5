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
    #: Largest message body accepted, bytes (clients learn it as ``publishing.max_body_size``).
    max_message_size: int = 4 * 1024 * 1024
    max_user_property_size: int = 16 * 1024
    user_property_max_num: int = 128
    max_message_group_size: int = 64
    #: Farthest delivery time ahead, ms.
    max_delay_time_mills: int = 24 * 3600 * 1000
    max_transaction_recovery_second: int = 3600
    #: Refuse a message whose type the topic's ``message.type`` attribute does not accept.
    enable_topic_message_type_check: bool = True
    # --- consumers ---
    min_invisible_time_mills_for_recv: int = 10_000
    max_invisible_time_mills: int = 12 * 3600 * 1000
    #: Invisible time of a receive with ``auto_renew`` (push consumers), ms.
    default_invisible_time_mills: int = 60_000
    grpc_client_consumer_min_long_polling_timeout_millis: int = 5_000
    grpc_client_consumer_max_long_polling_timeout_millis: int = 20_000
    #: Time a receive keeps back from its deadline for the answer to travel, ms.
    long_polling_reserve_time_in_millis: int = 100
    #: Retry policy sent to producers: attempts and exponential back-off, ms.
    grpc_client_producer_max_attempts: int = 3
    grpc_client_producer_backoff_initial_millis: int = 10
    grpc_client_producer_backoff_max_millis: int = 1000
    grpc_client_producer_backoff_multiplier: int = 2
    #: Delivery attempts of a group no broker has a config for (a group's are its ``retryMaxTimes`` + 1).
    default_max_delivery_attempts: int = 17
    # --- clients ---
    #: A client neither heard from this long is forgotten (its registration at the brokers too), ms.
    grpc_client_idle_time_mills: int = 120_000
    #: Clients tracked at once; more are refused with TOO_MANY_REQUESTS.
    max_clients: int = 10_000
    #: How often the proxy heartbeats the brokers on behalf of its clients, ms.
    heartbeat_broker_interval_mills: int = 10_000
    #: Timeout of one request to a broker, ms.
    broker_request_timeout_mills: int = 3_000
    #: Topic and group metadata (``message.type``, FIFO groups) is read again after this long, ms.
    metadata_cache_ttl_mills: int = 20_000
    # --- ACL ---
    #: Check each call's ``authorization`` (MQv2-HMAC-SHA1) against plain_acl.yml, as brokers do for remoting.
    acl_enable: bool = False
    #: The ACL file; empty: ``$ROCKETMQ_HOME/conf/plain_acl.yml``, then ``./conf/plain_acl.yml``.
    plain_acl_file: str = ""
    #: Keys the proxy signs its own requests to brokers with (brokers with ``aclEnable=true``); empty: unsigned.
    proxy_access_key: str = ""
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
