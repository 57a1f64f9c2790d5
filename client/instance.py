"""``MQClientInstance``: what every producer of one event loop and one client configuration shares.

One instance holds:

* the :class:`~remoting.client.RemotingClient` (one connection per name server and per broker);
* the route tables: topic → :class:`~remoting.route.TopicRouteData` (as last applied) and topic →
  :class:`~client.topic_publish.TopicPublishInfo` (at most :data:`MAX_TOPICS`), plus broker name → master
  address: updated from each route as it arrives, rebuilt from all routes after each poll (which drops
  brokers no route names any more);
* the name-server selection: one name server is used until it fails, then the next one round-robin (the
  one that answers becomes the sticky one);
* the background work: a route poll every ``poll_name_server_interval`` (30 s) and a heartbeat to every
  known master every ``heartbeat_broker_interval`` (30 s), both owned and cancelled at shutdown.

Route refresh (RocketMQ's ``updateTopicRouteInfoFromNameServer`` / ``tryToFindTopicPublishInfo``):

1. ask a name server for the topic's route; if it has one, use it;
2. if it has none (TOPIC_NOT_EXIST) and we already publish the topic from a real route, keep that route
   (a name server briefly without the topic must not empty a working route);
3. otherwise ask for ``TBW102`` and publish the topic on the brokers that can auto-create it
   (:func:`~client.topic_publish.default_route_for_topic`); the first send creates the topic there and the
   next refresh finds the topic's own route.

Concurrent callers refreshing one topic share one task (:meth:`MQClientInstance.refresh_topic`); callers
that give up (their timeout) leave it running for the others. A route equal to the cached one (other than
in list order) keeps the cached publish info and its round-robin counter. Route objects are never changed
in place: a new route gives new objects.

A new master address seen in a route gets a heartbeat at once, so a broker knows the producer from its
first send on; at shutdown every master gets ``UNREGISTER_CLIENT`` before the connections close.

Consumers (reference §8, §5.4) register on the same instance (:meth:`MQClientInstance.register_consumer`):

* heartbeats then carry each consumer group's ``consumerDataSet`` entry (its subscriptions) and go to
  *every* broker address of the routes held, slaves included (a consumer may pull from a slave, and the
  slave must know the group's subscription); a producer-only instance heartbeats masters only;
* the route poll also refreshes each subscribed topic (``%RETRY%<group>`` included) without the ``TBW102``
  fallback, since a consumer has nothing to read from a topic that does not exist;
* a broker's ``NOTIFY_CONSUMER_IDS_CHANGED`` (40) asks the named group's consumer to rebalance at once;
* ``broker_addr_table`` (broker name → broker id → address) answers
  :meth:`~MQClientInstance.find_broker_address_in_subscribe`, which consumers use to follow the broker's
  ``suggestWhichBrokerId`` and to fall back to any live member of a broker group whose master is down.

Instances are shared through :func:`acquire_instance`, keyed by the running loop and the
:class:`ClientConfig`; each producer and consumer registers its group and the last one out shuts the
instance down.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import structlog

from client.errors import MQClientError, NoNameServerError, NoRouteError
from client.headers import DEFAULT_TOPIC, DEFAULT_TOPIC_QUEUE_NUMS, UnregisterClientRequestHeader, heartbeat_body
from client.topic_publish import TopicPublishInfo, default_route_for_topic, route_changed
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode, SerializeType
from remoting.command import RemotingCommand
from remoting.connection import Connection
from remoting.errors import PocketMQError, RemotingConnectError, RemotingError, error_for_response
from remoting.headers import ConsumerGroupRequestHeader, GetRouteInfoRequestHeader
from remoting.route import MASTER_ID, BodyDecodeError, TopicRouteData, decode_route

__all__ = [
    "ClientConfig",
    "ConsumerRegistration",
    "FindBrokerResult",
    "MQClientInstance",
    "acquire_instance",
    "parse_namesrv_addr",
]

log = structlog.get_logger("client.instance")

T = TypeVar("T")

#: Default name server when neither the argument nor ``NAMESRV_ADDR`` gives one.
DEFAULT_NAMESRV_ADDR = "127.0.0.1:9876"
#: Topics whose routes an instance keeps; beyond it the topic published longest ago is forgotten (and looked
#: up again if it is used again).
MAX_TOPICS = 65536
#: A broker asked for an extra heartbeat (it did not know our group) gets one at most this often (s).
MIN_EXTRA_HEARTBEAT_INTERVAL = 1.0


class ConsumerRegistration(Protocol):
    """What the instance needs from a registered consumer."""

    def consumer_data(self) -> dict[str, Any]:
        """The group's ``consumerDataSet`` entry for heartbeats (:func:`client.subscription.consumer_data_json`)."""
        ...

    def subscribed_topics(self) -> Iterable[str]:
        """Topics whose routes the instance must keep fresh (``%RETRY%<group>`` included)."""
        ...

    def rebalance_soon(self) -> None:
        """Rebalance at once (the broker said the group's membership changed)."""
        ...


