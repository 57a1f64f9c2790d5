"""SQL92 selectors (common.filter): RocketMQ 4.9's grammar, type rules, NULL semantics and errors; a property-based
test against an independent evaluator written here; fuzzing (any input: a selector or a named error)."""

from __future__ import annotations

import contextlib
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pocketmq.common.filter import (
    FilterError,
    FilterEvaluationError,
    FilterSyntaxError,
    FilterTypeError,
    compile_selector,
)


@pytest.mark.parametrize(
    ("expression", "props", "expected"),
    [
        ("a > 5 AND region = 'eu'", {"a": "6", "region": "eu"}, True),
        ("a > 5 AND region = 'eu'", {"a": "5", "region": "eu"}, False),
        ("a >= 5 AND a <= 5", {"a": "5"}, True),
        ("a < -2", {"a": "-3"}, True),
        ("a < -2.5", {"a": "-3"}, True),  # a string against a Double: Double.valueOf
        ("a = 3", {"a": "+3"}, True),  # Integer.valueOf accepts a sign
        ("a > 2147483648", {"a": "2147483649"}, True),  # a Long literal parses the property as a long
        ("a > 5", {"a": "2147483648"}, False),  # an Integer literal: out of int range -> error -> no match
        ("a > 1.5", {"a": " 2 "}, True),  # Double.valueOf trims blanks
        ("a > 1.5", {"a": "NaN"}, True),  # Double.compare puts NaN above everything
        ("a = 1.0", {"a": "1"}, True),
        ("a BETWEEN 1 AND 3", {"a": "3"}, True),
        ("a NOT BETWEEN 1 AND 3", {"a": "4"}, True),
        ("a NOT BETWEEN 1 AND 3", {"a": "2"}, False),
        ("region IN ('eu', 'us')", {"region": "us"}, True),
        ("region NOT IN ('eu', 'us')", {"region": "ap"}, True),
        ("region NOT IN ('eu')", {}, False),  # NULL
        ("a IS NULL", {}, True),
        ("a IS NOT NULL", {"a": ""}, True),
        ("a <> 'x'", {}, False),  # NULL <> 'x' is NULL
        ("NOT (a = 'x')", {}, False),
        ("a = 'x' OR TRUE", {}, True),
        ("a = 'x' AND FALSE", {}, False),
        ("a = b", {}, True),  # two missing properties are equal (Java: null == null)
        ("a = TRUE", {"a": "True"}, True),  # Boolean.valueOf, any case
        ("a = FALSE", {"a": "yes"}, True),  # anything but "true" is false
        ("a = 5", {"a": "x"}, False),  # NumberFormatException: no match...
        ("a = 5 OR b = 'y'", {"a": "x", "b": "y"}, False),  # ...even when the rest would match
        ("b = 'y' OR a = 5", {"a": "x", "b": "y"}, True),  # unless OR stopped before it
        ("a > b", {"a": "10", "b": "9"}, True),  # two strings are ordered as numbers
        ("a > b", {"a": "x", "b": "9"}, False),
        ("TAGS = 'TagA' AND price > 10", {"TAGS": "TagA", "price": "11"}, True),
        ("-a > 1", {"a": "-5"}, False),  # a negated string is NULL
        ("- -5 = 5", {}, True),
        ("a = 'it''s'", {"a": "it's"}, True),
        ("a = 5 -- trailing comment\n", {"a": "5"}, True),
        ("/* c */ a = 5", {"a": "5"}, True),
        ("a = 5 whatever follows", {"a": "5"}, True),  # RocketMQ's grammar stops at a complete selector
        ("a = 007", {"a": "0"}, True),  # "007" is 0 followed by ignored tokens
        ("x", {"x": "true"}, False),  # a property as a condition: strings are never TRUE
        ("NULL", {}, False),
        ("nOt (A iS nUlL)", {"A": "1"}, True),  # keywords are case-insensitive, names are not
        ("5L = a", {"a": "5"}, True),
        ("1e1 = a", {"a": "10"}, True),
    ],
)
def test_semantics(expression: str, props: dict[str, str], expected: bool) -> None:
    assert compile_selector(expression).matches(props) is expected


