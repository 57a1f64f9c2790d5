"""Starting a master's stateful services: transactions (bookkeeping rebuilt from the half and op queues, then
check-backs), POP (its state rebuilt from the revive log, then revive and state snapshots in the background) and
timer messages (pending timers taken back from the timer queue, then delivered when due). Slaves replicate the
records of all three and run none."""

from __future__ import annotations

from collections.abc import Callable

from pocketmq.broker.client_manager import ClientManager
from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.metadata import ConsumerOffsetManager, SubscriptionGroupManager
from pocketmq.broker.pop.long_polling import PopLongPollingService
from pocketmq.broker.pop.revive import PopReviveService
from pocketmq.broker.pop.service import PopService, PopSettings
from pocketmq.broker.timer import TimerMessageService
from pocketmq.broker.topic_manager import TopicConfigManager
from pocketmq.broker.transaction.check import TransactionalMessageCheckService
from pocketmq.broker.transaction.service import TransactionalMessageService
from pocketmq.common.record import parse_host_port
from pocketmq.common.service import Service, periodic
from pocketmq.store import MessageStore


async def start_pop(c: BrokerConfig, store: MessageStore, topics: TopicConfigManager,
                    groups: SubscriptionGroupManager, offsets: ConsumerOffsetManager, hold: PopLongPollingService,
                    addr: str) -> tuple[PopService, list[Service]]:
    """The recovered POP service of a master and the background services to run beside it."""
    pop = PopService(
        store=store, topics=topics, groups=groups, offsets=offsets, hold=hold,
        settings=PopSettings(broker_name=c.broker_name, cluster_name=c.broker_cluster_name,
                             revive_queue_num=c.revive_queue_num,
                             pop_from_retry_probability=c.pop_from_retry_probability,
                             inflight_threshold=c.pop_inflight_message_threshold,
                             max_invisible_time=c.max_invisible_time_mills),
        store_addr=addr)
    await pop.recover()
    return pop, [PopReviveService(pop, c.revive_interval),
                 periodic("pop-snapshot", c.pop_state_snapshot_interval / 1000, pop.write_snapshot)]


async def start_timer(store: MessageStore, topics: TopicConfigManager, addr: str) -> TimerMessageService:
    """The timer service of a master with its pending timers taken back, listening for new ones."""
    timer = TimerMessageService(store, topics, addr)
    await timer.recover()
    store.add_arrival_listener(timer.on_arrival)
    return timer


async def load_transactions(c: BrokerConfig, store: MessageStore, offsets: ConsumerOffsetManager,
                            clients: ClientManager, topics: TopicConfigManager, addr: str,
                            on_stored: Callable[[str, int, int], None]
                            ) -> tuple[TransactionalMessageService, TransactionalMessageCheckService]:
    """The loaded transaction service of a master and its check-back service."""
    transactions = TransactionalMessageService(store, offsets, born_host=parse_host_port(addr), on_stored=on_stored)
    await transactions.load()
    check = TransactionalMessageCheckService(transactions, clients, topics, interval_ms=c.transaction_check_interval,
                                             timeout_ms=c.transaction_time_out, check_max=c.transaction_check_max)
    return transactions, check
