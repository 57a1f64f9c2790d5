"""``BrokerController``: the broker's composition root.

Start-up order matters and is spelled out in :meth:`BrokerController.start`: bind the port first (port 0
picks one, and the store writes the broker's address into every record), open and recover the store,
register processors, start serving, register with every name server, then start the background services.
Stop is the reverse: stop the background services (one call: they are children of one
:class:`~pocketmq.common.service.Service`), stop accepting, let in-flight sends finish, flush and close the store,
unregister.

Controller mode (``enableControllerMode``): the role is the controllers' to decide; the broker starts taking no writes
and :mod:`pocketmq.broker.controller_mode` (mixed in here) switches it to master or slave when told.

The module is longer than 600 lines because it is the composition root: every component is built and wired here in
start-up order, the role-dependent wiring of both replication modes included (what switches roles at run time, and
the master's stateful services, are in ``controller_mode`` and ``master_services``).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import shutil
import struct
import time
from collections.abc import Callable

from pocketmq.broker import disk_status, master_services
from pocketmq.broker.address_file import remove_address, write_address
from pocketmq.broker.client_manager import ClientManager
from pocketmq.broker.config import BrokerConfig, BrokerRole, ha_address_host
from pocketmq.broker.controller_mode import ControllerModeBroker
from pocketmq.broker.exporter_metrics import ExporterMetrics
from pocketmq.broker.filter import ConsumerFilterManager
from pocketmq.broker.ids_change import ConsumerIdsChangeNotifier
from pocketmq.broker.long_polling import PullRequestHoldService
from pocketmq.broker.metadata import (
    ConsumerOffsetManager,
    DelayOffsets,
    OffsetFiles,
    SubscriptionGroupManager,
    config_path,
    load_topics,
)
from pocketmq.broker.pop.long_polling import PopLongPollingService
from pocketmq.broker.pop.processors import PopProcessor
from pocketmq.broker.pop.service import PopService
from pocketmq.broker.processors.admin import AdminBrokerProcessor
from pocketmq.broker.processors.admin_clients import AdminClientsProcessor
from pocketmq.broker.processors.admin_config import AdminConfigProcessor
from pocketmq.broker.processors.admin_groups import AdminGroupsProcessor
from pocketmq.broker.processors.admin_stats import AdminStatsProcessor
from pocketmq.broker.processors.client_manage import ClientManageProcessor
from pocketmq.broker.processors.commit_log_tail import CommitLogTailProcessor
from pocketmq.broker.processors.consumer_manage import ConsumerManageProcessor
from pocketmq.broker.processors.pull import PullMessageProcessor
from pocketmq.broker.processors.query import QueryMessageProcessor
from pocketmq.broker.processors.recall import RecallMessageProcessor
from pocketmq.broker.processors.reply import ReplyMessageProcessor
from pocketmq.broker.processors.send import SendMessageProcessor
from pocketmq.broker.registration import (
    REJOIN_CHECK_INTERVAL,
    BrokerIdentity,
    BrokerOuterAPI,
    IncrementalRegistration,
    RegisterResult,
    split_namesrv_addr,
)
from pocketmq.broker.rewind_guard import RewindGuard
from pocketmq.broker.schedule import ScheduleMessageService
from pocketmq.broker.slave_sync import SlaveSynchronize
from pocketmq.broker.stats import BrokerStats
from pocketmq.broker.tail_recovery import TailRecovery, TailResult
from pocketmq.broker.timer import TimerMessageService, TimerMetricsProcessor
from pocketmq.broker.topic_manager import TopicConfigManager
from pocketmq.broker.transaction.check import TransactionalMessageCheckService
from pocketmq.broker.transaction.end import EndTransactionProcessor
from pocketmq.broker.transaction.service import TransactionalMessageService
from pocketmq.common import compiled
from pocketmq.common.logs import get_logger
from pocketmq.common.service import Service, on_demand, periodic
from pocketmq.common.topic_config import PermName, TopicConfig
from pocketmq.ha.client import HAClient
from pocketmq.ha.service import HAService
from pocketmq.proxy.local import LocalBroker
from pocketmq.proxy.server import ProxyServer, start_local_proxy
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection, Handler
from pocketmq.remoting.metrics import Metrics, MetricsServer
from pocketmq.remoting.plain_acl import PlainAclService
from pocketmq.remoting.server import RemotingServer, ServerConfig
from pocketmq.store.message_store import MessageStore

log = get_logger("pocketmq.broker.controller")
PREPARED_QUEUES_MAX = 64
"""Queues of a newly created topic whose consume-queue files are made at once (see ``_prepare_queues``)."""
PREPARE_BACKLOG_MAX = 16
"""Topics waiting for their files at most: those created faster than that make their files on first use."""
PREPARE_TOPICS_MAX = 1000
"""Topics the broker holds at most for a new one to get its files made at once: past it, making 4-8 files (and
their directories) for every topic created costs more, in CPU and inodes, than the first message of each queue
gains, and a large broker's topics are mostly idle."""


