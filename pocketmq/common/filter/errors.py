"""The SQL92 filter's named errors (RocketMQ's ``MQFilterException`` family).

A selector that cannot be compiled raises :class:`FilterSyntaxError` (a lexical or grammar error) or
:class:`FilterTypeError` (it parses, but RocketMQ's expression builders refuse it: ``a > 'x'``, ``a = NULL``,
``5 IN ('a')``, ``a BETWEEN 5 AND 1``, a number where a boolean is needed, a literal out of range). Both are
:class:`FilterError`, a ``ValueError``: the broker answers SUBSCRIPTION_PARSE_FAILED (23) for any of them.

Evaluation never raises to a caller of :meth:`~pocketmq.common.filter.expression.Selector.matches`: where Java's
evaluation throws (``a = 5`` with ``a = 'x'``: ``NumberFormatException``), the message does not match, as the
broker's ``ExpressionMessageFilter`` decides. :class:`FilterEvaluationError` is what
:meth:`~pocketmq.common.filter.expression.Selector.evaluate` raises in that case.
"""

from __future__ import annotations


class FilterError(ValueError):
    """A selector that cannot be compiled; ``pos`` is the character offset where it went wrong (-1: unknown)."""

    def __init__(self, message: str, pos: int = -1) -> None:
        super().__init__(f"{message} (at {pos})" if pos >= 0 else message)
        self.message = message
        self.pos = pos


class FilterSyntaxError(FilterError):
    """A lexical or grammar error: an unexpected character or token, an unterminated string."""


class FilterTypeError(FilterError):
    """A well-formed selector that RocketMQ's expression builders reject (operand types, literal ranges)."""


class FilterEvaluationError(ValueError):
    """Evaluating a selector against one message failed the way Java's evaluation throws (a property that is
    not a number compared with a number, for instance); such a message does not match."""
