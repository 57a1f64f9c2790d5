"""Local mode's shortcut (:mod:`pocketmq.proxy.local`) on its own: which requests it takes, and that a handler's
answer, failure or silence comes back as a remoting connection would give it (the end-to-end cases are in
test_bad_input.py, run against both modes, and test_cross_protocol.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pocketmq.proxy.backend import Backend
from pocketmq.proxy.errors import Code, ProxyError
from pocketmq.proxy.local import LocalBroker
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import InvalidHeaderError, ResponseError

pytestmark = pytest.mark.timeout(10)
ADDR = "127.0.0.1:10911"


def request(code: int = RequestCode.SEND_MESSAGE_V2, *, oneway: bool = False) -> RemotingCommand:
    return RemotingCommand.request(code, {"a": "1"}, b"body", oneway=oneway)


def broker(handler: Any, code: int = RequestCode.SEND_MESSAGE_V2) -> LocalBroker:
    return LocalBroker(lambda: ADDR, {code: handler, RequestCode.HEART_BEAT: handler})


async def test_only_the_listed_codes_to_this_broker_are_taken() -> None:
    local = broker(lambda req, conn: req.response(ResponseCode.SUCCESS))
    assert local.serves(ADDR, RequestCode.SEND_MESSAGE_V2)
    assert not local.serves("127.0.0.1:1", RequestCode.SEND_MESSAGE_V2)  # another broker: over remoting
    assert not local.serves(ADDR, RequestCode.HEART_BEAT)  # registrations stay on a real connection
    assert not local.serves(ADDR, RequestCode.POP_MESSAGE)  # a code the broker has no handler for


async def test_answers_sync_and_async_and_the_caller_is_the_broker_itself() -> None:
    seen: list[str] = []

    def sync(req: RemotingCommand, conn: Any) -> RemotingCommand:
        seen.append(conn.remote_addr)
        return req.response(ResponseCode.SUCCESS, ext_fields={"msgId": "X"})

    async def later(req: RemotingCommand, conn: Any) -> RemotingCommand:
        await asyncio.sleep(0)
        return req.response(ResponseCode.FLUSH_DISK_TIMEOUT, "slow disk")

    req = request()
    answer = await broker(sync).request(req, 1.0)
    assert answer is not None and answer.code == ResponseCode.SUCCESS and answer.opaque == req.opaque
    assert answer.ext_fields == {"msgId": "X"} and seen == [ADDR]
    slow = await broker(later).request(request(), 1.0)
    assert slow is not None and (slow.code, slow.remark) == (ResponseCode.FLUSH_DISK_TIMEOUT, "slow disk")
    assert await broker(sync).request(request(oneway=True), 1.0) is None


@pytest.mark.parametrize(("error", "code", "remark"), [
    (ResponseError(ResponseCode.NO_PERMISSION, "not yours"), ResponseCode.NO_PERMISSION, "not yours"),
    (InvalidHeaderError("the custom field <topic> is null"), InvalidHeaderError.code,
     "the custom field <topic> is null"),
    (ValueError("boom"), ResponseCode.SYSTEM_ERROR, "ValueError: boom"),
])
async def test_a_handler_failure_is_answered_as_a_connection_answers_it(error: Exception, code: int,
                                                                         remark: str) -> None:
    def failing(req: RemotingCommand, conn: Any) -> RemotingCommand:
        raise error

    answer = await broker(failing).request(request(), 1.0)
    assert answer is not None and (answer.code, answer.remark) == (code, remark)


async def test_a_handler_that_does_not_answer_in_time_is_proxy_timeout() -> None:
    never: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
    local = broker(lambda req, conn: never)
    with pytest.raises(ProxyError) as caught:
        await Backend._local_request(local, ADDR, request(), 0.05)
    assert caught.value.code == Code.PROXY_TIMEOUT


async def test_long_polls_parked_on_the_proxy_end_when_it_stops() -> None:
    local = broker(lambda req, conn: None)
    held: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    local.peer.park(held)
    local.close()
    assert held.cancelled()
