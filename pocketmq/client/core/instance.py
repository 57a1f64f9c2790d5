"""``MQClientInstance``: what every producer and consumer of one event loop and one client configuration shares.

One instance holds:

* the :class:`~pocketmq.remoting.client.RemotingClient` (one connection per name server and per broker);
* the routes and broker tables (:class:`~pocketmq.client.core.route_table.RouteTable`) and the one route fetcher that
  fills them (:class:`~pocketmq.client.core.route_refresher.RouteRefresher`); every route that changes is handed to
  each registered producer (it builds its publish info from it) and makes the consumers of the topic
  rebalance at once;
* the background work, on :mod:`pocketmq.common.service`: a route poll every ``poll_name_server_interval`` (30 s)
  that refreshes every topic held or subscribed, then rebuilds the broker tables; a look every second for a
  held route lacking a master it had lately (:mod:`pocketmq.client.core.route_watch`: asked for again at once, for
  producers and consumers alike); a heartbeat every ``heartbeat_broker_interval`` (30 s). All stop, with
  every one-off task, at shutdown.

Heartbeats (HEART_BEAT, JSON, as a Java client sends it) announce the producer groups and each consumer
group's ``consumerDataSet`` entry (its subscriptions). A producer-only instance heartbeats the masters; once a
consumer is registered every broker address of the routes held gets them, slaves included (a consumer may pull
from a slave, and the slave must know the group's subscription). A broker seen for the first time gets a
heartbeat at once, so it knows the group from the first request on; at shutdown every broker gets
``UNREGISTER_CLIENT`` (the rest of a consumer group rebalances at once) before the connections close.

A broker's ``NOTIFY_CONSUMER_IDS_CHANGED`` (40) asks the named group's consumer to rebalance at once. A broker's
``PUSH_REPLY_MESSAGE_TO_CLIENT`` (326) brings the reply to a request: the producer that waits for its
``CORRELATION_ID`` takes it; when none does (the request timed out, or was never sent from here) the push is
answered SYSTEM_ERROR with that reason, which the broker passes on to the replier.

Instances are shared through :func:`acquire_instance`, keyed by the running loop and the
:class:`~pocketmq.client.core.config.ClientConfig`; members join with :func:`join_instance`, and the last one out
shuts the instance down.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any, Protocol

from pocketmq.client.core.config import ClientConfig
from pocketmq.client.core.errors import MQClientError
from pocketmq.client.core.message_ext import MessageDecodeError, decode_messages
from pocketmq.client.core.reply import decode_pushed_reply
from pocketmq.client.core.route_refresher import RouteRefresher
from pocketmq.client.core.route_table import MAX_TOPICS, RouteTable
from pocketmq.client.core.route_watch import WATCH_INTERVAL, MasterWatch
from pocketmq.common.logs import get_logger
from pocketmq.common.message import MessageConst
from pocketmq.common.service import Service, periodic
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode, SerializeType
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection
from pocketmq.remoting.errors import PocketMQError, RemotingConnectError
from pocketmq.remoting.headers import ConsumerGroupRequestHeader, UnregisterClientRequestHeader
from pocketmq.remoting.route import TopicRouteData

__all__ = [
    "ConsumerRegistration",
    "MQClientInstance",
    "ProducerRegistration",
    "acquire_instance",
    "heartbeat_body",
    "join_instance",
]

log = get_logger("pocketmq.client.instance")

#: A broker asked for an extra heartbeat (it did not know our group) gets one at most this often (s).
MIN_EXTRA_HEARTBEAT_INTERVAL = 1.0


class ProducerRegistration(Protocol):
    """What the instance needs from a registered producer."""

    def update_topic_route(self, topic: str, route: TopicRouteData | None) -> None:
        """A topic's route changed (``None``: the instance forgot the topic)."""
        ...


class ConsumerRegistration(Protocol):
    """What the instance needs from a registered consumer."""

    def consumer_data(self) -> dict[str, Any]:
        """The group's ``consumerDataSet`` entry for heartbeats
        (:func:`pocketmq.client.consumer.subscription.consumer_data_json`)."""
        ...

    def subscribed_topics(self) -> Iterable[str]:
        """Topics whose routes the instance must keep fresh (``%RETRY%<group>`` included)."""
        ...

    def rebalance_soon(self) -> None:
        """Rebalance at once (the broker said the group's membership changed)."""
        ...


def heartbeat_body(
    client_id: str, producer_groups: Iterable[str], consumer_data: Iterable[Mapping[str, Any]] = ()
) -> bytes:
    """HEART_BEAT (34) body, as JSON (every broker reads that): the producer groups, and one
    ``consumerDataSet`` entry per consumer group (:func:`pocketmq.client.consumer.subscription.consumer_data_json`)."""
    data = {
        "clientID": client_id,
        "consumerDataSet": [dict(entry) for entry in consumer_data],
        "producerDataSet": [{"groupName": group} for group in producer_groups],
    }
    return json.dumps(data, separators=(",", ":")).encode()


