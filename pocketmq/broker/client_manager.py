"""Producers and consumers known to the broker, from their heartbeats (HEART_BEAT 34).

Heartbeat bodies come in several dialects: enum names (``"CLUSTERING"``) from Java and
JavaScript clients, ordinals (``messageModel:1``) and string ``subVersion`` from the C++ client, empty
sets omitted, and msgpack from our own SDK. :func:`parse_heartbeat` turns all of them into one typed shape
(subscriptions are the model's :class:`~pocketmq.common.subscription.SubscriptionData`).
A client is forgotten when its connection closes or it unregisters; silent connections are closed by the
remoting server's idle scan (120 s).

Costs stay per client, not per cluster: the groups each connection's clients are in are indexed by connection (a
closing connection touches its own groups, not all of them), and a heartbeat whose body is byte for byte the one
the same connection sent last (what a client sends every 30 s while nothing changes) is not parsed again
(:meth:`ClientManager.known_heartbeat`).

:meth:`ClientManager.find_channel` finds a client's live connection by its client id (RocketMQ's
``ProducerManager.findChannel``): the broker pushes a request's reply to it (PUSH_REPLY_MESSAGE_TO_CLIENT).
Every heartbeat indexes its client, producer or consumer, so a client that only consumes is found too.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pocketmq.common.consumer import ConsumeFromWhere, ConsumeType, MessageModel, WireEnum
from pocketmq.common.errors import FieldFormatError
from pocketmq.common.subscription import SubscriptionData
from pocketmq.remoting.connection import Connection
from pocketmq.remoting.errors import InvalidHeaderError

_E = TypeVar("_E", bound=WireEnum)

#: Bounds on what one heartbeat may register: a heartbeat is untrusted input.
MAX_GROUPS_PER_HEARTBEAT = 1024
MAX_SUBSCRIPTIONS_PER_GROUP = 1024
#: Client ids indexed for :meth:`ClientManager.find_channel` at most (connections are capped lower than this).
MAX_INDEXED_CLIENTS = 65_536


def _lenient(value: object, default: _E) -> _E:
    """The member a heartbeat names: a Java ordinal (an int), a Java name in any case, else ``default``."""
    kind = type(default)
    if isinstance(value, int) and not isinstance(value, bool):
        return kind.from_ordinal(value) or default
    if isinstance(value, str):
        try:
            return kind(value.upper())
        except ValueError:
            return default
    return default


@dataclass(frozen=True, slots=True)
class ConsumerData:
    group_name: str
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.LAST_OFFSET
    subscriptions: tuple[SubscriptionData, ...] = ()


@dataclass(frozen=True, slots=True)
class HeartbeatData:
    client_id: str
    producer_groups: tuple[str, ...]
    consumers: tuple[ConsumerData, ...]


def _subscription(raw: dict[str, Any]) -> SubscriptionData:
    try:
        return SubscriptionData.from_json_dict(raw)
    except FieldFormatError as exc:
        raise InvalidHeaderError(f"heartbeat {exc}") from None


def _consumer(raw: dict[str, Any]) -> ConsumerData:
    group = raw.get("groupName")
    if not isinstance(group, str) or not group:
        raise InvalidHeaderError("heartbeat consumer data without a groupName")
    subs = raw.get("subscriptionDataSet") or []
    if len(subs) > MAX_SUBSCRIPTIONS_PER_GROUP:
        raise InvalidHeaderError(f"heartbeat with more than {MAX_SUBSCRIPTIONS_PER_GROUP} subscriptions")
    return ConsumerData(
        group_name=group,
        consume_type=_lenient(raw.get("consumeType"), ConsumeType.CONSUME_PASSIVELY),
        message_model=_lenient(raw.get("messageModel"), MessageModel.CLUSTERING),
        consume_from_where=_lenient(raw.get("consumeFromWhere"), ConsumeFromWhere.LAST_OFFSET),
        subscriptions=tuple(_subscription(s) for s in subs if isinstance(s, dict)),
    )


def parse_heartbeat(raw: object) -> HeartbeatData:
    """A decoded HEART_BEAT body (JSON or msgpack) in any client's dialect."""
    if not isinstance(raw, dict):
        raise InvalidHeaderError("heartbeat body is not an object")
    client_id = raw.get("clientID")
    if not isinstance(client_id, str) or not client_id:
        raise InvalidHeaderError("heartbeat without clientID")
    producers = raw.get("producerDataSet") or []
    consumers = raw.get("consumerDataSet") or []
    if len(producers) + len(consumers) > MAX_GROUPS_PER_HEARTBEAT:
        raise InvalidHeaderError(f"heartbeat with more than {MAX_GROUPS_PER_HEARTBEAT} groups")
    return HeartbeatData(
        client_id=client_id,
        producer_groups=tuple(
            str(p["groupName"]) for p in producers if isinstance(p, dict) and isinstance(p.get("groupName"), str)
        ),
        consumers=tuple(_consumer(c) for c in consumers if isinstance(c, dict)),
    )


