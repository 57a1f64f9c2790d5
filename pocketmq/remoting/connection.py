"""One asyncio protocol for both ends of a remoting connection.

A connection is symmetric: either side may send requests and answer them (a broker pushes
``NOTIFY_CONSUMER_IDS_CHANGED`` to a client over the client's own connection). :class:`Connection`
therefore serves requests through a handler table *and* matches responses to its own pending requests
by ``opaque``; :mod:`remoting.server` and :mod:`pocketmq.remoting.client` differ only in how connections are made.

Invariants that the rest of the product relies on:

* Requests are answered as each completes, not in arrival order, so a long-polling pull never holds up a
  heartbeat on the same connection.
* A handler returns a response, ``None`` (no answer), or an awaitable of either. A plain return is
  answered inside the same ``data_received`` call, so a synchronous fast path (an ASYNC_FLUSH send) costs
  no task; an awaitable becomes one task, counted against ``max_in_flight``.
* Writes are coalesced: frames queued while a batch of input is processed, or within one loop
  iteration, leave in one ``write``/``writelines`` call; outside a read, the first frame is written at
  once (a lone request does not wait a loop iteration) and
  the ones after it are coalesced by a flush scheduled when the second one comes. Nothing is scheduled
  for a lone frame: the next input (its answer) or the next flush makes the following frame eager again,
  so a request/answer exchange costs no extra loop iteration on either side. Once 64 KiB of request
  bodies of one read have been handled, the answers so far leave at once: a peer that sent several large
  batches gets the first answers while the rest is stored, instead of everything at the end (pipelined
  sends, whose auto-batches arrive several per read, gain the most; docs/design/remoting.md).
  When such a request waits for something else (a SYNC_MASTER's replica acknowledgement), reading stops
  until the next loop iteration, so that the other socket is read before the peer's next batch is stored.
* Every bound (frame size, in-flight requests, pending responses, unflushed output) gives a named error
  or a ``SYSTEM_BUSY`` answer, never unbounded growth. A peer that does not read its responses stops
  being read from (``pause_reading``) until it does.
"""

from __future__ import annotations

import asyncio
import heapq
import inspect
import math
import typing
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeAlias

from pocketmq.common.logs import get_logger
from pocketmq.remoting.codes import FLAG_RESPONSE, ResponseCode, SerializeType
from pocketmq.remoting.command import Body, RemotingCommand
from pocketmq.remoting.errors import (
    BufferFullError,
    PocketMQError,
    ProtocolError,
    RemotingClosedError,
    RemotingTimeoutError,
    ResponseError,
)
from pocketmq.remoting.frame import DEFAULT_MAX_FRAME_LENGTH, FrameDecoder, encode_prefix_and_header

log = get_logger("pocketmq.remoting.connection")

HandlerResult: TypeAlias = RemotingCommand | Awaitable[RemotingCommand | None] | None
Handler: TypeAlias = Callable[[RemotingCommand, "Connection"], HandlerResult]

#: Bodies at least this large are handed to the transport as separate buffers instead of being joined.
_JOIN_LIMIT = 16 * 1024
_EARLY_FLUSH_BYTES = 64 * 1024
"""Request bodies handled in one read after which the answers so far are written (not at the read's end)."""


