"""Errors the SDK raises, built on the product-wide hierarchy of :mod:`pocketmq.remoting.errors`.

The three families of RocketMQ's client are kept, so that the send loop of the seeds reads the same here:

* **MQClientException** → :class:`MQClientError`: something failed on our side before or around a request
  (invalid message, no route, broker address unknown, producer or consumer not running). It carries a response-like
  ``response_code``: 13 MESSAGE_ILLEGAL for validation failures, or one of :class:`ClientErrorCode`.
* **MQBrokerException** → :data:`MQBrokerError`, i.e. :class:`pocketmq.remoting.errors.ResponseError`: a broker
  answered a non-success code. :func:`pocketmq.remoting.errors.error_for_response` picks the subclass.
* **RemotingException** → :class:`pocketmq.remoting.errors.RemotingError`: connect failures, timeouts, closed
  connections.

:func:`is_retriable_response_code` is the set of broker codes RocketMQ's sync send retries on another queue;
:func:`is_retriable_send_error` applies the whole rule of the sync send loop to an exception, and
:func:`is_retriable_async_error` the narrower rule of async sends (transport failures only).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum

from pocketmq.remoting.codes import ResponseCode
from pocketmq.remoting.errors import (
    PocketMQError,
    RemotingConnectError,
    RemotingError,
    RemotingTimeoutError,
    ResponseError,
)

__all__ = [
    "BrokerNotFoundError",
    "ClientErrorCode",
    "CompressionError",
    "ConsumerStateError",
    "InvalidMessageError",
    "MQBrokerError",
    "MQClientError",
    "NoNameServerError",
    "NoRouteError",
    "ProducerStateError",
    "ReplyMessageError",
    "RequestExpiredError",
    "RequestTableFullError",
    "RequestTimeoutError",
    "SendFailedError",
    "is_retriable_async_error",
    "is_retriable_response_code",
    "is_retriable_send_error",
]

#: A broker's non-success answer (RocketMQ's ``MQBrokerException``).
MQBrokerError = ResponseError


class ClientErrorCode(IntEnum):
    """Codes RocketMQ's client puts on its own exceptions (``ClientErrorCode``), beyond the broker's."""

    CONNECT_BROKER_EXCEPTION = 10001
    ACCESS_BROKER_TIMEOUT = 10002
    BROKER_NOT_EXIST_EXCEPTION = 10003
    NO_NAME_SERVER_EXCEPTION = 10004
    NOT_FOUND_TOPIC_EXCEPTION = 10005
    REQUEST_TIMEOUT_EXCEPTION = 10006
    CREATE_REPLY_MESSAGE_EXCEPTION = 10007


class MQClientError(PocketMQError):
    """A failure on the client's side (RocketMQ's ``MQClientException``).

    ``response_code`` mirrors :attr:`pocketmq.remoting.errors.ResponseError.response_code`, so a caller can read one
    attribute whichever family it caught. The sync send loop retries client errors unless ``retriable`` is
    false (validation and state errors are final).
    """

    retriable = True
    default_response_code: int = ResponseCode.SYSTEM_ERROR

    def __init__(self, message: str, *, response_code: int | None = None) -> None:
        self.response_code = self.default_response_code if response_code is None else response_code
        super().__init__(message)


class InvalidMessageError(MQClientError):
    """A message, topic or group failed validation before anything was sent (code 13 MESSAGE_ILLEGAL).

    The broker's answer to the same mistake is :class:`pocketmq.remoting.errors.MessageIllegalError`; both carry
    ``response_code == 13``.
    """

    code = ResponseCode.MESSAGE_ILLEGAL
    retriable = False
    default_response_code = ResponseCode.MESSAGE_ILLEGAL


class CompressionError(MQClientError):
    """A compressed body could not be decompressed, or would grow past the decompression limit."""

    retriable = False


class ProducerStateError(MQClientError):
    """The producer is not running (not started yet, or already shut down)."""

    retriable = False


class ConsumerStateError(MQClientError):
    """The consumer is not running (not started yet, or shut down), or is misconfigured for ``start``."""

    retriable = False


class NoNameServerError(MQClientError):
    """No name server address is configured, or none of them answered."""

    default_response_code = ClientErrorCode.NO_NAME_SERVER_EXCEPTION


class NoRouteError(MQClientError):
    """No writable queue is known for a topic: the name servers have no route and ``TBW102`` gave none."""

    refresh_route = True
    default_response_code = ClientErrorCode.NOT_FOUND_TOPIC_EXCEPTION

    def __init__(self, topic: str, detail: str = "") -> None:
        self.topic = topic
        suffix = f": {detail}" if detail else ""
        super().__init__(f"No route info of this topic: {topic}{suffix}")


class BrokerNotFoundError(MQClientError):
    """A queue names a broker whose master address is unknown (route stale or master down)."""

    refresh_route = True
    default_response_code = ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION

    def __init__(self, broker_name: str) -> None:
        self.broker_name = broker_name
        super().__init__(f"The broker[{broker_name}] not exist")


class RequestTimeoutError(MQClientError):
    """A request was sent but no reply came within its timeout (RocketMQ's ``RequestTimeoutException``)."""

    retriable = False
    default_response_code = ClientErrorCode.REQUEST_TIMEOUT_EXCEPTION

    def __init__(self, topic: str, correlation_id: str, timeout: float) -> None:
        self.topic = topic
        self.correlation_id = correlation_id
        self.timeout = timeout
        super().__init__(f"send request message to <{topic}> OK, but wait reply message timeout, "
                         f"{timeout * 1000:.0f} ms (CORRELATION_ID {correlation_id})")


class RequestTableFullError(MQClientError):
    """A producer already waits for its maximum of replies (``max_pending_requests``): the request is not sent."""

    retriable = False


class ReplyMessageError(MQClientError):
    """A reply cannot be made for this message: it is not a request (no ``CLUSTER``, ``REPLY_TO_CLIENT`` or
    ``CORRELATION_ID``), or it is one whose requester no longer waits (:class:`RequestExpiredError`)."""

    retriable = False
    default_response_code = ClientErrorCode.CREATE_REPLY_MESSAGE_EXCEPTION


class RequestExpiredError(ReplyMessageError):
    """The request's ``TTL`` has passed since it was born: its requester has given up, a reply would be refused."""


def _code_of_last_error(error: BaseException | None) -> int:
    """The response code RocketMQ gives a failed send, taken from its last attempt's error."""
    if isinstance(error, ResponseError):
        return error.response_code
    if isinstance(error, RemotingConnectError):
        return ClientErrorCode.CONNECT_BROKER_EXCEPTION
    if isinstance(error, RemotingTimeoutError):
        return ClientErrorCode.ACCESS_BROKER_TIMEOUT
    if isinstance(error, MQClientError):
        return ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION
    return ResponseCode.SYSTEM_ERROR


class SendFailedError(MQClientError):
    """Every attempt of one send failed, or the overall timeout ran out between attempts.

    ``errors`` holds one exception per failed attempt (oldest first) and ``brokers_tried`` the broker name
    of each attempt, so the two line up. ``response_code`` follows RocketMQ: the broker's code if the last
    attempt got an answer, else 10001 (connect), 10002 (timeout) or 10003 (client-side failure).
    """

    retriable = False

    def __init__(
        self,
        topic: str,
        *,
        errors: Sequence[BaseException],
        brokers_tried: Sequence[str],
        elapsed_ms: float,
        timed_out: bool = False,
    ) -> None:
        self.topic = topic
        self.errors = tuple(errors)
        self.brokers_tried = tuple(brokers_tried)
        self.elapsed_ms = elapsed_ms
        self.timed_out = timed_out
        last = self.errors[-1] if self.errors else None
        reason = "send timeout" if timed_out else "still failed"
        message = (
            f"Send [{len(self.brokers_tried)}] times, {reason}, cost [{elapsed_ms:.0f}]ms, "
            f"Topic: {topic}, BrokersSent: [{', '.join(self.brokers_tried)}]"
        )
        if last is not None:
            message += f"; last error: {type(last).__name__}: {last}"
        super().__init__(message, response_code=_code_of_last_error(last))

    @property
    def last_error(self) -> BaseException | None:
        """The error of the last attempt, if any attempt was made."""
        return self.errors[-1] if self.errors else None


#: Broker codes after which RocketMQ's sync send tries again (SYSTEM_BUSY, 2, is deliberately absent: a busy
#: broker sheds load, and retrying at once elsewhere would only move the overload).
_RETRIABLE_RESPONSE_CODES = frozenset(
    {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.NO_PERMISSION,
        ResponseCode.NO_BUYER_ID,
        ResponseCode.NOT_IN_CURRENT_UNIT,
    }
)


def is_retriable_response_code(code: int) -> bool:
    """Whether a sync send retries after a broker answered ``code`` ({17, 14, 1, 16, 204, 205})."""
    return code in _RETRIABLE_RESPONSE_CODES


def is_retriable_send_error(error: BaseException) -> bool:
    """Whether the sync send loop should make another attempt after ``error``.

    Broker answers retry by code; transport errors always retry; client errors unless they are final
    (validation, producer state); anything else (a bug, cancellation) never.
    """
    if isinstance(error, ResponseError):
        return error.response_code in _RETRIABLE_RESPONSE_CODES
    if isinstance(error, PocketMQError):
        return error.retriable
    return False


def is_retriable_async_error(error: BaseException) -> bool:
    """Whether an async send retries: only transport failures (RocketMQ never retries broker codes there)."""
    return isinstance(error, RemotingError)
