"""Subscriptions (RocketMQ's ``SubscriptionData``, ``FilterAPI`` and ``ExpressionType``): a topic plus a tag
expression, as a consumer registers it in its heartbeats and as a broker filters pulls by it.

A TAG expression is ``"*"`` (or empty: everything) or tags joined by ``||`` (``"TagA || TagB"``; blanks around
tags are trimmed, repeats dropped). Filtering happens twice, as in RocketMQ: the broker compares the tags'
hash codes (Java ``String.hashCode``, also stored in each consume-queue entry; :meth:`SubscriptionData.
tags_code_filter`), so different tags with equal codes get through; the consumer filters again by the tag
string itself (:meth:`SubscriptionData.matches`).

HEART_BEAT shape of one subscription, written in this key order::

    {"classFilterMode":false,"topic":"T","subString":"TagA || TagB","tagsSet":["TagA","TagB"],
     "codeSet":[80804290,80804291],"subVersion":1700000000000,"expressionType":"TAG"}

Heartbeats come in several dialects: sets omitted when empty, ``subVersion`` as a string
(the C++ client), codes that are not numbers; :meth:`SubscriptionData.from_json_dict` reads them all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pocketmq.common.errors import FieldFormatError
from pocketmq.common.fields import as_int
from pocketmq.common.message import java_string_hash

SUB_ALL = "*"
TAG_SEPARATOR = "||"


class ExpressionType:
    """How a subscription's expression is read: TAG (``||``-joined tags) or SQL92 (:mod:`pocketmq.common.filter`)."""

    TAG = "TAG"
    SQL92 = "SQL92"


@dataclass(slots=True)
class SubscriptionData:
    """One topic's subscription.

    ``tags_set`` keeps the expression's order (repeats dropped) and ``code_set`` holds the distinct hash codes
    in the same order; an empty ``tags_set`` means every message matches. ``sub_version`` is the creation time
    in ms: the broker refuses pulls whose version is older than the latest heartbeat's.
    """

    topic: str
    sub_string: str = SUB_ALL
    tags_set: list[str] = field(default_factory=list)
    code_set: list[int] = field(default_factory=list)
    sub_version: int = 0
    expression_type: str = ExpressionType.TAG
    class_filter_mode: bool = False
    _tags_lookup: frozenset[str] = field(default=frozenset(), init=False, repr=False, compare=False)
    _codes_lookup: frozenset[int] = field(default=frozenset(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._tags_lookup = frozenset(self.tags_set)
        self._codes_lookup = frozenset(self.code_set)

    @property
    def is_all(self) -> bool:
        """Whether the consumer's re-filter takes every message (no tags)."""
        return not self.tags_set

    def matches(self, tags: str | None) -> bool:
        """The consumer's re-filter: a message matches when the subscription takes all, or its ``TAGS`` string
        is one of the subscribed tags. A message without tags only matches ``*``."""
        if not self._tags_lookup:
            return True
        return tags is not None and tags in self._tags_lookup

    def tags_code_filter(self) -> Callable[[int], bool] | None:
        """The broker's filter on consume-queue tag codes: None (take all) when ``sub_string`` is ``*`` or
        blank, else membership in ``code_set`` (so an expression that names no tag matches nothing)."""
        if self.sub_string.strip() in ("", SUB_ALL):
            return None
        return self._codes_lookup.__contains__

    def to_json_dict(self) -> dict[str, Any]:
        """The subscription as a HEART_BEAT body carries it (and a broker reports it back)."""
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
        """A heartbeat's subscription in any client's dialect: missing sets are empty, numbers may be strings,
        and a code or version that is not a number reads as 0 (untrusted input never stops a heartbeat).
        Raises :class:`~pocketmq.common.errors.FieldFormatError` without a topic."""
        topic = data.get("topic")
        if not isinstance(topic, str) or not topic:
            raise FieldFormatError("subscription without a topic")
        return cls(
            topic=topic,
            sub_string=str(data.get("subString") or SUB_ALL),
            tags_set=list(dict.fromkeys(str(tag) for tag in data.get("tagsSet") or ())),
            code_set=list(dict.fromkeys(_lenient_int(code) for code in data.get("codeSet") or ())),
            sub_version=_lenient_int(data.get("subVersion")),
            expression_type=str(data.get("expressionType") or ExpressionType.TAG),
            class_filter_mode=data.get("classFilterMode") is True,
        )


def _lenient_int(value: object) -> int:
    """An int, or a string of one; anything else (booleans too) reads as 0."""
    try:
        return as_int(value, "", 0)
    except FieldFormatError:
        return 0


def parse_tags(expression: str | None) -> list[str]:
    """The distinct tags of a ``||`` expression in order; ``[]`` for ``*``, an empty or ``None`` expression,
    and for one that names no tag (``"||"``)."""
    if expression is None:
        return []
    stripped = expression.strip()
    if not stripped or stripped == SUB_ALL:
        return []
    tags = (part.strip() for part in stripped.split(TAG_SEPARATOR))
    return list(dict.fromkeys(tag for tag in tags if tag))


def is_sub_all(expression: str | None) -> bool:
    """Whether a TAG expression takes every message: ``*``, empty or ``None``."""
    return expression is None or expression.strip() in ("", SUB_ALL)


def build_subscription_data(topic: str, expression: str | None, sub_version: int) -> SubscriptionData:
    """A TAG subscription (Java's ``FilterAPI.buildSubscriptionData``): ``sub_string`` is ``*`` for an
    expression that takes all, else the expression as given; each tag contributes its Java hash code."""
    if is_sub_all(expression):
        return SubscriptionData(topic, SUB_ALL, sub_version=sub_version)
    tags = parse_tags(expression)
    codes = list(dict.fromkeys(java_string_hash(tag) for tag in tags))
    return SubscriptionData(topic, str(expression), tags, codes, sub_version)
