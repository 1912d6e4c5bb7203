"""A small, strict parser for filter strings such as the Spark jobs' `--where` option.

    id = 5 and ts >= '2024-01-01' or name is null
    region in ('eu', 'us') and not (price < 9.99) and `weird col`.x != -1

Grammar (keywords are case-insensitive; NOT binds tighter than AND, AND tighter than OR):

    expr      := and_expr (OR and_expr)*
    and_expr  := not_expr (AND not_expr)*
    not_expr  := NOT not_expr | '(' expr ')' | TRUE | FALSE | predicate
    predicate := column (op literal | IS [NOT] (NULL | NAN) | [NOT] IN '(' literal, ... ')')
    op        := = | == | != | <> | < | <= | > | >=
    literal   := 'text' ('' escapes a quote) | integer | decimal | TRUE | FALSE
    column    := name ('.' name)*, a name being an identifier or `back-quoted`

Literals keep their text's exactness: `9.99` is a Decimal, not a float, and quoted text is
converted to the column's type at bind time (dates, timestamps, uuids, decimals). Anything
else, including a column on the right-hand side, is a ValidationError that points at the spot.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from icecore.errors import ValidationError
from icecore.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BooleanExpression,
    Not,
    Operation,
    Or,
    UnboundPredicate,
    is_in,
    not_in,
)

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<string>'(?:[^']|'')*')
    | (?P<number>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
    | (?P<name>[A-Za-z_][A-Za-z0-9_]*|`(?:[^`]|``)+`)
    | (?P<op><=|>=|<>|!=|==|=|<|>)
    | (?P<punct>[(),.])
    )""",
    re.VERBOSE,
)
EXAMPLE = "a filter compares columns with values, e.g. ts >= '2024-01-01' and id in (1, 2)"
_KEYWORDS = frozenset({"and", "or", "not", "is", "null", "nan", "in", "true", "false"})
_OPS = {
    "=": Operation.EQ,
    "==": Operation.EQ,
    "!=": Operation.NOT_EQ,
    "<>": Operation.NOT_EQ,
    "<": Operation.LT,
    "<=": Operation.LT_EQ,
    ">": Operation.GT,
    ">=": Operation.GT_EQ,
}


def parse_filter(text: str) -> BooleanExpression:
    """The unbound expression for `text`; bind it to a schema before evaluating it."""
    return _Parser(text).parse()


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str, int]] = []  # (kind, text, position)
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None or m.lastgroup is None:
                if text[pos:].strip():
                    raise self._error(pos + len(text[pos:]) - len(text[pos:].lstrip()), "a token")
                break
            kind, value, start = m.lastgroup, m.group(m.lastgroup), m.start(m.lastgroup)
            if kind == "name" and value.lower() in _KEYWORDS:
                kind, value = "keyword", value.lower()
            self.tokens.append((kind, value, start))
            pos = m.end()
        self.i = 0

    def parse(self) -> BooleanExpression:
        if not self.tokens:
            raise ValidationError("empty filter")
        expr = self._or()
        if self.i < len(self.tokens):
            raise self._error(self.tokens[self.i][2], "AND, OR or the end of the filter")
        return expr

    def _or(self) -> BooleanExpression:
        expr = self._and()
        while self._accept("keyword", "or"):
            expr = Or(expr, self._and())
        return expr

    def _and(self) -> BooleanExpression:
        expr = self._not()
        while self._accept("keyword", "and"):
            expr = And(expr, self._not())
        return expr

    def _not(self) -> BooleanExpression:
        if self._accept("keyword", "not"):
            return Not(self._not())
        if self._accept("punct", "("):
            expr = self._or()
            self._expect("punct", ")")
            return expr
        if self._accept("keyword", "true"):
            return AlwaysTrue()
        if self._accept("keyword", "false"):
            return AlwaysFalse()
        return self._predicate()

    def _predicate(self) -> BooleanExpression:
        column = self._column()
        if self._accept("keyword", "is"):
            negated = self._accept("keyword", "not")
            if self._accept("keyword", "null"):
                op = Operation.NOT_NULL if negated else Operation.IS_NULL
            elif self._accept("keyword", "nan"):
                op = Operation.NOT_NAN if negated else Operation.IS_NAN
            else:
                at = self.tokens[self.i][2] if self.i < len(self.tokens) else len(self.text)
                raise self._error(at, "NULL or NAN after IS (as in `x IS NOT NULL`)")
            return UnboundPredicate(op, column)
        negated = self._accept("keyword", "not")
        if negated or self._peek("keyword", "in"):
            self._expect("keyword", "in")
            self._expect("punct", "(")
            values = [self._literal()]
            while self._accept("punct", ","):
                values.append(self._literal())
            self._expect("punct", ")")
            return not_in(column, values) if negated else is_in(column, values)
        kind, value, pos = self._next("a comparison, IS or IN")
        if kind != "op":
            raise self._error(pos, "a comparison, IS or IN")
        return UnboundPredicate(_OPS[value], column, (self._literal(),))

    def _column(self) -> str:
        parts = [self._name()]
        while self._accept("punct", "."):
            parts.append(self._name())
        return ".".join(parts)

    def _name(self) -> str:
        kind, value, pos = self._next("a column name")
        if kind != "name":
            raise self._error(pos, "a column name")
        return value[1:-1].replace("``", "`") if value.startswith("`") else value

    def _literal(self) -> Any:
        expected = "a literal ('text', a number, true or false)"
        kind, value, pos = self._next(expected)
        if kind == "string":
            return value[1:-1].replace("''", "'")
        if kind == "number":
            if any(c in value for c in ".eE"):
                return Decimal(value)
            return int(value)
        if kind == "keyword" and value in ("true", "false"):
            return value == "true"
        raise self._error(pos, expected)

    def _peek(self, kind: str, value: str) -> bool:
        return self.i < len(self.tokens) and self.tokens[self.i][:2] == (kind, value)

    def _accept(self, kind: str, value: str) -> bool:
        if self._peek(kind, value):
            self.i += 1
            return True
        return False

    def _expect(self, kind: str, value: str) -> None:
        if not self._accept(kind, value):
            at = self.tokens[self.i][2] if self.i < len(self.tokens) else len(self.text)
            raise self._error(at, value.upper() if kind == "keyword" else repr(value))

    def _next(self, expected: str) -> tuple[str, str, int]:
        if self.i >= len(self.tokens):
            raise self._error(len(self.text), expected)
        token = self.tokens[self.i]
        self.i += 1
        return token

    def _error(self, pos: int, expected: str) -> ValidationError:
        """What was expected where, in words, on the first line (the line a log or the
        Airflow UI shows), then the filter with a caret under the spot."""
        found = repr(self.text[pos : pos + 12]) if pos < len(self.text) else "the end"
        return ValidationError(
            f"cannot parse filter: expected {expected} at position {pos}, found {found} "
            f"({EXAMPLE})\n  {self.text}\n  {' ' * pos}^"
        )