def test_evaluate_is_three_valued_and_raises_where_java_throws() -> None:
    assert compile_selector("a = 'x'").evaluate({}) is None
    assert compile_selector("a = 'x'").evaluate({"a": "y"}) is False
    with pytest.raises(FilterEvaluationError):
        compile_selector("a = 5").evaluate({"a": "five"})
    with pytest.raises(FilterEvaluationError):
        compile_selector("TRUE = a").evaluate({"a": "true"})  # Java casts the Boolean to String


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        ("", FilterSyntaxError),
        ("a >", FilterSyntaxError),
        ("a ! 5", FilterSyntaxError),
        ("a == 5", FilterSyntaxError),
        ("'open", FilterSyntaxError),
        ("(a = 5", FilterSyntaxError),
        ("a IN ()", FilterSyntaxError),
        ("a IN (5)", FilterSyntaxError),  # IN lists hold strings only
        ("a IS 5", FilterSyntaxError),
        ("(a LIKE 'x%')", FilterSyntaxError),  # no LIKE (unparenthesised, "LIKE ..." is trailing text)
        ("(a + 1 > 2)", FilterSyntaxError),  # no arithmetic
        ("a > 'x'", FilterTypeError),  # strings take = and <> only
        ("a > TRUE", FilterTypeError),
        ("a = NULL", FilterTypeError),
        ("TRUE = 5", FilterTypeError),
        ("NOT a > 5", FilterTypeError),  # NOT binds tighter: (NOT a) > 5
        ("(a > 1) > 2", FilterTypeError),
        ("5", FilterTypeError),
        ("'x'", FilterTypeError),
        ("a AND 5", FilterTypeError),
        ("5 IN ('a')", FilterTypeError),
        ("a BETWEEN 5 AND 1", FilterTypeError),
        ("a BETWEEN NULL AND 1", FilterTypeError),
        ("a BETWEEN 'a' AND 'b'", FilterTypeError),
        ("a > 0.0", FilterTypeError),  # RocketMQ refuses float literals below Double.MIN_VALUE
        ("a > 1e999", FilterTypeError),
        ("a > 9223372036854775808", FilterTypeError),
    ],
)
def test_malformed_selectors_are_named_errors(expression: str, error: type[FilterError]) -> None:
    with pytest.raises(error):
        compile_selector(expression)


def test_required_tags() -> None:
    assert compile_selector("TAGS = 'a' AND x > 1").required_tags == frozenset({"a"})
    assert compile_selector("TAGS IN ('a', 'b') OR (TAGS = 'c' AND y = 2)").required_tags == frozenset({"a", "b", "c"})
    assert compile_selector("TAGS IN ('a', 'b') AND TAGS = 'b'").required_tags == frozenset({"b"})
    assert compile_selector("TAGS = 'a' OR x > 1").required_tags is None
    assert compile_selector("NOT (TAGS = 'a')").required_tags is None
    assert compile_selector("TAGS NOT IN ('a')").required_tags is None


def test_huge_numbers() -> None:
    with pytest.raises(FilterTypeError):
        compile_selector("a > " + "9" * 5000)
    assert not compile_selector("a > 5").matches({"a": "9" * 5000})
    assert compile_selector("a > 1.5").matches({"a": "9" * 5000})  # Double.valueOf: Infinity, as in Java


def test_deep_nesting_is_a_named_error_and_long_chains_work() -> None:
    with pytest.raises(FilterSyntaxError):
        compile_selector("(" * 5000 + "a = 1" + ")" * 5000)
    with pytest.raises(FilterSyntaxError):
        compile_selector("NOT " * 5000 + "a")
    chain = compile_selector(" OR ".join(f"a = {i}" for i in range(5000)))
    assert chain.matches({"a": "4999"}) and not chain.matches({"a": "5000"})


# --- property-based: the parser and evaluator against an independent evaluator ---------------------------------

NAMES = ("a", "b", "region")
VALUES = ("0", "7", "-3", "12", "2.5", "eu", "us", "")
INTS = st.integers(-20, 20)
FLOATS = st.sampled_from((0.5, 2.5, -1.5, 7.25))


class Boom(Exception):
    """Where Java's evaluation throws."""


def _number(text: str, integer: bool) -> float:
    pattern = r"[+-]?[0-9]+" if integer else r"[+-]?[0-9]+(\.[0-9]*)?"
    if not re.fullmatch(pattern, text):
        raise Boom(text)
    return float(text)


def leaf() -> st.SearchStrategy[Any]:
    name = st.sampled_from(NAMES)
    number = st.one_of(INTS.map(lambda n: ("int", n)), FLOATS.map(lambda f: ("float", f)))
    return st.one_of(
        st.tuples(st.just("cmp"), name, st.sampled_from((">", ">=", "<", "<=", "=", "<>")), number),
        st.tuples(st.just("streq"), name, st.sampled_from(("=", "<>")), st.sampled_from(("eu", "us", "x'y"))),
        st.tuples(st.just("in"), name, st.booleans(), st.lists(st.sampled_from(("eu", "us", "7")), min_size=1,
                                                              max_size=3)),
        st.tuples(st.just("between"), name, st.booleans(), INTS, st.integers(0, 10)),
        st.tuples(st.just("null"), name, st.booleans()),
        st.tuples(st.just("const"), st.booleans()),
    )


TREES = st.recursive(
    leaf(),
    lambda inner: st.one_of(
        st.tuples(st.just("not"), inner),
        st.tuples(st.sampled_from(("and", "or")), st.lists(inner, min_size=2, max_size=4)),
    ),
    max_leaves=12,
)


def kw(word: str, upper: bool) -> str:
    return word if upper else word.lower()


