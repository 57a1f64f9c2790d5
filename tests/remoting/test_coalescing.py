"""How a connection groups frames into socket writes: the answers to requests read together leave in one
write, except after large requests, whose answers leave as soon as they are ready (the peer works on them
while the rest of the read is handled); outside a read, the first frame of a loop iteration leaves at once
and the rest of that iteration's frames leave together."""

from __future__ import annotations

import asyncio
from typing import Any

from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection
from pocketmq.remoting.frame import FrameDecoder, encode_frame

CODE = 77


class RecordingTransport:
    """The part of a transport a Connection uses; every write is kept as one entry."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def writelines(self, chunks: list[bytes]) -> None:
        self.writes.append(b"".join(bytes(c) for c in chunks))

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


def answered_opaques(writes: list[bytes]) -> list[list[int]]:
    """The opaque of every answer, grouped by the write that carried it."""
    groups = []
    for chunk in writes:
        groups.append([cmd.opaque for cmd in FrameDecoder().feed(chunk)])
    return groups


async def run_read(body_size: int, count: int) -> tuple[list[int], list[list[int]]]:
    """Feed ``count`` requests with ``body_size``-byte bodies as one read; return, per request, how many
    writes had been made when its handler ran, and the answers grouped by write."""
    transport = RecordingTransport()
    writes_seen: list[int] = []

    def handler(req: RemotingCommand, conn: Connection) -> RemotingCommand:
        writes_seen.append(len(transport.writes))
        return req.response(0)

    conn = Connection({CODE: handler})
    conn.connection_made(transport)  # type: ignore[arg-type]
    requests = [RemotingCommand.request(CODE, body=bytes(body_size)) for _ in range(count)]
    conn.data_received(b"".join(encode_frame(req) for req in requests))
    await asyncio.sleep(0)
    grouped = answered_opaques(transport.writes)
    assert sorted(o for group in grouped for o in group) == sorted(req.opaque for req in requests)
    return writes_seen, grouped


async def test_answers_to_small_requests_of_one_read_share_one_write() -> None:
    writes_seen, grouped = await run_read(100, 5)
    assert writes_seen == [0, 0, 0, 0, 0]
    assert len(grouped) == 1 and len(grouped[0]) == 5


async def test_answers_to_large_requests_leave_before_the_rest_of_the_read_is_handled() -> None:
    writes_seen, grouped = await run_read(64 * 1024, 3)
    assert writes_seen == [0, 1, 2], "each large request's answer was written before the next was handled"
    assert [len(group) for group in grouped] == [1, 1, 1]


async def test_first_frame_of_a_loop_step_leaves_at_once_and_the_rest_together() -> None:
    transport = RecordingTransport()
    conn = Connection({})
    conn.connection_made(transport)  # type: ignore[arg-type]
    requests = [RemotingCommand.request(CODE, body=bytes(10)) for _ in range(4)]
    conn.send(requests[0])
    assert len(transport.writes) == 1, "a lone frame waited for the next loop iteration"
    for req in requests[1:]:
        conn.send(req)
    assert len(transport.writes) == 1
    await asyncio.sleep(0)
    assert answered_opaques(transport.writes) == [[requests[0].opaque], [req.opaque for req in requests[1:]]]
    conn.send(requests[0])  # a new loop iteration: at once again
    assert len(transport.writes) == 3


async def test_request_answer_exchange_schedules_no_flush() -> None:
    """A lone request leaves at once with nothing scheduled on the loop; its answer makes the next lone
    request eager again; a second frame before any input is coalesced by a flush in the next iteration."""
    transport = RecordingTransport()
    conn = Connection({})
    conn.connection_made(transport)  # type: ignore[arg-type]
    loop = asyncio.get_running_loop()
    scheduled: list[object] = []
    real_call_soon = loop.call_soon

    def counting_call_soon(callback: Any, *args: Any, **kwargs: Any) -> asyncio.Handle:
        scheduled.append(callback)
        return real_call_soon(callback, *args, **kwargs)

    loop.call_soon = counting_call_soon  # type: ignore[method-assign,assignment]
    try:
        for _ in range(3):
            request = RemotingCommand.request(CODE, body=bytes(10))
            conn.send(request)
            assert answered_opaques(transport.writes[-1:]) == [[request.opaque]], "the request did not leave at once"
            assert scheduled == [], "a lone request scheduled work on the loop"
            answer = request.response(0)
            answer.flag |= 1
            conn.data_received(encode_frame(answer))
        first, second = (RemotingCommand.request(CODE, body=bytes(10)) for _ in range(2))
        conn.send(first)
        writes = len(transport.writes)
        conn.send(second)  # no input since the eager write: coalesced with what follows in this iteration
        assert len(transport.writes) == writes and len(scheduled) == 1
    finally:
        loop.call_soon = real_call_soon  # type: ignore[method-assign]
    await asyncio.sleep(0)
    assert answered_opaques(transport.writes[-1:]) == [[second.opaque]]
    third = RemotingCommand.request(CODE, body=bytes(10))
    conn.send(third)  # the flush ran: eager again
    assert answered_opaques(transport.writes[-1:]) == [[third.opaque]]


class PausableTransport(RecordingTransport):
    """Also records ``pause_reading`` / ``resume_reading`` calls, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.reading: list[str] = []

    def pause_reading(self) -> None:
        self.reading.append("pause")

    def resume_reading(self) -> None:
        self.reading.append("resume")


