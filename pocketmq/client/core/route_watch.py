"""``MasterWatch``: which held topics' routes lack a master they had, so the client asks for them again soon.

A broker group whose master goes down leaves the topic's route (the name server drops it when its connection
closes) and comes back when the restarted master registers again, a few seconds later. A client that fetched
the route in between holds one without that group until its next 30 s poll: producers send everything to the
other groups (and when one of those is frozen next, nothing succeeds at all: a chaos run found a cluster-wide
outage as long as one master's SIGSTOP, docs/testing/chaos.md), and consumers do not read the group's queues.

The client instance (:class:`~client.core.instance.MQClientInstance`) calls :meth:`MasterWatch.topics_to_refresh`
every :data:`WATCH_INTERVAL` with its routes; a topic whose route lacks the master of a group seen in it during
the last :data:`WATCH_FOR` seconds is asked for again (the route refresher limits that to one lookup per
``min_refresh_interval`` per topic), and every :data:`SUSPECT_INTERVAL` during the first :data:`FAST_FOR` seconds
(in controller mode another replica takes over in about a second). A topic whose route names as a master an address
whose connection closed (or could not be made) or that answered "not serving" (SERVICE_NOT_AVAILABLE: a slave, a
deposed or fenced master) less than :data:`FAST_FOR` seconds ago, or that has left a request of this client
unanswered, saying nothing, for over :data:`SUSPECT_AFTER`, is asked for every :data:`SUSPECT_INTERVAL`
(:meth:`MasterWatch.topics_naming`): a frozen, cut-off or deposed master stays registered, and in controller mode
another replica takes over and registers as the master of a newer epoch in its place; the client sends to it well
within a second of that registration instead of at the next poll. A group missing for longer stops being watched
(it was removed, not restarted); the 30 s poll still sees it come back. A healthy cluster costs one pass over the
held routes per second and no lookup.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping

from pocketmq.remoting.route import MASTER_ID, TopicRouteData

__all__ = ["FAST_FOR", "SUSPECT_AFTER", "SUSPECT_INTERVAL", "WATCH_FOR", "WATCH_INTERVAL", "MasterWatch"]

#: Seconds between two looks at the routes held.
WATCH_INTERVAL = 1.0
#: A master silent this long on a request of ours is a suspect (s) ...
SUSPECT_AFTER = 1.0
#: ... and the routes naming it are asked for again this often while it is (s); so are, for :data:`FAST_FOR`
#: seconds, the routes of a group whose master went away.
SUSPECT_INTERVAL = 0.25
FAST_FOR = 10.0
#: How long a broker group whose master left a route is watched for its return (s).
WATCH_FOR = 300.0
#: Broker groups remembered per topic (a bound; the oldest are dropped beyond it).
MAX_GROUPS = 1024


class MasterWatch:
    """Per topic, when each broker group was last seen with a master in the topic's route."""

    def __init__(self, *, watch_for: float = WATCH_FOR, max_groups: int = MAX_GROUPS) -> None:
        self.watch_for = watch_for
        self.max_groups = max_groups
        self._seen: dict[str, dict[str, float]] = {}

    def topics_to_refresh(self, routes: Mapping[str, TopicRouteData], now: float) -> Iterator[str]:
        """The topics of ``routes`` (topic -> its own route) lacking a master seen in them lately. Topics not
        in ``routes`` are forgotten."""
        for topic in [t for t in self._seen if t not in routes]:
            del self._seen[topic]
        for topic, route in routes.items():
            if self._missing(topic, route, now):
                yield topic

    def topics_lately_missing(self, routes: Mapping[str, TopicRouteData], now: float,
                              within: float = FAST_FOR) -> Iterator[str]:
        """The topics of ``routes`` lacking a master that was in them less than ``within`` seconds ago (asked for
        every :data:`SUSPECT_INTERVAL`: the master of a controller-mode group is replaced in about a second)."""
        for topic, route in routes.items():
            self.note(topic, route, now)
            if any(0 < now - at < within for at in self._seen.get(topic, {}).values()):
                yield topic

    @staticmethod
    def topics_naming(routes: Mapping[str, TopicRouteData], suspects: Collection[str]) -> Iterator[str]:
        """The topics of ``routes`` whose route names one of ``suspects`` (addresses silent on a request) as a
        master."""
        if suspects:
            for topic, route in routes.items():
                if any(d.broker_addrs.get(MASTER_ID) in suspects for d in route.broker_datas):
                    yield topic

    def note(self, topic: str, route: TopicRouteData, now: float) -> None:
        """Remember the groups that have a master in ``route`` (every route the client applies is noted, so a
        route replaced before the next look still counts)."""
        seen = self._seen.setdefault(topic, {})
        for data in route.broker_datas:
            if MASTER_ID in data.broker_addrs:
                seen[data.broker_name] = now
        while len(seen) > self.max_groups:
            del seen[min(seen, key=seen.__getitem__)]

    def _missing(self, topic: str, route: TopicRouteData, now: float) -> bool:
        self.note(topic, route, now)
        seen = self._seen[topic]
        for name in [n for n, at in seen.items() if now - at > self.watch_for]:
            del seen[name]
        return any(at < now for at in seen.values())
