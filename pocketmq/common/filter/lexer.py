"""The SQL92 selector's tokens, read lazily as RocketMQ's JavaCC token manager reads them (``SelectorParser.jj``).

Pure: text in, tokens out, no I/O. Rules kept from the grammar:

* blanks (space, tab, CR, LF, form feed), ``-- ...`` comments *ended by a line break* and ``/* ... */``
  comments are skipped; a ``--`` at the very end without a line break is two minus signs;
* keywords ``NOT AND OR BETWEEN IN TRUE FALSE NULL IS`` and identifiers are case-insensitive; an identifier
  is ``[A-Za-z_$][A-Za-z0-9_$]*`` (ASCII only, no dots), and a keyword wins a tie with an identifier;
* ``DECIMAL_LITERAL`` is ``0`` or ``[1-9][0-9]*`` with an optional ``l``/``L``; ``FLOATING_POINT_LITERAL``
  is ``5.5``, ``5.``, ``.5`` or ``5E10`` with an optional signed exponent; the longest match wins, so ``007``
  is three tokens ``0 0 7``;
* strings are single-quoted, a quote inside doubled (``'it''s'``);
* operators ``= <> > >= < <= ( ) , + -``; any other character is a lexical error.

Tokens are produced only when the parser asks for them, as in Java: text after the point where a selector
is complete is never read, so ``a > 5 b`` is ``a > 5`` (RocketMQ's grammar has no end-of-input rule).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from pocketmq.common.filter.errors import FilterSyntaxError


class T(Enum):
    """Token kinds."""

    NOT = "NOT"
    AND = "AND"
    OR = "OR"
    BETWEEN = "BETWEEN"
    IN = "IN"
    TRUE = "TRUE"
    FALSE = "FALSE"
    NULL = "NULL"
    IS = "IS"
    DECIMAL = "decimal literal"
    FLOAT = "floating point literal"
    STRING = "string literal"
    ID = "identifier"
    EQ = "="
    NE = "<>"
    GT = ">"
    GE = ">="
    LT = "<"
    LE = "<="
    LPAREN = "("
    RPAREN = ")"
    COMMA = ","
    PLUS = "+"
    MINUS = "-"
    EOF = "end of input"


KEYWORDS = {kind.value: kind for kind in (T.NOT, T.AND, T.OR, T.BETWEEN, T.IN, T.TRUE, T.FALSE, T.NULL, T.IS)}


@dataclass(frozen=True, slots=True)
class Token:
    kind: T
    image: str
    pos: int


_BLANKS = " \t\n\r\f"
_LINE_COMMENT = re.compile(r"--[^\n\r]*(?:\r\n|\n|\r)")
_BLOCK_COMMENT = re.compile(r"/\*[^*]*\*+(?:[^*/][^*]*\*+)*/")
_ID = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_FLOAT = re.compile(r"[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+")
_DECIMAL = re.compile(r"0|[1-9][0-9]*[lL]?")
_STRING = re.compile(r"'(?:''|[^'])*'")
_OPERATORS = (("<>", T.NE), (">=", T.GE), ("<=", T.LE), (">", T.GT), ("<", T.LT), ("=", T.EQ), ("(", T.LPAREN),
              (")", T.RPAREN), (",", T.COMMA), ("+", T.PLUS), ("-", T.MINUS))


class Lexer:
    """Tokens of one selector, on demand: :meth:`peek` looks ahead, :meth:`next` consumes."""

    __slots__ = ("_ahead", "_pos", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        self._pos = 0
        self._ahead: list[Token] = []

    def peek(self, k: int = 0) -> Token:
        """The ``k``-th token not consumed yet (0: the next one)."""
        while len(self._ahead) <= k:
            self._ahead.append(self._read())
        return self._ahead[k]

    def next(self) -> Token:
        token = self.peek()
        self._ahead.pop(0)
        return token

    def _skip(self) -> None:
        text = self._text
        while self._pos < len(text):
            c = text[self._pos]
            if c in _BLANKS:
                self._pos += 1
                continue
            match = None
            if text.startswith("--", self._pos):
                match = _LINE_COMMENT.match(text, self._pos)
            elif text.startswith("/*", self._pos):
                match = _BLOCK_COMMENT.match(text, self._pos)
            if match is None:
                return
            self._pos = match.end()

    def _read(self) -> Token:
        self._skip()
        text, pos = self._text, self._pos
        if pos >= len(text):
            return Token(T.EOF, "", pos)
        c = text[pos]
        match: re.Match[str] | None
        if c.isascii() and (c.isalpha() or c in "_$"):
            match = _ID.match(text, pos)
            assert match is not None
            image = match.group()
            return self._take(KEYWORDS.get(image.upper(), T.ID), image)
        if c.isascii() and (c.isdigit() or c == "."):
            decimal = _DECIMAL.match(text, pos) if c != "." else None
            floating = _FLOAT.match(text, pos)
            if floating is not None and (decimal is None or floating.end() > decimal.end()):
                return self._take(T.FLOAT, floating.group())
            if decimal is not None:
                return self._take(T.DECIMAL, decimal.group())
        elif c == "'":
            match = _STRING.match(text, pos)
            if match is not None:
                return self._take(T.STRING, match.group())
            raise FilterSyntaxError("unterminated string literal", pos)
        else:
            for image, kind in _OPERATORS:
                if text.startswith(image, pos):
                    return self._take(kind, image)
        raise FilterSyntaxError(f"lexical error: unexpected character {c!r}", pos)

    def _take(self, kind: T, image: str) -> Token:
        token = Token(kind, image, self._pos)
        self._pos += len(image)
        return token
