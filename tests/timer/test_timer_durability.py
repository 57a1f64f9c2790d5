"""Timers survive a SIGKILL and live on a slave: a real broker process is killed with timers pending (some fired
already) and restarted on the same store: every timer fires, none early, those due after the restart on time; on
a SYNC_MASTER the slave holds the timer queue (with the same due times) and the checkpoints byte for byte, and a
broker started on a copy of the slave's store fires the pending timers."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import pytest

from pocketmq.broker.controller import BrokerController
from pocketmq.broker.timer import TIMER_CHECKPOINT_TOPIC, TIMER_TOPIC
from pocketmq.store.config import BrokerRole
from pocketmq.store.consume_queue import CQ_UNIT
from tests.cluster import start_broker, start_namesrv
from tests.helpers import eventually
from tests.pop.java_pop import create_topic, now_ms, send
from tests.pop.test_pop_crash import start_broker_proc
from tests.timer.support import Fired, pull_all
from tests.transaction.raw import RawClient
from tests.transaction.test_ha import commit_log_bytes, queue_ends

pytestmark = pytest.mark.timeout(120)


async def wait_all(client: RawClient, topic: str, bodies: set[bytes], timeout: float) -> list[Fired]:
    fired: list[Fired] = []

    async def complete() -> bool:
        fired[:] = await pull_all(client, topic)
        return {f.body for f in fired} >= bodies

    await eventually(complete, timeout=timeout, interval=0.1, message="every timer fired")
    return fired


async def test_timers_survive_sigkill(tmp_path: Path) -> None:
    ns = await start_namesrv(tmp_path)
    procs = [await asyncio.to_thread(start_broker_proc, ns.addr, tmp_path / "store", {})]
    try:
        client = await RawClient.connect(procs[0].addr)
        await create_topic(client, "TTimerKill", 1)
        base = now_ms()
        dues = {f"t{i}".encode(): base + 300 + i * 150 for i in range(40)}  # due over 0.3 .. 6.3 s
        for body, due in dues.items():
            assert (await send(client, "TTimerKill", body, TIMER_DELIVER_MS=str(due))).code == 0
        await eventually(lambda: now_ms() > base + 2600, timeout=5, message="a few fired and checkpointed")
        before = {f.body for f in await pull_all(client, "TTimerKill")}
        assert before  # some fired before the kill
        procs[0].kill()
        await client.close()
        procs.append(await asyncio.to_thread(start_broker_proc, ns.addr, tmp_path / "store", {}))
        ready = now_ms()
        client = await RawClient.connect(procs[-1].addr)
        fired = await wait_all(client, "TTimerKill", set(dues), timeout=30)
        await client.close()
        for f in fired:
            assert f.due == dues[f.body] and f.lateness >= 0, f"{f.body!r} early by {-f.lateness} ms"
            if f.due > ready + 500:
                assert f.lateness < 1000, f"{f.body!r} due after the restart fired {f.lateness} ms late"
    finally:
        for proc in procs:
            proc.kill()
        await ns.stop()


def timer_units(broker: BrokerController) -> list[tuple[int, int, int]]:
    assert broker.store is not None
    cq = broker.store.find_consume_queue(TIMER_TOPIC, 0)
    assert cq is not None
    units = cq.get_units(cq.min_offset, cq.max_offset - cq.min_offset)
    assert units is not None
    out = list(CQ_UNIT.iter_unpack(units))
    units.release()
    return out


async def test_slave_holds_the_timers(tmp_path: Path) -> None:
    ns = await start_namesrv(tmp_path)
    master = await start_broker(tmp_path, "broker-a", ns.addr, broker_role=BrokerRole.SYNC_MASTER)
    slave = await start_broker(tmp_path, "broker-a", ns.addr, broker_role=BrokerRole.SLAVE, broker_id=1)
    copy: BrokerController | None = None
    try:
        await eventually(lambda: master.ha_service is not None and master.ha_service.connection_count == 1,
                         message="slave attached")
        client = await RawClient.connect(master.addr)
        await create_topic(client, "TTimerHA", 1)
        base = now_ms()
        # "later" and "rel" must not fire before the comparison below, even on a loaded machine.
        dues = {b"soon": base + 300, b"later": base + 15_000}
        for body, due in dues.items():
            assert (await send(client, "TTimerHA", body, TIMER_DELIVER_MS=str(due))).code == 0
        assert (await send(client, "TTimerHA", b"rel", TIMER_DELAY_SEC="16")).code == 0
        await wait_all(client, "TTimerHA", {b"soon"}, timeout=10)
        await eventually(lambda: master.timer is not None and master.timer._last_checkpoint > 0, timeout=5,
                         message="a checkpoint")
        await client.close()
        assert master.store is not None and slave.store is not None
        await eventually(lambda: slave.store is not None and master.store is not None
                         and slave.store.max_phy_offset == master.store.max_phy_offset, message="caught up")
        assert commit_log_bytes(slave) == commit_log_bytes(master)
        await eventually(lambda: slave.store is not None and slave.store.dispatch_behind_bytes == 0
                         and queue_ends(slave, TIMER_CHECKPOINT_TOPIC) == queue_ends(master, TIMER_CHECKPOINT_TOPIC),
                         message="the slave's consume queues dispatched")
        assert queue_ends(master, TIMER_CHECKPOINT_TOPIC) != [0]
        assert timer_units(slave) == timer_units(master)
        assert [due for _p, _s, due in timer_units(slave)][:2] == [dues[b"soon"], dues[b"later"]]

        slave_dir = Path(slave.store.config.store_path_root_dir)
        await slave.stop()
        await master.stop()
        shutil.copytree(slave_dir, tmp_path / "from-slave", ignore=shutil.ignore_patterns("lock"))
        started = time.time()
        copy = await start_broker(tmp_path, "broker-b", ns.addr, store_path_root_dir=str(tmp_path / "from-slave"))
        assert copy.timer is not None and copy.timer.pending_by_topic == {"TTimerHA": 2}  # recovered, per topic
        client = await RawClient.connect(copy.addr)
        await create_topic(client, "TTimerHA", 1)  # topic configs reach a slave every 10 s: maybe not yet
        fired = await wait_all(client, "TTimerHA", {b"soon", b"later", b"rel"}, timeout=40)
        await client.close()
        assert sorted(f.body for f in fired) == [b"later", b"rel", b"soon"]  # "soon" fired once, before the copy
        for f in fired:
            assert f.lateness >= 0
        assert time.time() - started < 40
    finally:
        for broker in (copy, slave, master):
            if broker is not None:
                await broker.stop()
        await ns.stop()
