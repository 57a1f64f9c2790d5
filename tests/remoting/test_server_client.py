"""RemotingServer and RemotingClient on 127.0.0.1 port 0, in the test's own event loop."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator

import pytest

from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import ResponseCode, SerializeType
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection
from pocketmq.remoting.errors import RemotingClosedError, RemotingConnectError, RemotingTimeoutError
from pocketmq.remoting.frame import FrameDecoder, encode_frame
from pocketmq.remoting.server import RemotingServer, ServerConfig
from tests.helpers import eventually

ECHO, SLOW, FAIL, BLOCK = 1, 2, 3, 4


async def make_server(**config: object) -> RemotingServer:
    server = RemotingServer(ServerConfig(**config))  # type: ignore[arg-type]
    server.register(ECHO, lambda req, conn: req.response(0, body=req.body, ext_fields=req.ext_fields))

    async def slow(req: RemotingCommand, conn: Connection) -> RemotingCommand:
        await asyncio.sleep(float(req.field("delay", "0.2") or 0.2))
        return req.response(0, remark="slow")

    def fail(req: RemotingCommand, conn: Connection) -> RemotingCommand:
        raise ValueError("boom")

    server.register(SLOW, slow)
    server.register(FAIL, fail)
    await server.start()
    return server


@pytest.fixture
async def server() -> AsyncIterator[RemotingServer]:
    s = await make_server()
    yield s
    await s.stop(grace=1)


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    c = RemotingClient(connect_timeout=2)
    yield c
    await c.close()


@pytest.mark.parametrize("serialize_type", list(SerializeType))
async def test_echo_in_each_serialize_type(server: RemotingServer, client: RemotingClient,
                                           serialize_type: int) -> None:
    req = RemotingCommand.request(ECHO, {"k": "v"}, b"payload", serialize_type=serialize_type)
    resp = await client.invoke(server.addr, req)
    assert resp.is_response
    assert resp.opaque == req.opaque
    assert resp.serialize_type == serialize_type
    assert resp.body == b"payload"
    assert resp.ext_fields == {"k": "v"}


async def test_unknown_code_and_handler_exception(server: RemotingServer, client: RemotingClient) -> None:
    resp = await client.invoke(server.addr, RemotingCommand.request(999))
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert resp.remark == " request type 999 not supported"
    resp = await client.invoke(server.addr, RemotingCommand.request(FAIL))
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert "boom" in (resp.remark or "")


async def test_slow_request_does_not_hold_up_fast_ones(server: RemotingServer, client: RemotingClient) -> None:
    slow = asyncio.ensure_future(client.invoke(server.addr, RemotingCommand.request(SLOW, {"delay": "0.5"})))
    for _ in range(20):
        resp = await client.invoke(server.addr, RemotingCommand.request(ECHO, body=b"x"))
        assert resp.code == 0
    assert not slow.done(), "fast requests were answered after the slow one"
    assert (await slow).remark == "slow"


async def test_many_concurrent_requests_matched_by_opaque(server: RemotingServer, client: RemotingClient) -> None:
    reqs = [RemotingCommand.request(ECHO, body=str(i).encode()) for i in range(500)]
    resps = await asyncio.gather(*(client.invoke(server.addr, r) for r in reqs))
    assert [r.body for r in resps] == [str(i).encode() for i in range(500)]
    assert len(client.addresses) == 1  # one reused connection


async def test_oneway_is_never_answered(server: RemotingServer) -> None:
    reader, writer = await asyncio.open_connection(*server.address)
    for code in (ECHO, 999, FAIL):
        writer.write(encode_frame(RemotingCommand(code, opaque=1, flag=2)))
    writer.write(encode_frame(RemotingCommand(ECHO, opaque=2, body=b"last")))
    await writer.drain()
    decoder = FrameDecoder()
    got: list[RemotingCommand] = []
    while not got:
        chunk = await asyncio.wait_for(reader.read(65536), 5)
        assert chunk, "the server closed the connection instead of answering the last request"
        got += decoder.feed(chunk)
    assert [c.opaque for c in got] == [2]
    writer.close()


async def test_request_timeout(server: RemotingServer, client: RemotingClient) -> None:
    with pytest.raises(RemotingTimeoutError):
        await client.invoke(server.addr, RemotingCommand.request(SLOW, {"delay": "1"}), timeout=0.1)


async def test_pending_requests_fail_when_connection_drops_and_client_reconnects(
    client: RemotingClient,
) -> None:
    server = await make_server()
    addr = server.addr
    pending = asyncio.ensure_future(client.invoke(addr, RemotingCommand.request(SLOW, {"delay": "5"}), 10))
    await eventually(lambda: any(c.in_flight for c in server.connections), message="request in flight")
    for conn in server.connections:
        conn.abort()
    with pytest.raises(RemotingClosedError):
        await pending
    resp = await client.invoke(addr, RemotingCommand.request(ECHO, body=b"again"))
    assert resp.body == b"again"
    await server.stop(grace=0.1)
    with pytest.raises((RemotingConnectError, RemotingClosedError)):
        await client.invoke(addr, RemotingCommand.request(ECHO))


async def test_in_flight_bound_answers_system_busy(client: RemotingClient) -> None:
    server = await make_server(max_in_flight_per_connection=2)
    try:
        slow = [asyncio.ensure_future(client.invoke(server.addr, RemotingCommand.request(SLOW, {"delay": "0.5"})))
                for _ in range(2)]
        await eventually(lambda: sum(c.in_flight for c in server.connections) == 2, message="2 in flight")
        busy = await client.invoke(server.addr, RemotingCommand.request(SLOW))
        assert busy.code == ResponseCode.SYSTEM_BUSY
        assert "[OVERLOAD]" in (busy.remark or "")
        assert all(r.code == 0 for r in await asyncio.gather(*slow))
    finally:
        await server.stop(grace=1)


async def test_connection_bound(client: RemotingClient) -> None:
    server = await make_server(max_connections=1)
    try:
        assert (await client.invoke(server.addr, RemotingCommand.request(ECHO))).code == 0
        other = RemotingClient()
        with pytest.raises((RemotingClosedError, RemotingConnectError, RemotingTimeoutError)):
            await other.invoke(server.addr, RemotingCommand.request(ECHO), timeout=2)
        await other.close()
        assert (await client.invoke(server.addr, RemotingCommand.request(ECHO))).code == 0
    finally:
        await server.stop(grace=1)


async def test_idle_connections_are_closed_and_callbacks_run(client: RemotingClient) -> None:
    server = await make_server(idle_timeout=0.2)
    closed: list[Connection] = []
    server.on_connection_closed(closed.append)
    try:
        await client.invoke(server.addr, RemotingCommand.request(ECHO))
        await eventually(lambda: len(closed) == 1, timeout=5, message="idle connection closed")
        assert not server.connections
    finally:
        await server.stop(grace=1)


async def test_garbage_gets_error_answer_and_close_without_hurting_others(
    server: RemotingServer, client: RemotingClient
) -> None:
    reader, writer = await asyncio.open_connection(*server.address)
    writer.write(struct.pack(">II", 10, (9 << 24) | 2) + b"garbage!xx")
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 5)  # until the server closes
    [answer] = FrameDecoder().feed(data)
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert "unknown serialize type" in (answer.remark or "")
    # a half frame from another peer that then disconnects
    _reader2, writer2 = await asyncio.open_connection(*server.address)
    writer2.write(encode_frame(RemotingCommand(ECHO, body=b"x" * 100))[:50])
    await writer2.drain()
    writer2.close()
    resp = await client.invoke(server.addr, RemotingCommand.request(ECHO, body=b"fine"))
    assert resp.body == b"fine"


async def test_server_initiated_requests_reach_client_handlers(server: RemotingServer) -> None:
    seen: list[RemotingCommand] = []
    client = RemotingClient()

    def notified(req: RemotingCommand, conn: Connection) -> RemotingCommand:
        seen.append(req)
        return req.response(0, remark="got it")

    client.register(40, notified)
    try:
        await client.invoke(server.addr, RemotingCommand.request(ECHO))
        [conn] = server.connections
        resp = await conn.request(RemotingCommand.request(40, {"consumerGroup": "G"}), timeout=2)
        assert resp.remark == "got it"
        await conn.oneway(RemotingCommand.request(40, {"consumerGroup": "H"}, oneway=True))
        await eventually(lambda: len(seen) == 2, message="oneway notification")
        assert [r.field("consumerGroup") for r in seen] == ["G", "H"]
    finally:
        await client.close()


async def test_graceful_stop_finishes_in_flight_requests(client: RemotingClient) -> None:
    server = await make_server()
    pending = asyncio.ensure_future(client.invoke(server.addr, RemotingCommand.request(SLOW, {"delay": "0.3"})))
    await eventually(lambda: any(c.in_flight for c in server.connections), message="in flight")
    await server.stop(grace=5)
    assert (await pending).remark == "slow"
