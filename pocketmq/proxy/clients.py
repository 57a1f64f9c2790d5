"""The gRPC clients a proxy serves (RocketMQ's ``GrpcClientSettingsManager`` and ``GrpcChannelManager``): each
client's settings from its Telemetry stream, the stream itself (commands to push to the client), and its
registration at the brokers.

Registration: every ``heartbeatBrokerIntervalMills`` (and at once for a client or group seen for the first time) the
proxy sends each broker a HEART_BEAT *per client*, carrying the client's own id and language: a producer's topics
as producer groups (the Java proxy uses the topic as the producer group of a gRPC producer, so a broker's
transaction check-back of a half message reaches a proxy of that topic's producers), a consumer's group and
subscriptions. So ``rmq-admin consumerConnection``/``producerConnection`` list gRPC clients as any other. A client
that ends (NotifyClientTermination), or that is neither heard from nor connected by Telemetry for
``grpcClientIdleTimeMills``, is unregistered (UNREGISTER_CLIENT).

Bounds: ``maxClients`` clients (a new one beyond it is TOO_MANY_REQUESTS), :data:`OUTBOX_LIMIT` commands waiting
per Telemetry stream (an older check-back is dropped: the broker asks again).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any

from pocketmq.client.consumer.subscription import consumer_data_json
from pocketmq.client.core.instance import heartbeat_body
from pocketmq.common.consumer import ConsumeType
from pocketmq.common.logs import get_logger
from pocketmq.common.service import Service, periodic
from pocketmq.common.subscription import SubscriptionData
from pocketmq.proxy.apis import definition_pb2 as pb
from pocketmq.proxy.apis import service_pb2 as spb
from pocketmq.proxy.backend import Backend
from pocketmq.proxy.errors import Code, ProxyError
from pocketmq.remoting.codes import LanguageCode
from pocketmq.remoting.headers import UnregisterClientRequestHeader

log = get_logger("pocketmq.proxy.clients")

OUTBOX_LIMIT = 1024
"""Commands waiting to be written to one client's Telemetry stream."""


@dataclass(slots=True)
class ClientState:
    """What the proxy knows of one client (by its ``x-mq-client-id``)."""

    client_id: str
    language: str
    version: str
    remote: str
    last_seen: float
    client_type: int = pb.CLIENT_TYPE_UNSPECIFIED
    settings: pb.Settings | None = None
    topics: set[str] = field(default_factory=set)
    group: str = ""
    subscriptions: list[SubscriptionData] = field(default_factory=list)
    outbox: asyncio.Queue[spb.TelemetryCommand] | None = None
    registered: bool = False

    @property
    def is_consumer(self) -> bool:
        return bool(self.group)

    def language_code(self) -> int:
        try:
            return int(LanguageCode[self.language.upper()])
        except KeyError:
            return int(LanguageCode.OTHER)

    def heartbeat(self) -> bytes:
        consumers: list[dict[str, Any]] = []
        if self.group:
            kind = (ConsumeType.CONSUME_PASSIVELY if self.client_type == pb.PUSH_CONSUMER
                    else ConsumeType.CONSUME_POP)
            consumers.append(consumer_data_json(self.group, self.subscriptions, consume_type=kind))
        return heartbeat_body(self.client_id, sorted(self.topics), consumers)


