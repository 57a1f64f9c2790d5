"""``ControllerManager``: one controller (RocketMQ 5's class of the same name), the composition of

* the replicated state (:class:`~pocketmq.controller.replicas.ReplicasInfoManager`) on a Raft node
  (:class:`~pocketmq.controller.raft.node.RaftNode`, its messages on this process's remoting port);
* this controller's view of which brokers are alive (:class:`~pocketmq.controller.heartbeat.BrokerHeartbeatManager`);
* the request handlers (:mod:`pocketmq.controller.processor`, given this manager by whoever serves them);
* on the leader, the scan for groups whose master is gone (every ``scanInactiveMasterInterval``, at once when a
  broker's connection closes and when this controller becomes leader), the elections it starts, and the notice
  (NOTIFY_BROKER_ROLE_CHANGED) to every replica of a group whose master changed.

Decisions are taken one at a time (a lock): each reads the applied state, chooses, proposes one conditional event and
waits until it is applied, so two decisions never act on the same state.

It runs inside the name server (``enableControllerInNamesrv``: the name server's server carries its requests) or in
``rmq-controller`` (:mod:`pocketmq.controller.main`).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from pocketmq.common.logs import get_logger
from pocketmq.common.service import Service, periodic
from pocketmq.controller.config import ControllerConfig
from pocketmq.controller.elect import elect_master
from pocketmq.controller.heartbeat import BrokerHeartbeatManager
from pocketmq.controller.raft import NotLeaderError, ProposalDroppedError, RaftConfig, RaftNode
from pocketmq.controller.replicas import BrokerReplicaInfo, ReplicasInfoManager, event
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection
from pocketmq.remoting.controller_headers import NotifyBrokerRoleChangedRequestHeader, SyncStateSet
from pocketmq.remoting.errors import PocketMQError
from pocketmq.remoting.metrics import Metrics
from pocketmq.remoting.route import encode_body

__all__ = ["ControllerManager", "ElectOutcome", "register_metrics"]

log = get_logger("pocketmq.controller.manager")

PROPOSE_TIMEOUT = 5.0
"""How long one decision waits for its event to be committed and applied."""
FENCE_TIMEOUT = 6.0
"""A planned switchover: how long the old master has to stop taking writes and see its slaves hold everything."""


@dataclass(frozen=True, slots=True)
class ElectOutcome:
    """What an election decided: a response code and the group after it (None when there is no such group)."""

    code: int
    remark: str
    group: BrokerReplicaInfo | None


class ControllerManager:
    """See the module docstring: ``await start()``, its processor's handlers on a server, ``on_connection_closed``
    from that server, ``await stop()``."""

    def __init__(self, config: ControllerConfig, *, client: RemotingClient | None = None) -> None:
        self.config = config
        self.replicas = ReplicasInfoManager()
        self.heartbeats = BrokerHeartbeatManager()
        self._own_client = client is None
        self.client = client or RemotingClient(connect_timeout=1.0)
        raft = RaftConfig(config.controller_d_leger_self_id, config.peers, config.raft_directory,
                          election_timeout=config.controller_raft_election_timeout_mills / 1000,
                          heartbeat_interval=config.controller_raft_heartbeat_interval_mills / 1000,
                          snapshot_every=config.controller_raft_snapshot_every_entries)
        self.node = RaftNode(raft, self.replicas, self._send_raft, on_role_change=self._role_changed)
        self.lock = asyncio.Lock()
        self._services = Service(name="controller")
        self._scanner = self._services.add_child(
            periodic("controller-scan", config.scan_inactive_master_interval / 1000, self.scan_inactive_masters))
        self._was_leader = False
        #: elections that made a new master, and planned switchovers among them (for metrics)
        self.elections = 0
        self.switchovers = 0
        self._notices: set[asyncio.Future[None]] = set()
        self.log = log.bind(controller=config.controller_d_leger_self_id)

    # ============================================================================================ lifecycle

    async def start(self) -> None:
        await self.node.open()
        self.node.start()
        self._services.start()
        self.log.info("controller_started", peers=self.config.controller_d_leger_peers,
                      store=self.config.raft_directory)

    async def stop(self) -> None:
        await self._services.stop()
        for notice in list(self._notices):
            notice.cancel()
        await self.node.stop()
        if self._own_client:
            await self.client.close()

    def on_connection_closed(self, conn: Connection) -> None:
        if self.heartbeats.on_channel_closed(conn) and self.node.is_leader:
            self._scanner.trigger()

    async def _send_raft(self, address: str, body: bytes) -> None:
        request = RemotingCommand.request(RequestCode.CONTROLLER_RAFT_MESSAGE, None, body)
        await self.client.invoke_oneway(address, request)

    def _role_changed(self) -> None:
        leader = self.node.is_leader
        if leader and not self._was_leader:
            self.heartbeats.grace(time.monotonic())
            self._scanner.trigger()
        self._was_leader = leader

    # =========================================================================================== decisions

    @property
    def now(self) -> float:
        return time.monotonic()

    async def propose(self, data: bytes) -> dict[str, Any]:
        """Commit one event and return what applying it said (raises NotLeaderError, ProposalDroppedError,
        TimeoutError)."""
        result: dict[str, Any] = await self.node.propose(data, PROPOSE_TIMEOUT)
        return result

    async def scan_inactive_masters(self) -> None:
        """Leader only: elect where the master is gone, or where there is none and a candidate is alive."""
        if not self.node.can_serve():
            return
        now = self.now
        for name, group in list(self.replicas.groups.items()):
            if group.master_id is not None:
                if self.heartbeats.is_alive(name, group.master_id, now):
                    continue
            elif not any(self.heartbeats.is_alive(name, m, now) for m in group.sync_state_set) and not (
                    self.config.enable_elect_unclean_master and group.replicas):
                continue
            try:
                outcome = await self.elect(name)
            except (NotLeaderError, ProposalDroppedError, TimeoutError) as exc:
                self.log.warning("election_not_committed", group=name, error=str(exc))
                return
            if outcome.code == ResponseCode.SUCCESS:
                self.log.warning("master_replaced", group=name, master=outcome.group.master_id if outcome.group
                                 else None, epoch=outcome.group.master_epoch if outcome.group else None)

    async def elect(self, name: str, *, broker_id: int | None = None, prefer: int | None = None) -> ElectOutcome:
        """One election for group ``name``: started by this controller (no ids), by a broker of the group
        (``broker_id``: the first master of a new group is the first broker that asks), or by an administrator
        (``prefer``: a planned switchover to that broker, the old master fenced first)."""
        async with self.lock:
            group = self.replicas.groups.get(name)
            if group is None:
                return ElectOutcome(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                                    f"broker group {name} has not registered", None)
            first = group.master_id is None and group.master_epoch == 0 and broker_id in group.replicas
            chosen = broker_id if first and prefer is None else elect_master(
                group, self.heartbeats, self.now, prefer=prefer, unclean=self.config.enable_elect_unclean_master)
            if broker_id is not None and broker_id == group.master_id and prefer is None:
                # the master itself asks: it restarted, and must not write under the epoch it had before
                return await self._commit_election(group, broker_id, planned=False)
            if chosen is not None and chosen == group.master_id:
                return ElectOutcome(ResponseCode.CONTROLLER_MASTER_STILL_EXIST,
                                    f"the master {chosen} of {name} is still alive", group)
            if chosen is None:
                if broker_id is None and prefer is None and group.master_id is not None:
                    await self.propose(event("elect", name=name, master=None, epoch=group.master_epoch))
                    self.notify(name)
                    return ElectOutcome(ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE,
                                        f"the master of {name} is gone and no SyncStateSet member is alive", group)
                return ElectOutcome(ResponseCode.CONTROLLER_ELECT_MASTER_FAILED,
                                    f"no broker of {name} can be elected", group)
            planned = prefer is not None and group.master_id is not None and \
                self.heartbeats.is_alive(name, group.master_id, self.now)
            if planned:
                fenced = await self.fence_master(group)
                if fenced is not None:
                    return ElectOutcome(ResponseCode.CONTROLLER_ELECT_MASTER_FAILED, fenced, group)
            return await self._commit_election(group, chosen, planned=planned)

    async def _commit_election(self, group: BrokerReplicaInfo, chosen: int, *, planned: bool) -> ElectOutcome:
        name = group.broker_name
        result = await self.propose(event("elect", name=name, master=chosen, epoch=group.master_epoch))
        if not result.get("ok"):
            return ElectOutcome(ResponseCode.CONTROLLER_ELECT_MASTER_FAILED, str(result.get("error")), group)
        self.elections += 1
        self.switchovers += planned
        self.log.info("master_elected", group=name, master=chosen, epoch=group.master_epoch, planned=planned)
        self.notify(name)
        return ElectOutcome(ResponseCode.SUCCESS, "", self.replicas.groups.get(name))

    async def fence_master(self, group: BrokerReplicaInfo) -> str | None:
        """A planned switchover: ask the master to stop taking writes at its epoch and answer once every member of
        its SyncStateSet holds all it wrote. None when it did; else why not (the switchover is refused)."""
        address = group.master_address
        if address is None:
            return "the master has no address"
        request = RemotingCommand.request(RequestCode.CONTROLLER_FENCE_MASTER,
                                          {"masterEpoch": str(group.master_epoch)})
        try:
            response = await self.client.invoke(address, request, FENCE_TIMEOUT)
        except PocketMQError as exc:
            return f"the master did not answer the fence request: {exc}"
        if response.code != ResponseCode.SUCCESS:
            return f"the master refused to step down: {response.remark}"
        return None

    # ======================================================================================= notifications

    def notify(self, name: str) -> None:
        """Tell every replica of group ``name`` its state (oneway; the brokers also ask every few seconds)."""
        group = self.replicas.groups.get(name)
        if group is None or not self.config.notify_broker_role_changed:
            return
        header = NotifyBrokerRoleChangedRequestHeader(group.master_address, group.master_epoch,
                                                      group.sync_state_set_epoch, group.master_id,
                                                      group.master_ha_address).to_fields()
        body = encode_body(SyncStateSet(frozenset(group.sync_state_set), group.sync_state_set_epoch).to_json_dict())
        for replica in group.replicas.values():
            request = RemotingCommand.request(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, dict(header), body)
            task = asyncio.ensure_future(self._notify_one(replica.address, request))
            self._notices.add(task)
            task.add_done_callback(self._notices.discard)

    async def _notify_one(self, address: str, request: RemotingCommand) -> None:
        try:
            await self.client.invoke_oneway(address, request)
        except PocketMQError as exc:
            self.log.info("notify_failed", broker=address, error=str(exc))


def register_metrics(m: Metrics, manager: ControllerManager) -> None:
    """The controller's gauges: its Raft role and term, per group the master epoch and the SyncStateSet size, and the
    elections (and planned switchovers) this controller has led since it started."""
    node, groups = manager.node, manager.replicas.groups
    m.gauge("pocketmq_controller_is_leader", "1 while this controller is the Raft leader", [],
            lambda: [((), 1 if node.is_leader else 0)])
    m.gauge("pocketmq_controller_raft_term", "This controller's Raft term", [],
            lambda: [((), node.core.term)] if node.core is not None else [])
    m.gauge("pocketmq_controller_master_epoch", "Master epoch of each broker group", ["group"],
            lambda: [((name,), g.master_epoch) for name, g in groups.items()])
    m.gauge("pocketmq_controller_sync_state_set_size", "Members of each group's SyncStateSet", ["group"],
            lambda: [((name,), len(g.sync_state_set)) for name, g in groups.items()])
    m.gauge("pocketmq_controller_elections", "Elections that made a new master, led by this controller since it "
            "started (planned: electMaster switchovers)", ["kind"],
            lambda: [(("any",), manager.elections), (("planned",), manager.switchovers)])
