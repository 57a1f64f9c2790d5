"""The SQL92 selector's expression tree and its compiled form (RocketMQ's ``filter.expression`` classes).

The parser builds a small tree of :class:`Node`\\ s, applying RocketMQ's build-time checks as it goes (they are
here, next to the types they check); :meth:`Node.compile` turns it into nested closures, one call per node and
no dispatch on node type while a message is evaluated. The common shapes (a property against a literal) get a
closure of their own that does the conversion once, inline.

Three-valued logic as in Java: a missing property is NULL, any comparison with NULL is NULL, ``AND``/``OR``
short-circuit on FALSE/TRUE and are NULL otherwise, ``NOT NULL`` is NULL; a message matches only when the
whole selector is TRUE. A comparison that Java's evaluation throws on raises
:class:`~pocketmq.common.filter.errors.FilterEvaluationError`, which ends the evaluation: no match.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Protocol

from pocketmq.common.filter.errors import FilterEvaluationError, FilterTypeError
from pocketmq.common.filter.values import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    JavaLong,
    double_compare,
    java_compare,
    parse_java_double,
    parse_java_int,
)


class Properties(Protocol):
    """A message's properties as the evaluator reads them: a ``dict[str, str]`` or anything with its ``get``."""

    def get(self, name: str, /) -> str | None: ...


Eval = Callable[[Properties], object]

_CMP_TESTS: dict[str, Callable[[int], bool]] = {
    ">": lambda c: c > 0, ">=": lambda c: c >= 0, "<": lambda c: c < 0, "<=": lambda c: c <= 0,
    "=": lambda c: c == 0,
}


class Node:
    """One expression. ``is_constant``/``is_boolean`` are the Java classes' ``ConstantExpression`` and
    ``BooleanExpression`` markers, which the builders check."""

    is_constant: ClassVar[bool] = False
    is_boolean: ClassVar[bool] = False

    def compile(self) -> Eval:
        raise NotImplementedError



class Constant(Node):
    is_constant = True

    def __init__(self, value: object) -> None:
        self.value = value

    @property
    def is_boolean(self) -> bool:  # type: ignore[override]
        """TRUE, FALSE and NULL are ``BooleanConstantExpression``\\ s."""
        return self.value is None or type(self.value) is bool

    def compile(self) -> Eval:
        value = self.value
        return lambda _props: value

    def __str__(self) -> str:
        v = self.value
        if v is None:
            return "NULL"
        if type(v) is bool:
            return "TRUE" if v else "FALSE"
        if isinstance(v, str):
            return "'" + v.replace("'", "''") + "'"
        return repr(v) if isinstance(v, float) else str(int(v))  # type: ignore[call-overload]


def decimal_constant(image: str, pos: int) -> Constant:
    """``ConstantExpression.createFromDecimal``: int32 range -> Integer, else Long; beyond int64 an error."""
    digits = image.rstrip("lL")
    if len(digits) > 19 or int(digits) > INT64_MAX:  # no leading zeros: more than 19 digits is out of range
        raise FilterTypeError(f"{image[:32]} is out of the long range", pos)
    value = int(digits)
    return Constant(value if INT32_MIN <= value <= INT32_MAX else JavaLong(value))


def float_constant(image: str, pos: int) -> Constant:
    """``ConstantExpression.createFloat``: above Double.MAX_VALUE or below Double.MIN_VALUE (so 0.0 too) is an
    error, as in RocketMQ."""
    value = float(image)
    if value == float("inf"):
        raise FilterTypeError(f"{image} is greater than 1.7976931348623157E308", pos)
    if value < 5e-324:
        raise FilterTypeError(f"{image} is less than 4.9E-324", pos)
    return Constant(value)


class Property(Node):
    def __init__(self, name: str) -> None:
        self.name = name

    def compile(self) -> Eval:
        name = self.name
        return lambda props: props.get(name)

    def __str__(self) -> str:
        return self.name


class Unary(Node):
    def __init__(self, operand: Node) -> None:
        self.operand = operand


class Negate(Unary):

    def compile(self) -> Eval:
        inner = self.operand.compile()

        def negate(props: Properties) -> object:
            v = inner(props)
            kind = type(v)
            if kind is int or kind is float:
                return -v  # type: ignore[operator]
            if kind is JavaLong:
                return JavaLong(-v)  # type: ignore[operator]
            return None  # NULL, strings and booleans negate to NULL

        return negate

    def __str__(self) -> str:
        return f"(- {self.operand})"


def as_boolean(node: Node, pos: int) -> Node:
    """``asBooleanExpression``: a boolean expression as it is, a property cast, anything else an error."""
    if node.is_boolean:
        return node
    if isinstance(node, Property):
        return BooleanCast(node)
    raise FilterTypeError(f"Expression will not result in a boolean value: {node}", pos)


class BooleanCast(Node):
    is_boolean = True

    def __init__(self, operand: Property) -> None:
        self.operand = operand


    def compile(self) -> Eval:
        name = self.operand.name

        def cast(props: Properties) -> object:
            # Properties are strings, never booleans: a property as a condition is NULL when missing, else FALSE.
            return None if props.get(name) is None else False

        return cast

    def __str__(self) -> str:
        return str(self.operand)


class Not(Unary):
    is_boolean = True

    def compile(self) -> Eval:
        inner = self.operand.compile()

        def negation(props: Properties) -> object:
            v = inner(props)
            return None if v is None else not v

        return negation

    def __str__(self) -> str:
        return f"(NOT {self.operand})"


