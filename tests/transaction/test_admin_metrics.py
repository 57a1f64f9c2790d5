"""What operators see of transactions: ``rmq-admin txPending`` (unresolved half messages per real topic and
producer group) and the broker's ``pocketmq_transaction_messages`` metric (half, committed, rolled back,
checked, discarded)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from pocketmq.admin import cli
from pocketmq.client.core.message import Message
from pocketmq.client.producer.transaction import TransactionProducer, TransactionState
from tests.client.consumer.consumer_support import cluster, create_topic, instance_name
from tests.helpers import eventually
from tests.transaction.support import Ledger

#: Check-backs every 200 ms, but not before 60 s: the unknown transactions stay pending during the test.
SLOW_CHECK = {"transactionTimeOut": "60000", "transactionCheckInterval": "200", "transactionCheckMax": "3"}


async def test_tx_pending_and_metrics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    async with cluster(tmp_path, ("broker-a",), SLOW_CHECK, metrics_port=0) as c:
        await create_topic(c, "TxSeen", 2)
        broker = c.brokers["broker-a"]
        async with TransactionProducer("TxSeenPG", Ledger(), namesrv_addr=c.namesrv_addr,
                                       instance_name=instance_name("txa")) as producer:
            for body, state in (("a", TransactionState.UNKNOWN), ("b", TransactionState.UNKNOWN),
                                ("c", TransactionState.COMMIT), ("d", TransactionState.ROLLBACK)):
                await producer.send_message_in_transaction(Message("TxSeen", body.encode()), state)
            assert broker.transactions is not None
            await eventually(lambda: broker.transactions is not None
                             and broker.transactions.counters.rolled_back == 1, message="the rollback recorded")

            capsys.readouterr()
            code = await asyncio.to_thread(cli.main, ["txPending", "-n", c.namesrv_addr, "--json"])
            out = capsys.readouterr().out
            assert code == 0, out
            assert json.loads(out) == [{"broker": broker.addr, "topic": "TxSeen", "producerGroup": "TxSeenPG",
                                        "pending": 2}]

            assert broker.metrics is not None
            text = broker.metrics.render().decode()
            samples = {line.split("{")[1].split("}")[0]: float(line.rsplit(" ", 1)[1])
                       for line in text.splitlines() if line.startswith("pocketmq_transaction_messages{")}
            assert samples == {'kind="half"': 4, 'kind="committed"': 1, 'kind="rolled_back"': 1,
                               'kind="checked"': 0, 'kind="discarded"': 0}
            put = {line.split("{")[1].split("}")[0]: float(line.rsplit(" ", 1)[1])
                   for line in text.splitlines() if line.startswith("pocketmq_messages_put_total{")}
            # half messages count under the half topic, committed messages under their own
            assert put == {'topic="RMQ_SYS_TRANS_HALF_TOPIC"': 4, 'topic="TxSeen"': 1}
