"""SQL92 subscriptions on the broker (RocketMQ's ``ConsumerFilterManager`` and ``ExpressionMessageFilter``).

A subscription whose ``expressionType`` is ``SQL92`` (from a heartbeat, or from a pull that carries its
subscription) is compiled once per (group, topic, subVersion, expression) and kept in a bounded LRU cache
(:class:`ConsumerFilterManager`); a failure is cached too, so a bad expression is not re-parsed on every pull.

At pull time :class:`SqlMessageFilter` gives the store two stages: a tag-code check on the consume-queue unit
(only when the selector can be TRUE for a few ``TAGS`` values, e.g. ``TAGS = 'a' AND x > 1``: a message with
another tag is never read), then the selector on the stored record's properties. A message that fails either
is skipped and the next begin offset moves past it. Evaluation errors (``a > 5`` with ``a = 'x'``) mean no
match, as in RocketMQ. The long-poll wake-up uses the same record check (:mod:`pocketmq.broker.long_polling`).
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Callable

from pocketmq.common.errors import RecordFormatError
from pocketmq.common.filter import FilterError, Selector, compile_selector
from pocketmq.common.logs import get_logger
from pocketmq.common.message import get_property, java_string_hash
from pocketmq.common.record import locate_record
from pocketmq.common.subscription import ExpressionType, SubscriptionData

log = get_logger("pocketmq.broker.filter")

#: Compiled selectors kept (successes and failures); beyond it the least recently used is dropped.
MAX_CACHED_FILTERS = 4096


def is_tag_type(expression_type: str | None) -> bool:
    """RocketMQ's ``ExpressionType.isTagType``: no type, an empty one or ``TAG``."""
    return not expression_type or expression_type == ExpressionType.TAG


class StoredProperties:
    """A record's properties text, read one name at a time (a selector asks for few): no dict is built."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def get(self, name: str, /) -> str | None:
        return get_property(self.text, name)


_NO_PROPERTIES = StoredProperties("")


def record_properties(record: memoryview) -> StoredProperties:
    """The properties of one stored record (a whole record, as the store hands it out)."""
    parts = locate_record(record, 0, len(record), False, None, False)
    if not isinstance(parts, tuple) or len(parts) != 5:
        return _NO_PROPERTIES
    return StoredProperties(bytes(record[parts[4]:len(record)]).decode("utf-8", "replace"))


class SqlMessageFilter:
    """One SQL92 subscription's two filter stages, for :meth:`store.message_store.MessageStore.get_messages`."""

    __slots__ = ("selector", "tags_filter")

    def __init__(self, selector: Selector) -> None:
        self.selector = selector
        tags = selector.required_tags
        self.tags_filter: Callable[[int], bool] | None = None
        if tags is not None:
            self.tags_filter = frozenset(java_string_hash(tag) for tag in tags).__contains__

    def record_filter(self, record: memoryview) -> bool:
        """Whether the selector is TRUE for this record's properties (a damaged record: no)."""
        try:
            properties = record_properties(record)
        except RecordFormatError:
            return False
        return self.selector.matches(properties)


class ConsumerFilterManager:
    """Compiled SQL92 subscriptions by (group, topic, version, expression), bounded."""

    def __init__(self, max_entries: int = MAX_CACHED_FILTERS) -> None:
        self.max_entries = max_entries
        self._cache: OrderedDict[tuple[str, str, int, str], SqlMessageFilter | FilterError] = OrderedDict()

    def __len__(self) -> int:
        return len(self._cache)

    def get(self, group: str, sub: SubscriptionData) -> SqlMessageFilter:
        """The compiled filter of a SQL92 subscription; raises FilterError when it does not compile (or names an
        expression type this broker does not know)."""
        key = (group, sub.topic, sub.sub_version, sub.sub_string)
        cached = self._cache.get(key)
        if cached is None:
            cached = self._compile(sub)
            self._cache[key] = cached
            if len(self._cache) > self.max_entries:
                self._cache.popitem(last=False)
            if isinstance(cached, FilterError):
                log.warning("filter_compile_failed", group=group, topic=sub.topic, version=sub.sub_version,
                            reason=cached.message)
        else:
            self._cache.move_to_end(key)
        if isinstance(cached, FilterError):
            raise cached
        return cached

    def register(self, group: str, subscriptions: tuple[SubscriptionData, ...]) -> None:
        """A heartbeat's subscriptions: compile the SQL92 ones now (failures are logged once and answered at
        pull time)."""
        for sub in subscriptions:
            if not is_tag_type(sub.expression_type):
                with contextlib.suppress(FilterError):
                    self.get(group, sub)

    @staticmethod
    def _compile(sub: SubscriptionData) -> SqlMessageFilter | FilterError:
        if sub.expression_type != ExpressionType.SQL92:
            return FilterError(f"unknown expression type {sub.expression_type!r}")
        try:
            return SqlMessageFilter(compile_selector(sub.sub_string))
        except FilterError as exc:
            return exc