class Logic(Node):
    """``AND``/``OR`` over two or more operands, left to right. A chain ``a AND b AND c`` is one node: Java's
    left-deep tree gives the same value and evaluates the same operands (the first FALSE, for AND, or TRUE, for
    OR, ends it; otherwise NULL if any operand was NULL), and a long chain costs no recursion."""

    is_boolean = True

    def __init__(self, op: str, operands: list[Node]) -> None:
        self.op, self.operands = op, operands


    def compile(self) -> Eval:
        fns = tuple(node.compile() for node in self.operands)
        stop = self.op == "OR"  # the value that decides a chain: TRUE for OR, FALSE for AND

        def chain(props: Properties) -> object:
            unknown = False
            for fn in fns:
                v = fn(props)
                if v is stop:
                    return stop
                if v is None:
                    unknown = True
            return None if unknown else not stop

        return chain

    def __str__(self) -> str:
        return "(" + f" {self.op} ".join(map(str, self.operands)) + ")"


def check_less_than_operand(node: Node, pos: int) -> None:
    """``checkLessThanOperand``: ordering needs numbers; literal strings, booleans, NULL and boolean
    expressions are refused."""
    if isinstance(node, Constant):
        if type(node.value) in (int, JavaLong, float):
            return
        raise FilterTypeError(f"Value '{node}' cannot be compared.", pos)
    if node.is_boolean:
        raise FilterTypeError(f"Value '{node}' cannot be compared.", pos)


def check_equal_operands(left: Node, right: Node, pos: int) -> None:
    """``checkEqualOperand`` (no NULL literal: write IS NULL) and ``checkEqualOperandCompatability``."""
    for node in (left, right):
        if isinstance(node, Constant) and node.value is None:
            raise FilterTypeError(f"'{node}' cannot be compared.", pos)
    if left.is_constant and right.is_constant and left.is_boolean and not right.is_boolean:
        raise FilterTypeError(f"'{left}' cannot be compared with '{right}'", pos)


class Compare(Node):
    """``>``, ``>=``, ``<``, ``<=`` (operands checked by the parser) and ``=`` / IS NULL (``equal``)."""

    is_boolean = True

    def __init__(self, op: str, left: Node, right: Node) -> None:
        self.op, self.left, self.right = op, left, right


    def __str__(self) -> str:
        return f"({self.left} {self.op} {self.right})"

    def compile(self) -> Eval:
        if isinstance(self.left, Property) and isinstance(self.right, Constant) and self.right.value is not None:
            fast = _property_against_literal(self.op, self.left.name, self.right.value)
            if fast is not None:
                return fast
        left, right = self.left.compile(), self.right.compile()
        test = _CMP_TESTS[self.op]
        if self.op == "=":
            def equal(props: Properties) -> object:
                lv, rv = left(props), right(props)
                if lv is None or rv is None:
                    if lv is None and rv is None:
                        return True
                    return None if lv is None else False
                return java_compare(lv, rv) == 0
            return equal

        def ordered(props: Properties) -> object:
            lv = left(props)
            if lv is None:
                return None
            rv = right(props)
            if rv is None:
                return None
            if type(lv) is str and type(rv) is str:
                # Two strings are ordered only when both read as numbers (RocketMQ 4.9).
                try:
                    return test(double_compare(parse_java_double(lv), parse_java_double(rv)))
                except FilterEvaluationError:
                    raise FilterEvaluationError("strings cannot be ordered with '>', '>=', '<', '<='") from None
            return test(java_compare(lv, rv))
        return ordered


def _property_against_literal(op: str, name: str, literal: object) -> Eval | None:
    """The common case, ``prop OP literal``, with the string conversion chosen once (same result as the
    generic path: ``java_compare`` converts the property's string to the literal's class)."""
    test = _CMP_TESTS[op]
    kind = type(literal)
    if kind is str:
        if op != "=":
            return None
        def equal_string(props: Properties) -> object:
            v = props.get(name)
            return None if v is None else v == literal
        return equal_string
    if kind is float:
        f = float(literal)  # type: ignore[arg-type]
        def against_double(props: Properties) -> object:
            v = props.get(name)
            return None if v is None else test(double_compare(parse_java_double(v), f))
        return against_double
    if kind is int or kind is JavaLong:
        n = int(literal)  # type: ignore[call-overload]
        low, high = (INT32_MIN, INT32_MAX) if kind is int else (INT64_MIN, INT64_MAX)
        def against_integer(props: Properties) -> object:
            v = props.get(name)
            if v is None:
                return None
            p = parse_java_int(v, low, high)
            return test(0 if p == n else -1 if p < n else 1)
        return against_integer
    return None


class In(Node):
    is_boolean = True

    def __init__(self, operand: Property, values: list[str], negated: bool) -> None:
        self.operand, self.values, self.negated = operand, values, negated


    def compile(self) -> Eval:
        name, values, negated = self.operand.name, frozenset(self.values), self.negated

        def membership(props: Properties) -> object:
            v = props.get(name)
            return None if v is None else (v in values) != negated

        return membership

    def __str__(self) -> str:
        listed = ", ".join(str(Constant(v)) for v in self.values)
        return f"({self.operand} {'NOT IN' if self.negated else 'IN'} ({listed}))"