class Connection(asyncio.Protocol):
    """A framed remoting connection; see the module docstring for its contract."""

    def __init__(
        self,
        handlers: Mapping[int, Handler],
        *,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        max_in_flight: int = 4096,
        max_pending: int = 65536,
        on_close: Callable[[Connection], None] | None = None,
    ) -> None:
        self._handlers = handlers
        self._decoder = FrameDecoder(max_frame_length)
        self._max_in_flight = max_in_flight
        self._max_pending = max_pending
        self._on_close = on_close
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        # Request deadlines: one heap and one timer per connection instead of a timer per request
        # (a call_later and a cancel per request would cost more than the rest of the bookkeeping). Entries of
        # answered requests are
        # skipped when they surface, and the heap is rebuilt when they outnumber the live ones.
        self._deadlines: list[tuple[float, int, float]] = []
        self._sweep_handle: asyncio.TimerHandle | None = None
        self._sweep_at = math.inf
        self._tasks: set[asyncio.Task[None]] = set()
        # Waits of handlers that serve only this peer (parked long polls): cancelled when it goes away.
        self._parked: set[asyncio.Future[Any]] = set()
        self._out: list[Body] = []
        self._flush_scheduled = False
        # An eager write was made since the last input or flush: the next frame is coalesced instead.
        self._eager_spent = False
        self._in_data_received = False
        self._write_paused = False
        self._read_yielded = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._closed = self._loop.create_future()
        self.made: asyncio.Future[None] = self._loop.create_future()
        self.remote_addr = "?"
        self.last_activity = self._loop.time()
        self.close_after_flush = False
        #: Set by a server over its connection bound: the connection is closed as soon as it is made.
        self.refuse = False
        #: Called on every request this side sends, just before it is written (a client's ACL signature).
        self.before_request: Callable[[RemotingCommand], None] | None = None
        #: Called when the peer answers a request of ours SERVICE_NOT_AVAILABLE (a client notes the peer as stale).
        self.on_not_serving: Callable[[], None] | None = None

    # -- asyncio.Protocol -----------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but implement its interface.
        self._transport = typing.cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        if peer:
            self.remote_addr = f"{peer[0]}:{peer[1]}"
        if not self.made.done():
            self.made.set_result(None)
        if self.refuse:
            transport.close()

    def data_received(self, data: bytes) -> None:
        self.last_activity = self._loop.time()
        self._in_data_received = True
        self._eager_spent = False
        try:
            try:
                commands = self._decoder.feed(data)
            except ProtocolError as exc:
                self._protocol_error(exc)
                return
            handled = 0
            for cmd in commands:
                if cmd.flag & FLAG_RESPONSE:
                    self._complete(cmd)
                    continue
                self._dispatch(cmd)
                body = cmd.body
                if body is not None:
                    handled += len(body)
                    if handled >= _EARLY_FLUSH_BYTES:
                        if self._tasks:
                            self._yield_reading()
                        if self._out:
                            # A read full of large requests (batches): answer what is done now, so that the
                            # peer works on those answers while the rest is handled.
                            self._flush()
                        handled = 0
        finally:
            self._in_data_received = False
            if self._out:
                self._flush()

    def _yield_reading(self) -> None:
        """Large requests are waiting for something else (a SYNC_MASTER's replica acknowledgement on another
        socket): stop reading until the next loop iteration. The event loop would otherwise keep reading this
        socket while it has data (libuv reads up to 32 full buffers per wake-up), so the acknowledgement that
        answers the first batch is read only after the peer's last one is stored (the SYNC_MASTER lock-step of
        docs/perf/history.md, "Why SYNC_MASTER waited")."""
        transport = self._transport
        if self._read_yielded or transport is None or self._write_paused or transport.is_closing():
            return
        self._read_yielded = True
        transport.pause_reading()
        # Resumed two callback rounds later: the loop's next poll for I/O (between the two) reads the other
        # sockets but not this one; a single call_soon would resume before that poll, where this socket may
        # again come first.
        self._loop.call_soon(self._loop.call_soon, self._resume_yielded)

    def _resume_yielded(self) -> None:
        self._read_yielded = False
        transport = self._transport
        if transport is not None and not self._write_paused and not transport.is_closing():
            transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        error = RemotingClosedError(f"connection to {self.remote_addr} closed" + (f": {exc}" if exc else ""))
        if self._sweep_handle is not None:
            self._sweep_handle.cancel()
            self._sweep_handle = None
        self._deadlines = []
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(error)
        # Handlers already running finish: a request received before the peer left (a oneway send, an offset
        # commit) still takes effect, as with RocketMQ; only their answers are dropped. Waits that exist only
        # to answer this peer end now.
        self.release_parked()
        self._wake_drainers()
        if not self.made.done():
            self.made.set_exception(error)
            self.made.exception()  # consumed: nobody may be waiting
        if not self._closed.done():
            self._closed.set_result(None)
        if self._on_close is not None:
            self._on_close(self)

    def pause_writing(self) -> None:
        # The peer is not reading: stop reading its requests until our output drains.
        self._write_paused = True
        if self._transport is not None:
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._transport is not None and not self._transport.is_closing():
            self._transport.resume_reading()
        self._wake_drainers()

    # -- public API -----------------------------------------------------------------------------------

    @property
    def is_closed(self) -> bool:
        return self._transport is None or self._transport.is_closing()

    @property
    def in_flight(self) -> int:
        """Requests from the peer being processed by handlers right now."""
        return len(self._tasks)

    def unanswered_for(self) -> float:
        """Seconds the peer has been silent while a request of ours waits for it: since the later of its last bytes
        and the sending of the oldest request still waiting (0 when none waits). A scan of the waiting requests:
        for a once-a-second watch, not a hot path."""
        pending = self._pending
        if not pending:
            return 0.0
        now = self._loop.time()
        sent = min((deadline - timeout for deadline, opaque, timeout in self._deadlines if opaque in pending),
                   default=now)
        return max(0.0, now - max(self.last_activity, sent))

    def send(self, cmd: RemotingCommand) -> None:
        """Queue one frame; it leaves with the next coalesced write."""
        if self._transport is None:
            raise RemotingClosedError(f"connection to {self.remote_addr} is closed")
        head, body = encode_prefix_and_header(cmd)
        out = self._out
        if self._in_data_received:
            out.append(head)
            if body is not None:
                out.append(body)
            return  # leaves with the answers to the rest of the read
        if not out and not self._eager_spent and not self._write_paused and not self._transport.is_closing():
            # A lone frame leaves at once, with nothing scheduled (see the module docstring).
            self._eager_spent = True
            self._write_now(head, body)
            return
        out.append(head)
        if body is not None:
            out.append(body)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _write_now(self, head: bytes, body: Body | None) -> None:
        transport = self._transport
        assert transport is not None
        if body is None:
            transport.write(head)
        elif len(body) < _JOIN_LIMIT:
            transport.write(head + body)
        else:
            transport.writelines((head, body))

    async def request(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send a request and wait for its response (matched by ``opaque``)."""
        if self._write_paused:
            await self.drain()
        if self.before_request is not None:
            self.before_request(cmd)
        if len(self._pending) >= self._max_pending:
            raise BufferFullError(f"{len(self._pending)} requests already pending on {self.remote_addr}")
        fut: asyncio.Future[RemotingCommand] = self._loop.create_future()
        opaque = cmd.opaque
        self._pending[opaque] = fut
        self._add_deadline(opaque, timeout)
        try:
            self.send(cmd)
            return await fut
        finally:
            self._pending.pop(opaque, None)

    async def oneway(self, cmd: RemotingCommand) -> None:
        """Send a request that is never answered."""
        if self._write_paused:
            await self.drain()
        if self.before_request is not None:
            self.before_request(cmd)
        self.send(cmd)

    async def drain(self) -> None:
        """Wait until the transport accepts more output (or the connection closes)."""
        if not self._write_paused or self._transport is None:
            return
        fut: asyncio.Future[None] = self._loop.create_future()
        self._drain_waiters.append(fut)
        await fut

    def close(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            if self._out:
                self._flush()
            self._transport.close()

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    def park(self, future: asyncio.Future[Any]) -> None:
        """Cancel ``future`` if this connection closes (or :meth:`release_parked` runs) before it is done:
        for handler waits that only matter to this peer, such as a long poll."""
        if self._transport is None:
            future.cancel()
            return
        self._parked.add(future)
        future.add_done_callback(self._parked.discard)

    def release_parked(self) -> None:
        """Cancel every wait registered with :meth:`park` (a stopping server answers nothing more)."""
        for future in list(self._parked):
            future.cancel()

    def cancel_handlers(self) -> None:
        """Cancel every handler still running (a stopping server whose grace period ran out)."""
        for task in list(self._tasks):
            task.cancel()

    async def wait_closed(self) -> None:
        await asyncio.shield(self._closed)

    async def wait_handlers(self, timeout: float) -> None:
        """Wait for in-flight handlers to finish (graceful stop), at most ``timeout`` seconds."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)

    # -- internals ------------------------------------------------------------------------------------

    def _flush(self) -> None:
        self._flush_scheduled = False
        self._eager_spent = False
        out, self._out = self._out, []
        transport = self._transport
        if transport is None or not out or transport.is_closing():
            return
        if len(out) == 1:
            transport.write(out[0])
        elif all(len(b) < _JOIN_LIMIT for b in out):
            transport.write(b"".join(out))
        else:
            transport.writelines(out)
        if self.close_after_flush:
            transport.close()

    def _wake_drainers(self) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def _add_deadline(self, opaque: int, timeout: float) -> None:
        deadline = self._loop.time() + timeout
        deadlines = self._deadlines
        if len(deadlines) > 2 * len(self._pending) + 1024:
            pending = self._pending
            self._deadlines = deadlines = [d for d in deadlines if d[1] in pending]
            heapq.heapify(deadlines)
        heapq.heappush(deadlines, (deadline, opaque, timeout))
        if deadline < self._sweep_at:
            self._schedule_sweep(deadline)

    def _schedule_sweep(self, when: float) -> None:
        if self._sweep_handle is not None:
            self._sweep_handle.cancel()
        self._sweep_at = when
        self._sweep_handle = self._loop.call_at(when, self._sweep)

    def _sweep(self) -> None:
        """Fail every request whose deadline has passed, then wait for the next deadline."""
        self._sweep_handle = None
        self._sweep_at = math.inf
        now = self._loop.time()
        deadlines = self._deadlines
        pending = self._pending
        while deadlines and deadlines[0][0] <= now:
            _, opaque, timeout = heapq.heappop(deadlines)
            fut = pending.pop(opaque, None)
            if fut is not None and not fut.done():
                fut.set_exception(
                    RemotingTimeoutError(f"no response from {self.remote_addr} within {timeout * 1000:.0f} ms")
                )
        while deadlines and deadlines[0][1] not in pending:
            heapq.heappop(deadlines)  # answered requests: nothing to wait for
        if deadlines:
            self._schedule_sweep(deadlines[0][0])

    def _complete(self, response: RemotingCommand) -> None:
        fut = self._pending.pop(response.opaque, None)
        if fut is None:
            log.debug("response_without_request", peer=self.remote_addr, opaque=response.opaque)
            return
        if response.code == ResponseCode.SERVICE_NOT_AVAILABLE and self.on_not_serving is not None:
            self.on_not_serving()
        if not fut.done():
            fut.set_result(response)

    def _protocol_error(self, exc: ProtocolError) -> None:
        log.warning("protocol_error", peer=self.remote_addr, error=str(exc))
        # We cannot know which request the bad bytes belonged to: answer with opaque 0, then close.
        answer = RemotingCommand(
            ResponseCode.SYSTEM_ERROR,
            flag=FLAG_RESPONSE,
            remark=f"protocol error: {exc}",
            serialize_type=SerializeType.JSON,
        )
        if self._transport is not None:
            self.send(answer)
            self.close_after_flush = True

    def _dispatch(self, cmd: RemotingCommand) -> None:
        handler = self._handlers.get(cmd.code)
        if handler is None:
            self._answer(cmd, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {cmd.code} not supported")
            return
        if len(self._tasks) >= self._max_in_flight:
            self._answer(cmd, ResponseCode.SYSTEM_BUSY, f"[OVERLOAD] {len(self._tasks)} requests in flight")
            return
        try:
            result = handler(cmd, self)
        except Exception as exc:
            self._answer_error(cmd, exc)
            return
        if result is None or isinstance(result, RemotingCommand):
            self._reply(cmd, result)
        elif inspect.isawaitable(result):
            task = self._loop.create_task(self._finish(cmd, result))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            self._answer(cmd, ResponseCode.SYSTEM_ERROR, f"handler returned {type(result).__name__}")

    async def _finish(self, cmd: RemotingCommand, pending: Awaitable[RemotingCommand | None]) -> None:
        try:
            result = await pending
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._answer_error(cmd, exc)
            return
        if self._transport is not None:
            self._reply(cmd, result)

    def _reply(self, request: RemotingCommand, response: RemotingCommand | None) -> None:
        if response is None or request.is_oneway:
            return
        response.opaque = request.opaque
        response.flag |= FLAG_RESPONSE
        response.serialize_type = request.serialize_type
        self.send(response)

    def _answer(self, request: RemotingCommand, code: int, remark: str) -> None:
        if not request.is_oneway and self._transport is not None:
            self.send(request.response(code, remark))

    def _answer_error(self, request: RemotingCommand, exc: Exception) -> None:
        if isinstance(exc, ResponseError):
            self._answer(request, exc.response_code, exc.remark)
            return
        if isinstance(exc, PocketMQError):
            self._answer(request, exc.code, str(exc))
            return
        log.exception("handler_failed", peer=self.remote_addr, code=request.code, exc_info=exc)
        self._answer(request, ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