@dataclass(slots=True)
class ClientChannel:
    client_id: str
    connection: Connection
    last_update: float
    #: The client's language name and version ordinal, from its heartbeat's header (ConsumerConnection shows them).
    language: str = "JAVA"
    version: int = 0


@dataclass(slots=True)
class ConsumerGroupInfo:
    group_name: str
    consume_type: ConsumeType
    message_model: MessageModel
    consume_from_where: ConsumeFromWhere
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)
    channels: dict[str, ClientChannel] = field(default_factory=dict)

    def client_ids(self) -> list[str]:
        return sorted(self.channels)


@dataclass(slots=True)
class _Registered:
    """What one connection's clients are registered as: (group, client id) pairs, and its last heartbeat."""

    producers: set[tuple[str, str]] = field(default_factory=set)
    consumers: set[tuple[str, str]] = field(default_factory=set)
    body: bytes = b""
    groups: tuple[str, ...] = ()


def _newest_subscriptions(old: dict[str, SubscriptionData],
                          new: Iterable[SubscriptionData]) -> dict[str, SubscriptionData]:
    """A heartbeat's subscriptions, each kept at the newest version any member sent (RocketMQ's
    ``updateSubscription``): members built at different times must not replace each other's in turn, or the
    member with the newer version is answered SUBSCRIPTION_NOT_LATEST while its unchanged heartbeats are skipped."""
    merged = {}
    for sub in new:
        kept = old.get(sub.topic)
        merged[sub.topic] = kept if kept is not None and kept.sub_version > sub.sub_version else sub
    return merged


