"""Recursive-descent parser of RocketMQ's SQL92 selector grammar (``SelectorParser.jj``, 4.9.x).

Grammar, loosest binding first (``*`` repeats, ``|`` alternatives)::

    selector    := or                                  (must give a boolean; trailing text is not read)
    or          := and (OR and)*
    and         := equality (AND equality)*
    equality    := comparison ( "=" comparison | "<>" comparison | IS NULL | IS NOT NULL )*
    comparison  := unary ( (">" | ">=" | "<" | "<=") unary
                         | [NOT] BETWEEN unary AND unary
                         | [NOT] IN "(" string ("," string)* ")" )*
    unary       := "+" unary | "-" unary | NOT unary | primary
    primary     := literal | identifier | "(" or ")"
    literal     := string | decimal | float | TRUE | FALSE | NULL

So ``NOT`` binds tighter than comparisons (``NOT a > 5`` is ``(NOT a) > 5``, refused: write ``NOT (a > 5)``),
``IN`` lists hold string literals only and apply to a property only, and there is no arithmetic, ``LIKE`` or
``ESCAPE``. The builders' checks (:mod:`pocketmq.common.filter.expression`) run as each node is made, as in Java.
"""

from __future__ import annotations

from collections.abc import Callable

from pocketmq.common.filter.errors import FilterSyntaxError, FilterTypeError
from pocketmq.common.filter.expression import (
    Compare,
    Constant,
    In,
    Logic,
    Negate,
    Node,
    Not,
    Property,
    as_boolean,
    check_equal_operands,
    check_less_than_operand,
    decimal_constant,
    float_constant,
)
from pocketmq.common.filter.lexer import Lexer, T, Token
from pocketmq.common.filter.values import java_compare

#: Nesting bound: deeper selectors are refused rather than exhausting the interpreter's stack.
MAX_DEPTH = 100

_ORDERING = {T.GT: ">", T.GE: ">=", T.LT: "<", T.LE: "<="}