class ClientRegistry:
    """The clients of this proxy (see the module docstring)."""

    def __init__(self, backend: Backend, *, max_clients: int, idle_timeout: float, heartbeat_interval: float) -> None:
        self.backend = backend
        self.max_clients = max_clients
        self.idle_timeout = idle_timeout
        self.clients: dict[str, ClientState] = {}
        #: Called with the id of a client that ended or expired (its held messages are released).
        self.on_gone: Callable[[str], Awaitable[None]] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.service = Service(name="proxy-clients")
        self.service.add_child(periodic("proxy-client-heartbeat", heartbeat_interval, self.heartbeat_all))

    async def stop(self) -> None:
        await self.service.stop()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(*(self._unregister(c) for c in list(self.clients.values()) if c.registered),
                             return_exceptions=True)

    # -- calls -------------------------------------------------------------------------------------------

    def touch(self, client_id: str, language: str, version: str, remote: str) -> ClientState:
        """The client's state, created on its first call; CLIENT_ID_REQUIRED without an id."""
        if not client_id:
            raise ProxyError(Code.CLIENT_ID_REQUIRED, "the x-mq-client-id metadata is missing")
        client = self.clients.get(client_id)
        now = time.monotonic()
        if client is None:
            if len(self.clients) >= self.max_clients:
                self.expire(now)
                if len(self.clients) >= self.max_clients:
                    raise ProxyError(Code.TOO_MANY_REQUESTS, f"this proxy serves {self.max_clients} clients already")
            client = self.clients[client_id] = ClientState(client_id, language, version, remote, now)
        client.last_seen = now
        return client

    def update_settings(self, client: ClientState, settings: pb.Settings,
                        subscriptions: list[SubscriptionData]) -> None:
        """A client's settings from its Telemetry stream: what it produces or consumes."""
        client.settings = settings
        client.client_type = settings.client_type
        changed = False
        if settings.HasField("publishing"):
            topics = {t.name for t in settings.publishing.topics}
            changed = not topics <= client.topics
            client.topics |= topics
        if settings.HasField("subscription"):
            group = settings.subscription.group.name
            changed = group != client.group or subscriptions != client.subscriptions
            client.group = group
            client.subscriptions = subscriptions
        if changed or not client.registered:
            self.register_soon(client)

    def note_producer(self, client: ClientState, topic: str) -> None:
        """A client sends to ``topic``: registered as a producer of it (its transactions are checked back)."""
        if topic not in client.topics:
            client.topics.add(topic)
            self.register_soon(client)

    def note_consumer(self, client: ClientState, client_type: int, group: str) -> None:
        if group and not client.group:
            client.group = group
            client.client_type = client_type
            self.register_soon(client)

    async def remove(self, client_id: str) -> ClientState | None:
        client = self.clients.pop(client_id, None)
        if client is not None:
            self._close_outbox(client)
            if self.on_gone is not None:
                await self.on_gone(client_id)
            if client.registered:
                await self._unregister(client)
        return client

    # -- telemetry ----------------------------------------------------------------------------------------

    def open_stream(self, client: ClientState) -> asyncio.Queue[spb.TelemetryCommand]:
        """A new outbox for the client's Telemetry stream (a stream opened again replaces the old one)."""
        self._close_outbox(client)
        client.outbox = asyncio.Queue(OUTBOX_LIMIT)
        return client.outbox

    def close_stream(self, client: ClientState, outbox: asyncio.Queue[spb.TelemetryCommand]) -> None:
        if client.outbox is outbox:
            client.outbox = None
            client.last_seen = time.monotonic()

    @staticmethod
    def _close_outbox(client: ClientState) -> None:
        if client.outbox is not None:
            with contextlib.suppress(asyncio.QueueFull):
                client.outbox.put_nowait(spb.TelemetryCommand())  # an empty command ends the writer
            client.outbox = None

    def push_to_producer(self, topic: str, command: spb.TelemetryCommand) -> bool:
        """Put ``command`` on the stream of a producer of ``topic`` chosen at random; False when none is
        connected or its outbox is full."""
        streams = [c.outbox for c in self.clients.values() if topic in c.topics and c.outbox is not None]
        if not streams:
            return False
        outbox = random.choice(streams)
        try:
            outbox.put_nowait(command)
        except asyncio.QueueFull:
            return False
        return True

    # -- registration at the brokers ----------------------------------------------------------------------

    def register_soon(self, client: ClientState) -> None:
        self._spawn(self._register(client))

    async def _register(self, client: ClientState) -> None:
        for topic in sorted(client.topics | {s.topic for s in client.subscriptions}):
            with contextlib.suppress(ProxyError):
                await self.backend.route(topic)  # the brokers serving the client's topics become known
        addrs = self.backend.broker_addrs(masters_only=not client.is_consumer)
        if not addrs:
            return
        body = client.heartbeat()
        results = await asyncio.gather(*(self.backend.heartbeat(a, body, client.language_code()) for a in addrs))
        client.registered = client.registered or any(results)

    async def _unregister(self, client: ClientState) -> None:
        calls = []
        for addr in self.backend.broker_addrs(masters_only=False):
            for topic in client.topics:
                calls.append(self.backend.unregister(addr, UnregisterClientRequestHeader(
                    client.client_id, producer_group=topic).to_fields()))
            if client.group:
                calls.append(self.backend.unregister(addr, UnregisterClientRequestHeader(
                    client.client_id, consumer_group=client.group).to_fields()))
        await asyncio.gather(*calls, return_exceptions=True)

    def expire(self, now: float) -> list[ClientState]:
        """Forget clients idle longer than the idle timeout and without a Telemetry stream."""
        gone = [c for c in self.clients.values() if c.outbox is None and now - c.last_seen > self.idle_timeout]
        for client in gone:
            del self.clients[client.client_id]
            log.info("client_expired", client_id=client.client_id, group=client.group or None)
            self._spawn(self._gone(client))
        return gone

    async def _gone(self, client: ClientState) -> None:
        if self.on_gone is not None:
            await self.on_gone(client.client_id)
        if client.registered:
            await self._unregister(client)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def heartbeat_all(self) -> None:
        self.expire(time.monotonic())
        clients: Iterable[ClientState] = [c for c in self.clients.values() if c.topics or c.group]
        await asyncio.gather(*(self._register(c) for c in clients), return_exceptions=True)

    def snapshot(self) -> list[dict[str, Any]]:
        """The clients as ``rmq-admin``/metrics show them."""
        return [{"clientId": c.client_id, "language": c.language, "version": c.version, "address": c.remote,
                 "type": pb.ClientType.Name(c.client_type), "group": c.group,
                 "topics": sorted(c.topics), "telemetry": c.outbox is not None}
                for c in sorted(self.clients.values(), key=lambda c: c.client_id)]
