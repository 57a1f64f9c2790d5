"""Client errors, their codes, and which ones the send loops retry."""

from __future__ import annotations

import pytest

from pocketmq.client.core.errors import (
    BrokerNotFoundError,
    ClientErrorCode,
    InvalidMessageError,
    MQBrokerError,
    MQClientError,
    NoRouteError,
    ProducerStateError,
    SendFailedError,
    is_retriable_async_error,
    is_retriable_response_code,
    is_retriable_send_error,
)
from pocketmq.remoting.errors import (
    PocketMQError,
    ProtocolError,
    RemotingClosedError,
    RemotingConnectError,
    RemotingTimeoutError,
    ResponseError,
    error_for_response,
)


def test_retriable_response_codes_are_rocketmqs() -> None:
    assert {code for code in range(300) if is_retriable_response_code(code)} == {1, 14, 16, 17, 204, 205}
    assert not is_retriable_response_code(2)  # SYSTEM_BUSY is not retried


@pytest.mark.parametrize(
    ("error", "sync", "async_"),
    [
        (error_for_response(17), True, False),
        (error_for_response(1), True, False),
        (error_for_response(2), False, False),
        (error_for_response(13), False, False),
        (ResponseError(999), False, False),
        (RemotingConnectError("x"), True, True),
        (RemotingTimeoutError("x"), True, True),
        (RemotingClosedError("x"), True, True),
        (BrokerNotFoundError("b"), True, False),
        (NoRouteError("T"), True, False),
        (InvalidMessageError("bad"), False, False),
        (ProducerStateError("stopped"), False, False),
        (ProtocolError("garbage"), False, False),
        (ValueError("bug"), False, False),
    ],
)
def test_retry_rules(error: BaseException, sync: bool, async_: bool) -> None:
    assert is_retriable_send_error(error) is sync
    assert is_retriable_async_error(error) is async_


def test_hierarchy_and_codes() -> None:
    assert MQBrokerError is ResponseError
    invalid = InvalidMessageError("bad topic")
    assert isinstance(invalid, MQClientError) and isinstance(invalid, PocketMQError)
    assert invalid.response_code == 13 and invalid.code == 13 and str(invalid) == "bad topic"
    route = NoRouteError("T", "name servers unreachable")
    assert route.refresh_route and route.response_code == ClientErrorCode.NOT_FOUND_TOPIC_EXCEPTION
    assert str(route) == "No route info of this topic: T: name servers unreachable"
    assert BrokerNotFoundError("b").response_code == 10003
    assert MQClientError("x", response_code=42).response_code == 42


@pytest.mark.parametrize(
    ("last", "code"),
    [
        (error_for_response(14, "down"), 14),
        (RemotingConnectError("refused"), ClientErrorCode.CONNECT_BROKER_EXCEPTION),
        (RemotingTimeoutError("slow"), ClientErrorCode.ACCESS_BROKER_TIMEOUT),
        (BrokerNotFoundError("b"), ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION),
    ],
)
def test_send_failed_error(last: BaseException, code: int) -> None:
    first = RemotingConnectError("refused")
    err = SendFailedError("T", errors=[first, last], brokers_tried=["a", "b"], elapsed_ms=1234.4)
    assert err.response_code == code and err.last_error is last and err.errors == (first, last)
    assert err.brokers_tried == ("a", "b") and err.elapsed_ms == 1234.4 and not err.timed_out
    assert not err.retriable
    text = str(err)
    assert text.startswith("Send [2] times, still failed, cost [1234]ms, Topic: T, BrokersSent: [a, b]")
    assert type(last).__name__ in text


def test_send_failed_by_timeout_before_any_attempt() -> None:
    err = SendFailedError("T", errors=[], brokers_tried=[], elapsed_ms=3001, timed_out=True)
    assert err.last_error is None and err.timed_out and "send timeout" in str(err)
