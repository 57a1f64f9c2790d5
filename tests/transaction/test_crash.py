"""SIGKILL at each step of a transaction, then restart on the same store: a committed message is never lost,
a rolled-back or undecided one never delivered, and no committed one delivered twice to a consumer group.

The broker is a real process (``tests.transaction.crash_broker``, which can kill itself between two appends);
the producer (SDK) and the consumer run in the test. Steps: after the half message is stored (the producer's
END_TRANSACTION never arrives), between the committed message and its op record, during a check-back (after the
half's copy, before the check is sent), and after commit and rollback were both recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pocketmq.client.consumer.push import PushConsumer
from pocketmq.client.core.message import Message
from pocketmq.client.producer.transaction import TransactionProducer, TransactionState
from pocketmq.namesrv.controller import NamesrvController
from pocketmq.remoting.codes import RequestCode, ResponseCode
from tests.client.consumer.consumer_support import FAST, Recorder, admin, instance_name
from tests.cluster import start_namesrv
from tests.helpers import eventually
from tests.procs import Proc, effective_config
from tests.transaction.support import TX_PROPS, Ledger

COMMIT, ROLLBACK, UNKNOWN = TransactionState.COMMIT, TransactionState.ROLLBACK, TransactionState.UNKNOWN
TOPIC = "TxCrash"


def start_broker_proc(namesrv: str, store_dir: Path, crash_at: str | None = None) -> Proc:
    conf = store_dir.parent / "tx.properties"
    # A check round counts even when the producer has not reached the restarted broker yet (as in RocketMQ): under
    # load three 200 ms rounds can pass before its heartbeat, and the half would be discarded unasked.
    props = {**TX_PROPS, "transactionCheckMax": "25"}
    conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    module = "tests.transaction.crash_broker" if crash_at else "pocketmq.broker.main"
    args = [sys.executable, "-m", module, "-n", namesrv, "--listen-host", "127.0.0.1", "--listen-port", "0",
            "--broker-name", "broker-crash", "--store-dir", str(store_dir), "--log-format", "json",
            "-c", str(effective_config(store_dir, conf))]
    proc = Proc(args, "BROKER READY", env={"TX_CRASH_AT": crash_at} if crash_at else None)
    proc.wait_ready()
    return proc


@dataclass
class Rig:
    ns: NamesrvController
    store_dir: Path
    broker: Proc
    ledger: Ledger
    producer: TransactionProducer

    async def restart(self, crash_at: str | None = None) -> None:
        """Start the broker again, waiting for it in a thread: the name server runs on this event loop, and the
        restarted master asks it for its slaves (tail recovery) before it is ready."""
        self.broker = await asyncio.to_thread(start_broker_proc, self.ns.addr, self.store_dir, crash_at)

    async def wait_killed(self) -> None:
        await eventually(lambda: self.broker.popen.poll() is not None, timeout=15, message="the broker died")
        assert self.broker.popen.returncode == -9

    async def send(self, body: str, state: Any) -> None:
        with contextlib.suppress(Exception):  # the broker may die under the send's END_TRANSACTION
            await self.producer.send_message_in_transaction(Message(TOPIC, body.encode()), state)

    async def consume_all(self, expected: list[str], group: str = "TxCrashG") -> list[str]:
        """What a new consumer group gets, after waiting for ``expected`` and a few more check rounds."""
        rec = Recorder(group)
        consumer = PushConsumer(group, namesrv_addr=self.ns.addr, instance_name=instance_name(), **FAST)
        consumer.subscribe(TOPIC, "*")
        consumer.register_handler(rec)
        async with consumer:
            await eventually(lambda: sorted(set(rec.bodies)) == sorted(expected), timeout=30,
                             message=f"{expected} consumed")
            await asyncio.sleep(1.5)
        return sorted(rec.bodies)


@contextlib.asynccontextmanager
async def rig(tmp_path: Path, crash_at: str | None) -> AsyncIterator[Rig]:
    ns = await start_namesrv(tmp_path)
    store_dir = tmp_path / "store"
    broker = start_broker_proc(ns.addr, store_dir, crash_at)
    ledger = Ledger()
    producer = TransactionProducer("TxCrashPG", ledger, namesrv_addr=ns.addr, instance_name=instance_name("txc"),
                                   poll_name_server_interval=0.5, heartbeat_broker_interval=0.5)
    r = Rig(ns, store_dir, broker, ledger, producer)
    try:
        fields = {"topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": "2", "writeQueueNums": "2",
                  "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
        created = await admin(broker.addr, RequestCode.UPDATE_AND_CREATE_TOPIC, fields)
        assert created.code == ResponseCode.SUCCESS, created
        await producer.start()
        yield r
    finally:
        with contextlib.suppress(Exception):
            await producer.shutdown(grace=1.0)
        r.broker.kill()
        await ns.stop()


async def test_killed_after_the_half_write_the_check_back_commits_once(tmp_path: Path) -> None:
    async with rig(tmp_path, None) as r:
        def kill_then_commit(msg: Message, arg: Any) -> TransactionState:
            r.broker.kill()  # END_TRANSACTION will find no broker
            return COMMIT

        r.ledger.decided["half-only"] = COMMIT
        r.ledger.execute_local_transaction = kill_then_commit  # type: ignore[method-assign]
        await r.send("half-only", None)
        await r.restart()
        assert await r.consume_all(["half-only"]) == ["half-only"]
        assert set(r.ledger.checked) == {"half-only"}  # once, or again when an answer is slower than a round


async def test_killed_between_the_commit_and_its_op_record_is_repaired_at_restart(tmp_path: Path) -> None:
    async with rig(tmp_path, "before_op") as r:
        r.ledger.decided["cut"] = COMMIT
        await r.send("cut", COMMIT)
        await r.wait_killed()
        await r.restart()
        assert "transaction_op_repaired" in r.broker.stderr_text()
        assert await r.consume_all(["cut"]) == ["cut"]
        assert r.ledger.checked == []  # the repaired op record resolved it: no check-back, no second commit
        await r.send("after", COMMIT)
        assert await r.consume_all(["after", "cut"], group="TxCrashG2") == ["after", "cut"]


async def test_killed_during_a_check_back_checks_again_and_commits_once(tmp_path: Path) -> None:
    async with rig(tmp_path, "after_check_copy") as r:
        r.ledger.decided["checked"] = COMMIT
        await r.send("checked", UNKNOWN)
        await r.wait_killed()  # the check round copied the half, then died before asking
        assert r.ledger.checked == []
        await r.restart()
        assert await r.consume_all(["checked"]) == ["checked"]
        assert set(r.ledger.checked) == {"checked"}


async def test_recorded_outcomes_survive_a_kill(tmp_path: Path) -> None:
    async with rig(tmp_path, None) as r:
        await r.send("kept", COMMIT)
        await r.send("dropped", ROLLBACK)
        r.ledger.decided["undecided"] = ROLLBACK
        await r.send("undecided", UNKNOWN)
        await eventually(lambda: "undecided" in r.ledger.checked and r.broker.stderr_text().count(
            "transaction_check_answered") >= len(r.ledger.checked), timeout=15, message="the undecided rolled back")
        asked = len(r.ledger.checked)
        r.broker.kill()
        await r.restart()
        assert await r.consume_all(["kept"]) == ["kept"]
        assert len(r.ledger.checked) == asked  # nothing asked again after the restart
