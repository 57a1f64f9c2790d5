"""The one place a client fetches topic routes from the name servers (RocketMQ's
``updateTopicRouteInfoFromNameServer`` / ``tryToFindTopicPublishInfo``), for producers and consumers alike.

Name-server selection: one name server is asked until it fails, then the next one round-robin; the one that
answers becomes the sticky one. Each name server left gets an equal share of what remains of the lookup's
budget, so one that never answers cannot use it all up.

Single flight: concurrent callers refreshing one topic share one fetch (:meth:`RouteRefresher.refresh`), and
callers that give up (their timeout) leave it running for the others. A fetch:

1. asks a name server for the topic's route; if it has one, it is applied;
2. if it has none (TOPIC_NOT_EXIST) and a publisher waits on the fetch (``publish=True``): when the topic
   already has a route of its own, that route is kept (a name server briefly without the topic must not empty
   a working route); otherwise ``TBW102``'s route is fetched and the topic published on the brokers that can
   auto-create it (:func:`~pocketmq.client.core.route_table.default_route_for_topic`); the first send creates the
   topic there and the next refresh finds the topic's own route;
3. a consumer's fetch (``publish=False``) stops at 1: it has nothing to read from a topic that does not exist.

A partial route does not replace a complete one: when the answer lacks brokers of the topic's own route held,
the other name servers are asked too, and each missing broker that one of them still lists is kept, with its
queue and broker data from that answer. A name server that has just restarted knows only the brokers that
re-registered since (a second or so, see ``broker.registration``); a consumer that took its partial route
rebalanced over part of the queues while the others kept theirs, and four queues were read twice for 30 s.
A broker that every name server asked has dropped (it died, or its topic was deleted) goes at once, as in
RocketMQ; the confirmation costs one more lookup only when a route loses a broker. (Live connections were
not taken as the confirmation: a broker whose topic was deleted stays connected, and would never go.)

A publisher joining a consumer's fetch still in flight turns its fallback on, so one fetch serves both.
On-demand refreshes after a failure (:meth:`RouteRefresher.request`) run in the background, at most every
``min_refresh_interval`` per topic and kind.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from pocketmq.client.core.config import DEFAULT_TOPIC, ClientConfig
from pocketmq.client.core.errors import MQClientError, NoNameServerError
from pocketmq.client.core.route_table import MAX_TOPICS, RouteTable, default_route_for_topic, with_brokers_of
from pocketmq.common.logs import get_logger
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection
from pocketmq.remoting.errors import RemotingError, ResponseError, error_for_response
from pocketmq.remoting.headers import GetRouteInfoRequestHeader
from pocketmq.remoting.route import BodyDecodeError, TopicRouteData, decode_route

__all__ = ["ApplyRoute", "RouteRefresher"]

log = get_logger("pocketmq.client.route_refresher")

#: ``apply(topic, route, from_default=...)``: what the instance does with a route fetched.
ApplyRoute = Callable[..., None]
Connect = Callable[[str, float], Awaitable[Connection]]
Spawn = Callable[[Coroutine[Any, Any, None]], "asyncio.Task[None]"]


class _Flight:
    """One fetch in flight: whether a publisher waits on it (then the ``TBW102`` fallback applies)."""

    __slots__ = ("publish",)

    def __init__(self, publish: bool) -> None:
        self.publish = publish


class RouteRefresher:
    """Fetches routes for an instance (see the module docstring); ``apply`` receives what it found."""

    def __init__(
        self, config: ClientConfig, routes: RouteTable, *, connect: Connect, apply: ApplyRoute, spawn: Spawn
    ) -> None:
        self.config = config
        self.namesrv_addrs = config.namesrv_addrs
        self._routes = routes
        self._connect = connect
        self._apply = apply
        self._spawn = spawn
        self._flights: dict[str, tuple[asyncio.Task[None], _Flight]] = {}
        self._last_on_demand: dict[tuple[str, bool], float] = {}
        self._ns_index = random.randrange(len(self.namesrv_addrs))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self.log = log.bind(client_id=config.client_id)

    def start(self) -> None:
        """Allow background refreshes (:meth:`request`) on the running loop."""
        self._loop = asyncio.get_running_loop()

    def close(self) -> None:
        """No fetch starts any more (the instance cancels those running)."""
        self._closed = True

    @property
    def current_namesrv(self) -> str:
        """The name server asked first."""
        return self.namesrv_addrs[self._ns_index]

    # -- single flight ----------------------------------------------------------------------------------

    async def refresh(self, topic: str, timeout: float, *, publish: bool) -> None:
        """Fetch the topic's route now (or join the fetch already running) and wait at most ``timeout``.

        Raises :class:`NoNameServerError` when no name server answered in time.
        """
        if self._closed:
            raise MQClientError("the client instance is shut down")
        try:
            await asyncio.wait_for(asyncio.shield(self._flight(topic, publish)), timeout)
        except TimeoutError:
            raise NoNameServerError(f"route lookup of {topic} did not finish within {timeout * 1000:.0f} ms") from None

    def request(self, topic: str, *, publish: bool, min_interval: float | None = None) -> None:
        """Refresh in the background after a failure, at most every ``min_refresh_interval`` (or ``min_interval``)
        per topic and kind (a producer's requests and a consumer's do not hold each other back)."""
        if self._closed or self._loop is None:
            return
        now = self._loop.time()
        key = (topic, publish)
        last = self._last_on_demand.get(key)
        limit = self.config.min_refresh_interval if min_interval is None else min_interval
        if last is not None and now - last < limit:
            return
        if len(self._last_on_demand) >= MAX_TOPICS:
            self._last_on_demand.clear()
        self._last_on_demand[key] = now
        self._flight(topic, publish)

    def forget(self, topic: str) -> None:
        """The instance no longer holds the topic: its on-demand rate limit goes too."""
        self._last_on_demand.pop((topic, True), None)
        self._last_on_demand.pop((topic, False), None)

    def _flight(self, topic: str, publish: bool) -> asyncio.Task[None]:
        running = self._flights.get(topic)
        if running is not None and not running[0].done():
            task, flight = running
            flight.publish = flight.publish or publish  # read by the fetch once its answer is in
            return task
        flight = _Flight(publish)
        task = self._spawn(self._update(topic, flight))
        self._flights[topic] = (task, flight)

        def landed(done: asyncio.Task[None]) -> None:
            if self._flights.get(topic, (None,))[0] is done:
                del self._flights[topic]

        task.add_done_callback(landed)
        return task

    async def _update(self, topic: str, flight: _Flight) -> None:
        timeout = self.config.namesrv_timeout
        route = await self.fetch_route(topic, timeout)
        if route is not None:
            self._apply(topic, await self._complete(topic, route, timeout), from_default=False)
            return
        if not flight.publish or self._routes.has_own_route(topic):
            return  # nothing to read from a topic that does not exist / keep the last real route
        default = await self.fetch_route(DEFAULT_TOPIC, timeout)
        if default is None:
            return
        derived = default_route_for_topic(default, default_topic_queue_nums=self.config.default_topic_queue_nums)
        self._apply(topic, derived, from_default=True)

    async def _complete(self, topic: str, route: TopicRouteData, timeout: float) -> TopicRouteData:
        """``route`` plus the brokers of the route held that it lacks and another name server still lists."""
        held = self._routes.subscribe_route(topic)
        if held is None or len(self.namesrv_addrs) == 1:
            return route
        missing = {b.broker_name for b in held.broker_datas} - {b.broker_name for b in route.broker_datas}
        if not missing:
            return route
        answered = self._ns_index
        loop = asyncio.get_running_loop()
        share_end = loop.time() + timeout / (len(self.namesrv_addrs) - 1)
        fields = GetRouteInfoRequestHeader(topic).to_fields()
        for index, addr in enumerate(self.namesrv_addrs):
            if index == answered or not missing:
                continue
            request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, dict(fields),
                                              serialize_type=self.config.serialize_type)
            try:
                other = await self._ask(addr, request, share_end)
            except (RemotingError, ResponseError, BodyDecodeError):
                other = None
            share_end = loop.time() + timeout / (len(self.namesrv_addrs) - 1)
            if other is None:
                continue
            kept = missing & {b.broker_name for b in other.broker_datas}
            if kept:
                route = with_brokers_of(route, other, kept)
                missing -= kept
                self.log.info("partial_route_completed", topic=topic, partial=self.namesrv_addrs[answered],
                              confirmed_by=addr, kept=sorted(kept))
        return route

    # -- name servers -----------------------------------------------------------------------------------

    async def fetch_route(self, topic: str, timeout: float) -> TopicRouteData | None:
        """GET_ROUTEINFO_BY_TOPIC to the sticky name server, then the others round-robin on failure.

        Returns ``None`` when a name server answered TOPIC_NOT_EXIST.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        fields = GetRouteInfoRequestHeader(topic).to_fields()
        count = len(self.namesrv_addrs)
        failures: list[str] = []
        for i in range(count):
            index = (self._ns_index + i) % count
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            share_end = loop.time() + remaining / (count - i)
            request = RemotingCommand.request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, dict(fields), serialize_type=self.config.serialize_type
            )
            try:
                answer = await self._ask(self.namesrv_addrs[index], request, share_end)
            except (RemotingError, ResponseError, BodyDecodeError) as exc:
                failures.append(f"{self.namesrv_addrs[index]}: {exc}")
                continue
            self._stick_to(index)
            return answer
        self._ns_index = (self._ns_index + 1) % count  # start with the next one next time
        raise NoNameServerError(f"no name server answered the route of {topic}: " + "; ".join(failures or ["timeout"]))

    async def _ask(self, addr: str, request: RemotingCommand, share_end: float) -> TopicRouteData | None:
        """One name server's answer: the route, or ``None`` for TOPIC_NOT_EXIST. Raises a transport error, the
        broker's error for another code, or :class:`BodyDecodeError`."""
        loop = asyncio.get_running_loop()
        conn = await self._connect(addr, share_end - loop.time())
        response = await conn.request(request, max(share_end - loop.time(), 0.001))
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        if response.code != ResponseCode.SUCCESS:
            raise error_for_response(response.code, response.remark, addr)
        return decode_route(response.body or b"", response.serialize_type)

    def _stick_to(self, index: int) -> None:
        if index != self._ns_index:
            self.log.info("namesrv_switched", frm=self.namesrv_addrs[self._ns_index], to=self.namesrv_addrs[index])
            self._ns_index = index
