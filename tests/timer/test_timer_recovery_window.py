"""A timer dispatched into the timer queue while the timer service is recovering (the scan yields between
batches; at a controller-mode takeover the store may still be dispatching the replicated tail) is taken back by
the scan: the service only listens for arrivals once the scan is done, so one the scan missed would never fire."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pocketmq.broker import timer as timer_module
from pocketmq.broker.controller import BrokerController
from pocketmq.broker.timer import TIMER_TOPIC, TimerMessageService
from tests.helpers import eventually
from tests.pop.java_pop import create_topic, now_ms, send
from tests.transaction.raw import RawClient

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def broker_props() -> dict[str, str]:
    return {"timerMaxDelaySec": "3600"}


async def test_timers_dispatched_during_the_scan_are_taken_back(broker: BrokerController,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    store = broker.store
    assert store is not None
    client = await RawClient.connect(broker.addr)
    try:
        await create_topic(client, "TRecoverWindow", 1)
        due = now_ms() + 600_000
        for i in range(3):
            assert (await send(client, "TRecoverWindow", b"before", TIMER_DELIVER_MS=str(due + i))).code == 0
        await eventually(lambda: store.get_max_offset_in_queue(TIMER_TOPIC, 0) == 3, message="3 timers queued")
        real_sleep = asyncio.sleep
        sent_during = False

        async def sleep_and_send(delay: float, *args: Any) -> Any:
            """The scan's first yield: two more timers arrive and are dispatched meanwhile."""
            nonlocal sent_during
            if not sent_during:
                sent_during = True
                for i in range(2):
                    at = str(due + 9 + i)
                    assert (await send(client, "TRecoverWindow", b"during", TIMER_DELIVER_MS=at)).code == 0
                await eventually(lambda: store.get_max_offset_in_queue(TIMER_TOPIC, 0) == 5,
                                 message="2 more timers dispatched")
            return await real_sleep(delay, *args)

        monkeypatch.setattr(timer_module, "_SCAN_BATCH", 2)
        monkeypatch.setattr(asyncio, "sleep", sleep_and_send)  # the scan yields with asyncio.sleep(0)
        fresh = TimerMessageService(store, broker.topics, broker.addr)
        await fresh.recover()
        monkeypatch.undo()
        assert sent_during
        assert fresh.wheel.pending == 5 and fresh.recovered == 5
    finally:
        await client.close()
