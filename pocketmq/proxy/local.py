"""Local mode's shortcut: the broker a proxy runs inside, its request handlers called in-process.

RocketMQ 5's proxy in local mode (``LocalMessageService``) hands requests to its broker's processors directly
instead of over a socket. :class:`LocalBroker` does the same for the requests that need nothing of a connection
but its address: the send, the transaction's end, the recall, the POP calls and the metadata reads. The request is the
:class:`~pocketmq.remoting.command.RemotingCommand` the proxy would have put on the wire, given to the same
handler the broker's remoting server calls (with the broker's request metrics around it), so the checks and the
answers are the broker's own; only the frame encoding, the loopback socket and the decoding are skipped. A
handler's exception is answered as a connection answers it.

Registrations (HEART_BEAT, UNREGISTER_CLIENT) stay on remoting: the broker calls producers back
(CHECK_TRANSACTION_STATE) on the connection they registered from. The broker's remoting ACL is not applied to the
shortcut: the proxy checked the gRPC call against the same accounts already, as RocketMQ's local mode does.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from pocketmq.common.logs import get_logger
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Handler
from pocketmq.remoting.errors import PocketMQError, ResponseError

log = get_logger("pocketmq.proxy.local")

LOCAL_CODES = frozenset({
    RequestCode.SEND_MESSAGE_V2, RequestCode.END_TRANSACTION, RequestCode.POP_MESSAGE, RequestCode.ACK_MESSAGE,
    RequestCode.CHANGE_MESSAGE_INVISIBLETIME, RequestCode.CONSUMER_SEND_MSG_BACK, RequestCode.GET_TOPIC_CONFIG,
    RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, RequestCode.RECALL_MESSAGE,
})
"""Request codes served in-process; any other goes over remoting."""


class LocalPeer:
    """What a broker handler sees of the proxy as its caller: an address, and long polls parked on it (a POP
    held until messages arrive) that end when the proxy stops."""

    def __init__(self, remote_addr: str) -> None:
        self.remote_addr = remote_addr
        self._parked: set[asyncio.Future[Any]] = set()

    def park(self, future: asyncio.Future[Any]) -> None:
        self._parked.add(future)
        future.add_done_callback(self._parked.discard)

    def release_parked(self) -> None:
        for future in list(self._parked):
            future.cancel()


class LocalBroker:
    """The broker at ``addr()`` with its handler table (what its remoting server serves)."""

    def __init__(self, addr: Callable[[], str], handlers: Mapping[int, Handler]) -> None:
        self._addr = addr
        self._handlers: dict[int, Handler] = {code: handlers[code] for code in LOCAL_CODES if code in handlers}
        # The records' born host of a send taken here: the broker's own address (the proxy is in its process).
        self.peer = LocalPeer(addr())

    def serves(self, addr: str, code: int) -> bool:
        return code in self._handlers and addr == self._addr()

    async def request(self, request: RemotingCommand, timeout: float) -> RemotingCommand | None:
        """The handler's answer to ``request`` (None for a oneway request); the handler's failure as a response
        with the code a remoting connection would answer with. A wait beyond ``timeout`` raises TimeoutError."""
        try:
            result = self._handlers[request.code](request, self.peer)  # type: ignore[arg-type]
            if inspect.isawaitable(result):
                async with asyncio.timeout(timeout):
                    result = await result
        except TimeoutError:
            raise
        except PocketMQError as exc:
            result = _error_response(request, exc)
        except Exception as exc:
            log.exception("handler_failed", code=request.code, exc_info=exc)
            result = request.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
        if request.is_oneway or result is None:
            return None
        assert isinstance(result, RemotingCommand)
        result.serialize_type = request.serialize_type
        return result

    def close(self) -> None:
        self.peer.release_parked()


def _error_response(request: RemotingCommand, exc: PocketMQError) -> RemotingCommand:
    if isinstance(exc, ResponseError):
        return request.response(exc.response_code, exc.remark)
    return request.response(exc.code, str(exc))
