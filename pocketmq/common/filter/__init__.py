"""SQL92 message selectors, as RocketMQ 4.9's ``filter`` module reads and evaluates them. Pure: no I/O.

``compile_selector("a > 5 AND region = 'eu'")`` gives a :class:`Selector` or raises a
:class:`~pocketmq.common.filter.errors.FilterError` (:class:`~pocketmq.common.filter.errors.FilterSyntaxError` or
:class:`~pocketmq.common.filter.errors.FilterTypeError`); ``selector.matches(properties)`` is True only when the
selector is TRUE for a message's properties (strings by name; ``TAGS`` is the message's tag).

:attr:`Selector.required_tags` is what a broker may check on the consume queue's tag code before it reads a
message at all: when every way for the selector to be TRUE needs ``TAGS`` to equal one of a few strings
(``TAGS = 'a' AND x > 1``, ``TAGS IN ('a', 'b') OR (TAGS = 'c' AND y = 2)``) it is that set, else None.
"""

from __future__ import annotations

from pocketmq.common.filter.errors import (
    FilterError,
    FilterEvaluationError,
    FilterSyntaxError,
    FilterTypeError,
)
from pocketmq.common.filter.expression import Compare, Constant, Eval, In, Logic, Node, Properties, Property
from pocketmq.common.filter.parser import Parser

__all__ = [
    "FilterError",
    "FilterEvaluationError",
    "FilterSyntaxError",
    "FilterTypeError",
    "Properties",
    "Selector",
    "compile_selector",
]

TAGS = "TAGS"


class Selector:
    """A compiled selector; immutable, safe to share."""

    __slots__ = ("_eval", "expression", "required_tags", "root")

    def __init__(self, expression: str, root: Node) -> None:
        self.expression = expression
        self.root = root
        self._eval: Eval = root.compile()
        self.required_tags: frozenset[str] | None = _required_tags(root)

    def evaluate(self, properties: Properties) -> bool | None:
        """TRUE, FALSE or NULL (None); raises FilterEvaluationError where Java's evaluation throws."""
        result = self._eval(properties)
        return result if result is None or type(result) is bool else None

    def matches(self, properties: Properties) -> bool:
        """Whether a message with these properties is selected (NULL and evaluation errors: not)."""
        try:
            return self._eval(properties) is True
        except FilterEvaluationError:
            return False

    def __repr__(self) -> str:
        return f"Selector({self.expression!r})"


def compile_selector(expression: str) -> Selector:
    """Parse and compile ``expression``; raises FilterError (see the package docstring)."""
    if not isinstance(expression, str):
        raise FilterSyntaxError("a selector must be a string")
    return Selector(expression, Parser(expression).parse())


def _required_tags(node: Node) -> frozenset[str] | None:
    """Tags one of which a message must have for ``node`` to be TRUE, or None when no such set is known."""
    if isinstance(node, Compare) and node.op == "=":
        for prop, literal in ((node.left, node.right), (node.right, node.left)):
            if (isinstance(prop, Property) and prop.name == TAGS and isinstance(literal, Constant)
                    and isinstance(literal.value, str)):
                return frozenset((literal.value,))
        return None
    if isinstance(node, In) and not node.negated and node.operand.name == TAGS:
        return frozenset(node.values)
    if isinstance(node, Logic):
        sets = [_required_tags(operand) for operand in node.operands]
        if node.op == "AND":
            known = [tags for tags in sets if tags is not None]
            return frozenset.intersection(*known) if known else None
        if all(tags is not None for tags in sets):
            return frozenset().union(*sets)  # type: ignore[arg-type]
    return None
