"""``ControllerModeBroker``: the part of :class:`pocketmq.broker.controller.BrokerController` that controller mode adds
(RocketMQ 5's ``ReplicasManager.changeToMaster`` / ``changeToSlave`` on the broker's side).

A controller-mode broker starts like a slave that takes no writes: its HA server listens (refusing slaves), its HA
client has no master yet, its master-only services do not run. The :class:`~pocketmq.broker.replicas_manager.
ReplicasManager` then calls

* :meth:`ControllerModeBroker.become_master`, in this order: stop copying; when the previous master still answers (a
  planned switchover) copy its metadata one last time; cut a half-copied record; append ``<epoch, max offset>`` to the
  epoch file; start the master's services (delayed delivery, transaction check-backs, whatever was registered with
  :meth:`ControllerModeBroker.add_master_service`) over state rebuilt from the log (transactions); take slaves; take
  writes; register with the name servers as brokerId 0 of the epoch;
* :meth:`ControllerModeBroker.become_slave`: refuse writes at once; drop the slaves and answer their waiting puts
  (SERVICE_NOT_AVAILABLE, retried by producers); stop the master's services; follow the new master (the replication
  handshake cuts what this log holds past where the two agree) and copy its metadata; register as a slave.

Role changes are serialized (one lock), and every step that touches the disk runs off the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Callable

from pocketmq.broker import master_services
from pocketmq.broker.client_manager import ClientManager
from pocketmq.broker.config import BrokerConfig, BrokerRole
from pocketmq.broker.controller_api import ControllerClient, GroupState
from pocketmq.broker.long_polling import PullRequestHoldService
from pocketmq.broker.metadata import ConsumerOffsetManager, DelayOffsets, SubscriptionGroupManager
from pocketmq.broker.pop.long_polling import PopLongPollingService
from pocketmq.broker.pop.processors import PopProcessor
from pocketmq.broker.pop.service import PopService
from pocketmq.broker.processors.consumer_manage import ConsumerManageProcessor
from pocketmq.broker.processors.controller_mode import ControllerModeProcessor
from pocketmq.broker.processors.pull import PullMessageProcessor
from pocketmq.broker.processors.send import SendMessageProcessor
from pocketmq.broker.registration import BrokerIdentity, split_namesrv_addr
from pocketmq.broker.replicas_manager import ReplicasManager, identity_path
from pocketmq.broker.schedule import ScheduleMessageService
from pocketmq.broker.slave_sync import SlaveSynchronize
from pocketmq.broker.timer import TimerMessageService
from pocketmq.broker.topic_manager import TopicConfigManager
from pocketmq.broker.transaction.check import TransactionalMessageCheckService
from pocketmq.broker.transaction.end import EndTransactionProcessor
from pocketmq.broker.transaction.service import TransactionalMessageService
from pocketmq.common.logs import get_logger
from pocketmq.common.service import Service
from pocketmq.ha.client import HAClient
from pocketmq.ha.epoch_file import Epoch, EpochFileCache
from pocketmq.ha.service import HAService
from pocketmq.ha.slave_epochs import SlaveEpochs
from pocketmq.ha.sync_state import AckPolicy, ControllerReplication
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Handler
from pocketmq.remoting.errors import PocketMQError
from pocketmq.remoting.metrics import Metrics
from pocketmq.store.message_store import MessageStore
from pocketmq.store.reader import NO_FENCE

__all__ = ["ControllerModeBroker", "MasterServiceFactory"]

log = get_logger("pocketmq.broker.controller_mode")

MasterServiceFactory = Callable[[MessageStore], Service]
"""Builds a service that runs only while this broker is the master (given the store), started on every takeover."""

FINAL_SYNC_TIMEOUT = 1.5
"""How long a new master tries to copy the previous master's metadata one last time (it answers only when alive)."""
METADATA_PUSH_TIMEOUT = 3.0
"""How long a master waits for an in-sync slave to copy a metadata change."""
REHANDSHAKE_INTERVAL = 2.0
"""A slave whose last epoch handshake is older than the epoch it follows reconnects at most this often (its reads
stay fenced until a handshake with the master of that epoch)."""