class BrokerController(ControllerModeBroker):
    """One broker: ``await start()``, ``.addr``, ``await stop()``."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.server = RemotingServer(
            ServerConfig(
                host=config.listen_host, port=config.listen_port, max_connections=config.max_connections,
                max_in_flight_per_connection=config.max_in_flight_per_connection,
                max_frame_length=config.max_frame_length, idle_timeout=config.client_channel_max_idle_time_seconds,
            ),
            name=f"broker-{config.broker_name}",
        )
        self.client = RemotingClient()
        self.outer_api = BrokerOuterAPI(self.client, split_namesrv_addr(config.namesrv_addr),
                                        timeout=config.register_broker_timeout_mills / 1000,
                                        compress=config.compressed_register,
                                        source=lambda: (self.identity(), self.topics.wrapper()))
        self.stats = BrokerStats()
        self.stats.cluster = config.broker_cluster_name  # the key of BROKER_PUT_NUMS / BROKER_GET_NUMS
        self.clients = ClientManager()
        config_dir = config.store.config_dir
        self.topics_path = config_path(config_dir, "topics.json")
        self.topics = TopicConfigManager(
            cluster_name=config.broker_cluster_name, broker_name=config.broker_name,
            default_topic_queue_nums=config.default_topic_queue_nums,
            auto_create_topic_enable=config.auto_create_topic_enable,
            schedule_queue_nums=len(config.store.delay_levels_ms), on_change=self._topics_changed,
            path=self.topics_path,
        )
        self.offsets = ConsumerOffsetManager(config_path(config_dir, "consumerOffset.json"))
        self.groups = SubscriptionGroupManager(config_path(config_dir, "subscriptionGroup.json"),
                                               auto_create=config.auto_create_subscription_group)
        self.delay_offsets = DelayOffsets(config_path(config_dir, "delayOffset.json"))
        self._offset_files = OffsetFiles(log, self.offsets, self.delay_offsets)
        self.hold = PullRequestHoldService()
        self.filters = ConsumerFilterManager()
        self.pop_hold = PopLongPollingService(max_total=config.max_pop_polling_size,
                                              max_per_queue=config.pop_polling_size)
        #: RocketMQ 5's POP consumption (masters only; None on a slave)
        self.pop: PopService | None = None
        #: timer messages (masters only)
        self.timer: TimerMessageService | None = None
        self.acl: PlainAclService | None = None
        self.proxy: ProxyServer | None = None
        #: every request code's handler (set when the processors are registered)
        self.request_handlers: dict[int, Handler] = {}
        self.schedule: ScheduleMessageService | None = None
        self.transactions: TransactionalMessageService | None = None
        self.transaction_check: TransactionalMessageCheckService | None = None
        self.replies: ReplyMessageProcessor | None = None
        self.store: MessageStore | None = None
        self.ha_service: HAService | None = None
        self.ha_client: HAClient | None = None
        self.slave_sync: SlaveSynchronize | None = None
        self._init_controller_mode(config)  # no-ops unless enableControllerMode
        self.master_addr: str | None = None
        self.master_ha_addr: str | None = None
        self.last_registration: list[RegisterResult] = []
        #: what the tail recovery after an abnormal start of a master did (None: not run)
        self.tail_recovery: TailResult | None = None
        self._running = False
        self._topics_to_prepare: collections.deque[str] = collections.deque()
        #: every background loop of the broker: :meth:`start` starts them, :meth:`stop` stops them in one call
        self._services = Service(name="broker")
        # Registration at a fixed rate, as RocketMQ does: a round is due one period after the previous one
        # *started*, so a name server that answers slowly (or not at all, until the request's timeout) does not
        # stretch the interval the healthy ones see. A topic change wakes it for a round at once.
        self._registration = self._services.add_child(periodic(
            "broker-register", config.register_name_server_period / 1000, self.register_all, fixed_rate=True))
        # A name server lost (restarted, refused, unreachable) gets the registration again within a second.
        self._services.add_child(periodic("broker-rejoin", REJOIN_CHECK_INTERVAL, self.outer_api.rejoin))
        # A created or changed topic is registered alone (RocketMQ's registerIncrementBrokerData), at once.
        self._increments = self._services.add_child(
            IncrementalRegistration(self.outer_api, self.identity, lambda: self.topics.data_version))
        # NOTIFY_CONSUMER_IDS_CHANGED, once per member for a burst of changes to its group.
        self.ids_notifier = self._services.add_child(ConsumerIdsChangeNotifier(self.clients, self._notify_enabled))
        # topics.json and subscriptionGroup.json: one journal line per change (pocketmq.broker.config_journal).
        self._services.add_child(self.topics.journal)
        self._services.add_child(self.groups.journal)
        self._services.add_child(periodic("broker-stats", 1.0, self.stats.sample, initial_delay=0))
        self._services.add_child(periodic("broker-persist", config.flush_consumer_offset_interval / 1000,
                                          lambda: asyncio.to_thread(self._persist_metadata)))
        self._queue_preparer = self._services.add_child(on_demand("broker-prepare-queues", self._prepare_queues))
        # --- metrics ---
        self.metrics: Metrics | None = None
        self.metrics_server: MetricsServer | None = None
        if config.metrics_port is not None:
            self._define_metrics()
        # --- end metrics ---

    # -- addresses -----------------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        return self.server.address[1]

    @property
    def addr(self) -> str:
        """The address clients and name servers know this broker by (brokerIP1:port)."""
        return f"{self.config.broker_ip1}:{self.port}"

    @property
    def ha_port(self) -> int:
        """The HA port: the master's bound one; on a slave (which listens on none) the configured one."""
        if self.ha_service is not None:
            return self.ha_service.port
        return self.config.ha.ha_listen_port or self.port + 1

    @property
    def ha_addr(self) -> str:
        return f"{ha_address_host(self.config)}:{self.ha_port}"

    def identity(self) -> BrokerIdentity:
        if self.replicas is not None:
            return self._controller_identity()
        return BrokerIdentity(self.config.broker_cluster_name, self.config.broker_name, self.config.broker_id,
                              self.addr, self.ha_addr)

    # -- lifecycle -----------------------------------------------------------------------------------------

    async def start(self) -> None:
        await self._start_acl()  # first: a broken ACL file refuses the start before anything is opened
        await self.server.start(serve=False)
        store_config = dataclasses.replace(self.config.store, store_host=self.addr)
        if self.config.enable_controller_mode:  # no writes until the controllers say this broker is the master
            store_config = dataclasses.replace(store_config, broker_role=BrokerRole.SLAVE)
        self.store = MessageStore(store_config)
        await self.store.start()
        disk_status.feed_offsets(self.store, self.offsets, self.delay_offsets)  # what the disk report reads
        await asyncio.to_thread(self._load_metadata)
        await self._load_controller_identity(self.store)
        if self.config.trace_topic_enable:  # RocketMQ: one queue, read and write
            self.topics.create_system_topic(self.config.msg_trace_topic_name, 1,
                                            PermName.PERM_READ | PermName.PERM_WRITE)
        await self._recover_tail(self.store)  # an abnormal start: before the master takes any write
        self.store.add_arrival_listener(self.hold.notify)
        self.store.add_arrival_listener(self.pop_hold.notify)
        await self._start_ha(self.store)
        await self._start_master_services(self.store)
        self._register_processors(self.store)
        await self.server.start_serving()
        failed = await asyncio.to_thread(write_address, store_config.store_path_root_dir, self.addr)
        if failed is not None:  # a full disk: serve anyway, reads and the disk report matter most then
            log.warning("broker_address_not_recorded", store=store_config.store_path_root_dir, error=str(failed))
        if self.metrics is not None:
            self.metrics_server = MetricsServer(self.metrics, self.config.listen_host, self.config.metrics_port or 0)
            await self.metrics_server.start()
        self._running = True
        await self.register_all()
        if self.replicas is not None:
            self.replicas.start()
        if self.slave_sync is not None:
            self._services.add_child(self.slave_sync)
        if self.schedule is not None:
            self._services.add_child(self.schedule)
        if self.transaction_check is not None:
            self._services.add_child(self.transaction_check)
        self._services.start()
        if self.config.enable_grpc_proxy:  # the gRPC endpoint in this process, a cluster client like rmq-proxy
            self.proxy = await start_local_proxy(self.config.namesrv_addr or "", self.config.listen_host,
                                                 self.config.grpc_server_port, self.config.proxy_config_file,
                                                 self.metrics, LocalBroker(lambda: self.addr, self.request_handlers))
        log.info("broker_started", broker=self.config.broker_name, addr=self.addr, role=self.config.broker_role.name,
                 build=compiled.ACTIVE)

    async def _start_acl(self) -> None:
        """aclEnable=true: load the ACL file (a missing or invalid one refuses the start), check every request
        before its handler, reload the file when it changes."""
        if not self.config.acl_enable:
            return
        self.acl = PlainAclService(self.config.plain_acl_file)
        await self.acl.load()
        self.server.set_request_hook(self.acl.validator.check)
        self._services.add_child(self.acl.reloader)

    def _register_processors(self, store: MessageStore) -> None:
        handlers: dict[int, Handler] = {}
        controller_mode = self.config.enable_controller_mode
        send = self._send_processor = SendMessageProcessor(
            groups=self.groups, store=store, topics=self.topics, broker_name=self.config.broker_name,
            cluster_name=self.config.broker_cluster_name, broker_addr=lambda: self.addr,
            is_slave=self.config.broker_role is BrokerRole.SLAVE or controller_mode,
            broker_permission=lambda: self.config.broker_permission, region_id=self.config.region_id,
            trace_on=self.config.trace_on, on_stored=self._on_put(),
            transactions=None if self.config.reject_transaction_message else self.transactions,
        )
        end_transaction = self._end_transaction = EndTransactionProcessor(
            self.transactions, broker_name=self.config.broker_name, broker_addr=lambda: self.addr)
        is_master = self.config.is_master and not controller_mode
        self.consumer_processor = ConsumerManageProcessor(
            store=store, topics=self.topics, clients=self.clients, offsets=self.offsets, groups=self.groups,
            broker_name=self.config.broker_name, is_master=is_master, delay_offsets=self.delay_offsets,
        )
        pull = self._pull_processor = PullMessageProcessor(
            store=store, topics=self.topics, clients=self.clients, offsets=self.offsets, groups=self.groups,
            hold=self.hold, is_master=is_master, broker_permission=lambda: self.config.broker_permission,
            slave_read_enable=self.config.slave_read_enable, on_get=self.stats.on_get,
            filters=self.filters, enable_property_filter=self.config.enable_property_filter,
            rewind=self._rewind_guard(store),
        )
        self.admin_stats = AdminStatsProcessor(
            store=store, topics=self.topics, offsets=self.offsets, groups=self.groups, clients=self.clients,
            stats=self.stats, broker_name=self.config.broker_name, broker_addr=lambda: self.addr)
        admin_more = (
            AdminGroupsProcessor(groups=self.groups, offsets=self.offsets,
                                 on_changed=self.replicate_metadata if controller_mode else None), self.admin_stats,
            AdminClientsProcessor(store=store, topics=self.topics, clients=self.clients, offsets=self.offsets,
                                  broker_name=self.config.broker_name),
            AdminConfigProcessor(get_config=lambda: self.config, set_config=self._set_config, topics=self.topics,
                                 groups=self.groups, broker_addr=lambda: self.addr, register_now=self.register_all),
        )
        settled = self._settle_and_replicate if controller_mode else self._topics_settled
        admin = AdminBrokerProcessor(store=store, topics=self.topics, stats=self.stats,
                                     role=self._role_name, topics_settled=settled,
                                     extra_runtime_info=self._extra_runtime_info, on_topic_created=self._topic_created)
        self.client_processor = ClientManageProcessor(clients=self.clients, topics=self.topics,
                                                      on_group_changed=self.ids_notifier.changed,
                                                      filters=self.filters,
                                                      enable_property_filter=self.config.enable_property_filter)
        query = QueryMessageProcessor(store=store)
        tail = CommitLogTailProcessor(store=store, role=lambda: self.config.broker_role.name)
        pop = self._pop_processor = PopProcessor(
            pop=self.pop, hold=self.pop_hold, topics=self.topics, groups=self.groups, filters=self.filters,
            broker_name=self.config.broker_name, broker_permission=lambda: self.config.broker_permission,
            enable_property_filter=lambda: self.config.enable_property_filter,
            min_invisible_time=self.config.min_invisible_time_mills_for_recv,
            max_invisible_time=self.config.max_invisible_time_mills)
        self.replies = ReplyMessageProcessor(
            send=send, clients=self.clients, broker_addr=lambda: self.addr, region_id=self.config.region_id,
            store_reply=lambda: self.config.store_reply_message_enable, trace_on=self.config.trace_on)
        recall = RecallMessageProcessor(send=send, enabled=lambda: self.config.recall_message_enable)
        for processor in (send, pull, admin, query, self.client_processor, self.consumer_processor, end_transaction,
                          tail, pop, self.replies, TimerMetricsProcessor(lambda: self.timer, self.config.broker_name),
                          recall, *admin_more):
            handlers.update(processor.handlers())
        handlers.update(self._controller_handlers())
        if self.metrics is not None:  # latency by request code, messages got per topic
            self.metrics.instrument(handlers, self._on_response)
        for code, handler in handlers.items():
            self.server.register(code, handler)
        self.server.on_connection_closed(self._connection_closed)
        self.request_handlers = handlers  # what a local-mode proxy calls in-process

    def _set_config(self, config: BrokerConfig) -> None:
        """UPDATE_BROKER_CONFIG's run-time keys (see pocketmq.broker.processors.admin_config)."""
        self.config = config

    def _connection_closed(self, conn: Connection) -> None:
        self.client_processor.connection_closed(conn)

    async def stop(self, grace: float = 5.0) -> None:
        """Stop accepting, finish in-flight requests, flush and close the store, unregister."""
        if not self._running:
            return
        self._running = False
        await self._stop_controller_mode()
        if self.proxy is not None:
            await self.proxy.stop()
        await self._services.stop()
        await self.server.stop(grace=grace)
        if self.pop is not None:  # what changed since the last snapshot / checkpoint (an idle broker writes nothing)
            await self.pop.write_snapshot()
        if self.timer is not None and self.timer.fired_since_checkpoint:
            await self.timer.write_checkpoint()
        if self.ha_service is not None:
            await self.ha_service.stop()
        if self.ha_client is not None:
            await self.ha_client.stop()
        await self.topics.journal.close()
        await self.groups.journal.close()
        await asyncio.to_thread(self._persist_metadata, True)
        if self.store is not None:
            await asyncio.to_thread(remove_address, self.store.config.store_path_root_dir, self.addr)
            await self.store.shutdown()
        await self.outer_api.unregister_broker_all(self.identity())
        await self.client.close()
        if self.metrics_server is not None:
            await self.metrics_server.stop()
        log.info("broker_stopped", broker=self.config.broker_name, addr=self.addr)

    # -- registration --------------------------------------------------------------------------------------

    async def register_all(self) -> list[RegisterResult]:
        results = await self.outer_api.register_broker_all(self.identity(), self.topics.wrapper())
        self.last_registration = results
        if not self.config.is_master and self.replicas is None:
            answered = [r for r in results if r.ok]
            if answered:
                # The name servers tell a slave where its live master is (None while it is down).
                live = next((r for r in answered if r.master_addr), None)
                self.master_addr = live.master_addr if live else None
                self.master_ha_addr = live.ha_server_addr if live else None
                if self.ha_client is not None and not self.config.ha.ha_master_address:
                    self.ha_client.update_master_address(self.master_ha_addr)
        return results

    def _topics_changed(self, config: TopicConfig | None) -> None:
        """A topic was created or changed: register it alone, at once; the whole table was replaced (a slave
        took its master's): a full registration now."""
        if not self._running:
            return  # created while starting (system topics): the first full registration carries them
        if config is None:
            self._registration.trigger()
        else:
            self._increments.add(config)

    def _notify_enabled(self, group: str) -> bool:
        config = self.groups.get(group)
        return config is None or config.notify_consumer_ids_changed_enable

    async def _topics_settled(self) -> None:
        """Until the topics created or changed so far are registered (an admin's call returns then: the route is
        visible, as in RocketMQ; their journal lines are written already)."""
        await self._increments.registered()

    def _topic_created(self, topic: str) -> None:
        """UPDATE_AND_CREATE_TOPIC on a master: make the queues' consume-queue files in the background (unless
        :data:`PREPARE_BACKLOG_MAX` topics wait for theirs already: a mass creation is not slowed by it)."""
        if (self._running and self.config.is_master and len(self._topics_to_prepare) < PREPARE_BACKLOG_MAX
                and len(self.topics.table) <= PREPARE_TOPICS_MAX):
            self._topics_to_prepare.append(topic)
            self._queue_preparer.trigger()

    async def _prepare_queues(self) -> None:
        """For each topic created since the last call, create each queue's first consume-queue file now (empty,
        sparse, not mapped), one after the other in the store's thread, so the first message of each queue only
        opens it: a new file costs a directory fsync, which the first send of each queue would otherwise wait
        for. Only for topics created by an administrator, at most
        :data:`PREPARED_QUEUES_MAX` queues of each, :data:`PREPARE_BACKLOG_MAX` topics waiting, and while the broker
        holds at most :data:`PREPARE_TOPICS_MAX` topics: auto-created and retry topics (and the queues past those
        bounds) create their files on first use. Such a file costs an
        inode and no data block; a queue that never gets a message costs no memory (the store skips it at start)."""
        while self._topics_to_prepare:
            await self._prepare_topic_queues(self._topics_to_prepare.popleft())

    async def _prepare_topic_queues(self, topic: str) -> None:
        config = self.topics.table.get(topic)
        store = self.store
        if config is None or store is None:
            return
        count = min(max(config.read_queue_nums, config.write_queue_nums), PREPARED_QUEUES_MAX)
        await store.create_queue_files(topic, range(count))

    # -- replication -----------------------------------------------------------------------------------------

    async def _start_ha(self, store: MessageStore) -> None:
        """Masters listen for slaves on the HA port; slaves replicate from their master and copy its
        metadata every 10 s. Controller mode: the HA server already listens; the client waits for a master."""
        ha = self.config.ha
        if self.replicas is not None:
            self._start_controller_ha(store)
            return
        if self.config.is_master:
            port = ha.ha_listen_port or (self.port + 1 if self.config.listen_port else 0)
            self.ha_service = HAService(store, ha.replace(ha_listen_port=port))
            await self.ha_service.start()
            if self.config.broker_role is BrokerRole.SYNC_MASTER:
                store.set_replica_waiter(self.ha_service)  # every put waits for a slave: sends, send-backs, delays
            return
        self.ha_client = HAClient(store, ha, master_address=ha.ha_master_address or None)
        self.ha_client.start()
        self.slave_sync = SlaveSynchronize(
            client=self.client, master_addr=lambda: self.master_addr, topics=self.topics, offsets=self.offsets,
            groups=self.groups, delay_offsets=self.delay_offsets,
        )

    async def _recover_tail(self, store: MessageStore) -> None:
        """A master after an abnormal start takes back from its slave the commit-log tail it lost
        (broker.tail_recovery), within ``haTailRecoveryTimeoutMs``. (Controller mode: a restarted master is a new
        epoch's master or a slave; the epoch handshake does that job.)"""
        if not self.config.is_master or store.recovered_max is None or self.replicas is not None:
            return
        self.tail_recovery = await TailRecovery(
            store, self.client, self.outer_api.namesrv_addrs, broker_name=self.config.broker_name,
            timeout_ms=self.config.ha_tail_recovery_timeout_ms).run()

    async def _start_master_services(self, store: MessageStore) -> None:
        """Masters: transactions, POP and timers rebuilt from their queues, their services run in the background
        (slaves replicate their records and run none of them). Controller mode: on each takeover instead
        (:meth:`~pocketmq.broker.controller_mode.ControllerModeBroker._take_master_services`)."""
        if not self.config.is_master or self.replicas is not None:
            return
        self.transactions, self.transaction_check = await master_services.load_transactions(
            self.config, store, self.offsets, self.clients, self.topics, self.addr,
            self._on_put())
        self.pop, services = await master_services.start_pop(
            self.config, store, self.topics, self.groups, self.offsets, self.pop_hold, self.addr)
        self.timer = await master_services.start_timer(store, self.topics, self.addr)
        for service in (*services, self.timer):
            self._services.add_child(service)

    def _rewind_guard(self, store: MessageStore) -> RewindGuard | None:
        """After an abnormal start of a master: each queue's end as recovery left it (pocketmq.broker.rewind_guard)."""
        if store.recovered_max is None or not self.config.is_master or self.config.enable_controller_mode:
            return None
        return RewindGuard({(topic, queue_id): store.get_max_offset_in_queue(topic, queue_id)
                            for topic, queue_ids in store.topics().items() for queue_id in queue_ids})

    def _on_put(self) -> Callable[[str, int, int], None]:
        """What a stored message is counted by: the metrics' counters when they are on, else the stats."""
        return self._on_stored if self.metrics else self.stats.on_put

    def _extra_runtime_info(self) -> dict[str, str]:
        """HA keys, the transaction keys, and ``compiledBuild``: ``cython``, ``pure`` or ``partial`` (see
        :mod:`pocketmq.common.compiled`)."""
        info = {**self._ha_runtime_info(), "compiledBuild": compiled.ACTIVE}
        if self.replicas is not None:
            info.update(self.replicas.runtime_info())
        if self.replies is not None:
            info.update(self.replies.runtime_info())
        if self.transactions is not None:
            info.update(self.transactions.runtime_info())
        if self.pop is not None:
            info.update(self.pop.runtime_info())
        if self.timer is not None:
            info.update(self.timer.runtime_info())
        return info

    def _ha_runtime_info(self) -> dict[str, str]:
        if self.ha_service is not None and (self.replicas is None or self.replicas.role == "MASTER"):
            return self.ha_service.runtime_info()
        if self.ha_client is not None:
            return {**self.ha_client.runtime_info(), "masterAddr": self.master_addr or ""}
        return {}

    def _role_name(self) -> str:
        """What this broker is now: in controller mode the file's role is the master's, a replica reports SLAVE."""
        if self.config.enable_controller_mode and not self.is_controller_master:
            return BrokerRole.SLAVE.name
        return self.config.broker_role.name

    # -- metadata --------------------------------------------------------------------------------------------

    def _load_metadata(self) -> None:
        """Blocking: read config/*.json (run in a thread at start)."""
        stored = load_topics(self.topics_path)
        self.topics.load(stored.topics, stored.data_version)
        self.offsets.load()
        self.groups.load()
        self.delay_offsets.load()
        if self.config.is_master and self.store is not None and not self.config.enable_controller_mode:
            self.schedule = ScheduleMessageService(self.store, len(self.config.store.delay_levels_ms),
                                                   self.store.put_message, offsets=self.delay_offsets)

    def _persist_metadata(self, force: bool = False) -> None:
        """Blocking: write the changed consumer and delay offset files (run in a thread every
        ``flushConsumerOffsetInterval``, 5 s, and at stop; topics and groups have their journals)."""
        self._offset_files.persist(force)

    # -- metrics ------------------------------------------------------------------------------------------------

    def _define_metrics(self) -> None:
        """Counters bumped on put/pull answers; gauges read from the store and HA state at scrape time."""
        m = self.metrics = Metrics("broker")
        self._m_put = (m.counter("pocketmq_messages_put", "Messages stored, by topic", ["topic"]),
                       m.counter("pocketmq_bytes_put", "Message bytes stored, by topic", ["topic"]))
        self._m_got = (m.counter("pocketmq_messages_got", "Messages returned by pulls, by topic", ["topic"]),
                       m.counter("pocketmq_bytes_got", "Bytes returned by pulls, by topic", ["topic"]))
        c = self.config
        m.gauge("pocketmq_broker_info", "This broker's identity (value 1)", ["cluster", "broker", "id", "role"],
                lambda: [((c.broker_cluster_name, c.broker_name, str(c.broker_id), c.broker_role.name), 1)])
        m.gauge("pocketmq_store_commitlog_offset", "Commit-log offsets (min, max, flushed)", ["kind"],
                self._offset_samples)
        m.gauge("pocketmq_store_commitlog_bytes", "Bytes of commit log held on disk (max - min offset)", [],
                lambda: [((), self.store.max_phy_offset - self.store.min_phy_offset)] if self.store else [])
        m.gauge("pocketmq_store_disk_used_ratio", "Used fraction of the store's file system", [],
                self._disk_samples)
        m.gauge("pocketmq_store_disk_full", "1 while sends are refused for want of disk (ENOSPC met, or above "
                "diskSpaceWarningLevelRatio)", [],
                lambda: [((), 1 if self.store.disk_full else 0)] if self.store else [])
        m.gauge("pocketmq_store_writable", "1 while the store takes puts", [],
                lambda: [((), 1 if self.store.writable else 0)] if self.store else [])
        m.gauge("pocketmq_ha_connections", "Slaves attached to this master", [],
                lambda: [((), len(self.ha_service.attached_slaves))] if self.ha_service else [])
        m.gauge("pocketmq_ha_slave_ack_offset", "Commit-log offset each slave has acknowledged", ["slave"],
                lambda: [((str(s.address),), s.ack_offset) for s in self.ha_service.attached_slaves]
                if self.ha_service else [])
        m.gauge("pocketmq_ha_slave_lag_bytes", "Bytes each slave is behind this master", ["slave"],
                lambda: [((str(s.address),), max(0, self.store.max_phy_offset - s.ack_offset))
                         for s in self.ha_service.attached_slaves] if self.ha_service and self.store else [])
        ExporterMetrics(self).register(m)  # rocketmq-exporter's names and labels
        disk_status.register_metrics(m, lambda: self.store)
        m.gauge("pocketmq_ha_master_connected", "Slave: 1 while connected to its master", [],
                lambda: [((), 1 if self.ha_client.connected else 0)] if self.ha_client else [])
        self._register_controller_metrics(m)
        m.gauge("pocketmq_transaction_messages", "Transactional messages since start: half messages stored, "
                "committed, rolled back, checked back, discarded", ["kind"],
                lambda: self.transactions.counters.samples() if self.transactions else [])
        self._define_pop_timer_metrics(m)

    def _define_pop_timer_metrics(self, m: Metrics) -> None:
        """POP in flight per group, its revive backlog and counters; pending timers, their lateness."""
        m.gauge("pocketmq_pop_inflight_messages", "Messages popped and not acked or revived yet, by group", ["group"],
                lambda: [((g,), n) for g, n in self.pop.state.inflight_by_group.items()] if self.pop else [])
        m.gauge("pocketmq_pop_revive_backlog", "POP messages past their invisible time, not revived yet", [],
                lambda: [((), self.pop.state.expired_count(int(time.time() * 1000)))] if self.pop else [])
        m.gauge("pocketmq_pop_messages", "POP messages since start: popped, acked, revived, dead_lettered, changed",
                ["kind"], lambda: [((k,), n) for k, n in self.pop.counters.items()] if self.pop else [])
        m.gauge("pocketmq_timer_pending", "Timer messages waiting to be delivered", [],
                lambda: [((), self.timer.wheel.pending)] if self.timer else [])
        m.gauge("pocketmq_timer_fired", "Timer messages delivered since start", [],
                lambda: [((), self.timer.fired)] if self.timer else [])
        m.gauge("pocketmq_timer_lateness_ms", "Lateness of recent timer deliveries (stored minus due, ms)",
                ["quantile"], lambda: list(((q,), v) for q, v in self.timer.lateness_percentiles().items())
                if self.timer else [])

    def _offset_samples(self) -> list[tuple[tuple[str, ...], float]]:
        if self.store is None:
            return []
        return [(("min",), self.store.min_phy_offset), (("max",), self.store.max_phy_offset),
                (("flushed",), self.store.flushed_phy_offset)]

    def _disk_samples(self) -> list[tuple[tuple[str, ...], float]]:
        usage = shutil.disk_usage(self.config.store.store_path_root_dir)  # one statvfs: cheap
        return [((), usage.used / usage.total if usage.total else 0.0)]

    def _on_stored(self, topic: str, count: int, size: int) -> None:
        self.stats.on_put(topic, count, size)
        self._m_put[0].labels(topic).inc(count)
        self._m_put[1].labels(topic).inc(size)

    def _on_response(self, request: RemotingCommand, response: RemotingCommand | None) -> None:
        """Count what a successful pull returned, by topic (records are walked by their size field)."""
        if (request.code != RequestCode.PULL_MESSAGE or response is None or response.code != ResponseCode.SUCCESS
                or not response.body or request.ext_fields is None):
            return
        body = response.body
        count, pos = 0, 0
        while pos + 4 <= len(body):
            size = _INT32.unpack_from(body, pos)[0]
            if size <= 0:
                break
            count, pos = count + 1, pos + size
        topic = request.ext_fields.get("topic", "")
        self._m_got[0].labels(topic).inc(count)
        self._m_got[1].labels(topic).inc(len(body))


_INT32 = struct.Struct(">i")
# --- end metrics ---
