"""Finding stored messages: queries by key and by unique key, and viewing a message by either id.

RocketMQ's ``MQAdminImpl.queryMessage`` / ``viewMessage``, on top of two things any caller has: a way to
fetch a topic's route and a way to send a request to a broker. :class:`MessageQuerier` asks every broker
group of the topic at once (QUERY_MESSAGE, 12): the master, and when it cannot be reached its slaves in
turn (a slave builds its own index); it keeps the records whose topic and key really match (an index entry
is a hash) and returns them newest first.

:meth:`MessageQuerier.view_message` takes either id a send returns: an *offset* id (store host and commit-log
offset, 32 hex digits) of a broker of the topic is read with VIEW_MESSAGE_BY_ID (33) from that broker, or
from its slaves when it cannot be reached; anything else, or an offset id that names no message, is taken for
a client *unique* id (``UNIQ_KEY``) and found with a unique-key query (``_UNIQUE_KEY_QUERY=true``) from
shortly before the time the id carries.

The producer exposes both (:meth:`pocketmq.client.producer.producer.Producer.query_message` and ``view_message``);
``rmq-admin`` builds a querier over its own connections (:func:`MessageQuerier`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from pocketmq.client.core.errors import MQClientError
from pocketmq.client.core.instance import MQClientInstance
from pocketmq.client.core.message_ext import MessageDecodeError, MessageExt, decode_messages
from pocketmq.client.core.uniq import _month_bounds
from pocketmq.common.record import decode_message_id
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import PocketMQError
from pocketmq.remoting.headers import UNIQUE_KEY_QUERY, QueryMessageRequestHeader, ViewMessageRequestHeader
from pocketmq.remoting.route import MASTER_ID, BrokerData, TopicRouteData

Invoke = Callable[[str, RemotingCommand, float], Awaitable[RemotingCommand]]
"""Send a request to a broker address and wait for its answer (``RemotingClient.invoke``)."""
FetchRoute = Callable[[str], Awaitable[TopicRouteData | None]]
"""The current route of a topic (None: the topic has none)."""

LONG_MAX = (1 << 63) - 1
UNIQUE_QUERY_MAX_NUM = 32
_UNIQUE_LOOKBACK_MS = 1000


class QueryError(MQClientError):
    """No broker of the topic could answer, or the topic has no route."""


def nearly_time_of(unique_id: str, now_ms: int | None = None) -> int | None:
    """The time (epoch ms) a client unique id was made, from the month-relative ms it carries (RocketMQ's
    ``getNearlyTimeFromID``: a time after ``now`` belongs to the previous month); None when the id is not one."""
    if len(unique_id) < 12:
        return None
    try:
        delta = int(unique_id[-12:-4], 16)
    except ValueError:
        return None
    now = int(time.time() * 1000) if now_ms is None else now_ms
    start, _end = _month_bounds(now)
    if start + delta > now:
        start, _end = _month_bounds(start - 1)
    return start + delta


def members(broker: BrokerData) -> list[str]:
    """A broker group's addresses to try: the master first, then the slaves by id."""
    return [addr for _id, addr in sorted(broker.broker_addrs.items(), key=lambda item: (item[0] != MASTER_ID,
                                                                                          item[0]))]


