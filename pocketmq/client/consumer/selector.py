"""``MessageSelector``: what a consumer passes to ``subscribe`` to select messages (RocketMQ's class of the
same name).

``MessageSelector.by_tag("TagA || TagB")`` is the tag form (the same as passing the string itself);
``MessageSelector.by_sql("a > 5 AND region = 'eu'")`` selects by message properties with RocketMQ's SQL92
grammar (:mod:`pocketmq.common.filter`), evaluated by the broker, which needs ``enablePropertyFilter=true``. The SDK
checks a SQL92 expression when it is subscribed, so a malformed one fails at once rather than at the first
pull.
"""

from __future__ import annotations

from dataclasses import dataclass

from pocketmq.common.subscription import SUB_ALL, ExpressionType

__all__ = ["MessageSelector"]


@dataclass(frozen=True, slots=True)
class MessageSelector:
    """An expression and its type (``TAG`` or ``SQL92``)."""

    expression_type: str
    expression: str

    @classmethod
    def by_sql(cls, sql: str) -> MessageSelector:
        """Select by a SQL92 expression over message properties (``TAGS`` is the tag)."""
        return cls(ExpressionType.SQL92, sql)

    @classmethod
    def by_tag(cls, tag: str | None) -> MessageSelector:
        """Select by tags: ``"*"`` (or None, or ``""``) for all, else ``"TagA || TagB"``."""
        return cls(ExpressionType.TAG, SUB_ALL if tag is None or not tag.strip() else tag)
