from decimal import Decimal

import pytest

from icecore.errors import ValidationError
from icecore.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    Not,
    Or,
    bind,
    equal,
    greater_than,
    greater_than_or_equal,
    is_in,
    is_nan,
    is_null,
    less_than,
    less_than_or_equal,
    not_equal,
    not_in,
    not_nan,
    not_null,
)
from icecore.expressions.parser import parse_filter
from icecore.spec.schema import Schema
from icecore.spec.types import (
    DecimalType,
    DoubleType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
)


def test_example_from_the_docs():
    parsed = parse_filter("id = 5 and ts >= '2024-01-01' or name is null")
    expected = Or(And(equal("id", 5), greater_than_or_equal("ts", "2024-01-01")), is_null("name"))
    assert parsed == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a = 1", equal("a", 1)),
        ("a == 1", equal("a", 1)),
        ("a != 1", not_equal("a", 1)),
        ("a <> 1", not_equal("a", 1)),
        ("a < -1", less_than("a", -1)),
        ("a<=+2", less_than_or_equal("a", 2)),
        ("a > 1.50", greater_than("a", Decimal("1.50"))),
        ("a >= 1e3", greater_than_or_equal("a", Decimal("1e3"))),
        ("a = .5", equal("a", Decimal("0.5"))),
        ("a = 'it''s'", equal("a", "it's")),
        ("a = ''", equal("a", "")),
        ("a = true", equal("a", True)),
        ("a = FALSE", equal("a", False)),
        ("a IS NULL", is_null("a")),
        ("a is not null", not_null("a")),
        ("a is nan", is_nan("a")),
        ("a Is Not NaN", not_nan("a")),
        ("a in (1, 2, 3)", is_in("a", [1, 2, 3])),
        ("a not in ('x')", not_in("a", ["x"])),
        ("loc.city = 'Oslo'", equal("loc.city", "Oslo")),
        ("`weird col`.`x``y` = 1", equal("weird col.x`y", 1)),
        ("`in` = 1", equal("in", 1)),
        ("true", AlwaysTrue()),
        ("false or a = 1", equal("a", 1)),
        ("not a = 1", Not(equal("a", 1))),
        ("not not a = 1", equal("a", 1)),
    ],
)
def test_predicates(text, expected):
    assert parse_filter(text) == expected


def test_precedence_not_and_or():
    a, b, c = equal("a", 1), equal("b", 2), equal("c", 3)
    assert parse_filter("a = 1 or b = 2 and c = 3") == Or(a, And(b, c))
    assert parse_filter("(a = 1 or b = 2) and c = 3") == And(Or(a, b), c)
    assert parse_filter("not a = 1 and b = 2") == And(Not(a), b)
    assert parse_filter("not (a = 1 and b = 2)") == Not(And(a, b))
    assert parse_filter("a = 1 and b = 2 and c = 3") == And(And(a, b), c)


def test_constants_simplify():
    assert parse_filter("a = 1 and false") is AlwaysFalse()


def test_parsed_literals_bind_exactly():
    schema = Schema(
        (
            NestedField(1, "id", LongType()),
            NestedField(2, "ts", TimestampType()),
            NestedField(3, "price", DecimalType(5, 2)),
            NestedField(4, "score", DoubleType()),
            NestedField(5, "name", StringType()),
        )
    )
    bound = bind(parse_filter("price < 9.99 and ts >= '2024-01-01' and score > 0.1"), schema)
    assert bound.left.left.literal == Decimal("9.99")
    assert bound.left.right.literal == 1704067200000000
    assert bound.right.literal == 0.1
    with pytest.raises(ValidationError, match="column 'id'"):
        bind(parse_filter("id = 1.5"), schema)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty filter"),
        ("   ", "empty filter"),
        ("a =", r"expected a literal \(.*\) at position 3, found the end"),
        ("a = b", "expected a literal"),
        ("5 = a", "expected a column name at position 0"),
        ("a = 1 b = 2", "expected AND, OR or the end of the filter at position 6"),
        ("a in 1", "expected '\\(' at position 5"),
        ("a in (1,)", r"expected a literal \(.*\) at position 8"),
        ("a is 5", "expected NULL or NAN after IS"),
        ("a like 'x'", "expected a comparison, IS or IN"),
        ("(a = 1", "expected '\\)' at position 6"),
        ("a = 'open", "expected a token at position 4"),
        ("a = 1 ; drop", "expected a token at position 6"),
        ("a not = 1", "expected IN"),
    ],
)
def test_errors_point_at_the_problem(text, message):
    with pytest.raises(ValidationError, match=message):
        parse_filter(text)


def test_error_shows_a_caret():
    with pytest.raises(ValidationError) as info:
        parse_filter("a = 1 and")
    assert str(info.value).endswith("\n  a = 1 and\n           ^")