class MQClientInstance:
    """Routes, connections and heartbeats shared by producers and consumers (see the module docstring)."""

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self.client_id = config.client_id
        self.remoting = RemotingClient(
            connect_timeout=config.connect_timeout,
            max_pending_per_connection=config.max_pending_per_connection,
            before_request=config.credentials.sign if config.credentials is not None else None,
        )
        #: addr → live connection; the producers' hot path reads it directly.
        self.connections: dict[str, Connection] = {}
        self.routes = RouteTable()
        self.refresher = RouteRefresher(config, self.routes, connect=self.connect, apply=self.apply_route,
                                        spawn=self._spawn)
        self._producers: dict[str, ProducerRegistration] = {}
        self._consumers: dict[str, ConsumerRegistration] = {}
        self._extra_heartbeats: dict[str, float] = {}
        self._heartbeated: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._services = Service()
        self._services.name = "client-instance"
        self._services.add_child(periodic("client-route-poll", config.poll_name_server_interval,
                                          self.refresh_all_routes))
        self._services.add_child(periodic("client-heartbeat", config.heartbeat_broker_interval,
                                          self.send_heartbeat_to_all))
        self._master_watch = MasterWatch()
        self._services.add_child(periodic("client-route-watch", WATCH_INTERVAL, self.watch_routes))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self.log = log.bind(client_id=self.client_id)
        self.remoting.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._on_consumer_ids_changed)
        self.remoting.register(RequestCode.CHECK_TRANSACTION_STATE, self._on_check_transaction_state)
        self.remoting.register(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, self._on_push_reply)

    # -- lifecycle --------------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def idle(self) -> bool:
        """No producer or consumer is registered."""
        return not self._producers and not self._consumers

    def start(self) -> None:
        """Start the route poll and heartbeat services on the running loop (synchronous: no I/O yet)."""
        if self._loop is not None:
            return
        self._loop = asyncio.get_running_loop()
        self.refresher.start()
        self._services.start()
        self.log.info("client_instance_started", namesrv=";".join(self.config.namesrv_addrs))

    async def shutdown(self) -> None:
        """Stop the services and background tasks, then close every connection."""
        if self._closed:
            return
        self._closed = True
        self.refresher.close()
        _forget_instance(self)
        await self._services.stop()
        pending = list(self._tasks)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        await self.remoting.close()
        self.connections.clear()
        self.log.info("client_instance_stopped")

    # -- members ----------------------------------------------------------------------------------------

    def register_producer(self, group: str, producer: ProducerRegistration) -> None:
        """Add a producer group (heartbeats announce it) and hand it every route held. One producer per group
        per instance."""
        self._check_new_member(group, self._producers, "producer")
        self._producers[group] = producer
        for topic, route in list(self.routes.route_table.items()):
            producer.update_topic_route(topic, route)

    def register_consumer(self, group: str, consumer: ConsumerRegistration) -> None:
        """Add a consumer group: heartbeats announce it (to every broker, slaves included) and its topics'
        routes are kept fresh. One consumer per group per instance."""
        self._check_new_member(group, self._consumers, "consumer")
        self._consumers[group] = consumer

    def _check_new_member(self, group: str, members: Mapping[str, object], kind: str) -> None:
        if self._closed:
            raise MQClientError("the client instance is shut down")
        if group in members:
            raise MQClientError(
                f"the {kind} group {group} has already been created in this client instance; "
                "use another group or another instance_name"
            )

    async def unregister_producer(self, group: str) -> None:
        """Tell every master the group is gone (UNREGISTER_CLIENT); shut down when no member is left."""
        if self._producers.pop(group, None) is not None:
            header = UnregisterClientRequestHeader(self.client_id, producer_group=group)
            await self._unregister(sorted(set(self.routes.master_table.values())), header.to_fields())

    async def unregister_consumer(self, group: str) -> None:
        """Tell every broker the group's client is gone (UNREGISTER_CLIENT), so the others rebalance at once;
        shut down when no member is left."""
        if self._consumers.pop(group, None) is not None:
            header = UnregisterClientRequestHeader(self.client_id, consumer_group=group)
            await self._unregister(self.routes.all_broker_addrs(), header.to_fields())

    async def _unregister(self, addrs: list[str], fields: dict[str, str]) -> None:
        if addrs:
            await asyncio.gather(*(self._unregister_client(addr, fields) for addr in addrs))
        if self.idle:
            await self.shutdown()

    @property
    def producer_groups(self) -> list[str]:
        return list(self._producers)

    @property
    def consumer_groups(self) -> list[str]:
        return list(self._consumers)

    def consumer(self, group: str) -> ConsumerRegistration | None:
        """The consumer of ``group`` in this client, if any (the broker's admin requests name one)."""
        return self._consumers.get(group)

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

    def _on_check_transaction_state(self, request: RemotingCommand, conn: Connection) -> None:
        """CHECK_TRANSACTION_STATE (39), pushed by a broker: the transactional producer of the message's group
        (``PGROUP``) answers it (:mod:`client.producer.transaction`); none here: ignored, as the Java client does."""
        try:
            messages = decode_messages(request.body or b"", decompress=False)
        except MessageDecodeError:
            messages = []
        group = messages[0].get_property(MessageConst.PROPERTY_PRODUCER_GROUP) if messages else None
        producer = self._producers.get(group or "")
        check = getattr(producer, "check_transaction_state", None)
        if check is None:
            self.log.debug("transaction_check_ignored", peer=conn.remote_addr)
            return
        check(request, conn)

    def _on_push_reply(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        """PUSH_REPLY_MESSAGE_TO_CLIENT (326): the reply to one of our requests, handed to the producer waiting
        for its correlation id (a header or body that cannot be read is answered with the error)."""
        reply = decode_pushed_reply(request)
        correlation_id = reply.get_property(MessageConst.PROPERTY_CORRELATION_ID) or ""
        for producer in list(self._producers.values()):
            take = getattr(producer, "take_reply", None)
            if take is not None and take(correlation_id, reply):
                return request.response(ResponseCode.SUCCESS)
        self.log.info("reply_without_request", correlation_id=correlation_id, peer=conn.remote_addr)
        return request.response(ResponseCode.SYSTEM_ERROR,
                                f"no request of client {self.client_id} waits for the reply with CORRELATION_ID "
                                f"{correlation_id} (it timed out, or was not sent from this client)")

    # -- routes -----------------------------------------------------------------------------------------

    def apply_route(self, topic: str, route: TopicRouteData, *, from_default: bool) -> None:
        """Take a route just fetched: hold it, tell the producers, heartbeat brokers seen for the first time,
        and make the topic's consumers rebalance (not for a route derived from ``TBW102``)."""
        evicted = self.routes.make_room(topic)
        if evicted is not None:
            self.refresher.forget(evicted)
            self._tell_producers(evicted, None)
        if self._loop is not None and not from_default:
            self._master_watch.note(topic, route, self._loop.time())
        if not self.routes.apply(topic, route, from_default=from_default):
            return
        self.log.info("topic_route_updated", topic=topic, from_default=from_default,
                      write_queues=sum(q.write_queue_nums for q in route.queue_datas),
                      brokers=sorted(b.broker_name for b in route.broker_datas))
        self._tell_producers(topic, route)
        self._heartbeat_new_brokers()
        if not from_default:
            self._route_changed_for_consumers(topic)

    def _tell_producers(self, topic: str, route: TopicRouteData | None) -> None:
        for producer in list(self._producers.values()):
            producer.update_topic_route(topic, route)

    def _route_changed_for_consumers(self, topic: str) -> None:
        """A consumed topic's route changed (queues or brokers came or went): its consumers rebalance now
        rather than at their next periodic rebalance."""
        for group, consumer in list(self._consumers.items()):
            try:
                if topic in consumer.subscribed_topics():
                    consumer.rebalance_soon()
            except Exception:
                self.log.exception("rebalance_request_failed", group=group)

    def subscribed_topics(self) -> set[str]:
        """Every topic a registered consumer reads."""
        topics: set[str] = set()
        for group, consumer in list(self._consumers.items()):
            try:
                topics.update(consumer.subscribed_topics())
            except Exception:
                self.log.exception("subscribed_topics_failed", group=group)
        return topics

    def watch_routes(self) -> None:
        """Ask again, in the background, for every held route that lacks a master it had lately
        (:mod:`pocketmq.client.core.route_watch`): a restarted master is used again within seconds, not at the poll."""
        if self._loop is None:
            return
        held = {topic: route for topic in list(self.routes.route_table)
                if (route := self.routes.subscribe_route(topic)) is not None}
        for topic in list(self._master_watch.topics_to_refresh(held, self._loop.time())):
            self.refresher.request(topic, publish=False)

    async def refresh_all_routes(self) -> None:
        """Refresh every topic held and every subscribed one once, then rebuild the broker tables (what the
        poll service does). A topic held is refreshed as a publisher would (its own route kept, ``TBW102``
        only while it has none); a subscribed topic without a route as a consumer would."""
        held = list(self.routes.route_table)
        for topic in held:
            await self._poll_route(topic, publish=True)
        for topic in sorted(self.subscribed_topics() - set(held)):
            await self._poll_route(topic, publish=False)
        self.routes.rebuild_brokers()
        self._heartbeat_new_brokers()

    async def _poll_route(self, topic: str, *, publish: bool) -> None:
        try:
            await self.refresher.refresh(topic, self.config.namesrv_timeout, publish=publish)
        except PocketMQError as exc:
            self.log.warning("route_poll_failed", topic=topic, error=str(exc))

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
        self._spawn(self._heartbeat_soon(None))

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
        self._spawn(self._heartbeat_soon([addr]))

    async def _heartbeat_soon(self, addrs: list[str] | None) -> None:
        await (self.send_heartbeat_to_all() if addrs is None else self._heartbeat_all(addrs))

    def _heartbeat_targets(self) -> set[str]:
        """Masters for a producer-only instance; every known broker address once a consumer is registered."""
        if self._consumers:
            return set(self.routes.all_broker_addrs())
        return set(self.routes.master_table.values())

    def _heartbeat_new_brokers(self) -> None:
        new = self._heartbeat_targets() - self._heartbeated
        if new and not self.idle and not self._closed:
            self._heartbeated.update(new)  # claimed now; a failed heartbeat un-claims it (see _heartbeat)
            self._spawn(self._heartbeat_soon(sorted(new)))

    async def probe_broker(self, addr: str) -> bool:
        """Whether the broker at ``addr`` answers now: one heartbeat (within ``namesrv_timeout``), which a
        restarted broker needs anyway to know this client's groups. A failure is logged at debug level only:
        the prober logs the broker's transitions (it asks every second)."""
        return await self._heartbeat_all([addr], quiet=True) == 1

    async def _heartbeat_all(self, addrs: list[str], *, quiet: bool = False) -> int:
        if not addrs or self.idle:
            return 0
        consumer_data = []
        for group, consumer in list(self._consumers.items()):
            try:
                consumer_data.append(consumer.consumer_data())
            except Exception:  # a consumer's bug must not stop the heartbeats of the others
                self.log.exception("consumer_data_failed", group=group)
        body = heartbeat_body(self.client_id, self._producers, consumer_data)
        results = await asyncio.gather(*(self._heartbeat(addr, body, quiet=quiet) for addr in addrs))
        return sum(results)

    async def _heartbeat(self, addr: str, body: bytes, *, quiet: bool = False) -> bool:
        # JSON header and body, exactly what a Java client sends: every broker reads it.
        request = RemotingCommand.request(RequestCode.HEART_BEAT, None, body, serialize_type=SerializeType.JSON)
        ok = await self._call(addr, request, failed="heartbeat_failed", refused="heartbeat_refused", quiet=quiet)
        if ok:
            self._heartbeated.add(addr)
        else:
            self._heartbeated.discard(addr)
        return ok

    async def _unregister_client(self, addr: str, fields: dict[str, str]) -> None:
        request = RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, dict(fields),
                                          serialize_type=self.config.serialize_type)
        await self._call(addr, request, failed="unregister_client_failed", refused="unregister_client_refused")

    async def _call(self, addr: str, request: RemotingCommand, *, failed: str, refused: str,
                    quiet: bool = False) -> bool:
        """One request to a broker within ``namesrv_timeout``; a failure or refusal is logged (events
        ``failed`` / ``refused``; at debug level when ``quiet``), not raised."""
        warn = self.log.debug if quiet else self.log.warning
        timeout = self.config.namesrv_timeout
        try:
            conn = await self.connect(addr, timeout)
            response = await conn.request(request, timeout)
        except PocketMQError as exc:
            warn(failed, broker=addr, error=str(exc))
            return False
        if response.code != ResponseCode.SUCCESS:
            warn(refused, broker=addr, code=response.code, remark=response.remark)
            return False
        return True

    # -- one-off background tasks -----------------------------------------------------------------------

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run ``coro`` as a task this instance owns (cancelled at shutdown)."""
        loop = self._loop or asyncio.get_running_loop()
        task = loop.create_task(coro)
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


async def join_instance(config: ClientConfig, register: Callable[[MQClientInstance], None]) -> MQClientInstance:
    """The running loop's instance for ``config`` with a member registered by ``register``; when that fails
    (a group already registered), an instance left without members is shut down again."""
    instance = acquire_instance(config)
    try:
        register(instance)
    except MQClientError:
        if instance.idle:
            await instance.shutdown()
        raise
    return instance


def _forget_instance(instance: MQClientInstance) -> None:
    for key, value in list(_instances.items()):
        if value is instance:
            del _instances[key]
    # Loops closed without shutting their instances down would otherwise pin them here forever.
    for key in [k for k in _instances if k[0].is_closed()]:
        with contextlib.suppress(KeyError):
            del _instances[key]