class MessageQuerier:
    """Queries over ``fetch_route`` and ``invoke`` (see the module docstring); ``timeout`` per request."""

    def __init__(self, fetch_route: FetchRoute, invoke: Invoke, *, timeout: float = 3.0) -> None:
        self._fetch_route = fetch_route
        self._invoke = invoke
        self.timeout = timeout

    async def _route(self, topic: str) -> TopicRouteData:
        route = await self._fetch_route(topic)
        if route is None or not route.broker_datas:
            raise QueryError(f"no route of topic {topic!r}")
        return route

    async def query_message(self, topic: str, key: str, max_num: int, begin: int, end: int,
                            *, unique: bool = False) -> list[MessageExt]:
        """The messages of ``topic`` whose KEYS hold ``key`` (with ``unique``: whose UNIQ_KEY is ``key``)
        stored in ``[begin, end]`` (epoch ms), newest first; each broker answers at most ``max_num``.
        Raises :class:`QueryError` when no broker could answer."""
        if max_num <= 0:
            raise ValueError("max_num must be positive")
        route = await self._route(topic)
        fields = QueryMessageRequestHeader(topic, key, max_num, begin, end).to_fields()
        if unique:
            fields[UNIQUE_KEY_QUERY] = "true"
        answers = await asyncio.gather(*(self._ask_group(b, RequestCode.QUERY_MESSAGE, fields)
                                         for b in route.broker_datas))
        if all(isinstance(a, str) for a in answers):
            raise QueryError(f"no broker of topic {topic!r} answered: " + "; ".join(map(str, answers)))
        found: dict[tuple[str, int], MessageExt] = {}
        for broker, answer in zip(route.broker_datas, answers, strict=True):
            if isinstance(answer, RemotingCommand) and answer.code == ResponseCode.SUCCESS and answer.body:
                for message in decode_messages(bytes(answer.body), broker_name=broker.broker_name):
                    if message.topic == topic and _matches(message, key, unique):
                        found.setdefault((broker.broker_name, message.commit_log_offset), message)
        return sorted(found.values(), key=lambda m: m.store_timestamp, reverse=True)

    async def view_message(self, topic: str, msg_id: str) -> MessageExt:
        """The message named by an offset id or a client unique id (see the module docstring). Raises
        :class:`QueryError` when it cannot be found."""
        route = await self._route(topic)
        message = await self._view_by_offset(route, msg_id)
        if message is not None:
            return message
        made = nearly_time_of(msg_id)
        begin = max(0, made - _UNIQUE_LOOKBACK_MS) if made is not None else 0
        found = await self.query_message(topic, msg_id, UNIQUE_QUERY_MAX_NUM, begin, LONG_MAX, unique=True)
        if not found:
            raise QueryError(f"no message of topic {topic!r} with id {msg_id}")
        return found[-1]  # the first stored (a producer's retry may have stored it twice)

    async def _view_by_offset(self, route: TopicRouteData, msg_id: str) -> MessageExt | None:
        """VIEW_MESSAGE_BY_ID from the group of the id's broker or, when the route no longer lists it (a master
        gone), from every group; an answer counts only if it is the record the id names (a slave's copy
        carries its master's store host and offsets)."""
        try:
            ip, port, offset = decode_message_id(msg_id)
        except ValueError:
            return None
        addr = f"{ip}:{port}"
        groups = [b for b in route.broker_datas if addr in b.broker_addrs.values()] or route.broker_datas
        fields = ViewMessageRequestHeader(offset).to_fields()
        for broker in groups:
            answer = await self._ask_group(broker, RequestCode.VIEW_MESSAGE_BY_ID, fields, first=addr)
            if not isinstance(answer, RemotingCommand) or answer.code != ResponseCode.SUCCESS or not answer.body:
                continue
            try:
                messages = decode_messages(bytes(answer.body), broker_name=broker.broker_name)
            except MessageDecodeError:
                continue
            if messages and messages[0].offset_msg_id == msg_id.upper():
                return messages[0]
        return None

    async def _ask_group(self, broker: BrokerData, code: int, fields: dict[str, str],
                         first: str | None = None) -> RemotingCommand | str:
        """The first answer of a broker group's members (``first``, else the master, then the slaves);
        a string saying why when none answered."""
        addrs = members(broker)
        if first is not None and first in addrs:
            addrs.remove(first)
            addrs.insert(0, first)
        errors = []
        for addr in addrs:
            try:
                answer = await self._invoke(addr, RemotingCommand.request(code, dict(fields)), self.timeout)
            except (PocketMQError, OSError, TimeoutError) as exc:
                errors.append(f"{addr}: {type(exc).__name__}: {exc}")
                continue
            if answer.code in (ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND):
                return answer
            errors.append(f"{addr}: code {answer.code}: {answer.remark or ''}")
        return f"{broker.broker_name}: " + ", ".join(errors or ["no address"])


def _matches(message: MessageExt, key: str, unique: bool) -> bool:
    if unique:
        return message.uniq_key == key
    return key in message.key_list


def querier_for(instance: MQClientInstance, timeout: float = 3.0) -> MessageQuerier:
    """A querier over a client instance's route fetcher and connections."""

    async def fetch(topic: str) -> TopicRouteData | None:
        return await instance.refresher.fetch_route(topic, timeout)

    return MessageQuerier(fetch, instance.remoting.invoke, timeout=timeout)
