"""``ReplicasManager``: a broker's side of controller mode (RocketMQ 5's class of the same name).

At start the broker takes no writes. It gets its replica id (configured, or assigned by the controller and kept in
``<store>/config/controllerIdentity.json``), applies for it and registers with the controller leader
(:mod:`pocketmq.broker.controller_api`), and asks for an election when its group has never had a master. From then on
the controller's word decides its role (:meth:`ReplicasManager.on_state`), whether it comes as a notification
(NOTIFY_BROKER_ROLE_CHANGED), in the leader's answer to a heartbeat, or from the periodic poll:

* a newer epoch whose master is this broker: it becomes the master of that epoch (the broker's
  ``become_master``: stop copying, cut a half-copied record, append ``<epoch, max offset>`` to the epoch file, start
  the master's services, take writes, register as brokerId 0 of that epoch);
* a newer epoch with another master (or none): it stops taking writes at once and follows that master (``become_slave``:
  its log is cut to where the two agree at the replication handshake);
* the same epoch, a newer SyncStateSet: the master takes it.

A master that restarted finds itself the master of its own last epoch: it asks to be elected again, for a new epoch,
before it takes a write (a master that lost an unflushed tail must not write new records at offsets its slaves hold
other records at, under the same epoch).

While master it checks every ``checkSyncStateSetPeriod`` whether a member has not caught up for
``haMaxTimeSlaveNotCatchup`` (it asks the controller to drop it) or a follower has caught up (to add it; it waits for
that follower's acknowledgements from the moment it asks, :mod:`pocketmq.ha.sync_state`).

Fencing. A master stops taking writes the moment it learns of a newer epoch, and for a planned switchover when the
controller asks (:meth:`ReplicasManager.fence_for_switchover`: new writes are refused with SERVICE_NOT_AVAILABLE, which
producers retry elsewhere, and the answer waits until every SyncStateSet member holds everything written). Without
``allAckInSyncStateSet`` it also stops when no controller leader has confirmed it for ``lease`` (less than the
controllers' heartbeat timeout, so it has stopped before any of them may replace it); with it, a replacement is
always a replica that held every acknowledged write, so the master keeps serving while the controllers are down.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import secrets
import time
from typing import Protocol

from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.controller_api import ControllerClient, ControllerError, GroupState
from pocketmq.common.files import write_atomically
from pocketmq.common.logs import get_logger
from pocketmq.common.service import Service, periodic
from pocketmq.ha.epoch_file import EpochFileCache
from pocketmq.ha.service import HAService
from pocketmq.ha.slave_epochs import SlaveEpochs
from pocketmq.ha.sync_state import ControllerReplication
from pocketmq.remoting.codes import ResponseCode
from pocketmq.remoting.controller_headers import BrokerHeartbeatRequestHeader

__all__ = ["ReplicasManager", "RoleHost"]

log = get_logger("pocketmq.broker.replicas_manager")

IDENTITY_WAIT_S = 30.0
"""How long a broker with ``brokerId=-1`` waits at its first start for a controller to assign it an id."""
FENCE_HOLD_S = 10.0
"""A planned switchover's fence lifts by itself after this long when no new epoch came (the controller gave up)."""


class RoleHost(Protocol):
    """What the manager asks of the broker (:class:`pocketmq.broker.controller.BrokerController`)."""

    @property
    def addr(self) -> str: ...

    @property
    def ha_addr(self) -> str: ...

    def max_phy_offset(self) -> int: ...

    async def become_master(self, state: GroupState, previous_master: str | None) -> None: ...

    async def become_slave(self, state: GroupState) -> None: ...

    def follow(self, state: GroupState) -> None: ...

    def set_writes_fenced(self, reason: str | None) -> None: ...