@dataclass(frozen=True, slots=True)
class FindBrokerResult:
    """A broker address for a consumer request; ``slave`` when it is not the master (id 0)."""

    addr: str
    broker_id: int

    @property
    def slave(self) -> bool:
        return self.broker_id != MASTER_ID


def parse_namesrv_addr(addr: str | Iterable[str] | None) -> tuple[str, ...]:
    """``"a:9876;b:9876"`` (or a list of addresses) to a tuple; ``None`` reads ``NAMESRV_ADDR``.

    Raises :class:`~client.errors.NoNameServerError` when nothing is left.
    """
    if addr is None:
        addr = os.environ.get("NAMESRV_ADDR") or DEFAULT_NAMESRV_ADDR
    parts = addr.split(";") if isinstance(addr, str) else list(addr)
    addrs = tuple(p.strip() for p in parts if p and p.strip())
    if not addrs:
        raise NoNameServerError("no name server address configured")
    return addrs


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """What makes two producers share an instance: equal configs on one event loop share one."""

    namesrv_addrs: tuple[str, ...]
    client_id: str
    serialize_type: int = SerializeType.MSGPACK
    poll_name_server_interval: float = 30.0
    heartbeat_broker_interval: float = 30.0
    #: Budget of one route lookup (all name servers together) and of one heartbeat / unregister call.
    namesrv_timeout: float = 3.0
    connect_timeout: float = 3.0
    #: A topic is refreshed on demand (after a failed send) at most this often.
    min_refresh_interval: float = 1.0
    default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS
    max_pending_per_connection: int = 65536

    def __post_init__(self) -> None:
        if not self.namesrv_addrs:
            raise NoNameServerError("no name server address configured")
        if self.poll_name_server_interval <= 0 or self.heartbeat_broker_interval <= 0:
            raise ValueError("poll and heartbeat intervals must be positive")
        if self.namesrv_timeout <= 0 or self.connect_timeout <= 0:
            raise ValueError("timeouts must be positive")


