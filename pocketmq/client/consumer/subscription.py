"""The consumer's side of subscriptions: building one from what the application passes to ``subscribe``,
with the SDK's rules, and a consumer group's entry in a HEART_BEAT body.

The subscription itself, its tag parsing, matching and JSON form are the model's
(:mod:`pocketmq.common.subscription`). A consumer group's entry in ``consumerDataSet`` (:func:`consumer_data_json`)::

    {"groupName":"G","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING",
     "consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":[...],"unitMode":false}
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from pocketmq.client.consumer.selector import MessageSelector
from pocketmq.client.consumer.types import ConsumeFromWhere, ConsumeType, MessageModel
from pocketmq.client.core.errors import MQClientError
from pocketmq.client.core.instance import MQClientInstance
from pocketmq.common.filter import FilterError, compile_selector
from pocketmq.common.subscription import (
    SUB_ALL,
    ExpressionType,
    SubscriptionData,
    build_subscription_data,
    is_sub_all,
    parse_tags,
)
from pocketmq.remoting.errors import PocketMQError

__all__ = [
    "SubscriptionParseError",
    "build_subscription",
    "consumer_data_json",
]


class SubscriptionParseError(MQClientError):
    """A subscription expression has no usable tag, or asks for a filter type we do not support."""

    retriable = False


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def build_subscription(
    topic: str,
    expression: str | MessageSelector | None = SUB_ALL,
    *,
    expression_type: str = ExpressionType.TAG,
    now_ms: Callable[[], int] = _now_ms,
) -> SubscriptionData:
    """A subscription to ``topic``, versioned with the current time.

    ``expression`` is a tag expression or a :class:`~pocketmq.client.consumer.selector.MessageSelector` (whose type wins
    over ``expression_type``). Tags: ``"*"``, ``""`` and ``None`` subscribe to everything (``sub_string``
    ``"*"``); otherwise ``sub_string`` is the expression as given and each tag contributes its Java hash code,
    and the expression must name a tag (``"||"`` does not). SQL92: the expression must compile
    (:mod:`pocketmq.common.filter`); the broker filters, the client takes what it is sent. Class filters are not
    supported. Anything refused raises :class:`SubscriptionParseError`.
    """
    if isinstance(expression, MessageSelector):
        expression_type, expression = expression.expression_type, expression.expression
    if expression_type == ExpressionType.SQL92:
        try:
            compile_selector(expression or "")
        except FilterError as exc:
            raise SubscriptionParseError(f"SQL92 expression {expression!r} does not compile: {exc}") from None
        return SubscriptionData(topic, str(expression), sub_version=now_ms(), expression_type=ExpressionType.SQL92)
    if expression_type != ExpressionType.TAG:
        raise SubscriptionParseError(f"expression type {expression_type!r} is not supported, only TAG and SQL92")
    if not is_sub_all(expression) and not parse_tags(expression):
        raise SubscriptionParseError(f"subscription expression {expression!r} names no tag")
    return build_subscription_data(topic, expression, now_ms())


def consumer_data_json(
    group: str,
    subscriptions: Iterable[SubscriptionData],
    *,
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY,
    message_model: MessageModel = MessageModel.CLUSTERING,
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.LAST_OFFSET,
    unit_mode: bool = False,
) -> dict[str, Any]:
    """One entry of a HEART_BEAT body's ``consumerDataSet``, with Java enum names."""
    return {
        "groupName": group,
        "consumeType": consume_type.value,
        "messageModel": message_model.value,
        "consumeFromWhere": consume_from_where.java_name,
        "subscriptionDataSet": [sub.to_json_dict() for sub in subscriptions],
        "unitMode": unit_mode,
    }


async def fetch_routes(instance: MQClientInstance, topics: Iterable[str], timeout: float, logger: Any) -> None:
    """Fetch the routes of a starting consumer's topics now (a failure is logged: the refresher tries again)."""
    for topic in list(topics):
        try:
            await instance.refresher.refresh(topic, timeout, publish=False)
        except PocketMQError as exc:
            logger.warning("route_lookup_failed", topic=topic, error=str(exc))
