"""What every producer and consumer is configured with, and what decides which client instance it joins.

* :class:`ClientOptions` — the keyword arguments every producer and consumer takes (name servers, client id
  parts, poll and heartbeat intervals, timeouts, header encoding), the base of ``ProducerConfig``,
  ``ConsumerConfig`` and ``PullConsumerConfig``. A config is a frozen dataclass validated once, in
  ``__post_init__``; :attr:`ClientOptions.client` is the :class:`ClientConfig` derived from it.
* :class:`ClientConfig` — what makes two members share a :class:`~pocketmq.client.core.instance.MQClientInstance`:
  equal configs on one event loop share one.
* :class:`ClientArgs` — the same options as a ``TypedDict``, so constructors keep typed keyword-only
  arguments (``Producer(group, **options: Unpack[ProducerArgs])``) without restating the defaults.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypedDict

from pocketmq.client.core.errors import NoNameServerError
from pocketmq.client.core.uniq import client_id
from pocketmq.remoting.acl import SessionCredentials
from pocketmq.remoting.codes import SerializeType

__all__ = [
    "DEFAULT_NAMESRV_ADDR",
    "DEFAULT_TOPIC",
    "DEFAULT_TOPIC_QUEUE_NUMS",
    "ClientArgs",
    "ClientConfig",
    "ClientOptions",
    "check_positive",
    "parse_namesrv_addr",
]

#: Default name server when neither the argument nor ``NAMESRV_ADDR`` gives one.
DEFAULT_NAMESRV_ADDR = "127.0.0.1:9876"
#: ``createTopicKey``: the route looked up, and the send header's default topic, when a topic does not exist
#: yet (a broker auto-creates topics from it).
DEFAULT_TOPIC = "TBW102"
#: ``defaultTopicQueueNums`` of the producer: queues requested when a broker auto-creates a topic.
DEFAULT_TOPIC_QUEUE_NUMS = 4


def parse_namesrv_addr(addr: str | Iterable[str] | None) -> tuple[str, ...]:
    """``"a:9876;b:9876"`` (or a list of addresses) to a tuple; ``None`` reads ``NAMESRV_ADDR``.

    Raises :class:`~pocketmq.client.core.errors.NoNameServerError` when nothing is left.
    """
    if addr is None:
        addr = os.environ.get("NAMESRV_ADDR") or DEFAULT_NAMESRV_ADDR
    parts = addr.split(";") if isinstance(addr, str) else list(addr)
    addrs = tuple(p.strip() for p in parts if p and p.strip())
    if not addrs:
        raise NoNameServerError("no name server address configured")
    return addrs


def check_positive(**values: float) -> None:
    """Raise ``ValueError`` naming the first of ``values`` that is not positive."""
    for name, value in values.items():
        if value <= 0:
            raise ValueError(f"{name} must be positive")


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """What makes two members share an instance: equal configs on one event loop share one."""

    namesrv_addrs: tuple[str, ...]
    client_id: str
    serialize_type: int = SerializeType.MSGPACK
    poll_name_server_interval: float = 30.0
    heartbeat_broker_interval: float = 30.0
    #: Budget of one route lookup (all name servers together) and of one heartbeat / unregister call.
    namesrv_timeout: float = 3.0
    connect_timeout: float = 3.0
    #: A topic is refreshed on demand (after a failed send or pull) at most this often.
    min_refresh_interval: float = 1.0
    default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS
    max_pending_per_connection: int = 65536
    #: ACL keys: every request the instance sends is signed with them (RocketMQ's ``AclClientRPCHook``).
    credentials: SessionCredentials | None = None

    def __post_init__(self) -> None:
        if not self.namesrv_addrs:
            raise NoNameServerError("no name server address configured")
        if self.poll_name_server_interval <= 0 or self.heartbeat_broker_interval <= 0:
            raise ValueError("poll and heartbeat intervals must be positive")
        if self.namesrv_timeout <= 0 or self.connect_timeout <= 0:
            raise ValueError("timeouts must be positive")


class ClientArgs(TypedDict, total=False):
    """The keyword arguments of :class:`ClientOptions` (every producer's and consumer's)."""

    namesrv_addr: str | Iterable[str] | None
    instance_name: str | None
    client_ip: str | None
    poll_name_server_interval: float
    heartbeat_broker_interval: float
    namesrv_timeout: float
    connect_timeout: float
    serialize_type: int
    credentials: SessionCredentials | None


@dataclass(frozen=True, kw_only=True)
class ClientOptions:
    """Settings every producer and consumer takes; subclasses add their own and validate them in
    ``__post_init__`` (after calling this one's)."""

    group: str
    #: ``"a:9876;b:9876"`` or a list; ``None`` reads ``NAMESRV_ADDR`` (default ``127.0.0.1:9876``).
    namesrv_addr: str | Iterable[str] | None = None
    #: Part of the client id (``ip@instance_name``, default the pid): members with different names never share
    #: an instance.
    instance_name: str | None = None
    client_ip: str | None = None
    poll_name_server_interval: float = 30.0
    heartbeat_broker_interval: float = 30.0
    namesrv_timeout: float = 3.0
    connect_timeout: float = 3.0
    serialize_type: int = SerializeType.MSGPACK
    #: ACL keys (``SessionCredentials(access_key, secret_key)``): every request is signed; None: unsigned.
    credentials: SessionCredentials | None = None
    #: The instance-sharing key derived from the fields above (validated with them).
    client: ClientConfig = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        client = ClientConfig(
            namesrv_addrs=parse_namesrv_addr(self.namesrv_addr),
            client_id=client_id(ip=self.client_ip, instance_name=self.instance_name),
            serialize_type=int(self.serialize_type),
            poll_name_server_interval=self.poll_name_server_interval,
            heartbeat_broker_interval=self.heartbeat_broker_interval,
            namesrv_timeout=self.namesrv_timeout,
            connect_timeout=self.connect_timeout,
            default_topic_queue_nums=self._default_topic_queue_nums(),
            credentials=self.credentials,
        )
        object.__setattr__(self, "client", client)

    def _default_topic_queue_nums(self) -> int:
        """The instance's ``defaultTopicQueueNums``: a producer setting, the default for everyone else."""
        return DEFAULT_TOPIC_QUEUE_NUMS

    def client_args(self) -> ClientArgs:
        """These options as keyword arguments, to build another member that joins the same instance."""
        return ClientArgs(
            namesrv_addr=self.namesrv_addr, instance_name=self.instance_name, client_ip=self.client_ip,
            poll_name_server_interval=self.poll_name_server_interval,
            heartbeat_broker_interval=self.heartbeat_broker_interval, namesrv_timeout=self.namesrv_timeout,
            connect_timeout=self.connect_timeout, serialize_type=self.serialize_type, credentials=self.credentials,
        )
