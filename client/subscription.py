"""Subscriptions: a topic plus a tag expression, as a consumer registers them in its heartbeats.

A tag expression is ``"*"`` (or empty: everything) or tags joined by ``||`` (``"TagA || TagB"``; blanks
around tags are trimmed). The broker filters by the tags' hash codes (Java ``String.hashCode``, which it
also stores in each consume-queue entry), so different tags with equal hash codes get through; the client
filters again by the tag string itself (:meth:`SubscriptionData.matches`).

HEART_BEAT shape of one subscription (reference §2.4)::

    {"classFilterMode":false,"topic":"T","subString":"TagA || TagB","tagsSet":["TagA","TagB"],
     "codeSet":[80804290,80804291],"subVersion":1700000000000,"expressionType":"TAG"}

and of a consumer group's entry in ``consumerDataSet`` (:func:`consumer_data_json`)::

    {"groupName":"G","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING",
     "consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":[...],"unitMode":false}
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from client.consume_types import ConsumeFromWhere, ConsumeType, MessageModel
from client.core.errors import MQClientError

__all__ = [
    "EXPRESSION_TYPE_TAG",
    "SUB_ALL",
    "SubscriptionData",
    "SubscriptionParseError",
    "build_subscription",
    "consumer_data_json",
    "java_string_hash",
]

SUB_ALL = "*"
EXPRESSION_TYPE_TAG = "TAG"
EXPRESSION_TYPE_SQL92 = "SQL92"
TAG_SEPARATOR = "||"


class SubscriptionParseError(MQClientError):
    """A subscription expression has no usable tag, or asks for a filter type we do not support."""

    retriable = False


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, as an int32.

    Code units, not code points: a character outside the BMP counts as its two surrogates, as in Java.
    """
    units = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class SubscriptionData:
    """One topic's subscription (RocketMQ's ``SubscriptionData``).

    ``tags_set`` keeps the expression's order (duplicates dropped) and ``code_set`` holds the distinct hash
    codes in the same order; an empty ``tags_set`` means every message matches. ``sub_version`` is the
    creation time in ms: the broker refuses pulls whose version is older than the latest heartbeat's.
    """

    topic: str
    sub_string: str = SUB_ALL
    tags_set: list[str] = field(default_factory=list)
    code_set: list[int] = field(default_factory=list)
    sub_version: int = 0
    expression_type: str = EXPRESSION_TYPE_TAG
    class_filter_mode: bool = False
    _tags_lookup: frozenset[str] = field(default=frozenset(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._tags_lookup = frozenset(self.tags_set)

    @property
    def is_all(self) -> bool:
        """Whether every message of the topic matches (``*``)."""
        return not self.tags_set

    def matches(self, tags: str | None) -> bool:
        """The client-side re-filter: a message matches when the subscription takes all, or its ``TAGS``
        string is one of the subscribed tags. A message without tags only matches ``*``."""
        if not self._tags_lookup:
            return True
        return tags is not None and tags in self._tags_lookup

    def to_json_dict(self) -> dict[str, Any]:
        """The subscription as a HEART_BEAT body carries it."""
        return {
            "classFilterMode": self.class_filter_mode,
            "topic": self.topic,
            "subString": self.sub_string,
            "tagsSet": list(self.tags_set),
            "codeSet": list(self.code_set),
            "subVersion": self.sub_version,
            "expressionType": self.expression_type,
        }

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> SubscriptionData:
        """Read a heartbeat's subscription leniently: missing sets are empty, ``subVersion`` may be a string
        (both seen from third-party clients, reference §12)."""
        try:
            return cls(
                topic=str(data["topic"]),
                sub_string=str(data.get("subString") or SUB_ALL),
                tags_set=[str(tag) for tag in data.get("tagsSet") or ()],
                code_set=[int(code) for code in data.get("codeSet") or ()],
                sub_version=int(data.get("subVersion") or 0),
                expression_type=str(data.get("expressionType") or EXPRESSION_TYPE_TAG),
                class_filter_mode=bool(data.get("classFilterMode", False)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise SubscriptionParseError(f"bad subscription data {dict(data)!r}: {exc}") from None


def parse_tags(expression: str | None) -> list[str]:
    """The distinct tags of a ``||`` expression in order; ``[]`` for ``*``/empty/``None`` (all messages).

    Raises :class:`SubscriptionParseError` when an expression other than ``*`` names no tag (``"||"``).
    """
    if expression is None:
        return []
    stripped = expression.strip()
    if not stripped or stripped == SUB_ALL:
        return []
    tags: list[str] = []
    for part in stripped.split(TAG_SEPARATOR):
        tag = part.strip()
        if tag and tag not in tags:
            tags.append(tag)
    if not tags:
        raise SubscriptionParseError(f"subscription expression {expression!r} names no tag")
    return tags


def build_subscription(
    topic: str,
    expression: str | None = SUB_ALL,
    *,
    expression_type: str = EXPRESSION_TYPE_TAG,
    now_ms: Callable[[], int] = _now_ms,
) -> SubscriptionData:
    """A TAG subscription to ``topic`` (RocketMQ's ``FilterAPI.buildSubscriptionData``).

    ``"*"``, ``""`` and ``None`` subscribe to everything (``sub_string`` ``"*"``); otherwise ``sub_string`` is
    the expression as given and each tag contributes its Java hash code. SQL92 and class filters are not
    supported (:class:`SubscriptionParseError`).
    """
    if expression_type != EXPRESSION_TYPE_TAG:
        raise SubscriptionParseError(f"expression type {expression_type!r} is not supported, only TAG")
    tags = parse_tags(expression)
    codes: list[int] = []
    for tag in tags:
        code = java_string_hash(tag)
        if code not in codes:
            codes.append(code)
    sub_string = expression if tags and expression is not None else SUB_ALL
    return SubscriptionData(topic, sub_string, tags, codes, now_ms())


def consumer_data_json(
    group: str,
    subscriptions: Iterable[SubscriptionData],
    *,
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY,
    message_model: MessageModel = MessageModel.CLUSTERING,
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.LAST_OFFSET,
    unit_mode: bool = False,
) -> dict[str, Any]:
    """One entry of a HEART_BEAT body's ``consumerDataSet``, with Java enum names (reference §2.4)."""
    return {
        "groupName": group,
        "consumeType": consume_type.value,
        "messageModel": message_model.value,
        "consumeFromWhere": consume_from_where.java_name,
        "subscriptionDataSet": [sub.to_json_dict() for sub in subscriptions],
        "unitMode": unit_mode,
    }
