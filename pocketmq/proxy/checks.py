"""Checks and parsing shared by the proxy's calls: names (``GrpcValidator``), filter expressions (``FilterAPI``),
the status of several entries, and requests that are not protobufs of their method's type."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from google.protobuf.message import DecodeError
from google.protobuf.message import Message as ProtoMessage

from pocketmq.common.filter import compile_selector
from pocketmq.common.filter.errors import FilterError
from pocketmq.common.subscription import ExpressionType, SubscriptionData, build_subscription_data
from pocketmq.common.topic import (
    DLQ_GROUP_TOPIC_PREFIX,
    NOT_ALLOWED_SEND_TOPIC_SET,
    RETRY_GROUP_TOPIC_PREFIX,
    RMQ_SYS_TOPIC_PREFIX,
    validate_topic,
)
from pocketmq.proxy.apis import definition_pb2 as pb
from pocketmq.proxy.errors import Code, ProxyError, status

_SYSTEM_GROUP_PREFIXES = ("CID_RMQ_SYS_", "CID_ONSAPI_", "CID_ONS-HTTP-PROXY", "CID_HOUSEKEEPING", "PROXY_")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def duration_ms(duration: Any) -> int:
    return int(duration.seconds * 1000 + duration.nanos // 1_000_000)


_CHECKED_TOPICS: set[str] = set()
"""Topic names that passed :func:`check_topic` (a send checks its topic by one lookup); at most
:data:`_MAX_CHECKED_TOPICS`, cleared when full."""
_MAX_CHECKED_TOPICS = 10_000


def check_topic(name: str) -> None:
    """``GrpcValidator.validateTopic``: ILLEGAL_TOPIC for a bad name or a system topic."""
    if name in _CHECKED_TOPICS:
        return
    _check_topic(name)
    if len(_CHECKED_TOPICS) >= _MAX_CHECKED_TOPICS:
        _CHECKED_TOPICS.clear()
    _CHECKED_TOPICS.add(name)


def _check_topic(name: str) -> None:
    problem = validate_topic(name)
    if problem is not None:
        raise ProxyError(Code.ILLEGAL_TOPIC, problem)
    if (name in NOT_ALLOWED_SEND_TOPIC_SET or name.startswith(RMQ_SYS_TOPIC_PREFIX) or name.startswith("rmq_sys_")
            or name.startswith(RETRY_GROUP_TOPIC_PREFIX) or name.startswith(DLQ_GROUP_TOPIC_PREFIX)):
        raise ProxyError(Code.ILLEGAL_TOPIC, "cannot access system topic")


def check_group(name: str) -> None:
    """``GrpcValidator.validateConsumerGroup``."""
    problem = validate_topic(name)
    if problem is not None:
        raise ProxyError(Code.ILLEGAL_CONSUMER_GROUP, problem.replace("topic", "group"))
    if name.startswith(_SYSTEM_GROUP_PREFIXES):
        raise ProxyError(Code.ILLEGAL_CONSUMER_GROUP, "cannot use system consumer group")


def subscription_of(topic: str, expression: pb.FilterExpression) -> SubscriptionData:
    """``FilterAPI.build``: ILLEGAL_FILTER_EXPRESSION for an expression that does not parse."""
    text = expression.expression or "*"
    if expression.type == pb.SQL:
        try:
            compile_selector(text)
        except FilterError as exc:
            raise ProxyError(Code.ILLEGAL_FILTER_EXPRESSION, f"expression format is not correct: {exc}") from None
        return SubscriptionData(topic, text, sub_version=now_ms(), expression_type=ExpressionType.SQL92)
    return build_subscription_data(topic, text, now_ms())


def aggregate(codes: set[int]) -> pb.Status:
    """One status for several entries: their code when they agree, MULTIPLE_RESULTS otherwise."""
    if len(codes) > 1:
        return status(Code.MULTIPLE_RESULTS)
    if codes:
        return status(codes.pop())  # type: ignore[arg-type]
    return status(Code.INTERNAL_SERVER_ERROR, "no entry")


MALFORMED = "Invalid protobuf byte sequence"
"""What grpc-java (and so RocketMQ's proxy) answers, with status INTERNAL, to a request it cannot parse."""


class Malformed:
    """A request that did not parse: handed to the call, which answers INTERNAL (gRPC's own deserializer error
    would be UNKNOWN with a logged traceback)."""


def parser(kind: type[ProtoMessage]) -> Callable[[bytes], Any]:
    def parse(data: bytes) -> Any:
        try:
            return kind.FromString(data)
        except DecodeError:
            return Malformed()

    return parse
