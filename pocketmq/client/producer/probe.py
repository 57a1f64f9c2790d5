"""``FaultProbe``: ends the isolation of a broker that did not answer as soon as it answers again.

A failed attempt isolates its broker for 600 s (:mod:`pocketmq.client.producer.fault`). When the attempt got no answer
at all (the master was killed, restarted, frozen, cut off), the broker is *unreachable*, and every
:data:`PROBE_INTERVAL` the probe asks its master, as the routes know it now, for a heartbeat (what the broker
gets from this client anyway; a restarted one learns the producer groups from it). An answer restores the
broker at once (RocketMQ 5's ``LatencyFaultToleranceImpl.detectByOneway`` does the same), so a broker is out
for as long as it is down, not for ten minutes. Brokers isolated for a slow or negative answer are not probed:
they are alive, and a heartbeat would not tell how slow their sends are.

A restarted master usually comes back on another address, or its group shows no master while it is down,
so each round also asks for a fresh route (rate-limited by the instance to one per ``min_refresh_interval``
per topic) of every topic whose route names an unreachable broker, instead of waiting for the 30 s route
poll. A route that brings a broker's master back, or names a new master, ends its isolation at once
(:meth:`~pocketmq.client.producer.producer.Producer.update_topic_route`).

The probe logs transitions, not probes: ``broker_unreachable`` once when a broker's first probe fails (the
failed heartbeats themselves are debug-level), ``broker_restored`` once when it answers. A broker that
leaves the unreachable set some other way (a new route) is forgotten, so its next outage is logged again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from pocketmq.client.producer.fault import MQFaultStrategy

__all__ = ["PROBE_INTERVAL", "FaultProbe"]

#: Seconds between two probes of an unreachable broker (a probe in progress delays the next one).
PROBE_INTERVAL = 1.0

#: ``ask(addr) -> answered``: one probe request to a broker address.
Ask = Callable[[str], Awaitable[bool]]
#: ``refresh(broker_names)``: ask for fresh routes of the topics that name one of these brokers.
Refresh = Callable[[Iterable[str]], None]


class FaultProbe:
    """Probes a producer's unreachable brokers (see the module docstring); :meth:`tick` is one round."""

    def __init__(self, strategy: MQFaultStrategy, masters: Callable[[], Mapping[str, str]], ask: Ask,
                 refresh: Refresh, log: Any) -> None:
        self._strategy = strategy
        self._masters = masters
        self._ask = ask
        self._refresh = refresh
        self._log = log
        #: Brokers whose failed probe was logged (bounded by the brokers isolated at once).
        self._logged_down: set[str] = set()

    async def tick(self) -> None:
        """Refresh the routes naming an unreachable broker and probe every unreachable broker whose master
        address is known, in parallel."""
        names = self._strategy.latency_fault_tolerance.unreachable()
        self._logged_down.intersection_update(names)
        if names:
            self._refresh(names)
            masters = self._masters()
            probes = [self._probe(name, masters[name]) for name in names if name in masters]
            await asyncio.gather(*probes)

    async def _probe(self, name: str, addr: str) -> None:
        if await self._ask(addr):
            self._strategy.latency_fault_tolerance.remove(name)
            self._logged_down.discard(name)
            self._log.info("broker_restored", broker=name, addr=addr, reason="probe_answered")
        elif name not in self._logged_down:
            self._logged_down.add(name)
            self._log.warning("broker_unreachable", broker=name, addr=addr, probe_interval=PROBE_INTERVAL)