class Parser:
    """One use: ``Parser(text).parse()`` gives the root node (a boolean expression)."""

    def __init__(self, text: str) -> None:
        self._lexer = Lexer(text)
        self._depth = 0

    def parse(self) -> Node:
        start = self._lexer.peek().pos
        return as_boolean(self._or(), start)

    # -- helpers ---------------------------------------------------------------------------------------

    def _peek(self, k: int = 0) -> Token:
        return self._lexer.peek(k)

    def _expect(self, kind: T) -> Token:
        token = self._lexer.next()
        if token.kind is not kind:
            raise FilterSyntaxError(f"expected {kind.value!r} but found {_describe(token)}", token.pos)
        return token

    def _enter(self) -> None:
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise FilterSyntaxError(f"selector nested deeper than {MAX_DEPTH} levels", self._peek().pos)

    # -- grammar ---------------------------------------------------------------------------------------

    def _or(self) -> Node:
        self._enter()
        node = self._chain(T.OR, self._and)
        self._depth -= 1
        return node

    def _and(self) -> Node:
        return self._chain(T.AND, self._equality)

    def _chain(self, kind: T, operand: Callable[[], Node]) -> Node:
        """``x (OP x)*`` as one n-ary :class:`Logic` node (each operand must be boolean), or ``x`` alone."""
        first = operand()
        operands: list[Node] = []
        while self._peek().kind is kind:
            pos = self._lexer.next().pos
            if not operands:
                operands.append(as_boolean(first, pos))
            operands.append(as_boolean(operand(), pos))
        return Logic(kind.value, operands) if operands else first

    def _equality(self) -> Node:
        depth = self._depth
        try:
            return self._equality_chain()
        finally:
            self._depth = depth

    def _equality_chain(self) -> Node:
        """``a = b = c``: each link nests the tree one level deeper, so each counts against the depth bound."""
        left = self._comparison()
        while True:
            if self._peek().kind in (T.EQ, T.NE, T.IS):
                self._enter()
            token = self._peek()
            if token.kind is T.EQ or token.kind is T.NE:
                self._lexer.next()
                right = self._comparison()
                check_equal_operands(left, right, token.pos)
                equal = Compare("=", left, right)
                left = equal if token.kind is T.EQ else Not(equal)
            elif token.kind is T.IS:
                self._lexer.next()
                negated = self._peek().kind is not T.NULL
                if negated:
                    self._expect(T.NOT)
                self._expect(T.NULL)
                is_null = Compare("=", left, Constant(None))
                left = Not(is_null) if negated else is_null
            else:
                return left

    def _comparison(self) -> Node:
        left = self._unary()
        while True:
            token = self._peek()
            if token.kind in _ORDERING:
                self._lexer.next()
                left = self._ordered(_ORDERING[token.kind], left, self._unary(), token.pos)
            elif token.kind is T.BETWEEN:
                self._lexer.next()
                left = self._between(left, token.pos, negated=False)
            elif token.kind is T.IN:
                self._lexer.next()
                left = self._in(left, token.pos, negated=False)
            elif token.kind is T.NOT and self._peek(1).kind in (T.BETWEEN, T.IN):
                self._lexer.next()
                second = self._lexer.next()
                if second.kind is T.BETWEEN:
                    left = self._between(left, token.pos, negated=True)
                else:
                    left = self._in(left, token.pos, negated=True)
            else:
                return left

    def _ordered(self, op: str, left: Node, right: Node, pos: int) -> Node:
        check_less_than_operand(left, pos)
        check_less_than_operand(right, pos)
        return Compare(op, left, right)

    def _between(self, value: Node, pos: int, *, negated: bool) -> Node:
        low = self._unary()
        self._expect(T.AND)
        high = self._unary()
        if negated:
            return Logic("OR", [self._ordered("<", value, low, pos), self._ordered(">", value, high, pos)])
        if isinstance(low, Constant) and isinstance(high, Constant):
            if low.value is None or high.value is None:
                raise FilterTypeError("Illegal values of between, values can not be null!", pos)
            try:
                ordered = java_compare(high.value, low.value) >= 0
            except ValueError:
                ordered = False
            if not ordered:
                raise FilterTypeError(f"Illegal values of between, left value({low}) must less than or equal to "
                                      f"right value({high})", pos)
        return Logic("AND", [self._ordered(">=", value, low, pos), self._ordered("<=", value, high, pos)])

    def _in(self, value: Node, pos: int, *, negated: bool) -> Node:
        self._expect(T.LPAREN)
        values = [_string(self._expect(T.STRING))]
        while self._peek().kind is T.COMMA:
            self._lexer.next()
            values.append(_string(self._expect(T.STRING)))
        self._expect(T.RPAREN)
        if not isinstance(value, Property):
            raise FilterTypeError(f"Expected a property for In expression, got: {value}", pos)
        return In(value, values, negated)

    def _unary(self) -> Node:
        token = self._peek()
        if token.kind is T.PLUS:
            self._lexer.next()
            return self._nested_unary()
        if token.kind is T.MINUS:
            self._lexer.next()
            return Negate(self._nested_unary())
        if token.kind is T.NOT:
            self._lexer.next()
            return Not(as_boolean(self._nested_unary(), token.pos))
        return self._primary()

    def _nested_unary(self) -> Node:
        self._enter()
        node = self._unary()
        self._depth -= 1
        return node

    def _primary(self) -> Node:
        token = self._lexer.next()
        kind = token.kind
        if kind is T.STRING:
            return Constant(_string(token))
        if kind is T.DECIMAL:
            return decimal_constant(token.image, token.pos)
        if kind is T.FLOAT:
            return float_constant(token.image, token.pos)
        if kind is T.TRUE or kind is T.FALSE:
            return Constant(kind is T.TRUE)
        if kind is T.NULL:
            return Constant(None)
        if kind is T.ID:
            return Property(token.image)
        if kind is T.LPAREN:
            node = self._or()
            self._expect(T.RPAREN)
            return node
        raise FilterSyntaxError(f"unexpected {_describe(token)}", token.pos)


def _string(token: Token) -> str:
    """A string literal's value: quotes removed, doubled quotes made single."""
    return token.image[1:-1].replace("''", "'")


def _describe(token: Token) -> str:
    return "end of input" if token.kind is T.EOF else f"{token.image!r}"