class ReplicasManager:
    """See the module docstring. ``start()`` after the broker serves; ``await stop()`` before it stops."""

    def __init__(self, config: BrokerConfig, host: RoleHost, controllers: ControllerClient,
                 ha_service: HAService, epochs: EpochFileCache, identity_path: str) -> None:
        self.config = config
        self.host = host
        self.controllers = controllers
        self.ha_service = ha_service
        self.epochs = epochs
        self._identity_path = identity_path
        self.broker_id = config.broker_id
        #: the HA client's side of the handshake, told this replica's id (the broker sets it)
        self.slave_epochs: SlaveEpochs | None = None
        self._token = ""
        if ha_service.controller is None:
            raise ValueError("controller mode needs an HAService made with a ControllerReplication")
        self.replication: ControllerReplication = ha_service.controller
        self.role = "UNDECIDED"
        self.master_epoch = 0
        self.state: GroupState | None = None
        self.registered = False
        self._lock = asyncio.Lock()
        self._fence_until = 0.0
        self._renewed_at = -float("inf")
        self.lease = (config.controller_heart_beat_timeout_mills - 2 * config.broker_heartbeat_interval) / 1000
        #: role changes since start (metrics)
        self.role_changes = 0
        self._services = Service(name="replicas-manager")
        self._services.add_child(periodic("controller-heartbeat", config.broker_heartbeat_interval / 1000,
                                          self.heartbeat, initial_delay=0))
        self._sync = self._services.add_child(periodic("controller-sync", config.sync_broker_metadata_period / 1000,
                                                       self.sync_state, initial_delay=0))
        self._services.add_child(periodic("sync-state-set-check", config.check_sync_state_set_period / 1000,
                                          self.check_sync_state_set))
        self.log = log.bind(broker=config.broker_name)

    # ============================================================================================ lifecycle

    async def load_identity(self) -> None:
        """This replica's id and register token (created on first start; an id is asked of the controller when
        ``brokerId=-1``, retried for :data:`IDENTITY_WAIT_S`). Raises ControllerError when none was assigned."""
        stored = await asyncio.to_thread(self._read_identity)
        self._token = str(stored.get("token") or secrets.token_hex(8))
        if self.broker_id == -1:
            stored_id = stored.get("brokerId")
            self.broker_id = (stored_id if isinstance(stored_id, int) else 0) or await self._next_id()
        await self._save_identity(stored)

    async def _next_id(self) -> int:
        deadline = time.monotonic() + IDENTITY_WAIT_S
        while True:
            try:
                return await self.controllers.next_broker_id()
            except ControllerError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)

    async def _save_identity(self, stored: dict[str, object]) -> None:
        self.replication.broker_id = self.broker_id
        if self.slave_epochs is not None:
            self.slave_epochs.broker_id = self.broker_id
        if stored != {"brokerId": self.broker_id, "token": self._token}:
            data = json.dumps({"brokerId": self.broker_id, "token": self._token}).encode()
            await asyncio.to_thread(write_atomically, self._identity_path, data)
        self.log = log.bind(broker=self.config.broker_name, broker_id=self.broker_id)

    def _read_identity(self) -> dict[str, object]:
        try:
            with open(self._identity_path, "rb") as f:
                data = json.loads(f.read())
            return data if isinstance(data, dict) else {}
        except FileNotFoundError:
            return {}
        except ValueError:
            log.warning("controller_identity_unreadable", path=self._identity_path)
            return {}

    def start(self) -> None:
        self._services.start()

    async def stop(self) -> None:
        await self._services.stop()

    # ============================================================================================== talking

    async def register(self) -> None:
        """Apply for the id and register; ask for an election when the group never had a master. An assigned id
        (``brokerId=-1``) another replica took first is replaced by the next free one."""
        try:
            await self.controllers.apply_broker_id(self.broker_id, f"{self.host.addr};{self._token}")
        except ControllerError as exc:
            if exc.response_code != ResponseCode.CONTROLLER_BROKER_ID_INVALID or self.config.broker_id != -1:
                raise
            self.broker_id = await self.controllers.next_broker_id()
            await self._save_identity({})
            self.log.warning("broker_id_taken_reassigned", broker_id=self.broker_id)
            await self.controllers.apply_broker_id(self.broker_id, f"{self.host.addr};{self._token}")
        state = await self.controllers.register(self.broker_id, self.host.addr, self.host.ha_addr)
        self.registered = True
        self.log.info("registered_with_controller", master=state.master_id, epoch=state.master_epoch)
        if state.master_id is None:
            _code, state = await self.controllers.elect(self.broker_id)
        await self.on_state(state)

    async def sync_state(self) -> None:
        """The periodic poll: register until registered, then read the group's state."""
        try:
            if not self.registered:
                await self.register()
                return
            await self.on_state(await self.controllers.group_state())
        except ControllerError as exc:
            if exc.response_code in (ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST,
                                     ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED):
                self.registered = False
            self.log.info("controller_sync_failed", error=str(exc))

    async def heartbeat(self) -> None:
        """Tell every controller this broker lives; the leader's answer renews a master's standing."""
        sent_at = time.monotonic()
        header = BrokerHeartbeatRequestHeader(
            self.config.broker_cluster_name, self.host.addr, self.config.broker_name, self.broker_id,
            self.epochs.last_epoch, self.host.max_phy_offset(), self.confirm_offset(),
            self.config.controller_heart_beat_timeout_mills, self.config.broker_election_priority,
            self.replication.policy.all_ack_in_sync_state_set)
        state = await self.controllers.heartbeat(header, self.config.broker_heartbeat_interval / 1000 * 2)
        if state is not None:
            if self.role == "MASTER" and state.master_id == self.broker_id and \
                    state.master_epoch == self.master_epoch:
                self._renewed_at = sent_at
            if self.registered:
                await self.on_state(state)
        self._check_lease()

    def confirm_offset(self) -> int:
        """What every SyncStateSet member holds (the master's max when it is alone)."""
        if self.role != "MASTER":
            return self.host.max_phy_offset()
        return min(self.ha_service.push_to_slave_max_offset, self.host.max_phy_offset())

    # ============================================================================================ the state

    async def on_state(self, state: GroupState) -> None:
        """Act on the group's state as the controller said it (see the module docstring)."""
        async with self._lock:
            if not state.replicas and self.state is not None:  # a heartbeat's answer names no replica addresses
                state = dataclasses.replace(state, replicas=self.state.replicas)
            self.state = state
            if state.master_epoch > self.master_epoch:
                await self._new_epoch(state)
            elif state.master_epoch == self.master_epoch and self.role == "MASTER":
                self._new_sync_state_set(state)
            elif state.master_epoch == self.master_epoch and self.role == "UNDECIDED":
                await self._new_epoch(state)
            elif state.master_epoch == self.master_epoch and self.role == "SLAVE":
                self.host.follow(state)  # an address the first answer lacked, or one that changed

    async def _new_epoch(self, state: GroupState) -> None:
        if state.master_id == self.broker_id:
            if self.role == "UNDECIDED" and state.master_epoch <= self.epochs.last_epoch:
                await self._ask_for_new_epoch(state)
                return
            previous = self.state.master_address if self.state is not None else None
            await self._become_master(state, previous)
        else:
            await self._become_slave(state)

    async def _ask_for_new_epoch(self, state: GroupState) -> None:
        """Restarted as the master of our own last epoch: be elected again before taking writes."""
        self.log.warning("restarted_as_master_asking_new_epoch", epoch=state.master_epoch)
        try:
            code, fresh = await self.controllers.elect(self.broker_id)
        except ControllerError as exc:
            self.log.warning("re_election_failed", error=str(exc))
            return
        if code == ResponseCode.SUCCESS and fresh.master_epoch > state.master_epoch:
            if fresh.master_id == self.broker_id:
                await self._become_master(fresh, None)
            else:
                await self._become_slave(fresh)

    async def _become_master(self, state: GroupState, previous: str | None) -> None:
        self.log.warning("becoming_master", epoch=state.master_epoch, sync_state_set=sorted(state.sync_state_set))
        repl = self.replication
        repl.sync_state_set = state.sync_state_set or frozenset({self.broker_id})
        repl.sync_state_set_epoch = state.sync_state_set_epoch
        repl.pending = frozenset()
        repl.master_epoch = state.master_epoch
        self.master_epoch = state.master_epoch
        self.role = "MASTER"
        self.role_changes += 1
        self._renewed_at = time.monotonic()
        self._fence_until = 0.0
        await self.host.become_master(state, previous if previous != self.host.addr else None)

    async def _become_slave(self, state: GroupState) -> None:
        self.log.warning("becoming_slave", epoch=state.master_epoch, master=state.master_id,
                         master_address=state.master_address)
        was_master = self.role == "MASTER"
        self.master_epoch = state.master_epoch
        self.role = "SLAVE"
        self.role_changes += was_master
        self.replication.master_epoch = state.master_epoch
        await self.host.become_slave(state)

    def _new_sync_state_set(self, state: GroupState) -> None:
        repl = self.replication
        if state.sync_state_set_epoch > repl.sync_state_set_epoch and state.sync_state_set:
            repl.sync_state_set = state.sync_state_set
            repl.sync_state_set_epoch = state.sync_state_set_epoch
            repl.pending = repl.pending - state.sync_state_set
            self.ha_service.sync_state_changed()

    # ============================================================================== the SyncStateSet (master)

    async def check_sync_state_set(self) -> None:
        """Shrink or grow the SyncStateSet (see the module docstring)."""
        if self.role != "MASTER" or not self.ha_service.controller:
            return
        repl = self.replication
        now = asyncio.get_running_loop().time()
        limit = self.config.ha.ha_max_time_slave_not_catchup
        recent = limit / 2  # a follower that caught up at least this recently joins
        caught_up: dict[int, float] = {}
        for connection in self.ha_service.attached_slaves:
            caught_up[connection.slave_id] = max(caught_up.get(connection.slave_id, 0.0), connection.caught_up_time)
        members = repl.sync_state_set
        drop = {m for m in members - {self.broker_id} if now - caught_up.get(m, -float("inf")) > limit}
        add = {i for i, t in caught_up.items() if i not in members and i >= 0 and now - t <= recent}
        if not drop and not add:
            return
        wanted = (members - drop) | add
        repl.pending = frozenset(add)  # waited for from now on: see pocketmq.ha.sync_state
        self.ha_service.sync_state_changed()
        self.log.info("sync_state_set_change", members=sorted(members), wanted=sorted(wanted))
        try:
            confirmed = await self.controllers.alter_sync_state_set(self.broker_id, self.master_epoch, wanted,
                                                                    repl.sync_state_set_epoch)
        except ControllerError as exc:
            repl.pending = frozenset()
            self.ha_service.sync_state_changed()
            self.log.warning("sync_state_set_change_refused", error=str(exc))
            if exc.response_code in (ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
                                     ResponseCode.CONTROLLER_INVALID_MASTER):
                self._sync.trigger()
            return
        repl.sync_state_set = frozenset(confirmed.members)
        repl.sync_state_set_epoch = confirmed.epoch
        repl.pending = frozenset()
        self.ha_service.sync_state_changed()

    # ============================================================================================== fencing

    async def fence_for_switchover(self, master_epoch: int) -> str | None:
        """A planned switchover (see the module docstring): None once every SyncStateSet member holds everything
        written; else why not."""
        if self.role != "MASTER" or master_epoch != self.master_epoch:
            return f"not the master of epoch {master_epoch} (role {self.role}, epoch {self.master_epoch})"
        self._fence_until = time.monotonic() + FENCE_HOLD_S
        self.host.set_writes_fenced(f"a switchover of epoch {master_epoch} is under way")
        end = self.host.max_phy_offset()
        deadline = time.monotonic() + self.config.ha.slave_timeout
        while time.monotonic() < deadline:
            if self._members_hold(end):
                return None
            await asyncio.sleep(0.01)
        self._fence_until = 0.0
        self.host.set_writes_fenced(None)
        return f"the SyncStateSet did not reach offset {end} within {self.config.ha.slave_timeout}s"

    def _members_hold(self, offset: int) -> bool:
        required = self.replication.required
        acks: dict[int, int] = {}
        for connection in self.ha_service.attached_slaves:
            acks[connection.slave_id] = max(acks.get(connection.slave_id, -1), connection.ack_offset)
        return all(acks.get(m, -1) >= offset for m in required)

    def _check_lease(self) -> None:
        """Lift an expired switchover fence; fence a master that lost its standing (see the module docstring)."""
        now = time.monotonic()
        if self.role != "MASTER":
            return
        if self._fence_until and now > self._fence_until:
            self._fence_until = 0.0
            self.host.set_writes_fenced(None)
            self.log.warning("switchover_fence_lifted")
        if self.replication.policy.all_ack_in_sync_state_set or self._fence_until:
            return
        expired = now - self._renewed_at > self.lease
        self.host.set_writes_fenced("no controller leader confirmed this master in time" if expired else None)

    # ============================================================================================== reports

    def runtime_info(self) -> dict[str, str]:
        repl = self.replication
        return {"controllerRole": self.role, "brokerControllerId": str(self.broker_id),
                "masterEpoch": str(self.master_epoch), "lastEpoch": str(self.epochs.last_epoch),
                "syncStateSet": ",".join(map(str, sorted(repl.sync_state_set))),
                "syncStateSetEpoch": str(repl.sync_state_set_epoch),
                "controllerLeader": self.controllers.leader or ""}


def identity_path(config_dir: str) -> str:
    return os.path.join(config_dir, "controllerIdentity.json")