class MQClientInstance:
    """Routes, connections, heartbeats shared by producers (see the module docstring)."""

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self.client_id = config.client_id
        self.namesrv_addrs = config.namesrv_addrs
        self.remoting = RemotingClient(
            connect_timeout=config.connect_timeout,
            max_pending_per_connection=config.max_pending_per_connection,
        )
        #: addr → live connection; the producers' hot path reads it directly.
        self.connections: dict[str, Connection] = {}
        #: topic → publish info; the producers' hot path reads it directly. Never replaced, only updated.
        self.publish_table: dict[str, TopicPublishInfo] = {}
        #: broker name → master address, from every route we hold. Never replaced, only updated.
        self.master_table: dict[str, str] = {}
        #: broker name → broker id → address, from every route we hold (consumers read slaves too).
        self.broker_addr_table: dict[str, dict[int, str]] = {}
        self.route_table: dict[str, TopicRouteData] = {}
        self._from_default: set[str] = set()
        self._groups: dict[str, object] = {}
        self._consumers: dict[str, ConsumerRegistration] = {}
        self._refreshing: dict[str, asyncio.Task[None]] = {}
        self._refreshing_sub: dict[str, asyncio.Task[None]] = {}
        self._extra_heartbeats: dict[str, float] = {}
        self._last_on_demand: dict[str, float] = {}
        self._heartbeated: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._services: list[asyncio.Task[None]] = []
        self._ns_index = random.randrange(len(self.namesrv_addrs))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self.log = log.bind(client_id=self.client_id)
        self.remoting.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._on_consumer_ids_changed)

    # -- lifecycle --------------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def start(self) -> None:
        """Start the route poll and heartbeat services on the running loop (synchronous: no I/O yet)."""
        if self._loop is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._services = [
            self._loop.create_task(self._poll_routes_service(), name="client-route-poll"),
            self._loop.create_task(self._heartbeat_service(), name="client-heartbeat"),
        ]
        self.log.info("client_instance_started", namesrv=";".join(self.namesrv_addrs))

    async def shutdown(self) -> None:
        """Stop the services and background tasks, then close every connection."""
        if self._closed:
            return
        self._closed = True
        _forget_instance(self)
        pending = [*self._services, *self._tasks]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        self._services = []
        await self.remoting.close()
        self.connections.clear()
        self.log.info("client_instance_stopped")

    def register_producer(self, group: str, producer: object) -> None:
        """Add a producer group (heartbeats announce it). One producer per group per instance."""
        if self._closed:
            raise MQClientError("the client instance is shut down")
        if group in self._groups:
            raise MQClientError(
                f"the producer group {group} has already been created in this client instance; "
                "use another group or another instance_name"
            )
        self._groups[group] = producer

    async def unregister_producer(self, group: str) -> None:
        """Tell every master the group is gone (UNREGISTER_CLIENT); shut down when no group is left."""
        if self._groups.pop(group, None) is None:
            return
        header = UnregisterClientRequestHeader(self.client_id, producer_group=group).to_fields()
        addrs = sorted(set(self.master_table.values()))
        if addrs:
            await asyncio.gather(*(self._unregister_client(addr, header) for addr in addrs))
        if not self._groups and not self._consumers:
            await self.shutdown()

    @property
    def producer_groups(self) -> list[str]:
        return list(self._groups)

    def register_consumer(self, group: str, consumer: ConsumerRegistration) -> None:
        """Add a consumer group: heartbeats announce it (to every broker, slaves included) and its topics'
        routes are kept fresh. One consumer per group per instance."""
        if self._closed:
            raise MQClientError("the client instance is shut down")
        if group in self._consumers:
            raise MQClientError(
                f"the consumer group {group} has already been created in this client instance; "
                "use another group or another instance_name"
            )
        self._consumers[group] = consumer

    async def unregister_consumer(self, group: str) -> None:
        """Tell every broker the group's client is gone (UNREGISTER_CLIENT), so the others rebalance at once;
        shut down when no group is left."""
        if self._consumers.pop(group, None) is None:
            return
        header = UnregisterClientRequestHeader(self.client_id, consumer_group=group).to_fields()
        addrs = self.all_broker_addrs()
        if addrs:
            await asyncio.gather(*(self._unregister_client(addr, header) for addr in addrs))
        if not self._groups and not self._consumers:
            await self.shutdown()

    @property
    def consumer_groups(self) -> list[str]:
        return list(self._consumers)

    def _on_consumer_ids_changed(self, request: RemotingCommand, conn: Connection) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED (40), pushed by a broker: rebalance the group now (no answer)."""
        try:
            group = ConsumerGroupRequestHeader.from_command(request).consumer_group
        except PocketMQError:
            group = ""
        consumer = self._consumers.get(group)
        targets = [consumer] if consumer is not None else list(self._consumers.values())
        self.log.info("consumer_ids_changed", group=group, peer=conn.remote_addr)
        for target in targets:
            target.rebalance_soon()

    # -- routes -----------------------------------------------------------------------------------------

    async def find_publish_info(self, topic: str, timeout: float) -> TopicPublishInfo:
        """The topic's publish info, looked up (shared with concurrent callers) when none is usable yet.

        Raises :class:`NoRouteError` when no name server knows the topic or ``TBW102``, or the route has no
        writable queue; :class:`NoNameServerError` when no name server answered in time.
        """
        info = self.publish_table.get(topic)
        if info is not None and info.ok:
            return info
        await self.refresh_topic(topic, timeout)
        info = self.publish_table.get(topic)
        if info is None:
            raise NoRouteError(topic, f"no name server of {';'.join(self.namesrv_addrs)} has it or {DEFAULT_TOPIC}")
        if not info.ok:
            raise NoRouteError(topic, "its route has no writable queue on a broker with a master")
        return info

    async def refresh_topic(self, topic: str, timeout: float) -> None:
        """Fetch the topic's route now (or join the fetch already running) and wait at most ``timeout``."""
        task = self._refresh_task(topic)
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout)
        except TimeoutError:
            raise NoNameServerError(
                f"route lookup of {topic} did not finish within {timeout * 1000:.0f} ms"
            ) from None

    def request_refresh(self, topic: str) -> None:
        """Refresh in the background after a failed send, at most every ``min_refresh_interval``."""
        if self._closed or self._loop is None:
            return
        now = self._loop.time()
        last = self._last_on_demand.get(topic)
        if last is not None and now - last < self.config.min_refresh_interval:
            return
        if len(self._last_on_demand) >= MAX_TOPICS:
            self._last_on_demand.clear()
        self._last_on_demand[topic] = now
        self._refresh_task(topic)

    async def refresh_subscribed_topic(self, topic: str, timeout: float) -> None:
        """Fetch a consumed topic's route now (or join the fetch running), without the ``TBW102`` fallback."""
        if self._closed:
            raise MQClientError("the client instance is shut down")
        task = self._subscribed_refresh_task(topic)
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout)
        except TimeoutError:
            raise NoNameServerError(
                f"route lookup of {topic} did not finish within {timeout * 1000:.0f} ms"
            ) from None

    def request_refresh_subscribed(self, topic: str) -> None:
        """Refresh a consumed topic's route in the background, at most every ``min_refresh_interval``."""
        if self._closed or self._loop is None:
            return
        now = self._loop.time()
        key = "\x00" + topic  # its own rate limit, apart from the producer's on-demand refreshes
        last = self._last_on_demand.get(key)
        if last is not None and now - last < self.config.min_refresh_interval:
            return
        if len(self._last_on_demand) >= MAX_TOPICS:
            self._last_on_demand.clear()
        self._last_on_demand[key] = now
        self._subscribed_refresh_task(topic)

    def _subscribed_refresh_task(self, topic: str) -> asyncio.Task[None]:
        task = self._refreshing_sub.get(topic)
        if task is None:
            task = self._spawn(self._update_subscribed_topic(topic))
            self._refreshing_sub[topic] = task

            def done(t: asyncio.Task[None]) -> None:
                if self._refreshing_sub.get(topic) is t:
                    del self._refreshing_sub[topic]

            task.add_done_callback(done)
        return task

    async def _update_subscribed_topic(self, topic: str) -> None:
        route = await self.fetch_route(topic, self.config.namesrv_timeout)
        if route is not None:
            self._apply_route(topic, route, from_default=False)

    def subscribe_route(self, topic: str) -> TopicRouteData | None:
        """The topic's own route (never one derived from ``TBW102``), or ``None``."""
        if topic in self._from_default:
            return None
        return self.route_table.get(topic)

    def is_from_default_route(self, topic: str) -> bool:
        """Whether the topic is published on ``TBW102``'s brokers because it has no route of its own yet."""
        return topic in self._from_default

    def _refresh_task(self, topic: str) -> asyncio.Task[None]:
        task = self._refreshing.get(topic)
        if task is None:
            if self._closed:
                raise MQClientError("the client instance is shut down")
            task = self._spawn(self._update_topic(topic))
            self._refreshing[topic] = task

            def done(t: asyncio.Task[None]) -> None:
                if self._refreshing.get(topic) is t:
                    del self._refreshing[topic]

            task.add_done_callback(done)
        return task

    async def _update_topic(self, topic: str) -> None:
        timeout = self.config.namesrv_timeout
        route = await self.fetch_route(topic, timeout)
        if route is not None:
            self._apply_route(topic, route, from_default=False)
            return
        if topic in self.publish_table and topic not in self._from_default:
            return  # keep the last real route (RocketMQ does too)
        default = await self.fetch_route(DEFAULT_TOPIC, timeout)
        if default is None:
            return
        derived = default_route_for_topic(default, default_topic_queue_nums=self.config.default_topic_queue_nums)
        self._apply_route(topic, derived, from_default=True)

    def _apply_route(self, topic: str, route: TopicRouteData, *, from_default: bool) -> None:
        if from_default:
            self._from_default.add(topic)
        else:
            self._from_default.discard(topic)
        old = self.route_table.get(topic)
        if old is not None and topic in self.publish_table and not route_changed(old, route):
            return
        if old is None and len(self.route_table) >= MAX_TOPICS:
            self._forget_topic(next(iter(self.route_table)))
        self.route_table[topic] = route
        info = TopicPublishInfo.from_route(topic, route)
        self.publish_table[topic] = info
        self.log.info("topic_route_updated", topic=topic, from_default=from_default,
                      queues=len(info.message_queues), brokers=sorted(info.broker_names))
        self._merge_masters(route)
        if not from_default:
            self._route_changed_for_consumers(topic)

    def _route_changed_for_consumers(self, topic: str) -> None:
        """A consumed topic's route changed (queues or brokers came or went): its consumers rebalance now
        rather than at their next periodic rebalance."""
        for group, consumer in list(self._consumers.items()):
            try:
                if topic in consumer.subscribed_topics():
                    consumer.rebalance_soon()
            except Exception:
                self.log.exception("rebalance_request_failed", group=group)

    def _forget_topic(self, topic: str) -> None:
        self.route_table.pop(topic, None)
        self.publish_table.pop(topic, None)
        self._from_default.discard(topic)
        self._last_on_demand.pop(topic, None)

    def _merge_masters(self, route: TopicRouteData) -> None:
        """Take the brokers of a route just fetched (it is the freshest word on them); heartbeat new ones.

        A broker group's member list is replaced as a whole: a master the name server dropped (it is down)
        must not linger in ``broker_addr_table``, or consumers would keep trying it instead of the slave.
        (``master_table`` keeps its entry until the next poll, as the producer has always relied on.)
        """
        for broker in route.broker_datas:
            addr = broker.broker_addrs.get(MASTER_ID)
            if addr:
                self.master_table[broker.broker_name] = addr
            if broker.broker_addrs:
                self.broker_addr_table[broker.broker_name] = dict(broker.broker_addrs)
        self._heartbeat_new_brokers()

    def _rebuild_master_table(self) -> None:
        """Masters (and all members) from every route held, dropping brokers no route names any more
        (after each route poll)."""
        masters: dict[str, str] = {}
        members: dict[str, dict[int, str]] = {}
        for route in self.route_table.values():
            for broker in route.broker_datas:
                addr = broker.broker_addrs.get(MASTER_ID)
                if addr:
                    masters[broker.broker_name] = addr
                if broker.broker_addrs:
                    members.setdefault(broker.broker_name, {}).update(broker.broker_addrs)
        if masters != self.master_table:
            self.master_table.clear()
            self.master_table.update(masters)
        if members != self.broker_addr_table:
            self.broker_addr_table.clear()
            self.broker_addr_table.update(members)
        self._heartbeat_new_brokers()

    def _heartbeat_targets(self) -> set[str]:
        """Masters for a producer-only instance; every known broker address once a consumer is registered."""
        if self._consumers:
            return set(self.all_broker_addrs())
        return set(self.master_table.values())

    def _heartbeat_new_brokers(self) -> None:
        new = self._heartbeat_targets() - self._heartbeated
        if new and (self._groups or self._consumers) and not self._closed:
            self._heartbeated.update(new)  # claimed now; a failed heartbeat un-claims it (see _heartbeat)
            self._spawn(self._heartbeat_all(sorted(new)))

    def all_broker_addrs(self) -> list[str]:
        """Every broker address (masters and slaves) of the routes held, sorted."""
        return sorted({addr for members in self.broker_addr_table.values() for addr in members.values()})

    def find_broker_address_in_subscribe(
        self, broker_name: str, broker_id: int = MASTER_ID, *, only_this_broker: bool = False,
        skip: Iterable[str] = (),
    ) -> FindBrokerResult | None:
        """Where a consumer should send a request for ``broker_name`` (Java's
        ``findBrokerAddressInSubscribe``): the member ``broker_id``; else, for a slave id, the next id; else
        (unless ``only_this_broker``) any member, the master first. Addresses in ``skip`` (recently
        unreachable) are passed over while another member is left."""
        members = self.broker_addr_table.get(broker_name)
        if not members:
            return None
        skipped = set(skip)
        candidates = [broker_id]
        if broker_id != MASTER_ID:
            candidates.append(broker_id + 1)
        for candidate in candidates:
            addr = members.get(candidate)
            if addr is not None and addr not in skipped:
                return FindBrokerResult(addr, candidate)
        if only_this_broker:
            addr = members.get(broker_id)
            return FindBrokerResult(addr, broker_id) if addr is not None else None
        ordered = sorted(members.items())
        for member_id, addr in ordered:
            if addr not in skipped:
                return FindBrokerResult(addr, member_id)
        member_id, addr = ordered[0]  # all of them were unreachable lately: try anyway
        return FindBrokerResult(addr, member_id)

    def find_broker_address_in_admin(self, broker_name: str) -> FindBrokerResult | None:
        """The master of ``broker_name``, else any member (offset commits and queries when the master is
        down go to a slave, reference §5.4)."""
        return self.find_broker_address_in_subscribe(broker_name, MASTER_ID)

    async def fetch_route(self, topic: str, timeout: float) -> TopicRouteData | None:
        """GET_ROUTEINFO_BY_TOPIC to the sticky name server, then the others round-robin on failure.

        Returns ``None`` when a name server answered TOPIC_NOT_EXIST. Each name server left gets an equal share
        of what remains of ``timeout``, so one that never answers cannot use up the whole budget.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        fields = GetRouteInfoRequestHeader(topic).to_fields()
        addrs = self.namesrv_addrs
        count = len(addrs)
        failures: list[str] = []
        for i in range(count):
            index = (self._ns_index + i) % count
            addr = addrs[index]
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            share_end = loop.time() + remaining / (count - i)
            request = RemotingCommand.request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, dict(fields), serialize_type=self.config.serialize_type
            )
            try:
                conn = await self.connect(addr, share_end - loop.time())
                response = await conn.request(request, max(share_end - loop.time(), 0.001))
            except RemotingError as exc:
                failures.append(f"{addr}: {exc}")
                continue
            if response.code == ResponseCode.TOPIC_NOT_EXIST:
                self._stick_to(index)
                return None
            if response.code != ResponseCode.SUCCESS:
                failures.append(f"{addr}: {error_for_response(response.code, response.remark, addr)}")
                continue
            try:
                route = decode_route(response.body or b"", response.serialize_type)
            except BodyDecodeError as exc:
                failures.append(f"{addr}: {exc}")
                continue
            self._stick_to(index)
            return route
        self._ns_index = (self._ns_index + 1) % count  # start with the next one next time
        raise NoNameServerError(f"no name server answered the route of {topic}: " + "; ".join(failures or ["timeout"]))

    def _stick_to(self, index: int) -> None:
        if index != self._ns_index:
            self.log.info("namesrv_switched", frm=self.namesrv_addrs[self._ns_index], to=self.namesrv_addrs[index])
            self._ns_index = index

    @property
    def current_namesrv(self) -> str:
        """The name server asked first."""
        return self.namesrv_addrs[self._ns_index]

    # -- connections ------------------------------------------------------------------------------------

    async def connect(self, addr: str, timeout: float) -> Connection:
        """The live connection to ``addr``, connecting within ``timeout`` if there is none."""
        conn = self.connections.get(addr)
        if conn is not None and not conn.is_closed:
            return conn
        try:
            async with asyncio.timeout(timeout):
                conn = await self.remoting.connection(addr)
        except TimeoutError:
            raise RemotingConnectError(f"cannot connect to {addr} within {timeout * 1000:.0f} ms") from None
        self.connections[addr] = conn
        return conn

    # -- heartbeats -------------------------------------------------------------------------------------

    async def send_heartbeat_to_all(self) -> int:
        """Heartbeat every target now (masters; all brokers once a consumer is registered); returns how many
        answered SUCCESS."""
        return await self._heartbeat_all(sorted(self._heartbeat_targets()))

    def request_heartbeat_all(self) -> None:
        """Heartbeat every target soon (a consumer's subscriptions changed)."""
        if self._closed or self._loop is None:
            return
        self._spawn(self.send_heartbeat_to_all())

    def request_heartbeat(self, addr: str) -> None:
        """Heartbeat one broker soon (it answered that it does not know our group, e.g. after a restart);
        at most once per :data:`MIN_EXTRA_HEARTBEAT_INTERVAL` per broker."""
        if self._closed or self._loop is None:
            return
        now = self._loop.time()
        last = self._extra_heartbeats.get(addr)
        if last is not None and now - last < MIN_EXTRA_HEARTBEAT_INTERVAL:
            return
        if len(self._extra_heartbeats) >= MAX_TOPICS:
            self._extra_heartbeats.clear()
        self._extra_heartbeats[addr] = now
        self._spawn(self._heartbeat_all([addr]))

    async def _heartbeat_all(self, addrs: list[str]) -> int:
        if not addrs or not (self._groups or self._consumers):
            return 0
        consumer_data = []
        for group, consumer in list(self._consumers.items()):
            try:
                consumer_data.append(consumer.consumer_data())
            except Exception:  # a consumer's bug must not stop the heartbeats of the others
                self.log.exception("consumer_data_failed", group=group)
        body = heartbeat_body(self.client_id, self._groups, consumer_data)
        results = await asyncio.gather(*(self._heartbeat(addr, body) for addr in addrs))
        return sum(results)

    async def _heartbeat(self, addr: str, body: bytes) -> bool:
        # JSON header and body, exactly what a Java client sends: every broker reads it.
        request = RemotingCommand.request(RequestCode.HEART_BEAT, None, body, serialize_type=SerializeType.JSON)
        timeout = self.config.namesrv_timeout
        try:
            conn = await self.connect(addr, timeout)
            response = await conn.request(request, timeout)
        except PocketMQError as exc:
            self.log.warning("heartbeat_failed", broker=addr, error=str(exc))
            self._heartbeated.discard(addr)
            return False
        if response.code != ResponseCode.SUCCESS:
            self.log.warning("heartbeat_refused", broker=addr, code=response.code, remark=response.remark)
            self._heartbeated.discard(addr)
            return False
        self._heartbeated.add(addr)
        return True

    async def _unregister_client(self, addr: str, fields: dict[str, str]) -> None:
        request = RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, dict(fields),
                                          serialize_type=self.config.serialize_type)
        timeout = self.config.namesrv_timeout
        try:
            conn = await self.connect(addr, timeout)
            response = await conn.request(request, timeout)
        except PocketMQError as exc:
            self.log.warning("unregister_client_failed", broker=addr, error=str(exc))
            return
        if response.code != ResponseCode.SUCCESS:
            self.log.warning("unregister_client_refused", broker=addr, code=response.code, remark=response.remark)

    # -- services ---------------------------------------------------------------------------------------

    def subscribed_topics(self) -> set[str]:
        """Every topic a registered consumer reads."""
        topics: set[str] = set()
        for group, consumer in list(self._consumers.items()):
            try:
                topics.update(consumer.subscribed_topics())
            except Exception:
                self.log.exception("subscribed_topics_failed", group=group)
        return topics

    async def refresh_all_routes(self) -> None:
        """Refresh every published and subscribed topic once, then rebuild the broker tables (what the poll
        service does). A topic both published and consumed takes the producer's path (which keeps a real
        route and falls back to ``TBW102`` only while it has none); consumers ignore derived routes."""
        published = list(self.publish_table)
        for topic in published:
            try:
                await self.refresh_topic(topic, self.config.namesrv_timeout)
            except PocketMQError as exc:
                self.log.warning("route_poll_failed", topic=topic, error=str(exc))
        for topic in sorted(self.subscribed_topics() - set(published)):
            try:
                await self.refresh_subscribed_topic(topic, self.config.namesrv_timeout)
            except PocketMQError as exc:
                self.log.warning("route_poll_failed", topic=topic, error=str(exc))
        self._rebuild_master_table()

    async def _poll_routes_service(self) -> None:
        while True:
            await asyncio.sleep(self.config.poll_name_server_interval)
            await self.refresh_all_routes()

    async def _heartbeat_service(self) -> None:
        while True:
            await asyncio.sleep(self.config.heartbeat_broker_interval)
            await self.send_heartbeat_to_all()

    def _spawn(self, coro: Awaitable[T]) -> asyncio.Task[T]:
        loop = self._loop or asyncio.get_running_loop()
        task: asyncio.Task[T] = loop.create_task(coro)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()  # retrieved here so that a failed background refresh is never "unretrieved"
        if exc is not None and not isinstance(exc, PocketMQError):
            self.log.error("client_task_failed", error=repr(exc))


# -- sharing ------------------------------------------------------------------------------------------------

_instances: dict[tuple[asyncio.AbstractEventLoop, ClientConfig], MQClientInstance] = {}


def acquire_instance(config: ClientConfig) -> MQClientInstance:
    """The running loop's instance for ``config``, created and started if needed (call from the loop)."""
    loop = asyncio.get_running_loop()
    key = (loop, config)
    instance = _instances.get(key)
    if instance is None or instance.closed:
        instance = MQClientInstance(config)
        _instances[key] = instance
        instance.start()
    return instance


def _forget_instance(instance: MQClientInstance) -> None:
    for key, value in list(_instances.items()):
        if value is instance:
            del _instances[key]
    # Loops closed without shutting their instances down would otherwise pin them here forever.
    for key in [k for k in _instances if k[0].is_closed()]:
        with contextlib.suppress(KeyError):
            del _instances[key]
