"""POP state survives a SIGKILL: a real broker process is killed with messages in flight (some acked, one with
a changed invisible time) and restarted on the same store; every unacked message comes back, no acked one does,
and the queue's progress is kept (new messages are delivered once). With and without a state snapshot written
before the kill (without one, recovery replays the whole revive log)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pocketmq.broker.pop.records import pop_state_topic
from pocketmq.remoting.codes import RequestCode, ResponseCode
from tests.cluster import start_namesrv
from tests.helpers import eventually
from tests.pop.java_pop import (
    ACK_MESSAGE,
    CHANGE_INVISIBLE,
    Popped,
    ack_fields,
    change_fields,
    create_topic,
    pop,
    popped,
    send,
)
from tests.procs import Proc, effective_config
from tests.transaction.raw import RawClient

pytestmark = pytest.mark.timeout(120)
TOPIC, GROUP = "TPopCrash", "GPopCrash"


def start_broker_proc(namesrv: str, store_dir: Path, props: dict[str, str]) -> Proc:
    conf = store_dir.parent / "pop.properties"
    conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    args = [sys.executable, "-m", "pocketmq.broker.main", "-n", namesrv, "--listen-host", "127.0.0.1",
            "--listen-port", "0", "--broker-name", "broker-a", "--store-dir", str(store_dir), "--log-format", "json",
            "-c", str(effective_config(store_dir, conf))]
    proc = Proc(args, "BROKER READY")
    proc.wait_ready()
    return proc


@contextlib.asynccontextmanager
async def broker_process(tmp_path: Path, props: dict[str, str]) -> AsyncIterator[tuple[str, list[Proc]]]:
    ns = await start_namesrv(tmp_path)
    procs = [await asyncio.to_thread(start_broker_proc, ns.addr, tmp_path / "store", props)]
    try:
        yield ns.addr, procs
    finally:
        for proc in procs:
            proc.kill()
        await ns.stop()


async def collect(client: RawClient, want: int, timeout: float) -> list[Popped]:
    got: list[Popped] = []

    async def enough() -> bool:
        got.extend(popped(await pop(client, GROUP, TOPIC, invisible=60_000, poll=500)))
        return len(got) >= want

    await eventually(enough, timeout=timeout, interval=0.05, message=f"{want} messages popped")
    return got


async def state_records(client: RawClient) -> int:
    """Records in the broker's POP state topic (one per snapshot)."""
    fields = {"topic": pop_state_topic("DefaultCluster"), "queueId": "0"}
    answer = await client.request(RequestCode.GET_MAX_OFFSET, fields)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return int(answer.ext["offset"])


async def _more(client: RawClient, than: int) -> bool:
    return await state_records(client) > than


@pytest.mark.parametrize("snapshot_ms", ["200", "600000"], ids=["snapshot", "replay-all"])
async def test_sigkill_with_messages_in_flight(tmp_path: Path, snapshot_ms: str) -> None:
    props = {"reviveInterval": "100", "popStateSnapshotInterval": snapshot_ms, "flushConsumerOffsetInterval": "600000"}
    async with broker_process(tmp_path, props) as (namesrv, procs):
        client = await RawClient.connect(procs[0].addr)
        await create_topic(client, TOPIC, 2)
        for i in range(20):
            assert (await send(client, TOPIC, f"m{i}".encode(), queue_id=i % 2)).code == 0
        first = popped(await pop(client, GROUP, TOPIC, invisible=3000, max_nums=12))
        second = popped(await pop(client, GROUP, TOPIC, invisible=3000, max_nums=12))
        messages = first + second
        assert len(messages) == 20
        acked = messages[::2]
        for m in acked[:5]:
            assert (await client.request(ACK_MESSAGE, ack_fields(GROUP, TOPIC, m))).code == 0
        changed = messages[1]
        assert (await client.request(CHANGE_INVISIBLE, change_fields(GROUP, TOPIC, changed, 6000))).code == 0
        if snapshot_ms == "200":  # a snapshot covers what came before, not what follows
            written = await state_records(client)
            await eventually(lambda: _more(client, written), message="a state snapshot written")
        for m in acked[5:]:
            assert (await client.request(ACK_MESSAGE, ack_fields(GROUP, TOPIC, m))).code == 0
        procs[0].kill()
        await client.close()
        procs.append(await asyncio.to_thread(start_broker_proc, namesrv, tmp_path / "store", props))
        client = await RawClient.connect(procs[-1].addr)
        try:
            for i in range(20, 24):
                assert (await send(client, TOPIC, f"m{i}".encode(), queue_id=i % 2)).code == 0
            unacked = sorted(m.body for m in messages if m not in acked)
            back = await collect(client, len(unacked) + 4, timeout=30)
            bodies = sorted(m.body for m in back)
            assert bodies == sorted(unacked + [f"m{i}".encode() for i in range(20, 24)])
            assert next(m for m in back if m.body == changed.body).reconsume_times == 1
            for m in back:
                assert (await client.request(ACK_MESSAGE, ack_fields(GROUP, TOPIC, m))).code == 0
            await asyncio.sleep(3.5)  # past every original deadline: nothing acked comes back
            assert popped(await pop(client, GROUP, TOPIC, poll=500)) == []
        finally:
            await client.close()
