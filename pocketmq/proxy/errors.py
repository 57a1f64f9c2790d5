"""The proxy's one error: :class:`ProxyError` carries the ``apache.rocketmq.v2.Code`` and message a RocketMQ 5 proxy
answers with (``GrpcProxyException``), and :func:`code_of_response` maps a broker's remoting response code to the
``Code`` a 5.x proxy gives for it (``ResponseBuilder.buildCode``, plus the codes PocketMQ's brokers add)."""

from __future__ import annotations

from pocketmq.proxy.apis import definition_pb2 as pb
from pocketmq.remoting.codes import ResponseCode

Code = pb.Code
"""``apache.rocketmq.v2.Code``: its members are ints on the wire and the type of every code here."""


class ProxyError(Exception):
    """A call that fails with ``code`` (an ``apache.rocketmq.v2.Code``) and ``message``."""

    def __init__(self, code: Code, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def status(self) -> pb.Status:
        return pb.Status(code=self.code, message=self.message)


def status(code: Code, message: str | None = None) -> pb.Status:
    """A ``Status``; the message defaults to the code's name, as the Java proxy writes it."""
    return pb.Status(code=code, message=message if message is not None else Code.Name(code))


OK_STATUS = status(Code.OK)

_RESPONSE_CODES: dict[int, Code] = {
    ResponseCode.SUCCESS: Code.OK,
    ResponseCode.SYSTEM_BUSY: Code.TOO_MANY_REQUESTS,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: Code.NOT_IMPLEMENTED,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: Code.CONSUMER_GROUP_NOT_FOUND,
    # Not in RocketMQ's table (it answers these as INTERNAL_SERVER_ERROR); the codes the clients understand.
    ResponseCode.TOPIC_NOT_EXIST: Code.TOPIC_NOT_FOUND,
    ResponseCode.NO_PERMISSION: Code.FORBIDDEN,
    ResponseCode.MESSAGE_ILLEGAL: Code.BAD_REQUEST,
    ResponseCode.ILLEGAL_OPERATION: Code.BAD_REQUEST,
    ResponseCode.FLUSH_DISK_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: Code.SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE,
}


def code_of_response(response_code: int) -> Code:
    """The ``Code`` for a broker's response code (INTERNAL_SERVER_ERROR for any other)."""
    return _RESPONSE_CODES.get(response_code, Code.INTERNAL_SERVER_ERROR)


def broker_error(response_code: int, remark: str | None) -> ProxyError:
    """A broker's refusal as the proxy reports it: the mapped code, the broker's remark."""
    return ProxyError(code_of_response(response_code), remark or f"broker answered code {response_code}")
