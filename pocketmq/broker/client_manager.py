"""Producers and consumers known to the broker, from their heartbeats (HEART_BEAT 34).

Heartbeat bodies come in several dialects: enum names (``"CLUSTERING"``) from Java and
JavaScript clients, ordinals (``messageModel:1``) and string ``subVersion`` from the C++ client, empty
sets omitted, and msgpack from our own SDK. :func:`parse_heartbeat` turns all of them into one typed shape
(subscriptions are the model's :class:`~pocketmq.common.subscription.SubscriptionData`).
A client is forgotten when its connection closes or it unregisters; silent connections are closed by the
remoting server's idle scan (120 s).

:meth:`ClientManager.find_channel` finds a client's live connection by its client id (RocketMQ's
``ProducerManager.findChannel``): the broker pushes a request's reply to it (PUSH_REPLY_MESSAGE_TO_CLIENT).
Every heartbeat indexes its client, producer or consumer, so a client that only consumes is found too.
"""

from __future__ import annotations

import time
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


class ClientManager:
    """Producer and consumer groups with their live client channels."""

    def __init__(self) -> None:
        self.producers: dict[str, dict[str, ClientChannel]] = {}
        self.consumers: dict[str, ConsumerGroupInfo] = {}
        #: client id → the channel of its latest heartbeat (see :meth:`find_channel`).
        self._by_client: dict[str, ClientChannel] = {}

    def heartbeat(self, data: HeartbeatData, conn: Connection, language: str = "JAVA", version: int = 0) -> list[str]:
        """Record a heartbeat; returns the consumer groups whose membership changed."""
        now = time.monotonic()
        self._index(ClientChannel(data.client_id, conn, now, language, version))
        for group in data.producer_groups:
            self.producers.setdefault(group, {})[data.client_id] = ClientChannel(data.client_id, conn, now,
                                                                                 language, version)
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
            info.subscriptions = {s.topic: s for s in consumer.subscriptions}
            if data.client_id not in info.channels:
                changed.append(consumer.group_name)
            info.channels[data.client_id] = ClientChannel(data.client_id, conn, now, language, version)
        return changed

    def unregister(self, client_id: str, producer_group: str | None, consumer_group: str | None) -> list[str]:
        if producer_group:
            self.producers.get(producer_group, {}).pop(client_id, None)
        changed = []
        if consumer_group:
            info = self.consumers.get(consumer_group)
            if info is not None and info.channels.pop(client_id, None) is not None:
                changed.append(consumer_group)
        if not self._registered(client_id):
            self._by_client.pop(client_id, None)
        return changed

    def connection_closed(self, conn: Connection) -> list[str]:
        """Forget every client registered over ``conn``; returns consumer groups that changed."""
        for group in self.producers.values():
            for cid in [cid for cid, ch in group.items() if ch.connection is conn]:
                del group[cid]
        for cid in [cid for cid, ch in self._by_client.items() if ch.connection is conn]:
            del self._by_client[cid]
        changed = []
        for name, info in self.consumers.items():
            gone = [cid for cid, ch in info.channels.items() if ch.connection is conn]
            for cid in gone:
                del info.channels[cid]
            if gone:
                changed.append(name)
        return changed

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

    def _registered(self, client_id: str) -> bool:
        """Whether ``client_id`` still has a producer or consumer group here."""
        return (any(client_id in group for group in self.producers.values())
                or any(client_id in info.channels for info in self.consumers.values()))

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