async def feed_waiting(body_size: int, count: int) -> tuple[PausableTransport, list[asyncio.Future[RemotingCommand]]]:
    """Feed ``count`` requests whose handler answers later (a future, as a SYNC_MASTER put waits for its
    replica) as one read; return the transport and the handlers' futures."""
    transport = PausableTransport()
    loop = asyncio.get_running_loop()
    waits: list[asyncio.Future[RemotingCommand]] = []

    def handler(req: RemotingCommand, conn: Connection) -> asyncio.Future[RemotingCommand]:
        waits.append(loop.create_future())
        return waits[-1]

    conn = Connection({CODE: handler})
    conn.connection_made(transport)  # type: ignore[arg-type]
    requests = [RemotingCommand.request(CODE, body=bytes(body_size)) for _ in range(count)]
    conn.data_received(b"".join(encode_frame(req) for req in requests))
    return transport, waits


async def test_large_requests_that_wait_yield_the_socket_for_one_loop_iteration() -> None:
    """The event loop would read this socket again and again while it has data (uvloop reads up to 32 full
    buffers per wake-up): the acknowledgement a SYNC_MASTER's first batch waits for, on another socket, was
    read only after the peer's last batch was stored. Reading stops once per read, until the next iteration."""
    transport, waits = await feed_waiting(64 * 1024, 3)
    assert len(waits) == 3, "the requests of the read are all handled"
    assert transport.reading == ["pause"]
    await asyncio.sleep(0)
    assert transport.reading == ["pause"], "not resumed before the next poll for I/O"
    await asyncio.sleep(0)
    assert transport.reading == ["pause", "resume"]
    for wait in waits:
        wait.cancel()


async def test_small_waiting_requests_and_answered_large_ones_do_not_pause_reading() -> None:
    transport, waits = await feed_waiting(100, 5)
    await asyncio.sleep(0)
    assert transport.reading == []
    for wait in waits:
        wait.cancel()
    pausable = PausableTransport()
    conn = Connection({CODE: lambda req, conn: req.response(0)})
    conn.connection_made(pausable)  # type: ignore[arg-type]
    conn.data_received(b"".join(encode_frame(RemotingCommand.request(CODE, body=bytes(64 * 1024)))
                                for _ in range(3)))
    await asyncio.sleep(0)
    assert pausable.reading == []
