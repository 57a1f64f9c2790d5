"""One error hierarchy for the whole product.

Every error carries the response code a server answers with and what a client should do about it:
``retriable`` (try again, possibly on another broker) and ``refresh_route`` (fetch the route again first).

* :class:`ProtocolError` — bytes that are not a valid frame or header (ours or the peer's);
* :class:`RemotingError` — transport failures: connect, timeout, connection closed, too busy;
* :class:`ResponseError` — a peer answered with a non-success code; :func:`error_for_response` picks the
  subclass for a code, so callers can ``except TopicNotExistError``.
"""

from __future__ import annotations

from typing import ClassVar

from pocketmq.remoting.codes import ResponseCode


class PocketMQError(Exception):
    """Base of every PocketMQ error."""

    code: ClassVar[int] = ResponseCode.SYSTEM_ERROR
    retriable: ClassVar[bool] = False
    refresh_route: ClassVar[bool] = False


class ProtocolError(PocketMQError):
    """Malformed bytes on the wire: bad lengths, oversized frame, unknown serialize type, bad header."""


class InvalidHeaderError(PocketMQError):
    """A request header is missing a required field or a field has the wrong type."""


class BufferFullError(PocketMQError):
    """A bounded buffer or queue is full."""

    code = ResponseCode.SYSTEM_BUSY
    retriable = True


class RemotingError(PocketMQError):
    """Transport failure talking to a peer."""

    retriable = True


class RemotingConnectError(RemotingError):
    """Could not connect to the peer."""

    refresh_route = True


class RemotingTimeoutError(RemotingError):
    """No response within the request's timeout."""


class RemotingClosedError(RemotingError):
    """The connection closed while the request was in flight."""

    refresh_route = True


class ResponseError(PocketMQError):
    """The peer answered with a non-success response code."""

    def __init__(self, code: int, remark: str | None = None, addr: str | None = None) -> None:
        self.response_code = code
        self.remark = remark or ""
        self.addr = addr
        try:
            name = ResponseCode(code).name
        except ValueError:
            name = str(code)
        where = f" from {addr}" if addr else ""
        super().__init__(f"{name}({code}){where}: {self.remark}")


class SystemError_(ResponseError):
    code = ResponseCode.SYSTEM_ERROR
    retriable = True
    # a controller-mode master that lost its in-sync replicas answers this: another may have replaced it
    refresh_route = True


class SystemBusyError(ResponseError):
    code = ResponseCode.SYSTEM_BUSY


class RequestCodeNotSupportedError(ResponseError):
    code = ResponseCode.REQUEST_CODE_NOT_SUPPORTED


class MessageIllegalError(ResponseError):
    code = ResponseCode.MESSAGE_ILLEGAL


class ServiceNotAvailableError(ResponseError):
    code = ResponseCode.SERVICE_NOT_AVAILABLE
    retriable = True
    # a slave, or a fenced master of controller mode: the route names another master by now
    refresh_route = True


class NoPermissionError(ResponseError):
    code = ResponseCode.NO_PERMISSION
    retriable = True


class TopicNotExistError(ResponseError):
    code = ResponseCode.TOPIC_NOT_EXIST
    retriable = True
    refresh_route = True


class SubscriptionError(ResponseError):
    code = ResponseCode.SUBSCRIPTION_NOT_EXIST


class QueryNotFoundError(ResponseError):
    code = ResponseCode.QUERY_NOT_FOUND


class NoBuyerIdError(ResponseError):
    code = ResponseCode.NO_BUYER_ID
    retriable = True


class NotInCurrentUnitError(ResponseError):
    code = ResponseCode.NOT_IN_CURRENT_UNIT
    retriable = True


_BY_CODE: dict[int, type[ResponseError]] = {
    cls.code: cls
    for cls in (
        SystemError_,
        SystemBusyError,
        RequestCodeNotSupportedError,
        MessageIllegalError,
        ServiceNotAvailableError,
        NoPermissionError,
        TopicNotExistError,
        QueryNotFoundError,
        NoBuyerIdError,
        NotInCurrentUnitError,
    )
}
_BY_CODE[ResponseCode.SUBSCRIPTION_NOT_LATEST] = SubscriptionError
_BY_CODE[ResponseCode.SUBSCRIPTION_PARSE_FAILED] = SubscriptionError


def error_for_response(code: int, remark: str | None = None, addr: str | None = None) -> ResponseError:
    """The :class:`ResponseError` subclass for a response code (plain ``ResponseError`` if none)."""
    cls = _BY_CODE.get(code, ResponseError)
    return cls(code, remark, addr)