def render(tree: Any, upper: bool = True) -> str:
    kind = tree[0]
    if kind == "cmp":
        _, name, op, (_, value) = tree
        return f"{name} {op} {value}"
    if kind == "streq":
        _, name, op, text = tree
        return f"{name} {op} '{str(text).replace(chr(39), chr(39) * 2)}'"
    if kind == "in":
        _, name, negated, items = tree
        listed = ", ".join(f"'{i}'" for i in items)
        return f"{name} {kw('NOT ', upper) if negated else ''}{kw('IN', upper)} ({listed})"
    if kind == "between":
        _, name, negated, low, width = tree
        return (f"{name} {kw('NOT ', upper) if negated else ''}{kw('BETWEEN', upper)} {low} {kw('AND', upper)} "
                f"{low + width}")
    if kind == "null":
        return f"{tree[1]} {kw('IS', upper)} {kw('NOT ', upper) if tree[2] else ''}{kw('NULL', upper)}"
    if kind == "const":
        return kw("TRUE" if tree[1] else "FALSE", upper)
    if kind == "not":
        return f"{kw('NOT', upper)} ({render(tree[1], upper)})"
    joiner = f" {kw(str(kind).upper(), upper)} "
    return joiner.join(f"({render(t, upper)})" for t in tree[1])


def reference(tree: Any, props: dict[str, str]) -> str:
    """'T', 'F' or 'U' (unknown), raising Boom where Java throws; written as truth tables, not closures."""
    kind = tree[0]
    if kind == "const":
        return "T" if tree[1] else "F"
    if kind == "null":
        missing = tree[1] not in props
        return "T" if missing != tree[2] else "F"
    if kind == "not":
        return {"T": "F", "F": "T", "U": "U"}[reference(tree[1], props)]
    if kind in ("and", "or"):
        decisive, other = ("F", "T") if kind == "and" else ("T", "F")
        seen_unknown = False
        for sub in tree[1]:
            value = reference(sub, props)
            if value == decisive:
                return decisive
            seen_unknown = seen_unknown or value == "U"
        return "U" if seen_unknown else other
    name = str(tree[1])
    if name not in props:
        return "U"
    text = props[name]
    if kind == "streq":
        same = text == tree[3]
        return "T" if same == (tree[2] == "=") else "F"
    if kind == "in":
        return "T" if (text in tree[3]) != tree[2] else "F"
    if kind == "between":
        number = _number(text, True)
        low, high = tree[3], tree[3] + tree[4]
        inside = low <= number <= high
        return "T" if inside != tree[2] else "F"
    _, _, op, (num_kind, literal) = tree
    x = _number(text, num_kind == "int")
    outcome = {">": x > literal, ">=": x >= literal, "<": x < literal, "<=": x <= literal,
               "=": x == literal, "<>": x != literal}[op]
    return "T" if outcome else "F"


PROPS = st.dictionaries(st.sampled_from(NAMES), st.sampled_from(VALUES), max_size=3)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=TREES, props=PROPS, upper=st.booleans())
def test_matches_independent_evaluator(tree: Any, props: dict[str, str], upper: bool) -> None:
    selector = compile_selector(render(tree, upper))
    try:
        expected = reference(tree, props) == "T"
    except Boom:
        expected = False
    assert selector.matches(props) is expected


# --- fuzzing: any text is a selector or a named error, and evaluation never raises --------------------------------

SEEDS = ("a > 5 AND region = 'eu'", "TAGS IN ('a', 'b') OR x BETWEEN 1 AND 3", "NOT (a IS NULL) -- c\n",
         "a = 1.5e3 OR b <> 'it''s'", "/* x */ (a < -2L)")
ALPHABET = st.sampled_from([*"ab ()'=<>!-+.,*/\n\t0123456789eELl_$", "AND", "OR", "NOT", "IN", "IS", "NULL",
                            "BETWEEN", "TRUE", "é", "\x00"])
EVAL_PROPS: tuple[dict[str, str], ...] = (
    {}, {"a": "5", "b": "x", "region": "eu", "TAGS": "a"}, {"a": "x", "b": "1e3", "x": "2"})


def _check(text: str) -> None:
    try:
        selector = compile_selector(text)
    except FilterError:
        return
    for props in EVAL_PROPS:
        assert selector.matches(props) in (True, False)
        with contextlib.suppress(FilterEvaluationError):
            assert selector.evaluate(props) in (True, False, None)


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=80))
def test_fuzz_any_text(text: str) -> None:
    _check(text)


@settings(max_examples=500, deadline=None)
@given(st.lists(ALPHABET, max_size=40).map("".join))
def test_fuzz_selector_alphabet(text: str) -> None:
    _check(text)


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(SEEDS), st.data())
def test_fuzz_mutated_selectors(seed: str, data: st.DataObject) -> None:
    text = seed
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(text)))
        action = data.draw(st.sampled_from(("insert", "delete", "swap")))
        if action == "insert":
            text = text[:at] + data.draw(ALPHABET) + text[at:]
        elif action == "delete":
            text = text[:at] + text[at + 1:]
        elif at + 1 < len(text):
            text = text[:at] + text[at + 1] + text[at] + text[at + 2:]
    _check(text)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=60))
def test_fuzz_bytes(raw: bytes) -> None:
    _check(raw.decode("latin-1"))
    _check(raw.decode("utf-8", "replace"))