class ClientManager:
    """Producer and consumer groups with their live client channels."""

    def __init__(self) -> None:
        self.producers: dict[str, dict[str, ClientChannel]] = {}
        self.consumers: dict[str, ConsumerGroupInfo] = {}
        self._by_conn: dict[Connection, _Registered] = {}
        #: client id → the channel of its latest heartbeat (see :meth:`find_channel`).
        self._by_client: dict[str, ClientChannel] = {}

    def known_heartbeat(self, conn: Connection, body: bytes) -> tuple[str, ...] | None:
        """When ``body`` is the last heartbeat ``conn`` sent (and nothing unregistered its clients since): its
        consumer groups, with the channels' times refreshed; None otherwise (the caller parses it)."""
        registered = self._by_conn.get(conn)
        if registered is None or not body or registered.body != body:
            return None
        now = time.monotonic()
        for group, client_id in registered.consumers:
            info = self.consumers.get(group)
            channel = info.channels.get(client_id) if info is not None else None
            if channel is not None and channel.connection is conn:
                channel.last_update = now
        for group, client_id in registered.producers:
            channel = self.producers.get(group, {}).get(client_id)
            if channel is not None and channel.connection is conn:
                channel.last_update = now
        return registered.groups

    def remember(self, conn: Connection, body: bytes, data: HeartbeatData) -> None:
        """``body`` (parsed as ``data``) is ``conn``'s latest heartbeat."""
        registered = self._by_conn.get(conn)
        if registered is not None:
            registered.body = body
            registered.groups = tuple(c.group_name for c in data.consumers)

    @staticmethod
    def _channel(old: ClientChannel | None, client_id: str, conn: Connection, now: float, language: str,
                 version: int) -> ClientChannel:
        if old is not None and old.connection is conn and old.language == language and old.version == version:
            old.last_update = now
            return old
        return ClientChannel(client_id, conn, now, language, version)

    def heartbeat(self, data: HeartbeatData, conn: Connection, language: str = "JAVA", version: int = 0) -> list[str]:
        """Record a heartbeat; returns the consumer groups whose membership changed."""
        now = time.monotonic()
        registered = self._by_conn.get(conn)
        if registered is None:
            registered = self._by_conn[conn] = _Registered()
        client_id = data.client_id
        self._index(self._channel(self._by_client.get(client_id), client_id, conn, now, language, version))
        for group in data.producer_groups:
            channels = self.producers.setdefault(group, {})
            channels[client_id] = self._channel(channels.get(client_id), client_id, conn, now, language, version)
            registered.producers.add((group, client_id))
        changed = []
        for consumer in data.consumers:
            info = self.consumers.get(consumer.group_name)
            if info is None:
                info = ConsumerGroupInfo(consumer.group_name, consumer.consume_type, consumer.message_model,
                                         consumer.consume_from_where)
                self.consumers[consumer.group_name] = info
            info.consume_type = consumer.consume_type
            info.message_model = consumer.message_model
            info.consume_from_where = consumer.consume_from_where
            info.subscriptions = _newest_subscriptions(info.subscriptions, consumer.subscriptions)
            old = info.channels.get(client_id)
            if old is None:
                changed.append(consumer.group_name)
            info.channels[client_id] = self._channel(old, client_id, conn, now, language, version)
            registered.consumers.add((consumer.group_name, client_id))
        return changed

    def unregister(self, client_id: str, producer_group: str | None, consumer_group: str | None) -> list[str]:
        if producer_group:
            self._forget(self.producers.get(producer_group, {}).pop(client_id, None), producer_group, False)
        changed = []
        if consumer_group:
            info = self.consumers.get(consumer_group)
            channel = info.channels.pop(client_id, None) if info is not None else None
            if channel is not None:
                self._forget(channel, consumer_group, True)
                changed.append(consumer_group)
        return changed

    def _forget(self, channel: ClientChannel | None, group: str, consumer: bool) -> None:
        """``channel``'s client left ``group``: its connection's next heartbeat is parsed again, and the client is
        no longer found by id once it is in no group over that connection."""
        registered = self._by_conn.get(channel.connection) if channel is not None else None
        if channel is None or registered is None:
            return
        registered.body = b""
        (registered.consumers if consumer else registered.producers).discard((group, channel.client_id))
        client_id = channel.client_id
        if not any(cid == client_id for pairs in (registered.producers, registered.consumers) for _g, cid in pairs):
            indexed = self._by_client.get(client_id)
            if indexed is not None and indexed.connection is channel.connection:
                del self._by_client[client_id]

    def connection_closed(self, conn: Connection) -> list[str]:
        """Forget every client registered over ``conn``; returns consumer groups that changed."""
        registered = self._by_conn.pop(conn, None)
        if registered is None:
            return []
        for _group, client_id in (*registered.producers, *registered.consumers):
            indexed = self._by_client.get(client_id)
            if indexed is not None and indexed.connection is conn:
                del self._by_client[client_id]
        for group, client_id in registered.producers:
            channels = self.producers.get(group)
            if channels is not None and (ch := channels.get(client_id)) is not None and ch.connection is conn:
                del channels[client_id]
        changed = set()
        for group, client_id in registered.consumers:
            info = self.consumers.get(group)
            if info is not None and (ch := info.channels.get(client_id)) is not None and ch.connection is conn:
                del info.channels[client_id]
                changed.add(group)
        return sorted(changed)

    def find_channel(self, client_id: str) -> ClientChannel | None:
        """The live channel of the client ``client_id`` (any group), None when it is not connected."""
        channel = self._by_client.get(client_id)
        return channel if channel is not None and not channel.connection.is_closed else None

    def _index(self, channel: ClientChannel) -> None:
        by_client = self._by_client
        if channel.client_id not in by_client and len(by_client) >= MAX_INDEXED_CLIENTS:
            for cid in [cid for cid, ch in by_client.items() if ch.connection.is_closed]:
                del by_client[cid]
            if len(by_client) >= MAX_INDEXED_CLIENTS:
                return  # a connection that heartbeats for thousands of made-up ids gets no more of them indexed
        by_client[channel.client_id] = channel

    def producer_count(self) -> int:
        return sum(len(g) for g in self.producers.values())

    # -- admin look-ups (GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY, resets) -------------------------

    def consumer_channel(self, group: str, client_id: str) -> ClientChannel | None:
        """The live channel of one consumer client of ``group``, None when it is not connected."""
        info = self.consumers.get(group)
        channel = info.channels.get(client_id) if info is not None else None
        return channel if channel is not None and not channel.connection.is_closed else None

    def live_consumer_channels(self, group: str) -> list[ClientChannel]:
        info = self.consumers.get(group)
        if info is None:
            return []
        return [ch for _cid, ch in sorted(info.channels.items()) if not ch.connection.is_closed]

    def groups_consuming(self, topic: str) -> list[str]:
        """Online consumer groups subscribed to ``topic``."""
        return sorted(name for name, info in self.consumers.items() if info.channels and topic in info.subscriptions)