class ControllerModeBroker:
    """Mixed into BrokerController (see the module docstring); the attributes below are the broker's."""

    config: BrokerConfig
    client: RemotingClient
    store: MessageStore | None
    ha_service: HAService | None
    ha_client: HAClient | None
    slave_sync: SlaveSynchronize | None
    replicas: ReplicasManager | None
    epochs: EpochFileCache | None
    transactions: TransactionalMessageService | None
    schedule: ScheduleMessageService | None
    delay_offsets: DelayOffsets
    master_addr: str | None
    master_ha_addr: str | None
    hold: PullRequestHoldService
    _send_processor: SendMessageProcessor | None
    _end_transaction: EndTransactionProcessor | None
    _pull_processor: PullMessageProcessor | None
    _pop_processor: PopProcessor | None
    pop: PopService | None
    pop_hold: PopLongPollingService
    timer: TimerMessageService | None
    clients: ClientManager
    consumer_processor: ConsumerManageProcessor
    transaction_check: TransactionalMessageCheckService | None
    _master_services: Service | None
    _master_factories: list[MasterServiceFactory]
    _role_lock: asyncio.Lock
    _rehandshake_at: float = 0.0

    controllers: ControllerClient | None
    topics: TopicConfigManager
    offsets: ConsumerOffsetManager
    groups: SubscriptionGroupManager

    @property
    def port(self) -> int:
        raise NotImplementedError  # the broker's

    @property
    def addr(self) -> str:
        raise NotImplementedError  # the broker's

    @property
    def ha_addr(self) -> str:
        raise NotImplementedError  # the broker's

    async def register_all(self) -> object:
        raise NotImplementedError  # the broker's

    async def _topics_settled(self) -> None:
        raise NotImplementedError  # the broker's

    def _on_put(self) -> Callable[[str, int, int], None]:
        raise NotImplementedError  # the broker's

    def _init_controller_mode(self, config: BrokerConfig) -> None:
        """The controller-mode attributes (None / empty without ``enableControllerMode``)."""
        self.controllers = ControllerClient(
            self.client, split_namesrv_addr(config.controller_addr), cluster=config.broker_cluster_name,
            broker_name=config.broker_name) if config.enable_controller_mode else None
        self.replicas = None
        self.epochs = None
        self._send_processor = None
        self._end_transaction = None
        self._pull_processor = None
        self._pop_processor = None
        self._master_services = None
        self._master_factories = []
        self._role_lock = asyncio.Lock()

    def _controller_identity(self) -> BrokerIdentity:
        """What a controller-mode broker registers as: brokerId 0 while it is the master (of the newest epoch, which
        the name servers compare), its replica id otherwise."""
        replicas = self.replicas
        assert replicas is not None
        broker_id = 0 if replicas.role == "MASTER" else replicas.broker_id
        return BrokerIdentity(self.config.broker_cluster_name, self.config.broker_name, broker_id, self.addr,
                              self.ha_addr, replicas.master_epoch)

    def _controller_handlers(self) -> dict[int, Handler]:
        """Controller mode's request codes: role notifications, epochs, the metadata copy on demand."""
        handlers: dict[int, Handler] = {}
        if self.replicas is None or self.epochs is None:
            return handlers
        if self.slave_sync is not None:
            handlers.update(self.slave_sync.handlers())
        handlers.update(ControllerModeProcessor(self.replicas, self.epochs, cluster=self.config.broker_cluster_name,
                                                broker_name=self.config.broker_name).handlers())
        return handlers

    async def _stop_controller_mode(self) -> None:
        if self.replicas is not None:
            await self.replicas.stop()
        await self._drop_master_services()

    async def _load_controller_identity(self, store: MessageStore) -> None:
        """Controller mode: the epoch file, this replica's id, and the manager that will decide the role."""
        if self.controllers is None:
            return
        ha = self.config.ha
        # an idle follower reports often enough to count as caught up (it leaves the SyncStateSet otherwise)
        heartbeat = min(ha.ha_send_heartbeat_interval, ha.ha_max_time_slave_not_catchup / 3)
        ha = ha.replace(ha_send_heartbeat_interval=heartbeat, ha_housekeeping_interval=max(
            heartbeat * 4, min(ha.ha_housekeeping_interval, ha.ha_max_time_slave_not_catchup)))
        self.config = dataclasses.replace(self.config, ha=ha)
        path = ha.store_path_epoch_file or f"{store.config.store_path_root_dir}/epochFileCheckpoint"
        self.epochs = EpochFileCache(path)
        await asyncio.to_thread(self.epochs.load)
        policy = AckPolicy(ha.all_ack_in_sync_state_set, ha.in_sync_replicas, ha.min_in_sync_replicas)
        replication = ControllerReplication(self.config.broker_id, self.epochs, policy)
        port = ha.ha_listen_port or (self.port + 1 if self.config.listen_port else 0)
        self.ha_service = HAService(store, ha.replace(ha_listen_port=port), controller=replication)
        await self.ha_service.start()  # listening from the start: the controller hands its address out
        self.replicas = ReplicasManager(self.config, self, self.controllers, self.ha_service, self.epochs,
                                        identity_path(self.config.store.config_dir))
        await self.replicas.load_identity()

    def _start_controller_ha(self, store: MessageStore) -> None:
        """Controller mode: the HA server already listens; the client (and the metadata copy) wait for a master."""
        assert self.replicas is not None and self.epochs is not None
        self.replicas.slave_epochs = SlaveEpochs(self.replicas.broker_id, self.epochs)
        self.replicas.slave_epochs.on_adopted = self._log_agrees_with_master
        # Nothing is read before the first epoch handshake: a log that outlived its epoch may end in records of a
        # master whose tail did not survive (cut at the handshake).
        store.set_read_fence(0)
        self.ha_client = HAClient(store, self.config.ha, epochs=self.replicas.slave_epochs)
        self.ha_client.start()
        self.slave_sync = SlaveSynchronize(
            client=self.client, master_addr=lambda: self.master_addr, topics=self.topics, offsets=self.offsets,
            groups=self.groups, delay_offsets=self.delay_offsets,
            interval=self.config.slave_synchronize_interval / 1000, first_delay=0.5)

    def _register_controller_metrics(self, m: Metrics) -> None:
        m.gauge("pocketmq_broker_master_epoch", "Controller mode: the master epoch this broker follows or leads", [],
                lambda: [((), self.replicas.master_epoch)] if self.replicas else [])
        m.gauge("pocketmq_broker_sync_state_set_size", "Controller mode, on the master: members of its SyncStateSet",
                [], lambda: [((), len(self.replicas.replication.sync_state_set))]
                if self.replicas and self.replicas.role == "MASTER" else [])
        m.gauge("pocketmq_broker_role_changes", "Controller mode: times this broker became master or stopped being it",
                [], lambda: [((), self.replicas.role_changes)] if self.replicas else [])

    @property
    def is_controller_master(self) -> bool:
        return self.replicas is not None and self.replicas.role == "MASTER"

    def add_master_service(self, factory: MasterServiceFactory) -> None:
        """Run ``factory(store)``'s service while this broker is the master (POP revive, timer... register here)."""
        self._master_factories.append(factory)

    def set_writes_fenced(self, reason: str | None) -> None:
        if self.store is not None:
            self.store.set_fenced(reason)

    def max_phy_offset(self) -> int:
        return self.store.max_phy_offset if self.store is not None else 0

    async def _settle_and_replicate(self) -> None:
        """A topic changed by an administrator: the name servers learn it, and the in-sync slaves copy it."""
        await self._topics_settled()
        await self.replicate_metadata()

    async def replicate_metadata(self) -> None:
        """On the master: ask each in-sync slave to copy the metadata now and wait for them (bounded); a slave that
        does not answer in time copies it at its next round (see :mod:`pocketmq.broker.slave_sync`)."""
        replicas = self.replicas
        if replicas is None or replicas.role != "MASTER" or replicas.state is None:
            return
        members = replicas.replication.sync_state_set - {replicas.broker_id}
        if not members <= replicas.state.replicas.keys():
            with contextlib.suppress(PocketMQError):
                await replicas.on_state(await replicas.controllers.group_state())  # a member's address unknown yet
        known = replicas.state.replicas if replicas.state is not None else {}
        addresses = [known[m][0] for m in members if m in known]
        request = RemotingCommand.request

        async def one(address: str) -> None:
            try:
                await self.client.invoke(address, request(RequestCode.SYNC_BROKER_METADATA_NOW), METADATA_PUSH_TIMEOUT)
            except PocketMQError as exc:
                log.warning("metadata_push_failed", slave=address, error=str(exc))

        await asyncio.gather(*(one(a) for a in addresses if a))

    # ================================================================================================ roles

    async def become_master(self, state: GroupState, previous_master: str | None) -> None:
        store, ha_service, epochs = self.store, self.ha_service, self.epochs
        assert store is not None and ha_service is not None and epochs is not None
        async with self._role_lock:
            store.set_role(BrokerRole.SLAVE)
            if self.ha_client is not None:
                self.ha_client.update_master_address(None)
            if previous_master and self.slave_sync is not None:
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(FINAL_SYNC_TIMEOUT):
                        await self.slave_sync.sync_all(previous_master)
            max_offset = await store.cut_partial_tail()
            await asyncio.to_thread(epochs.append, Epoch(state.master_epoch, max_offset))
            await self._take_master_services(store)
            self._set_processor_roles(master=True)
            self.master_addr = self.master_ha_addr = None
            replication = ha_service.controller
            assert replication is not None
            replication.accepting = True
            ha_service.on_confirmed = self._confirmed
            ha_service.sync_state_changed()
            store.set_replica_waiter(ha_service)
            store.set_fenced(None)
            store.set_role(BrokerRole.SYNC_MASTER)
            log.warning("took_over_as_master", epoch=state.master_epoch, start_offset=max_offset,
                        sync_state_set=sorted(replication.sync_state_set))
        await self.register_all()

    async def become_slave(self, state: GroupState) -> None:
        store, ha_service = self.store, self.ha_service
        assert store is not None and ha_service is not None
        async with self._role_lock:
            store.set_role(BrokerRole.SLAVE)
            store.set_replica_waiter(None)
            ha_service.on_confirmed = None
            ha_service.step_down()
            # A former master's log may end in writes the new master never had, and a slave's in its old master's:
            # no reads until the handshake with the new master has cut them (see _log_agrees_with_master).
            store.set_read_fence(0)
            await self._drop_master_services()
            self._set_processor_roles(master=False)
            self.follow(state)
            log.warning("following_master", epoch=state.master_epoch, master=state.master_address)
        await self.register_all()

    def _log_agrees_with_master(self, master_epoch: int) -> None:
        """The epoch handshake with a master of ``master_epoch`` is done, anything it lacks cut: a slave following
        that master serves what it holds (a slave's reads are not fenced further, as in RocketMQ)."""
        if self.store is None or self.replicas is None or self.replicas.role != "SLAVE" or \
                master_epoch < self.replicas.master_epoch:
            return
        self.store.set_read_fence(None)
        self.hold.notify_confirmed(NO_FENCE)

    def _confirmed(self, offset: int) -> None:
        """The master's confirm offset moved: consumers may read up to it now (see :mod:`pocketmq.store.reader`)."""
        if self.store is not None:
            self.store.set_read_fence(offset)
        self.hold.notify_confirmed(offset)

    def follow(self, state: GroupState) -> None:
        """As a slave: copy from the master ``state`` names (cheap when it is the one followed already)."""
        ha = state.master_ha_address
        if ha is None and state.master_address is not None and state.master_address == self.master_addr:
            ha = self.master_ha_addr  # an answer that names the master without its HA address
        changed = (self.master_addr, self.master_ha_addr) != (state.master_address, ha)
        self.master_addr = state.master_address
        self.master_ha_addr = ha
        if self.ha_client is not None:
            self.ha_client.update_master_address(ha)
            epochs = self.replicas.slave_epochs if self.replicas is not None else None
            now = time.monotonic()
            if not changed and ha and epochs is not None and epochs.master_epoch < state.master_epoch and \
                    now - self._rehandshake_at >= REHANDSHAKE_INTERVAL:
                # the same master under a newer epoch (or its handshake not seen yet): handshake again
                self._rehandshake_at = now
                self.ha_client.reconnect()
        if changed and self.slave_sync is not None and state.master_address:
            self.slave_sync.trigger()

    async def _take_master_services(self, store: MessageStore) -> None:
        """On a takeover: transactions, POP and timers rebuilt from their queues (which replication brought), delayed
        delivery from the copied delay offsets, and the registered factories' services, in one group."""
        await self._drop_master_services()
        group = Service(name="broker-master")
        c = self.config
        self.transactions, self.transaction_check = await master_services.load_transactions(
            c, store, self.offsets, self.clients, self.topics, self.addr, self._on_put())
        group.add_child(self.transaction_check)
        self.pop, pop_services = await master_services.start_pop(
            c, store, self.topics, self.groups, self.offsets, self.pop_hold, self.addr)
        self.timer = await master_services.start_timer(store, self.topics, self.addr)
        self.schedule = ScheduleMessageService(store, len(c.store.delay_levels_ms), store.put_message,
                                               offsets=self.delay_offsets)
        for service in (*pop_services, self.timer, self.schedule):
            group.add_child(service)
        for factory in self._master_factories:
            group.add_child(factory(store))
        self._master_services = group
        group.start()

    async def _drop_master_services(self) -> None:
        group, self._master_services = self._master_services, None
        if group is not None:
            await group.stop()
        if self.pop is not None:
            await self.pop.write_snapshot()
        if self.timer is not None and self.store is not None:
            self.store.remove_arrival_listener(self.timer.on_arrival)
        self.schedule = None
        self.transactions = None
        self.transaction_check = None
        self.pop = None
        self.timer = None

    def _set_processor_roles(self, *, master: bool) -> None:
        if self._send_processor is not None:
            self._send_processor.is_slave = not master
            if not self.config.reject_transaction_message:
                self._send_processor.transactions = self.transactions if master else None
        if self._end_transaction is not None:
            self._end_transaction.service = self.transactions if master else None
        if self._pull_processor is not None:
            self._pull_processor.is_master = master
        if self._pop_processor is not None:
            self._pop_processor.pop = self.pop if master else None
        self.consumer_processor.is_master = master

