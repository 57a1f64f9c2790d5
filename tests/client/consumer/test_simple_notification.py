"""The SimpleConsumer's long polls on several brokers at once (:class:`pocketmq.client.consumer.simple.PopReceiver`):
a broker that fails its NOTIFICATION (down, or a slave) counts as "nothing there yet", and no failure is left
unretrieved for asyncio to report, whether another broker answered first or every poll ended."""

from __future__ import annotations

import asyncio
import gc
from typing import Any, cast

from pocketmq.client.consumer.pop_api import PopAPI
from pocketmq.client.consumer.simple import PopReceiver
from pocketmq.client.core.errors import MQClientError
from pocketmq.common.subscription import SubscriptionData


class _Api:
    """NOTIFICATION answers by broker: an exception raised at once, or a result after a delay."""

    def __init__(self, answers: dict[str, tuple[float, Any]]) -> None:
        self.answers = answers

    async def notification(self, broker: str, topic: str, *, poll_ms: int, order: bool) -> bool:
        delay, answer = self.answers[broker]
        await asyncio.sleep(delay)
        if isinstance(answer, Exception):
            raise answer
        return bool(answer)


async def _unretrieved(answers: dict[str, tuple[float, Any]]) -> tuple[bool, list[dict[str, Any]]]:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    sub = SubscriptionData("T")
    receiver = PopReceiver(cast(PopAPI, _Api(answers)), {"T": sub})
    try:
        found = await receiver._any_has_message([(sub, b) for b in answers], 1000)
        gc.collect()  # a task whose exception nobody retrieved is reported when it is collected
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(None)
    return found, reported


async def test_a_failed_poll_beside_one_that_finds_messages_is_not_reported() -> None:
    answers: dict[str, tuple[float, Any]] = {f"down:{i}": (0.0, MQClientError("connect failed")) for i in range(10)}
    answers["up:1"] = (0.0, True)  # done in the same round as the failures: the answer must not skip them
    found, reported = await _unretrieved(answers)
    assert found and reported == []


async def test_every_poll_failed_or_empty_is_nothing_and_not_reported() -> None:
    found, reported = await _unretrieved({"down:1": (0.0, MQClientError("connect failed")),
                                          "slave:1": (0.01, MQClientError("SERVICE_NOT_AVAILABLE")),
                                          "idle:1": (0.02, False)})
    assert not found and reported == []
