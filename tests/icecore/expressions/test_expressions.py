import datetime as dt
import pickle
import struct
import uuid
from decimal import Decimal

import pytest

from icecore.errors import ValidationError
from icecore.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BoundPredicate,
    Not,
    Operation,
    Or,
    UnboundPredicate,
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
    rewrite_not,
)
from icecore.expressions.literals import to_literal
from icecore.spec.schema import Schema
from icecore.spec.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    ListType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

SCHEMA = Schema(
    (
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "name", StringType()),
        NestedField(3, "ts", TimestampType()),
        NestedField(4, "tstz", TimestamptzType()),
        NestedField(5, "day", DateType()),
        NestedField(6, "price", DecimalType(9, 2)),
        NestedField(7, "score", DoubleType()),
        NestedField(8, "ratio", FloatType()),
        NestedField(9, "small", IntegerType()),
        NestedField(
            10,
            "loc",
            StructType(
                NestedField(11, "lat", DoubleType(), required=True),
                NestedField(12, "city", StringType()),
            ),
        ),
        NestedField(13, "tags", ListType(14, StringType())),
        NestedField(
            15,
            "req",
            StructType(NestedField(16, "inner", IntegerType(), required=True)),
            required=True,
        ),
        NestedField(17, "Mixed", StringType()),
    )
)
A = equal("id", 1)
B = less_than("small", 3)


class TestConstruction:
    def test_constants_are_singletons(self):
        assert AlwaysTrue() is AlwaysTrue()
        assert AlwaysFalse() is AlwaysFalse()
        assert AlwaysTrue() != AlwaysFalse()

    def test_and_simplifies(self):
        assert And(A, AlwaysFalse()) is AlwaysFalse()
        assert And(AlwaysFalse(), A) is AlwaysFalse()
        assert And(A, AlwaysTrue()) == A
        assert And(AlwaysTrue(), A) == A
        assert And(A, B) == And(A, B)
        assert And(A, B) != And(B, A)

    def test_or_simplifies(self):
        assert Or(A, AlwaysTrue()) is AlwaysTrue()
        assert Or(AlwaysTrue(), A) is AlwaysTrue()
        assert Or(A, AlwaysFalse()) == A
        assert Or(AlwaysFalse(), A) == A

    def test_not_simplifies(self):
        assert Not(AlwaysTrue()) is AlwaysFalse()
        assert Not(AlwaysFalse()) is AlwaysTrue()
        assert Not(Not(A)) == A
        assert isinstance(Not(A), Not)

    def test_variadic_nests_left_to_right(self):
        c = is_null("name")
        assert And(A, B, c) == And(And(A, B), c)
        assert Or(A, B, c) == Or(Or(A, B), c)

    def test_operators(self):
        assert And(A, B) == (A & B)
        assert Or(A, B) == (A | B)
        assert Not(A) == ~A

    def test_non_expressions_are_rejected(self):
        with pytest.raises(ValidationError, match="filter expression"):
            And(A, True)

    def test_set_predicates_simplify_when_empty(self):
        assert is_in("id", []) is AlwaysFalse()
        assert not_in("id", []) is AlwaysTrue()
        assert is_in("id", iter([1, 2])) == UnboundPredicate(Operation.IN, "id", (1, 2))

    def test_literal_arity_is_checked(self):
        with pytest.raises(ValidationError, match="takes one literals, got 2"):
            UnboundPredicate(Operation.EQ, "id", (1, 2))
        with pytest.raises(ValidationError, match="takes no literals"):
            UnboundPredicate(Operation.IS_NULL, "id", (1,))

    def test_null_literals_are_rejected(self):
        with pytest.raises(ValidationError, match="is_null"):
            equal("id", None)
        with pytest.raises(ValidationError, match="is_null"):
            is_in("id", [1, None])

    def test_column_name_is_required(self):
        with pytest.raises(ValidationError, match="column name"):
            equal("", 1)

    def test_expressions_pickle(self):
        expr = Or(And(A, Not(B)), is_in("name", ["a", "b"]))
        assert pickle.loads(pickle.dumps(expr)) == expr
        bound = bind(expr, SCHEMA)
        assert pickle.loads(pickle.dumps(bound)) == bound

    def test_repr_is_readable(self):
        assert repr(And(A, is_null("name"))) == "And(id == 1, is_null(name))"
        assert repr(bind(equal("price", "1.5"), SCHEMA)) == "price == Decimal('1.50')"


