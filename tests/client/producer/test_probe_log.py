"""The producer's fault probe logs a broker's transitions, not every failed probe (it probes every second)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pocketmq.client.producer.fault import MQFaultStrategy
from pocketmq.client.producer.probe import FaultProbe


class RecordingLog:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any]]] = []

    def info(self, event: str, **kw: Any) -> None:
        self.events.append(("info", event, kw))

    def warning(self, event: str, **kw: Any) -> None:
        self.events.append(("warning", event, kw))


async def test_an_isolated_broker_is_logged_once_down_and_once_restored() -> None:
    strategy = MQFaultStrategy()
    answers = {"addr-a": False}
    asked: list[str] = []
    refreshed: list[list[str]] = []

    async def ask(addr: str) -> bool:
        asked.append(addr)
        return answers[addr]

    def refresh(names: Iterable[str]) -> None:
        refreshed.append(sorted(names))

    log = RecordingLog()
    probe = FaultProbe(strategy, lambda: {"broker-a": "addr-a"}, ask, refresh, log)
    strategy.update_fault_item("broker-a", 1, isolation=True, answered=False)
    for _ in range(10):  # ten seconds of a dead broker
        await probe.tick()
    assert len(asked) == 10 and len(refreshed) == 10
    assert [(level, event) for level, event, _ in log.events] == [("warning", "broker_unreachable")]

    answers["addr-a"] = True
    await probe.tick()
    await probe.tick()  # restored: not probed any more
    assert [event for _, event, _ in log.events] == ["broker_unreachable", "broker_restored"]
    assert strategy.is_available("broker-a") and len(asked) == 11

    # A second outage is a new transition: logged again, once.
    answers["addr-a"] = False
    strategy.update_fault_item("broker-a", 1, isolation=True, answered=False)
    for _ in range(3):
        await probe.tick()
    assert [event for _, event, _ in log.events] == ["broker_unreachable", "broker_restored", "broker_unreachable"]


async def test_a_broker_that_left_the_unreachable_set_otherwise_is_logged_again_next_time() -> None:
    strategy = MQFaultStrategy()

    async def ask(_addr: str) -> bool:
        return False

    log = RecordingLog()
    probe = FaultProbe(strategy, lambda: {"broker-a": "addr-a"}, ask, lambda _names: None, log)
    strategy.update_fault_item("broker-a", 1, isolation=True, answered=False)
    await probe.tick()
    strategy.latency_fault_tolerance.remove("broker-a")  # a new route brought its master back
    await probe.tick()
    strategy.update_fault_item("broker-a", 1, isolation=True, answered=False)
    await probe.tick()
    assert [event for _, event, _ in log.events] == ["broker_unreachable", "broker_unreachable"]
