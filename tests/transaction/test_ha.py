"""Transactions on a SYNC_MASTER with a slave: half messages, copies, committed messages and op records replicate
like everything else (the slave's commit log is byte-identical), and the slave never checks back nor ends a
transaction."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pocketmq.broker.controller import BrokerController
from pocketmq.client.core.message import Message
from pocketmq.client.producer.transaction import TransactionProducer, TransactionState
from pocketmq.common.topic import RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.store.config import BrokerRole
from tests.client.consumer.consumer_support import Cluster, cluster, create_topic, instance_name
from tests.cluster import start_broker
from tests.helpers import eventually
from tests.transaction.support import TX_PROPS, Ledger

COMMIT, ROLLBACK, UNKNOWN = TransactionState.COMMIT, TransactionState.ROLLBACK, TransactionState.UNKNOWN


def commit_log_bytes(broker: BrokerController) -> bytes:
    assert broker.store is not None
    directory = Path(broker.store.config.commit_log_dir)
    return b"".join(p.read_bytes() for p in sorted(directory.iterdir()) if p.name.isdigit())


def queue_ends(broker: BrokerController, topic: str, queues: int = 1) -> list[int]:
    assert broker.store is not None
    return [broker.store.get_max_offset_in_queue(topic, q) for q in range(queues)]


async def test_sync_master_replicates_transactions_and_the_slave_never_checks_back(tmp_path: Path) -> None:
    async with cluster(tmp_path, ("broker-a",), dict(TX_PROPS), broker_role=BrokerRole.SYNC_MASTER) as c:
        master = c.brokers["broker-a"]
        slave = await start_broker(tmp_path, "broker-a", c.namesrv_addr, dict(TX_PROPS), broker_role=BrokerRole.SLAVE,
                                   broker_id=1)
        try:
            await eventually(lambda: master.ha_service is not None and master.ha_service.connection_count == 1,
                             message="slave attached")
            await run_transactions(c, master, slave)
        finally:
            await slave.stop()


async def run_transactions(c: Cluster, master: BrokerController, slave: BrokerController) -> None:
    assert slave.transactions is None and slave.transaction_check is None  # no check-back service on a slave
    await create_topic(c, "TxHA", 2)
    ledger = Ledger(answer=lambda msg: COMMIT)
    async with TransactionProducer("TxHAPG", ledger, namesrv_addr=c.namesrv_addr,
                                   instance_name=instance_name("txha")) as producer:
        for body, state in (("c", COMMIT), ("r", ROLLBACK), ("u", UNKNOWN)):
            result = await producer.send_message_in_transaction(Message("TxHA", body.encode()), state)
            assert result.send_result.status.name == "SEND_OK"  # the half waited for the slave
        await eventually(lambda: sum(queue_ends(master, "TxHA", 2)) == 2, timeout=15, message="c and u committed")
        assert set(ledger.checked) == {"u"}
        asked = len(ledger.checked)
        assert master.store is not None and slave.store is not None
        await eventually(lambda: slave.store is not None and master.store is not None
                         and slave.store.max_phy_offset == master.store.max_phy_offset, message="caught up")
        assert commit_log_bytes(slave) == commit_log_bytes(master)
        for topic in (RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC):
            assert queue_ends(slave, topic) == queue_ends(master, topic)
        assert queue_ends(slave, "TxHA", 2) == queue_ends(master, "TxHA", 2)
        client = RemotingClient()
        try:
            end = await client.invoke(slave.addr, RemotingCommand.request(
                RequestCode.END_TRANSACTION, {"producerGroup": "TxHAPG", "tranStateTableOffset": "0",
                                              "commitLogOffset": "0", "commitOrRollback": "8", "msgId": "x"}))
            assert end.code == ResponseCode.SLAVE_NOT_AVAILABLE
        finally:
            await client.close()
        await asyncio.sleep(1.0)  # more check rounds on the master: all resolved, nothing asked again
        assert len(ledger.checked) == asked