class TestRewriteNot:
    def test_negations_of_every_operation(self):
        pairs = [
            (is_null("name"), not_null("name")),
            (is_nan("score"), not_nan("score")),
            (less_than("id", 1), greater_than_or_equal("id", 1)),
            (less_than_or_equal("id", 1), greater_than("id", 1)),
            (equal("id", 1), not_equal("id", 1)),
            (is_in("id", [1, 2]), not_in("id", [1, 2])),
        ]
        for a, b in pairs:
            assert rewrite_not(Not(a)) == b
            assert rewrite_not(Not(b)) == a

    def test_de_morgan(self):
        c = is_null("name")
        expr = Not(And(A, Or(B, Not(c))))
        expected = Or(not_equal("id", 1), And(greater_than_or_equal("small", 3), c))
        assert rewrite_not(expr) == expected

    def test_bound_expressions_too(self):
        bound = bind(Not(Or(A, B)), SCHEMA)
        assert rewrite_not(bound) == bind(
            And(not_equal("id", 1), greater_than_or_equal("small", 3)), SCHEMA
        )

    def test_leaves_constants_alone(self):
        assert rewrite_not(AlwaysTrue()) is AlwaysTrue()
        assert rewrite_not(A) == A


class TestBind:
    def test_binds_field_id_type_and_literal(self):
        bound = bind(equal("small", 7), SCHEMA)
        assert isinstance(bound, BoundPredicate)
        assert bound.field_id == 9
        assert bound.field_type == IntegerType()
        assert bound.literal == 7
        assert bound.column == "small"

    def test_accepts_a_struct(self):
        assert bind(equal("small", 7), SCHEMA.struct) == bind(equal("small", 7), SCHEMA)

    def test_nested_struct_fields_bind_by_dotted_name(self):
        bound = bind(equal("loc.city", "Oslo"), SCHEMA)
        assert bound.field_id == 12

    def test_fields_inside_lists_do_not_bind(self):
        with pytest.raises(ValidationError, match=r"cannot find column 'tags\.element'"):
            bind(equal("tags.element", "x"), SCHEMA)

    def test_non_primitive_columns_do_not_bind(self):
        with pytest.raises(ValidationError, match="not a primitive"):
            bind(is_null("loc"), SCHEMA)

    def test_unknown_column(self):
        with pytest.raises(ValidationError, match="cannot find column 'nope'"):
            bind(equal("nope", 1), SCHEMA)

    def test_case_sensitivity(self):
        with pytest.raises(ValidationError, match="cannot find column 'mixed'"):
            bind(equal("mixed", "x"), SCHEMA)
        assert bind(equal("mixed", "x"), SCHEMA, case_sensitive=False).field_id == 17
        assert bind(equal("LOC.CITY", "x"), SCHEMA, case_sensitive=False).field_id == 12

    def test_case_insensitive_ambiguity_is_an_error(self):
        schema = Schema((NestedField(1, "a", LongType()), NestedField(2, "A", LongType())))
        with pytest.raises(ValidationError, match="ambiguous"):
            bind(equal("a", 1), schema, case_sensitive=False)
        assert bind(equal("A", 1), schema).field_id == 2

    def test_null_checks_on_required_fields_fold(self):
        assert bind(is_null("id"), SCHEMA) is AlwaysFalse()
        assert bind(not_null("id"), SCHEMA) is AlwaysTrue()
        assert bind(is_null("req.inner"), SCHEMA) is AlwaysFalse()
        # Required inside an optional struct can still be null.
        assert isinstance(bind(is_null("loc.lat"), SCHEMA), BoundPredicate)
        assert bind(Or(is_null("id"), A), SCHEMA) == bind(A, SCHEMA)

    def test_nan_checks_need_floating_point(self):
        assert bind(is_nan("ratio"), SCHEMA).op is Operation.IS_NAN
        for op in (is_nan, not_nan):
            with pytest.raises(ValidationError, match="float or double column; 'id' is long"):
                bind(op("id"), SCHEMA)

    def test_in_converts_and_dedupes(self):
        bound = bind(is_in("price", ["1.5", Decimal("1.50"), 2]), SCHEMA)
        assert bound.op is Operation.IN
        assert bound.literals == frozenset({Decimal("1.50"), Decimal("2.00")})

    def test_in_with_one_distinct_value_becomes_equality(self):
        assert bind(is_in("day", ["2024-01-01", dt.date(2024, 1, 1)]), SCHEMA) == bind(
            equal("day", 19723), SCHEMA
        )
        assert bind(not_in("id", [3, 3]), SCHEMA) == bind(not_equal("id", 3), SCHEMA)

    def test_literal_errors_name_the_column(self):
        with pytest.raises(ValidationError, match=r"column 'small'.*out of the 32-bit range"):
            bind(less_than("small", 2**31), SCHEMA)
        with pytest.raises(ValidationError, match=r"column 'price'.*fractional digits"):
            bind(equal("price", "1.005"), SCHEMA)
        with pytest.raises(ValidationError, match=r"column 'name'"):
            bind(equal("name", 5), SCHEMA)

    def test_rebinding_checks_ids_and_types(self):
        bound = bind(A, SCHEMA)
        assert bind(bound, SCHEMA) == bound
        other = Schema((NestedField(1, "id", StringType()),))
        with pytest.raises(ValidationError, match="does not have"):
            bind(bound, other)
        with pytest.raises(ValidationError, match="does not have"):
            bind(bound, Schema((NestedField(2, "id", LongType()),)))

    def test_every_comparison_binds(self):
        for make in (less_than, less_than_or_equal, greater_than, greater_than_or_equal):
            bound = bind(make("ts", "2024-01-01T00:00:01"), SCHEMA)
            assert bound.literal == 1704067201000000


