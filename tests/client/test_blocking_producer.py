"""The blocking facade, driven from worker threads while the test's loop serves a name server and brokers."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pocketmq.client import InvalidMessageError, Message, ProducerStateError, SendResult, SendStatus
from pocketmq.client.blocking import Producer
from pocketmq.namesrv.controller import NamesrvController
from pocketmq.remoting.errors import BufferFullError
from tests.client.producer.producer_support import HANG, ScriptedBroker, start_namesrv
from tests.helpers import eventually, wait_until


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[NamesrvController, ScriptedBroker]]:
    ns = await start_namesrv(tmp_path)
    broker = await ScriptedBroker("broker-a", {"T": 4}).start()
    await broker.register(ns.addr)
    yield ns, broker
    await broker.stop()
    await ns.stop()


async def test_blocking_sends(cluster: tuple[NamesrvController, ScriptedBroker]) -> None:
    ns, broker = cluster

    def work() -> tuple[list[SendResult], SendResult, SendResult, threading.Thread]:
        with Producer("SG", namesrv_addr=ns.addr) as p:
            results = [p.send(Message("T", f"m{i}".encode())) for i in range(4)]
            batch = p.send_batch([Message("T", b"b1"), Message("T", b"b2")])
            p.send_oneway(Message("T", b"oneway"))
            future = p.send_async(Message("T", b"async"))
            async_result = future.result(5)
            thread = p.thread
        return results, batch, async_result, thread

    results, batch, async_result, thread = await asyncio.to_thread(work)
    assert all(r.status is SendStatus.SEND_OK for r in results)
    assert len(batch.msg_id.split(",")) == 2
    assert async_result.status is SendStatus.SEND_OK
    assert not thread.is_alive()  # shutdown joined the loop thread
    await eventually(lambda: len(broker.sends) == 7, timeout=5, message="all sends arrived")
    assert broker.unregisters and broker.unregisters[0]["producerGroup"] == "SG"


async def test_many_threads_share_one_producer(cluster: tuple[NamesrvController, ScriptedBroker]) -> None:
    ns, _broker = cluster

    def work() -> int:
        with Producer("SG", namesrv_addr=ns.addr, max_in_flight=4) as p, \
                concurrent.futures.ThreadPoolExecutor(8) as pool:
            futures = [pool.submit(p.send, Message("T", f"{i}".encode())) for i in range(64)]
            return sum(f.result(10).status is SendStatus.SEND_OK for f in futures)

    assert await asyncio.to_thread(work) == 64


async def test_async_errors_and_callbacks(cluster: tuple[NamesrvController, ScriptedBroker]) -> None:
    ns, _broker = cluster

    def work() -> list[tuple[SendResult | None, BaseException | None]]:
        seen: list[tuple[SendResult | None, BaseException | None]] = []
        done = threading.Event()

        def callback(result: SendResult | None, error: BaseException | None) -> None:
            seen.append((result, error))
            if len(seen) == 2:
                done.set()

        with Producer("SG", namesrv_addr=ns.addr) as p:
            bad = p.send_async(Message("T", b""), callback=callback)
            with pytest.raises(InvalidMessageError):
                bad.result(5)
            p.send_async(Message("T", b"fine"), callback=callback).result(5)
            assert done.wait(5)
        return seen

    seen = await asyncio.to_thread(work)
    assert isinstance(seen[0][1], InvalidMessageError) and seen[0][0] is None
    assert seen[1][0] is not None and seen[1][1] is None


async def test_calls_from_the_loop_thread_are_refused(cluster: tuple[NamesrvController, ScriptedBroker]) -> None:
    ns, _ = cluster

    def work() -> BaseException | None:
        errors: list[BaseException | None] = []
        with Producer("SG", namesrv_addr=ns.addr) as p:
            def callback(result: SendResult | None, error: BaseException | None) -> None:
                try:
                    p.send(Message("T", b"nested"))
                except RuntimeError as exc:
                    errors.append(exc)

            p.send_async(Message("T", b"x"), callback=callback).result(5)
            wait_until(lambda: bool(errors), timeout=5, message="callback ran")
        return errors[0]

    error = await asyncio.to_thread(work)
    assert isinstance(error, RuntimeError) and "loop thread" in str(error)


async def test_window_and_state(cluster: tuple[NamesrvController, ScriptedBroker]) -> None:
    ns, broker = cluster
    broker.default_code = HANG

    def work() -> None:
        p = Producer("SG", namesrv_addr=ns.addr, max_in_flight=1, send_msg_timeout=0.3)
        first = p.send_async(Message("T", b"hangs"))
        with pytest.raises(BufferFullError):
            p.send(Message("T", b"no slot"), timeout=0.05)
        with pytest.raises(Exception, match="Send"):
            first.result(5)
        p.shutdown()
        with pytest.raises(ProducerStateError):
            p.send(Message("T", b"late"))
        p.shutdown()  # idempotent

    await asyncio.to_thread(work)
