"""Stopping the rebalance service while it is being woken must not hang (found by ``rmq-chaos``).

A 600 s chaos run hung in ``PushConsumer.shutdown``: the rebalance loop waited for its wakeup with
``asyncio.wait_for``, which on Python 3.11 returns the inner result instead of raising when the cancellation
and the wakeup land in the same loop iteration (the cancellation is swallowed, CPython gh-86296). The loop went
on, and ``Service.stop`` waited for it forever. A wakeup right before the stop makes that race certain.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.client.consumer.consumer_support import Recorder, cluster, create_topic, push_consumer
from tests.helpers import eventually


async def test_a_rebalance_woken_as_it_is_stopped_still_stops(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "RebalanceStopT", 2)
        consumer = push_consumer(c, "RebalanceStopG", "RebalanceStopT", Recorder(), rebalance_interval=20.0)
        async with consumer:
            parts = consumer._running_parts
            rebalance = parts.rebalance
            await eventually(lambda: rebalance.count >= 1 and not rebalance._lock.locked(), timeout=10,
                             message="the first rebalance done, the loop waiting for its interval")
            task = rebalance._task
            assert task is not None
            await asyncio.sleep(0.05)  # the loop is parked in its wait
            rebalance.wakeup()
            stopping = asyncio.ensure_future(rebalance.stop())
            done, _ = await asyncio.wait({stopping}, timeout=5)
            assert stopping in done, "the rebalance service did not stop"
            assert task.done()
