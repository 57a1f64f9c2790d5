"""The SDK's ``TransactionProducer`` (asyncio and blocking) against a real in-process broker: commit, rollback,
unknown then check-back, exceptions as UNKNOWN, check-backs exhausted and discarded, a check-back reaching
another producer of the group when the first is gone, and consumer groups seeing exactly the committed
messages, once each."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pocketmq.client import blocking
from pocketmq.client.core.errors import InvalidMessageError
from pocketmq.client.core.message import Message
from pocketmq.client.producer.transaction import TransactionProducer, TransactionState
from pocketmq.common.topic import RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC
from tests.client.consumer.consumer_support import (
    Cluster,
    Recorder,
    cluster,
    create_topic,
    instance_name,
    push_consumer,
)
from tests.helpers import eventually
from tests.transaction.support import TX_PROPS, Ledger

COMMIT, ROLLBACK, UNKNOWN = TransactionState.COMMIT, TransactionState.ROLLBACK, TransactionState.UNKNOWN


def tx_producer(c: Cluster, ledger: Ledger, group: str = "TxPG") -> TransactionProducer:
    return TransactionProducer(group, ledger, namesrv_addr=c.namesrv_addr, instance_name=instance_name("tx"))


def stored(c: Cluster, topic: str, queues: int = 4) -> int:
    store = c.brokers["broker-a"].store
    assert store is not None
    return sum(store.get_max_offset_in_queue(topic, q) for q in range(queues))


async def test_consumer_groups_see_exactly_the_committed_messages(tmp_path: Path) -> None:
    async with cluster(tmp_path, ("broker-a",), dict(TX_PROPS)) as c:
        await create_topic(c, "TxOrders", 4)
        ledger = Ledger()
        states = {f"m{i}": [COMMIT, ROLLBACK, UNKNOWN, RuntimeError("db down")][i % 4] for i in range(24)}
        for body in states:  # the check-back decides the unknown ones: half commit, half not
            ledger.decided[body] = COMMIT if int(body[1:]) % 8 in (2, 3) else ROLLBACK
        async with tx_producer(c, ledger) as producer:
            results = {}
            for body, state in states.items():
                results[body] = await producer.send_message_in_transaction(Message("TxOrders", body.encode()), state)
            assert {b: r.local_state for b, r in results.items()} == {
                b: s if isinstance(s, TransactionState) else UNKNOWN for b, s in states.items()}
            committed = sorted(b for b, s in states.items()
                               if s is COMMIT or ((not isinstance(s, TransactionState) or s is UNKNOWN)
                               and ledger.decided[b] is COMMIT))
            await eventually(lambda: len(set(ledger.checked)) == 12, timeout=15, message="every unknown checked back")
            await eventually(lambda: stored(c, "TxOrders") == len(committed), timeout=10)
            first, second = Recorder("g1"), Recorder("g2")
            async with push_consumer(c, "TxG1", "TxOrders", first), push_consumer(c, "TxG2", "TxOrders", second):
                await eventually(lambda: len(first.got) >= len(committed) and len(second.got) >= len(committed),
                                 timeout=20, message="both groups consumed")
                await asyncio.sleep(1.0)  # check rounds go on: nothing else may appear
            assert sorted(first.bodies) == sorted(second.bodies) == committed
            assert all(m.get_property("TRAN_MSG") == "true" and m.transaction_id for m in first.got)
        counters = c.brokers["broker-a"].transactions.counters  # type: ignore[union-attr]
        assert (counters.half, counters.committed) == (24, len(committed))
        # A check is asked again when its answer is slower than a check round (200 ms here, under load).
        assert counters.rolled_back == 24 - len(committed) and counters.checked >= 12 and counters.discarded == 0


async def test_unknown_is_checked_back_until_committed(tmp_path: Path) -> None:
    async with cluster(tmp_path, ("broker-a",), dict(TX_PROPS)) as c:
        await create_topic(c, "TxLate", 4)
        ledger = Ledger()
        ledger.answer = lambda msg: UNKNOWN if len(ledger.checked) == 1 else COMMIT
        async with tx_producer(c, ledger) as producer:
            result = await producer.send_message_in_transaction(Message("TxLate", b"late"), UNKNOWN)
            assert result.local_state is UNKNOWN and result.transaction_id == result.send_result.msg_id
            await eventually(lambda: stored(c, "TxLate") == 1, timeout=15, message="committed on the 2nd check")
            asked = len(ledger.checked)
            assert asked >= 2 and set(ledger.checked) == {"late"}
            await asyncio.sleep(1.0)
            assert len(ledger.checked) == asked and stored(c, "TxLate") == 1


async def test_check_backs_exhausted_discard_the_half_message(tmp_path: Path) -> None:
    async with cluster(tmp_path, ("broker-a",), dict(TX_PROPS)) as c:
        await create_topic(c, "TxNever", 4)
        ledger = Ledger(answer=lambda msg: UNKNOWN)
        async with tx_producer(c, ledger) as producer:
            await producer.send_message_in_transaction(Message("TxNever", b"never"), UNKNOWN)
            broker = c.brokers["broker-a"]
            store = broker.store
            assert store is not None
            await eventually(lambda: store.get_max_offset_in_queue(RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, 0) == 1,
                             timeout=15, message="discarded")
            assert ledger.checked == ["never"] * 3  # transactionCheckMax
            await asyncio.sleep(1.0)
            assert ledger.checked == ["never"] * 3 and stored(c, "TxNever") == 0
            assert store.get_max_offset_in_queue(RMQ_SYS_TRANS_HALF_TOPIC, 0) == 4  # the half and 3 copies
            assert broker.transactions is not None and broker.transactions.counters.discarded == 1


async def test_check_back_reaches_another_producer_of_the_group(tmp_path: Path) -> None:
    async with cluster(tmp_path, ("broker-a",), dict(TX_PROPS)) as c:
        await create_topic(c, "TxHandover", 4)
        gone, heir = Ledger(answer=lambda msg: UNKNOWN), Ledger(answer=lambda msg: COMMIT)
        first = tx_producer(c, gone)
        async with first:
            await first.send_message_in_transaction(Message("TxHandover", b"handed-over"), UNKNOWN)
        async with tx_producer(c, heir) as second:
            await second.send_message_in_transaction(Message("TxHandover", b"own"), COMMIT)  # heartbeats the broker
            await eventually(lambda: stored(c, "TxHandover") == 2, timeout=15, message="committed by the heir")
            assert set(heir.checked) == {"handed-over"} and gone.checked == []


async def test_batches_and_delays_are_refused(tmp_path: Path) -> None:
    async with cluster(tmp_path, ("broker-a",), dict(TX_PROPS)) as c, tx_producer(c, Ledger()) as producer:
        with pytest.raises(InvalidMessageError, match="delayed"):
            await producer.send_message_in_transaction(Message("TxRefused", b"x", delay_level=3), COMMIT)
        with pytest.raises(InvalidMessageError, match="batches"):
            await producer.send_batch([Message("TxRefused", b"x")])


async def test_blocking_facade_commits_with_a_blocking_listener(tmp_path: Path) -> None:
    async with cluster(tmp_path, ("broker-a",), dict(TX_PROPS)) as c:
        await create_topic(c, "TxSync", 4)
        ledger = Ledger(answer=lambda msg: COMMIT)

        def run() -> list[TransactionState]:
            with blocking.TransactionProducer("TxSyncPG", ledger, namesrv_addr=c.namesrv_addr,
                                          instance_name=instance_name("txs")) as producer:
                return [producer.send_message_in_transaction(Message("TxSync", b"s1"), COMMIT).local_state,
                        producer.send_message_in_transaction(Message("TxSync", b"s2"), ROLLBACK).local_state]

        assert await asyncio.to_thread(run) == [COMMIT, ROLLBACK]
        await eventually(lambda: stored(c, "TxSync") == 1, timeout=10)
        assert ledger.executed == ["s1", "s2"]


async def test_check_immunity_time_delays_the_first_check_back(tmp_path: Path) -> None:
    async with cluster(tmp_path, ("broker-a",), dict(TX_PROPS)) as c:
        await create_topic(c, "TxImmune", 4)
        ledger = Ledger(answer=lambda msg: COMMIT)
        async with tx_producer(c, ledger) as producer:
            msg = Message("TxImmune", b"immune", properties={"CHECK_IMMUNITY_TIME_IN_SECONDS": "2"})
            sent = await producer.send_message_in_transaction(msg, UNKNOWN)
            await asyncio.sleep(1.2)  # four times transactionTimeOut: still immune
            assert ledger.checked == []
            await eventually(lambda: stored(c, "TxImmune") == 1, timeout=10, message="checked after 2 s")
            assert set(ledger.checked) == {"immune"} and sent.local_state is UNKNOWN


async def test_compressed_bodies_and_a_failing_check_listener(tmp_path: Path) -> None:
    async with cluster(tmp_path, ("broker-a",), dict(TX_PROPS)) as c:
        await create_topic(c, "TxBig", 1)
        calls = []

        def answer(msg: object) -> TransactionState:
            calls.append(msg)
            if len(calls) == 1:
                raise ConnectionError("database unreachable")  # counts as UNKNOWN: asked again
            return COMMIT

        ledger = Ledger(answer=answer)
        body = b"0123456789" * 2000  # over 4 KiB: the SDK compresses it
        async with tx_producer(c, ledger) as producer:
            await producer.send_message_in_transaction(Message("TxBig", body), UNKNOWN)
            await eventually(lambda: stored(c, "TxBig", 1) == 1, timeout=15, message="committed on the 2nd check")
        assert len(calls) == 2 and all(bytes(m.body) == body for m in calls)  # type: ignore[attr-defined]
        rec = Recorder("big")
        async with push_consumer(c, "TxBigG", "TxBig", rec):
            await eventually(lambda: len(rec.got) == 1, timeout=15)
        assert bytes(rec.got[0].body) == body