MICROS_2024 = 1704067200000000


class TestLiterals:
    @pytest.mark.parametrize(
        ("t", "value", "expected"),
        [
            (BooleanType(), True, True),
            (IntegerType(), -(2**31), -(2**31)),
            (LongType(), 2**63 - 1, 2**63 - 1),
            (DoubleType(), 5, 5.0),
            (DoubleType(), Decimal("0.1"), 0.1),
            (DoubleType(), float("inf"), float("inf")),
            (FloatType(), 1.1, struct.unpack("<f", struct.pack("<f", 1.1))[0]),
            (DecimalType(9, 2), 14, Decimal("14.00")),
            (DecimalType(9, 2), "14.2", Decimal("14.20")),
            (DecimalType(9, 2), 14.2, Decimal("14.20")),
            (DecimalType(9, 2), Decimal("-0.5"), Decimal("-0.50")),
            (DecimalType(38, 0), str(10**38 - 1), Decimal(10**38 - 1)),
            (DateType(), "2024-01-01", 19723),
            (DateType(), dt.date(1969, 12, 31), -1),
            (DateType(), -719162, -719162),
            (TimeType(), "10:15:30.000001", 36930000001),
            (TimeType(), dt.time(0, 0), 0),
            (TimeType(), 86_399_999_999, 86_399_999_999),
            (TimestampType(), "2024-01-01", MICROS_2024),
            (TimestampType(), "2024-01-01 00:00:00.5", MICROS_2024 + 500000),
            (TimestampType(), dt.datetime(1969, 12, 31, 23, 59, 59, 999999), -1),
            (TimestampType(), dt.date(2024, 1, 1), MICROS_2024),
            (TimestampType(), -5, -5),
            (TimestamptzType(), "2024-01-01T02:00:00+02:00", MICROS_2024),
            (TimestamptzType(), "2024-01-01T00:00:00Z", MICROS_2024),
            (
                TimestamptzType(),
                dt.datetime(2023, 12, 31, 19, tzinfo=dt.timezone(dt.timedelta(hours=-5))),
                MICROS_2024,
            ),
            (StringType(), "é", "é"),
            (
                UUIDType(),
                "f79c3e09-677c-4bbd-a479-3f349cb785e7",
                uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7"),
            ),
            (FixedType(2), bytearray(b"ab"), b"ab"),
            (BinaryType(), b"", b""),
        ],
    )
    def test_conversions(self, t, value, expected):
        result = to_literal(t, value)
        assert result == expected
        assert type(result) is type(expected)

    def test_decimal_keeps_the_type_scale(self):
        assert to_literal(DecimalType(9, 2), 14).as_tuple().exponent == -2

    @pytest.mark.parametrize(
        ("t", "value", "why"),
        [
            (BooleanType(), 1, "not a valid boolean"),
            (IntegerType(), True, "not a valid int"),
            (IntegerType(), 1.0, "not a valid int"),
            (IntegerType(), "1", "not a valid int"),
            (LongType(), 2**63, "64-bit range"),
            (DateType(), 2**31, "32-bit range"),
            (DoubleType(), float("nan"), "use is_nan"),
            (DoubleType(), 2**53 + 1, "not exactly representable"),
            (DoubleType(), 10**400, "out of range"),
            (DoubleType(), "1.0", "not a valid double"),
            (FloatType(), 1e39, "single-precision range"),
            (DecimalType(4, 2), "100.00", "more than 4 digits"),
            (DecimalType(4, 2), 0.001, "fractional digits"),
            (DecimalType(4, 2), "abc", "not a valid decimal"),
            (DecimalType(4, 2), "NaN", "non-finite"),
            (DateType(), dt.datetime(2024, 1, 1), "a datetime is not a date"),
            (DateType(), "2024-13-01", "month must be in 1..12"),
            (TimeType(), 86_400_000_000, "microseconds since midnight"),
            (TimeType(), "10:00:00+01:00", "no time zone"),
            (TimestampType(), "2024-01-01T00:00:00+00:00", "cannot take an offset"),
            (TimestampType(), "2024-01-01T00:00:00.0000001", "finer than microseconds"),
            (TimestamptzType(), "2024-01-01T00:00:00", "explicit offset"),
            (TimestamptzType(), "2024-01-01", "explicit offset"),
            (TimestamptzType(), 2**63, "microseconds since the epoch"),
            (StringType(), b"x", "not a valid string"),
            (UUIDType(), "not-a-uuid", "not a valid uuid"),
            (UUIDType(), 5, "not a valid uuid"),
            (FixedType(3), b"ab", "exactly 3 bytes"),
            (BinaryType(), "ab", "not a valid binary"),
        ],
    )
    def test_refusals(self, t, value, why):
        with pytest.raises(ValidationError, match=why):
            to_literal(t, value)

    def test_nested_types_take_no_literal(self):
        with pytest.raises(ValidationError, match="cannot compare"):
            to_literal(StructType(), 1)
