"""``python -m pocketmq.admin.health``: healthy only when the server answers its question with SUCCESS."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys

import pytest

from pocketmq.admin import health
from pocketmq.broker.controller import BrokerController
from pocketmq.namesrv.controller import NamesrvController


async def check(*argv: str) -> tuple[int, str]:
    """The check as the container engine runs it: a process, its exit status and stderr."""
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "pocketmq.admin.health", *argv,
                                                stderr=subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, err.decode()


async def test_a_name_server_and_a_broker_that_answer_are_healthy(namesrv: NamesrvController,
                                                                  broker: BrokerController) -> None:
    assert await check(namesrv.addr) == (0, "")
    assert await check("--broker", broker.addr) == (0, "")


async def test_asking_the_wrong_question_is_unhealthy(namesrv: NamesrvController) -> None:
    """A name server does not answer GET_BROKER_RUNTIME_INFO: the code it answers with is reported."""
    code, err = await check("--broker", namesrv.addr)
    assert code == 1 and "GET_BROKER_RUNTIME_INFO" in err


async def test_nothing_listening_is_unhealthy() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, not listening: connections are refused
        code, err = await check(f"127.0.0.1:{port}", "--timeout", "2")
    assert code == 1 and "unhealthy" in err


async def test_a_server_that_never_answers_is_unhealthy_within_the_timeout() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1 << 16)
        await asyncio.sleep(30)

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        started = asyncio.get_running_loop().time()
        code, err = await check(f"127.0.0.1:{port}", "--timeout", "1")
        assert code == 1 and "timed out" in err
        assert asyncio.get_running_loop().time() - started < 20
    finally:
        server.close()


async def test_a_peer_that_closes_without_answering_is_unhealthy() -> None:
    async def rude(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1 << 16)  # the whole request read first: the close is a FIN, not a reset
        writer.close()

    server = await asyncio.start_server(rude, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(health.Unhealthy, match="closed the connection"):
            await asyncio.to_thread(health.check, f"127.0.0.1:{port}", False, 2.0)
    finally:
        server.close()
