"""``BrokerHeartbeatManager``: which brokers this controller hears from (RocketMQ 5's
``DefaultBrokerHeartbeatManager``).

Every controller keeps its own table: brokers send their heartbeat (BROKER_HEARTBEAT, 904) to all of them, so a
controller that becomes leader already knows who is alive. A broker is alive while its last heartbeat is younger than
the timeout it announced (``heartbeatTimeoutMills``) and, for a broker that acknowledges only what every SyncStateSet
member holds (``allAckInSyncStateSet``), while the connection it heartbeats on is open: a killed broker's connection
closes at once, so it is replaced without waiting out the timeout. A broker that may acknowledge alone is given the
whole timeout even after its connection closed: it fences itself within it when it cannot renew (see the design
document), and a new master must not start before.

A new leader counts every broker as heard from at the moment it took over (``grace``): what the old leader renewed is
honoured for one more timeout before anybody is replaced for silence.
"""

from __future__ import annotations

from dataclasses import dataclass

from pocketmq.remoting.controller_headers import BrokerHeartbeatRequestHeader

__all__ = ["DEFAULT_TIMEOUT_S", "MAX_BROKERS", "BrokerHeartbeatManager", "BrokerLiveInfo"]

DEFAULT_TIMEOUT_S = 3.0
"""A broker that announces no ``heartbeatTimeoutMills`` is dead after this long without a heartbeat."""
MAX_BROKERS = 16_384
"""Brokers tracked at most; a heartbeat from one more is not recorded (a bound, not a cluster size)."""


@dataclass(slots=True)
class BrokerLiveInfo:
    cluster: str
    broker_name: str
    broker_id: int
    address: str
    last_update: float
    timeout: float
    channel: object | None
    epoch: int = 0
    max_offset: int = 0
    confirm_offset: int = 0
    election_priority: int = 2**31 - 1
    all_ack: bool = True
    channel_closed: bool = False


class BrokerHeartbeatManager:
    """See the module docstring. Times are the caller's monotonic clock."""

    def __init__(self) -> None:
        self.table: dict[tuple[str, int], BrokerLiveInfo] = {}
        self._grace_until = -float("inf")
        self._grace_from = -float("inf")

    def on_heartbeat(self, header: BrokerHeartbeatRequestHeader, channel: object | None, now: float) -> bool:
        """Record a heartbeat; False when it names no broker id (a broker not yet registered) or the table is full."""
        if header.broker_id is None or header.broker_id < 0:
            return False
        key = (header.broker_name, header.broker_id)
        info = self.table.get(key)
        if info is None:
            if len(self.table) >= MAX_BROKERS:
                return False
            info = self.table[key] = BrokerLiveInfo(header.cluster_name, header.broker_name, header.broker_id,
                                                    header.broker_addr, now, DEFAULT_TIMEOUT_S, channel)
        info.address = header.broker_addr
        info.last_update = now
        info.channel = channel
        info.channel_closed = False
        if header.heartbeat_timeout_mills:
            info.timeout = header.heartbeat_timeout_mills / 1000
        if header.epoch is not None:
            info.epoch = header.epoch
        if header.max_offset is not None:
            info.max_offset = header.max_offset
        if header.confirm_offset is not None:
            info.confirm_offset = header.confirm_offset
        if header.election_priority is not None:
            info.election_priority = header.election_priority
        if header.all_ack_in_sync_state_set is not None:
            info.all_ack = header.all_ack_in_sync_state_set
        return True

    def on_channel_closed(self, channel: object) -> list[BrokerLiveInfo]:
        """The connection ``channel`` closed: the brokers that heartbeat on it."""
        closed = [info for info in self.table.values() if info.channel is channel]
        for info in closed:
            info.channel_closed = True
            info.channel = None
        return closed

    def grace(self, now: float) -> None:
        """This controller just became leader (see the module docstring)."""
        self._grace_from = now
        self._grace_until = now + max((i.timeout for i in self.table.values()), default=DEFAULT_TIMEOUT_S)

    def is_alive(self, broker_name: str, broker_id: int, now: float) -> bool:
        info = self.table.get((broker_name, broker_id))
        if info is None:
            return now < self._grace_until  # not heard from since this controller started: give it the timeout
        last = max(info.last_update, self._grace_from)
        if now - last > info.timeout:
            return False
        return not (info.channel_closed and info.all_ack)

    def get(self, broker_name: str, broker_id: int) -> BrokerLiveInfo | None:
        return self.table.get((broker_name, broker_id))

    def forget(self, broker_name: str, broker_ids: list[int] | None) -> None:
        """Stop tracking the given brokers of a group (all of them for None)."""
        for key in [k for k in self.table if k[0] == broker_name and (broker_ids is None or k[1] in broker_ids)]:
            del self.table[key]
