"""The official RocketMQ 5 clients, unmodified, against a PocketMQ cluster through the gRPC proxy: each test runs
with the Python client (``rocketmq-python-client`` 5.1.2, in its own environment) and with the Node.js client
(``rocketmq-client-nodejs`` 1.0.8). Their Producer sends normal, FIFO, delayed and transactional messages (an open
transaction is checked back over Telemetry and committed); their SimpleConsumer receives, acks, changes invisible
durations and sees an unacked message again with ``delivery_attempt == 2``; their PushConsumer consumes every
message exactly once, FIFO groups in order."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.grpc.support import SDKS, SHORT_POLLS, ProxyCluster, born_near, proxy_cluster
from tests.helpers import eventually

pytestmark = pytest.mark.timeout(150)


@pytest.fixture(params=sorted(SDKS))
def sdk(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def pc(tmp_path: Path, sdk: str) -> AsyncIterator[ProxyCluster]:
    # Short invisible times and long polls are allowed, so redeliveries come back and empty receives end in seconds.
    async with proxy_cluster(tmp_path, ("broker-a", "broker-b"), min_invisible_time_mills_for_recv=1000,
                             **SHORT_POLLS) as running:
        running.sdk = sdk
        yield running


async def test_normal_messages_keep_their_id_tag_keys_properties_and_born_time(pc: ProxyCluster) -> None:
    await pc.topic("TNormal")
    sent = await pc.client("produce", topic="TNormal", count=6, tag="TagA", keys="key",
                           properties={"color": "blue", "n": "1"})
    assert not sent["errors"] and len(sent["sent"]) == 6
    assert all(s["offset"] >= 0 and s["transaction_id"] == "" for s in sent["sent"])
    got = await pc.client("simple", topic="TNormal", group="GNormal", want=6, timeout_s=40, await_s=1)
    assert not got["errors"]
    by_id = {m["message_id"]: m for m in got["received"]}
    assert set(by_id) == {s["message_id"] for s in sent["sent"]}
    for s in sent["sent"]:
        m = by_id[s["message_id"]]
        assert m["body"] == f"body-{s['i']}" and m["tag"] == "TagA" and m["keys"] == [f"key-{s['i']}"]
        assert m["properties"] == {"color": "blue", "n": "1"}
        assert m["attempt"] == 1 and m["acked"]
        assert born_near(m["born_ms"], s["sent_ms"])


async def test_an_unacked_message_comes_back_with_delivery_attempt_2(pc: ProxyCluster) -> None:
    await pc.topic("TRedeliver")
    sent = await pc.client("produce", topic="TRedeliver", count=3)
    got = await pc.client("simple", topic="TRedeliver", group="GRedeliver", want=3, timeout_s=40,
                          mode="leave-one", invisible_s=2, await_s=1)
    attempts = defaultdict(list)
    for m in got["received"]:
        attempts[m["message_id"]].append(m["attempt"])
    assert set(attempts) == {s["message_id"] for s in sent["sent"]}
    left = [mid for mid, seen in attempts.items() if len(seen) == 2]
    assert len(left) == 1 and attempts[left[0]] == [1, 2]
    assert all(seen == [1] for mid, seen in attempts.items() if mid != left[0])


async def test_change_invisible_duration_brings_the_message_back_after_the_new_duration(pc: ProxyCluster) -> None:
    await pc.topic("TChange")
    await pc.client("produce", topic="TChange", count=2)
    got = await pc.client("simple", topic="TChange", group="GChange", want=2, timeout_s=40, mode="change",
                          change_s=2, invisible_s=30, await_s=1)
    assert not got["errors"]
    assert len(got["changed"]) == 2
    for mid, changed_ms in got["changed"].items():
        again = [m for m in got["received"] if m["message_id"] == mid and m["acked"]]
        assert len(again) == 1
        # Visible again after the new 2 s, long before the first 30 s.
        assert 1500 <= again[0]["received_ms"] - changed_ms < 25_000
        assert again[0]["attempt"] == 2


async def test_push_consumer_consumes_every_message_exactly_once(pc: ProxyCluster) -> None:
    await pc.topic("TPush", queues=4)
    sent = await pc.client("produce", topic="TPush", count=40)
    got = await pc.client("push", topic="TPush", group="GPush", want=40, timeout_s=60, quiet_s=3)
    counts = Counter(m["message_id"] for m in got["received"])
    assert set(counts) == {s["message_id"] for s in sent["sent"]}
    assert set(counts.values()) == {1}, [mid for mid, n in counts.items() if n > 1]
    assert got["fifo"] is False


async def test_a_message_held_longer_than_its_invisible_time_is_renewed_not_redelivered(tmp_path: Path,
                                                                                       sdk: str) -> None:
    async with proxy_cluster(tmp_path, default_invisible_time_mills=3000, renew_ahead_time_millis=1500,
                             renew_schedule_period_millis=200, **SHORT_POLLS) as pc:
        pc.sdk = sdk
        await pc.topic("TRenew")
        sent = await pc.client("produce", topic="TRenew", count=3)
        got = await pc.client("push", topic="TRenew", group="GRenew", want=3, timeout_s=60, quiet_s=3,
                              hold_first_s=8)
        counts = Counter(m["message_id"] for m in got["received"])
        assert set(counts) == {s["message_id"] for s in sent["sent"]}
        assert set(counts.values()) == {1}  # held 8 s with a 3 s invisible time: renewed, acked once
        assert pc.proxy.service.renew is not None and pc.proxy.service.renew.renewals >= 2
        assert not pc.proxy.service.renew.held  # acked with the renewed handle: nothing left to renew


async def test_fifo_message_groups_arrive_in_order(pc: ProxyCluster) -> None:
    await pc.topic("TFifo", "FIFO", queues=4)
    await pc.fifo_group("GFifo")
    sent = await pc.client("produce", topic="TFifo", count=24, kind="fifo", groups=4)
    assert not sent["errors"]
    got = await pc.client("push", topic="TFifo", group="GFifo", want=24, timeout_s=60, quiet_s=2)
    assert got["fifo"] is True
    by_group: dict[str, list[int]] = defaultdict(list)
    for m in got["received"]:
        by_group[m["message_group"]].append(int(m["body"].removeprefix("body-")))
    assert sorted(by_group) == ["group-0", "group-1", "group-2", "group-3"]
    for group, numbers in by_group.items():
        assert numbers == sorted(numbers), (group, numbers)
        assert len(numbers) == 6


async def test_delayed_messages_arrive_no_earlier_than_asked(pc: ProxyCluster) -> None:
    await pc.topic("TDelay", "DELAY")
    sent = await pc.client("produce", topic="TDelay", count=3, kind="delay", delay_s=3)
    assert not sent["errors"]
    got = await pc.client("simple", topic="TDelay", group="GDelay", want=3, timeout_s=60, await_s=1)
    sent_ms = {s["message_id"]: s["sent_ms"] for s in sent["sent"]}
    assert {m["message_id"] for m in got["received"]} == set(sent_ms)
    for m in got["received"]:
        assert m["delivery_ms"] >= sent_ms[m["message_id"]] + 2000  # whole seconds: at least 2 s after the send
        assert m["received_ms"] >= m["delivery_ms"]


async def test_recalled_delayed_messages_never_arrive(tmp_path: Path, sdk: str) -> None:
    async with proxy_cluster(tmp_path, props={"recallMessageEnable": "true"}, **SHORT_POLLS) as pc:
        pc.sdk = sdk
        await pc.topic("TRecall", "DELAY")
        sent = await pc.client("produce", topic="TRecall", count=4, kind="delay", delay_s=3, recall_every=2)
        assert not sent["errors"]
        ids = [s["message_id"] for s in sent["sent"]]
        assert sent["recalled"] == ids[0::2]  # messages 0 and 2, by the handles their sends answered
        got = await pc.client("simple", topic="TRecall", group="GRecall", want=2, timeout_s=40, await_s=1)
        assert sorted(m["message_id"] for m in got["received"]) == sorted(ids[1::2])
        # Both markers are due and the two recalled messages were dropped: nothing more can arrive.
        timers = [b.timer for b in pc.cluster.brokers.values() if b.timer is not None]
        await eventually(lambda: sum(t.recalled for t in timers) == 2 and not any(t.recalls for t in timers),
                         timeout=10, message="the recalled messages dropped when due")


async def test_transactions_commit_and_an_open_one_is_checked_back_over_telemetry(pc: ProxyCluster) -> None:
    await pc.topic("TTx", "TRANSACTION")
    committed = await pc.client("produce", topic="TTx", count=2, kind="tx", commit=True)
    left_open = await pc.client("produce", topic="TTx", count=2, kind="tx", commit=False, wait_check_s=30,
                                body_prefix="open-")
    assert not committed["errors"] and not left_open["errors"]
    assert all(s["transaction_id"] for s in committed["sent"] + left_open["sent"])
    # The checker of the producer that left them open was asked, over its Telemetry stream, and committed them.
    assert sorted(left_open["checked"]) == sorted(s["message_id"] for s in left_open["sent"])
    got = await pc.client("simple", topic="TTx", group="GTx", want=4, timeout_s=40, await_s=1)
    ids = {s["message_id"] for s in committed["sent"] + left_open["sent"]}
    assert {m["message_id"] for m in got["received"]} == ids
