import datetime as dt
import math
import random
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
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
from icecore.expressions.projection import inclusive_projection
from icecore.expressions.pruning import ManifestEvaluator, MetricsEvaluator, PartitionEvaluator
from icecore.spec.conversions import to_bytes, truncate_lower_bound, truncate_upper_bound
from icecore.spec.manifest import DataFile, FileFormat
from icecore.spec.manifest_list import PartitionFieldSummary
from icecore.spec.partitioning import PartitionField, PartitionSpec
from icecore.spec.schema import Schema
from icecore.spec.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    TruncateTransform,
    VoidTransform,
    YearTransform,
)
from icecore.spec.types import (
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
)

SCHEMA = Schema(
    (
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "score", DoubleType()),
        NestedField(3, "name", StringType()),
        NestedField(4, "day", DateType()),
        NestedField(5, "ts", TimestampType()),
        NestedField(6, "amount", DecimalType(10, 2)),
        NestedField(7, "small", IntegerType()),
        NestedField(8, "ratio", FloatType()),
    )
)
HOUR = 3_600_000_000
DAY = 24 * HOUR


def spec_of(*fields: tuple[int, object, str]) -> PartitionSpec:
    return PartitionSpec(
        0, tuple(PartitionField(src, 1000 + i, t, name) for i, (src, t, name) in enumerate(fields))
    )


def project(spec: PartitionSpec, expr):
    return inclusive_projection(spec, SCHEMA, expr)


def shape(expr):
    """A bound projection as plain data: (op, partition name, literal or sorted literals)."""
    if isinstance(expr, And):
        return ("and", shape(expr.left), shape(expr.right))
    if isinstance(expr, Or):
        return ("or", shape(expr.left), shape(expr.right))
    if isinstance(expr, BoundPredicate):
        value = sorted(expr.literals) if expr.op.is_set else expr.literal
        return (expr.op.value, expr.column, value)
    return expr


class TestInclusiveProjection:
    def test_identity_keeps_every_operation(self):
        spec = spec_of((2, IdentityTransform(), "s"))
        cases = [
            (is_null("score"), ("is_null", "s", None)),
            (not_null("score"), ("not_null", "s", None)),
            (is_nan("score"), ("is_nan", "s", None)),
            (not_nan("score"), ("not_nan", "s", None)),
            (less_than("score", 1), ("<", "s", 1.0)),
            (less_than_or_equal("score", 1), ("<=", "s", 1.0)),
            (greater_than("score", 1), (">", "s", 1.0)),
            (greater_than_or_equal("score", 1), (">=", "s", 1.0)),
            (equal("score", 1), ("==", "s", 1.0)),
            (not_equal("score", 1), ("!=", "s", 1.0)),
            (is_in("score", [1, 2]), ("in", "s", [1.0, 2.0])),
            (not_in("score", [1, 2]), ("not_in", "s", [1.0, 2.0])),
        ]
        for expr, expected in cases:
            projected = project(spec, expr)
            assert shape(projected) == expected
            assert projected.field_id == 1000
            assert projected.field_type == DoubleType()

    def test_bucket_projects_equality_and_in_only(self):
        spec = spec_of((1, BucketTransform(16), "b"))
        # Spec Appendix B: hash(34L) = 2017239379, and 2017239379 % 16 = 3.
        assert shape(project(spec, equal("id", 34))) == ("==", "b", 3)
        in_set = shape(project(spec, is_in("id", [34, 35])))
        assert in_set[:2] == ("in", "b") and 3 in in_set[2]
        for expr in (
            less_than("id", 34),
            greater_than_or_equal("id", 34),
            not_equal("id", 34),
            not_in("id", [34, 35]),
        ):
            assert project(spec, expr) is AlwaysTrue()
        assert shape(project(spec, is_null("id"))) is AlwaysFalse()  # required: folded

    def test_truncate_integers_close_open_bounds(self):
        spec = spec_of((7, TruncateTransform(10), "t"))
        cases = [
            (less_than("small", 10), ("<=", "t", 0)),
            (less_than("small", 11), ("<=", "t", 10)),
            (less_than_or_equal("small", 10), ("<=", "t", 10)),
            (greater_than("small", 9), (">=", "t", 10)),
            (greater_than("small", 10), (">=", "t", 10)),
            (greater_than_or_equal("small", 10), (">=", "t", 10)),
            (equal("small", 15), ("==", "t", 10)),
            (is_in("small", [1, 15, 25]), ("in", "t", [0, 10, 20])),
            (is_in("small", [11, 15]), ("==", "t", 10)),
            (less_than("small", -1), ("<=", "t", -10)),
            (less_than("small", 0), ("<=", "t", -10)),
            (greater_than("small", -1), (">=", "t", 0)),
            (equal("small", -1), ("==", "t", -10)),
        ]
        for expr, expected in cases:
            assert shape(project(spec, expr)) == expected, expr
        assert project(spec, not_equal("small", 5)) is AlwaysTrue()
        assert project(spec, not_in("small", [5, 6])) is AlwaysTrue()

    def test_truncate_decimals_step_by_one_unscaled_unit(self):
        spec = spec_of((6, TruncateTransform(10), "t"))
        cases = [
            (less_than("amount", "10.60"), ("<=", "t", Decimal("10.50"))),
            (less_than("amount", "10.65"), ("<=", "t", Decimal("10.60"))),
            (greater_than("amount", "10.69"), (">=", "t", Decimal("10.70"))),
            (greater_than("amount", "10.65"), (">=", "t", Decimal("10.60"))),
            (equal("amount", "-0.01"), ("==", "t", Decimal("-0.10"))),
        ]
        for expr, expected in cases:
            got = shape(project(spec, expr))
            assert got == expected, expr
            assert got[2].as_tuple().exponent == -2

    def test_truncate_strings_just_close_bounds(self):
        spec = spec_of((3, TruncateTransform(3), "t"))
        cases = [
            (less_than("name", "abcd"), ("<=", "t", "abc")),
            (less_than("name", "ab"), ("<=", "t", "ab")),
            (less_than_or_equal("name", "abcd"), ("<=", "t", "abc")),
            (greater_than("name", "abcd"), (">=", "t", "abc")),
            (greater_than_or_equal("name", "abcd"), (">=", "t", "abc")),
            (equal("name", "ab\U0001f600d"), ("==", "t", "ab\U0001f600")),
            (is_in("name", ["abcd", "abce", "x"]), ("in", "t", ["abc", "x"])),
        ]
        for expr, expected in cases:
            assert shape(project(spec, expr)) == expected, expr
        assert project(spec, not_equal("name", "abc")) is AlwaysTrue()

    def test_day_of_timestamp(self):
        spec = spec_of((5, DayTransform(), "d"))
        day_2024 = 19723
        cases = [
            (less_than("ts", "2024-01-02"), ("<=", "d", day_2024)),
            (less_than("ts", "2024-01-02T00:00:00.000001"), ("<=", "d", day_2024 + 1)),
            (less_than_or_equal("ts", "2024-01-02"), ("<=", "d", day_2024 + 1)),
            (greater_than("ts", "2024-01-01T23:59:59.999999"), (">=", "d", day_2024 + 1)),
            (greater_than_or_equal("ts", "2024-01-01T12:00"), (">=", "d", day_2024)),
            (equal("ts", "2024-01-01T12:00"), ("==", "d", day_2024)),
        ]
        for expr, expected in cases:
            assert shape(project(spec, expr)) == expected, expr
        assert project(spec, equal("ts", 0)).field_type == DateType()

    def test_negative_timestamps_widen_for_pre_0_11_writers(self):
        spec = spec_of((5, DayTransform(), "d"))
        cases = [
            # day(-1us) = -1, widened to 0 because old writers put 1969-12-31 in day 0.
            (less_than("ts", 0), ("<=", "d", 0)),
            (less_than("ts", "1969-12-31T10:00:00"), ("<=", "d", 0)),
            (less_than("ts", "1969-12-30T10:00:00"), ("<=", "d", -1)),
            (less_than_or_equal("ts", -DAY - 1), ("<=", "d", -1)),
            (equal("ts", "1969-12-31T10:00:00"), ("in", "d", [-1, 0])),
            (is_in("ts", [-1, DAY]), ("in", "d", [-1, 0, 1])),
            (greater_than("ts", -DAY - 1), (">=", "d", -1)),
            (greater_than_or_equal("ts", -1), (">=", "d", -1)),
            (equal("ts", 0), ("==", "d", 0)),
        ]
        for expr, expected in cases:
            assert shape(project(spec, expr)) == expected, expr

    def test_hour_month_year_of_timestamps(self):
        spec = spec_of(
            (5, HourTransform(), "h"), (5, MonthTransform(), "m"), (5, YearTransform(), "y")
        )
        projected = shape(project(spec, greater_than_or_equal("ts", "2024-03-05T10:30:00")))
        hours = (1704067200 + (31 + 29 + 4) * 86400 + 10 * 3600) // 3600
        assert projected == (
            "and",
            ("and", (">=", "h", hours), (">=", "m", 54 * 12 + 2)),
            (">=", "y", 54),
        )
        assert shape(project(spec_of((5, HourTransform(), "h")), equal("ts", -1))) == (
            "in",
            "h",
            [-1, 0],
        )
        assert shape(project(spec_of((5, YearTransform(), "y")), less_than("ts", 0))) == (
            "<=",
            "y",
            0,
        )

    def test_date_sources(self):
        day_spec = spec_of((4, DayTransform(), "d"))
        # day(date) is the date itself, so no pre-0.11 widening.
        assert shape(project(day_spec, less_than("day", "1969-12-31"))) == ("<=", "d", -2)
        assert shape(project(day_spec, equal("day", -1))) == ("==", "d", -1)
        month_spec = spec_of((4, MonthTransform(), "m"))
        assert shape(project(month_spec, equal("day", "1969-12-15"))) == ("in", "m", [-1, 0])
        assert shape(project(month_spec, less_than("day", "2024-02-01"))) == ("<=", "m", 648)
        year_spec = spec_of((4, YearTransform(), "y"))
        assert shape(project(year_spec, greater_than("day", "2023-12-31"))) == (">=", "y", 54)
        assert shape(project(year_spec, is_in("day", ["1969-06-01", "2024-06-01"]))) == (
            "in",
            "y",
            [-1, 0, 54],
        )

    def test_void_projects_nothing(self):
        spec = spec_of((1, VoidTransform(), "v"))
        assert project(spec, equal("id", 1)) is AlwaysTrue()
        assert project(spec, is_null("score")) is AlwaysTrue()

    def test_unpartitioned_columns_and_or(self):
        spec = spec_of((1, IdentityTransform(), "i"))
        assert project(spec, equal("name", "x")) is AlwaysTrue()
        assert project(spec, Or(equal("id", 1), equal("name", "x"))) is AlwaysTrue()
        assert shape(project(spec, And(equal("id", 1), equal("name", "x")))) == ("==", "i", 1)
        assert project(PartitionSpec(), equal("id", 1)) is AlwaysTrue()

    def test_several_fields_on_one_source_are_anded(self):
        spec = spec_of((1, BucketTransform(16), "b"), (1, TruncateTransform(10), "t"))
        assert shape(project(spec, equal("id", 34))) == ("and", ("==", "b", 3), ("==", "t", 30))

    def test_not_is_pushed_down_first(self):
        spec = spec_of((7, TruncateTransform(10), "t"))
        assert shape(project(spec, Not(less_than("small", 15)))) == (">=", "t", 10)
        # Not(=) is !=, which truncate cannot project.
        assert project(spec, Not(equal("small", 15))) is AlwaysTrue()

    def test_constants_pass_through(self):
        spec = spec_of((1, IdentityTransform(), "i"))
        assert project(spec, AlwaysFalse()) is AlwaysFalse()
        assert project(spec, And(equal("id", 1), AlwaysFalse())) is AlwaysFalse()


PTYPE = StructType(
    NestedField(1000, "i", LongType()),
    NestedField(1001, "s", DoubleType()),
    NestedField(1002, "n", StringType()),
)


class TestPartitionEvaluator:
    def check(self, expr, partition):
        return PartitionEvaluator(PTYPE, expr).eval(partition)

    def test_comparisons(self):
        p = (5, 1.5, "m")
        assert self.check(equal("i", 5), p)
        assert not self.check(equal("i", 6), p)
        assert self.check(not_equal("i", 6), p)
        assert not self.check(not_equal("i", 5), p)
        assert self.check(less_than("i", 6), p)
        assert not self.check(less_than("i", 5), p)
        assert self.check(less_than_or_equal("i", 5), p)
        assert not self.check(less_than_or_equal("i", 4), p)
        assert self.check(greater_than("i", 4), p)
        assert not self.check(greater_than("i", 5), p)
        assert self.check(greater_than_or_equal("i", 5), p)
        assert not self.check(greater_than_or_equal("i", 6), p)
        assert self.check(is_in("n", ["a", "m"]), p)
        assert not self.check(is_in("n", ["a", "b"]), p)
        assert self.check(not_in("n", ["a", "b"]), p)
        assert not self.check(not_in("n", ["a", "m"]), p)
        assert self.check(And(equal("i", 5), less_than("s", 2)), p)
        assert not self.check(And(equal("i", 5), less_than("s", 1)), p)
        assert self.check(Or(equal("i", 4), less_than("s", 2)), p)

    def test_nulls(self):
        p = (None, None, None)
        assert self.check(is_null("i"), p)
        assert not self.check(not_null("i"), p)
        for expr in (
            equal("i", 1),
            less_than("i", 1),
            less_than_or_equal("i", 1),
            greater_than("i", 1),
            greater_than_or_equal("i", 1),
            is_in("i", [1, 2]),
            is_nan("s"),
        ):
            assert not self.check(expr, p), expr
        # The answers that can never lose a row, as Java's Evaluator gives them.
        for expr in (not_equal("i", 1), not_in("i", [1, 2]), not_nan("s")):
            assert self.check(expr, p), expr

    def test_nan(self):
        p = (1, math.nan, "x")
        assert self.check(is_nan("s"), p)
        assert not self.check(not_nan("s"), p)
        assert not self.check(less_than("s", 1), p)
        assert not self.check(greater_than("s", 1), p)
        assert not self.check(equal("s", 1), p)
        assert self.check(not_equal("s", 1), p)
        assert not self.check(is_nan("s"), (1, 1.0, "x"))
        assert self.check(not_nan("s"), (1, 1.0, "x"))

    def test_not_is_pushed_down(self):
        assert not PartitionEvaluator(PTYPE, Not(less_than("i", 6))).eval((5, 1.0, "x"))
        # SQL: not (null < 6) is unknown, so no match; never "not False".
        assert not PartitionEvaluator(PTYPE, Not(less_than("i", 6))).eval((None, 1.0, "x"))

    def test_accepts_a_bound_projection(self):
        spec = spec_of((1, TruncateTransform(10), "t"))
        ptype = spec.partition_type(SCHEMA)
        evaluator = PartitionEvaluator(ptype, project(spec, less_than("id", 20)))
        assert evaluator.eval((10,))
        assert not evaluator.eval((20,))
        wrong = StructType(NestedField(1000, "t", IntegerType()))
        with pytest.raises(ValidationError, match="does not have"):
            PartitionEvaluator(wrong, project(spec, less_than("id", 20)))

    def test_constants(self):
        assert PartitionEvaluator(PTYPE, AlwaysTrue()).eval((None, None, None))
        assert not PartitionEvaluator(PTYPE, AlwaysFalse()).eval((None, None, None))


def summary(t, values):
    present = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    contains_nan = False
    if isinstance(t, DoubleType | FloatType):
        contains_nan = any(v is not None and math.isnan(v) for v in values)
    return PartitionFieldSummary(
        contains_null=any(v is None for v in values),
        contains_nan=contains_nan,
        lower_bound=to_bytes(t, min(present)) if present else None,
        upper_bound=to_bytes(t, max(present)) if present else None,
    )


class Manifest:
    """The two attributes ManifestEvaluator reads, as a plain value (see ManifestFile)."""

    def __init__(self, *summaries, path="m.avro"):
        self.partitions = list(summaries) if summaries else None
        self.manifest_path = path


def manifest(ids, scores, names):
    return Manifest(
        summary(LongType(), ids), summary(DoubleType(), scores), summary(StringType(), names)
    )


class TestManifestEvaluator:
    def check(self, expr, m):
        return ManifestEvaluator(PTYPE, expr).eval(m)

    def test_bounds(self):
        m = manifest([30, 79], [1.0], ["a"])
        assert not self.check(less_than("i", 30), m)
        assert self.check(less_than("i", 31), m)
        assert not self.check(less_than_or_equal("i", 29), m)
        assert self.check(less_than_or_equal("i", 30), m)
        assert not self.check(greater_than("i", 79), m)
        assert self.check(greater_than("i", 78), m)
        assert not self.check(greater_than_or_equal("i", 80), m)
        assert self.check(greater_than_or_equal("i", 79), m)
        assert not self.check(equal("i", 29), m)
        assert not self.check(equal("i", 80), m)
        assert self.check(equal("i", 30), m)
        assert self.check(equal("i", 79), m)
        assert self.check(equal("i", 50), m)
        assert not self.check(is_in("i", [1, 29, 80, 100]), m)
        assert self.check(is_in("i", [1, 29, 79]), m)
        assert self.check(is_in("i", [1, 50, 100]), m)
        assert not self.check(is_in("i", range(80, 500)), m)  # beyond Java's 200 limit
        assert self.check(is_in("i", range(79, 500)), m)

    def test_nulls(self):
        all_null = manifest([None], [None], [None])
        assert self.check(is_null("i"), all_null)
        assert not self.check(not_null("i"), all_null)
        for expr in (less_than("i", 5), greater_than("i", 5), equal("i", 5), is_in("i", [1, 2])):
            assert not self.check(expr, all_null)
        assert self.check(not_equal("i", 5), all_null)
        assert self.check(not_in("i", [5, 6]), all_null)
        no_null = manifest([1, 2], [1.0], ["a"])
        assert not self.check(is_null("i"), no_null)
        assert self.check(not_null("i"), no_null)
        some_null = manifest([1, None], [1.0], ["a"])
        assert self.check(is_null("i"), some_null)
        assert self.check(not_null("i"), some_null)

    def test_float_nulls_and_nans(self):
        # All null, NaN known absent: nothing is not-null.
        assert not self.check(not_null("s"), manifest([1], [None], ["a"]))
        # All null or NaN, NaN presence unknown (v1 writers): might be NaN, so might be not-null.
        unknown = Manifest(
            summary(LongType(), [1]),
            PartitionFieldSummary(contains_null=True, contains_nan=None),
            summary(StringType(), ["a"]),
        )
        assert self.check(not_null("s"), unknown)
        assert self.check(is_nan("s"), unknown)
        only_nan = manifest([1], [math.nan], ["a"])
        assert self.check(is_nan("s"), only_nan)
        assert not self.check(not_nan("s"), only_nan)
        assert not self.check(less_than("s", 5), only_nan)
        assert not self.check(greater_than("s", 5), only_nan)
        assert self.check(not_null("s"), only_nan)
        no_nan = manifest([1], [1.0, 2.0], ["a"])
        assert not self.check(is_nan("s"), no_nan)
        assert self.check(not_nan("s"), no_nan)
        nan_and_null = manifest([1], [math.nan, None], ["a"])
        assert self.check(not_nan("s"), nan_and_null)  # Java keeps it; the null is not NaN
        assert not self.check(is_nan("s"), manifest([1], [None], ["a"]))

    def test_not_equal_prunes_only_a_single_known_value(self):
        assert not self.check(not_equal("i", 5), manifest([5], [1.0], ["a"]))
        assert self.check(not_equal("i", 5), manifest([5, 6], [1.0], ["a"]))
        assert self.check(not_equal("i", 5), manifest([5, None], [1.0], ["a"]))
        assert self.check(not_equal("i", 6), manifest([5], [1.0], ["a"]))
        assert not self.check(not_in("n", ["a", "b"]), manifest([5], [1.0], ["a"]))
        assert self.check(not_in("n", ["b", "c"]), manifest([5], [1.0], ["a"]))
        # Floats: NaN presence must be known absent, and zero is never taken as unique.
        assert not self.check(not_equal("s", 2.0), manifest([5], [2.0], ["a"]))
        assert self.check(not_equal("s", 2.0), manifest([5], [2.0, math.nan], ["a"]))
        two = to_bytes(DoubleType(), 2.0)
        unknown_nan = Manifest(
            summary(LongType(), [5]),
            PartitionFieldSummary(False, None, two, two),
            summary(StringType(), ["a"]),
        )
        assert self.check(not_equal("s", 2.0), unknown_nan)
        assert self.check(not_equal("s", 0.0), manifest([5], [0.0], ["a"]))

    def test_logic_and_not(self):
        m = manifest([30, 79], [1.0], ["a"])
        assert not self.check(And(less_than("i", 30), greater_than("i", 0)), m)
        assert self.check(Or(less_than("i", 30), greater_than("i", 70)), m)
        assert self.check(Not(less_than("i", 30)), m)
        assert not self.check(Not(greater_than_or_equal("i", 30)), m)

    def test_no_summaries_might_match(self):
        assert self.check(equal("i", 1), Manifest())

    def test_summary_count_must_match_the_spec(self):
        with pytest.raises(ValidationError, match=r"m\.avro: has 1 partition summaries"):
            self.check(equal("i", 1), Manifest(summary(LongType(), [1])))

    def test_legacy_nan_bounds_are_unknown(self):
        nan = to_bytes(DoubleType(), math.nan)
        m = Manifest(
            summary(LongType(), [1]),
            PartitionFieldSummary(False, None, nan, nan),
            summary(StringType(), ["a"]),
        )
        for expr in (less_than("s", 1), greater_than("s", 1), equal("s", 1)):
            assert self.check(expr, m)

    def test_for_row_filter(self):
        spec = spec_of((5, DayTransform(), "d"))
        days = summary(DateType(), [19723, 19725])
        evaluator = ManifestEvaluator.for_row_filter(spec, SCHEMA, less_than("ts", "2024-01-01"))
        assert not evaluator.eval(Manifest(days))
        evaluator = ManifestEvaluator.for_row_filter(
            spec, SCHEMA, less_than("ts", "2024-01-01T00:00:00.000001")
        )
        assert evaluator.eval(Manifest(days))


def data_file(record_count=10, **metrics):
    return DataFile(
        file_path="s3://b/t/data/f.parquet",
        file_format=FileFormat.PARQUET,
        partition=(),
        record_count=record_count,
        file_size_in_bytes=100,
        **metrics,
    )


def bounds(t_and_values):
    lower, upper = {}, {}
    for fid, (t, lo, hi) in t_and_values.items():
        if lo is not None:
            lower[fid] = to_bytes(t, lo)
        if hi is not None:
            upper[fid] = to_bytes(t, hi)
    return {"lower_bounds": lower, "upper_bounds": upper}


# id in [30, 79], no nulls; score has nulls and NaN; name truncated bounds; small all null.
FILE = data_file(
    record_count=50,
    value_counts={1: 50, 2: 50, 3: 50, 7: 50, 8: 50},
    null_value_counts={1: 0, 2: 10, 3: 0, 7: 50, 8: 0},
    nan_value_counts={2: 5, 8: 50},
    **bounds(
        {
            1: (LongType(), 30, 79),
            2: (DoubleType(), -1.5, 2.5),
            3: (StringType(), "abc", truncate_upper_bound(StringType(), "abcdefgh", 4)),
        }
    ),
)


class TestMetricsEvaluator:
    def check(self, expr, f=FILE):
        return MetricsEvaluator(SCHEMA, expr).eval(f)

    def test_bounds_edges(self):
        assert not self.check(less_than("id", 30))
        assert self.check(less_than("id", 31))
        assert not self.check(less_than_or_equal("id", 29))
        assert self.check(less_than_or_equal("id", 30))
        assert not self.check(greater_than("id", 79))
        assert self.check(greater_than("id", 78))
        assert not self.check(greater_than_or_equal("id", 80))
        assert self.check(greater_than_or_equal("id", 79))
        assert not self.check(equal("id", 29))
        assert not self.check(equal("id", 80))
        assert self.check(equal("id", 30))
        assert self.check(equal("id", 79))
        assert not self.check(is_in("id", [29, 80]))
        assert self.check(is_in("id", [29, 30]))
        assert not self.check(is_in("id", range(80, 1000)))
        assert self.check(not_equal("id", 30))
        assert self.check(not_in("id", [30, 31]))

    def test_empty_and_unknown_record_counts(self):
        assert not self.check(AlwaysTrue(), data_file(record_count=0))
        assert self.check(
            equal("id", 1), data_file(record_count=-1, **bounds({1: (LongType(), 5, 5)}))
        )

    def test_missing_stats_might_match(self):
        bare = data_file()
        for expr in (
            equal("id", 1),
            less_than("id", 1),
            greater_than("id", 1),
            is_in("id", [1, 2]),
            not_equal("id", 1),
            is_null("score"),
            not_null("score"),
            is_nan("score"),
            not_nan("score"),
        ):
            assert self.check(expr, bare), expr
        assert self.check(equal("id", 1), data_file(lower_bounds={}, upper_bounds=None))

    def test_one_sided_bounds(self):
        only_upper = data_file(**bounds({1: (LongType(), None, 10)}))
        assert self.check(less_than("id", 0), only_upper)
        assert not self.check(greater_than("id", 10), only_upper)
        assert not self.check(equal("id", 11), only_upper)
        assert not self.check(is_in("id", [11, 12]), only_upper)
        assert self.check(is_in("id", [-5, 12]), only_upper)
        only_lower = data_file(**bounds({1: (LongType(), 10, None)}))
        assert not self.check(less_than("id", 10), only_lower)
        assert self.check(greater_than("id", 100), only_lower)
        assert not self.check(is_in("id", [1, 9]), only_lower)

    def test_all_null_column(self):
        for expr in (
            less_than("small", 5),
            less_than_or_equal("small", 5),
            greater_than("small", 5),
            greater_than_or_equal("small", 5),
            equal("small", 5),
            is_in("small", [5, 6]),
            not_null("small"),
        ):
            assert not self.check(expr), expr
        assert self.check(is_null("small"))
        assert self.check(not_equal("small", 5))
        assert self.check(not_in("small", [5, 6]))

    def test_null_counts(self):
        assert not self.check(is_null("name"))
        assert self.check(not_null("name"))
        assert self.check(is_null("score"))
        assert self.check(not_null("score"))

    def test_nan_counts(self):
        assert self.check(is_nan("score"))
        assert self.check(not_nan("score"))
        assert not self.check(not_nan("ratio"))  # every value is NaN
        assert self.check(is_nan("ratio"))
        for expr in (less_than("ratio", 1), greater_than("ratio", 1), equal("ratio", 1)):
            assert not self.check(expr), expr
        assert self.check(not_equal("ratio", 1))
        no_nan = data_file(value_counts={2: 10}, null_value_counts={2: 0}, nan_value_counts={2: 0})
        assert not self.check(is_nan("score"), no_nan)
        all_null = data_file(value_counts={2: 10}, null_value_counts={2: 10})
        assert not self.check(is_nan("score"), all_null)

    def test_float_bounds_exclude_nan(self):
        # score has NaN values outside [-1.5, 2.5]; comparisons use the bounds alone.
        assert not self.check(greater_than("score", 2.5))
        assert not self.check(less_than("score", -1.5))
        assert self.check(equal("score", 0))
        legacy = data_file(**bounds({2: (DoubleType(), math.nan, math.nan)}))
        for expr in (less_than("score", 1), greater_than("score", 1), equal("score", 1)):
            assert self.check(expr, legacy), expr

    def test_truncated_string_bounds_stay_inclusive(self):
        # Upper bound is "abce" (from "abcdefgh" truncated to 4 and incremented).
        assert self.check(equal("name", "abcdefgh"))
        assert self.check(equal("name", "abcdzzzzzzzz"))
        assert self.check(less_than_or_equal("name", "abc"))
        assert not self.check(less_than("name", "abc"))
        assert not self.check(greater_than_or_equal("name", "abcf"))
        assert self.check(greater_than("name", "abcd\U0010ffff"))
        assert not self.check(greater_than("name", "abce"))
        assert not self.check(equal("name", "abb"))
        assert self.check(is_in("name", ["a", "abcdz"]))
        assert not self.check(is_in("name", ["a", "abcz"]))

    def test_not_equal_with_a_single_value(self):
        single = data_file(
            value_counts={1: 10, 2: 10},
            null_value_counts={1: 0, 2: 0},
            nan_value_counts={2: 0},
            **bounds({1: (LongType(), 7, 7), 2: (DoubleType(), 0.0, 0.0)}),
        )
        assert not self.check(not_equal("id", 7), single)
        assert not self.check(not_in("id", [7, 8]), single)
        assert self.check(not_equal("id", 8), single)
        assert self.check(not_equal("score", 0.0), single)  # zero may hide -0.0 (Parquet)
        unknown_nulls = data_file(**bounds({1: (LongType(), 7, 7)}))
        assert self.check(not_equal("id", 7), unknown_nulls)
        float_single = data_file(
            value_counts={2: 10},
            null_value_counts={2: 0},
            **bounds({2: (DoubleType(), 1.0, 1.0)}),
        )
        assert self.check(not_equal("score", 1.0), float_single)  # NaN count unknown

    def test_promoted_int_bounds(self):
        promoted = data_file(**bounds({1: (IntegerType(), 30, 79)}))
        assert not self.check(less_than("id", 30), promoted)
        assert self.check(equal("id", 79), promoted)

    def test_logic(self):
        assert not self.check(And(greater_than("id", 50), less_than("id", 30)))
        assert self.check(Or(greater_than("id", 50), less_than("id", 30)))
        assert not self.check(Or(greater_than("id", 79), is_null("name")))
        assert not self.check(Not(greater_than_or_equal("id", 30)))
        assert self.check(Not(equal("id", 30)))
        assert self.check(AlwaysTrue())
        assert not self.check(AlwaysFalse())

    def test_corrupt_bound_names_the_file(self):
        corrupt = data_file(lower_bounds={1: b"\x01\x02\x03"})
        with pytest.raises(ValidationError, match=r"s3://b/t/data/f\.parquet: bound of field 1"):
            self.check(less_than("id", 5), corrupt)

    def test_binds_once(self):
        evaluator = MetricsEvaluator(SCHEMA, Or(equal("id", 30), is_nan("score")))
        assert isinstance(evaluator.expr, Or)
        assert evaluator.expr.left.op is Operation.EQ
        with pytest.raises(ValidationError, match="cannot find column"):
            MetricsEvaluator(SCHEMA, equal("nope", 1))


# ---------------------------------------------------------------------------------------
# Soundness against real data: no evaluator may answer "cannot match" for a file or a
# partition that holds a matching row. Rows are written to real Parquet files; metrics come
# from their footers, as a writer would compute them.

ARROW_TYPES = {
    1: pa.int64(),
    2: pa.float64(),
    3: pa.string(),
    4: pa.date32(),
    5: pa.timestamp("us"),
    6: pa.decimal128(10, 2),
    7: pa.int32(),
    8: pa.float32(),
}
ALPHABET = ["a", "b", "z", "é", "\U0001f600", "\U0010ffff"]


def random_row(rng: random.Random, center: int) -> dict[int, object]:
    def maybe(value, null_rate=0.1):
        return None if rng.random() < null_rate else value

    score = rng.choice([rng.uniform(-3, 3), 0.0, -0.0, math.nan, math.inf])
    return {
        1: center + rng.randint(-20, 20),
        2: maybe(score),
        3: maybe("".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 24)))),
        4: maybe(center // 3 + rng.randint(-40, 40)),
        5: maybe(center * HOUR + rng.randint(-3 * DAY, 3 * DAY)),
        6: maybe(Decimal(rng.randint(-5000, 5000)).scaleb(-2)),
        7: maybe(rng.randint(-50, 50), null_rate=0.5),
        8: maybe(float(rng.choice([1.1, -2.5, math.nan, 0.0]))),
    }


def write_parquet(path, rows):
    arrays = {}
    for fid, arrow_type in ARROW_TYPES.items():
        arrays[str(fid)] = pa.array([r[fid] for r in rows], type=arrow_type)
    pq.write_table(pa.table(arrays), path)


def read_rows(path):
    table = pq.read_table(path)
    columns = {}
    for fid in ARROW_TYPES:
        column = table.column(str(fid))
        if fid in (4, 5):
            column = column.cast(pa.int32() if fid == 4 else pa.int64())
        columns[fid] = column.to_pylist()
    return [{fid: columns[fid][i] for fid in columns} for i in range(table.num_rows)]


def metrics_from_footer(path, rows):
    meta = pq.ParquetFile(path).metadata.row_group(0)
    metrics = {
        "value_counts": {},
        "null_value_counts": {},
        "nan_value_counts": {},
        "lower_bounds": {},
        "upper_bounds": {},
    }
    for index, fid in enumerate(ARROW_TYPES):
        t = SCHEMA.find_type(fid)
        stats = meta.column(index).statistics
        metrics["value_counts"][fid] = meta.column(index).num_values
        metrics["null_value_counts"][fid] = stats.null_count
        if isinstance(t, DoubleType | FloatType):
            nans = sum(1 for r in rows if r[fid] is not None and math.isnan(r[fid]))
            metrics["nan_value_counts"][fid] = nans
        if stats.has_min_max:
            lower = truncate_lower_bound(t, to_literal(t, stats.min), 16)
            upper = truncate_upper_bound(t, to_literal(t, stats.max), 16)
            metrics["lower_bounds"][fid] = to_bytes(t, lower)
            if upper is not None:
                metrics["upper_bounds"][fid] = to_bytes(t, upper)
    return metrics


def matches(expr, row) -> bool:
    """SQL semantics on a bound expression without Not: null satisfies no comparison."""
    if expr is AlwaysTrue():
        return True
    if expr is AlwaysFalse():
        return False
    if isinstance(expr, And):
        return matches(expr.left, row) and matches(expr.right, row)
    if isinstance(expr, Or):
        return matches(expr.left, row) or matches(expr.right, row)
    value, op, lit = row[expr.field_id], expr.op, expr.literal
    if op is Operation.IS_NULL:
        return value is None
    if op is Operation.NOT_NULL:
        return value is not None
    if value is None:
        return False
    return {
        Operation.IS_NAN: lambda: math.isnan(value),
        Operation.NOT_NAN: lambda: not math.isnan(value),
        Operation.LT: lambda: value < lit,
        Operation.LT_EQ: lambda: value <= lit,
        Operation.GT: lambda: value > lit,
        Operation.GT_EQ: lambda: value >= lit,
        Operation.EQ: lambda: value == lit,
        Operation.NOT_EQ: lambda: value != lit,
        Operation.IN: lambda: value in expr.literals,
        Operation.NOT_IN: lambda: value not in expr.literals,
    }[op]()


def random_literal(rng, fid, rows):
    t = SCHEMA.find_type(fid)
    seen = [r[fid] for r in rows if r[fid] is not None]
    seen = [v for v in seen if not (isinstance(v, float) and math.isnan(v))] or [0]
    base = rng.choice(seen)
    if isinstance(t, StringType):
        return rng.choice([base, base[: rng.randint(0, 20)], base + "a", "b", "\U0010ffff"])
    if isinstance(t, DecimalType):
        return base + rng.choice([Decimal("-0.01"), 0, Decimal("0.01"), Decimal(10)])
    if isinstance(t, FloatType):
        return rng.choice([base, 1.1, -2.5, 0.0])
    if isinstance(t, DoubleType):
        return rng.choice([base, base + 0.5, -0.0, 0.0, math.inf, -math.inf])
    step = {5: rng.choice([1, HOUR, DAY]), 4: 1}.get(fid, 1)
    return base + step * rng.choice([-1, 0, 1])


OPS = [
    less_than,
    less_than_or_equal,
    greater_than,
    greater_than_or_equal,
    equal,
    not_equal,
]


def random_expr(rng, rows, depth=0):
    roll = rng.random()
    if depth < 2 and roll < 0.3:
        combine = rng.choice([And, Or])
        return combine(random_expr(rng, rows, depth + 1), random_expr(rng, rows, depth + 1))
    if depth < 2 and roll < 0.4:
        return Not(random_expr(rng, rows, depth + 1))
    fid = rng.choice(list(ARROW_TYPES))
    name = SCHEMA.column_name(fid)
    kind = rng.random()
    if kind < 0.1:
        return rng.choice([is_null, not_null])(name)
    if kind < 0.2 and fid in (2, 8):
        return rng.choice([is_nan, not_nan])(name)
    if kind < 0.35:
        values = [random_literal(rng, fid, rows) for _ in range(rng.randint(1, 4))]
        return rng.choice([is_in, not_in])(name, values)
    return rng.choice(OPS)(name, random_literal(rng, fid, rows))


def test_metrics_evaluator_never_drops_a_matching_file(tmp_path):
    rng = random.Random(20240101)
    files = []
    for k in range(12):
        rows = [random_row(rng, center=k * 37 - 200) for _ in range(rng.randint(1, 30))]
        path = tmp_path / f"f{k}.parquet"
        write_parquet(path, rows)
        rows = read_rows(path)
        files.append((data_file(record_count=len(rows), **metrics_from_footer(path, rows)), rows))
    pruned = 0
    for _ in range(600):
        expr = random_expr(rng, files[rng.randrange(len(files))][1])
        bound = rewrite_not(bind(expr, SCHEMA))
        evaluator = MetricsEvaluator(SCHEMA, expr)
        for f, rows in files:
            if evaluator.eval(f):
                continue
            pruned += 1
            assert not any(matches(bound, r) for r in rows), (expr, f)
    assert pruned > 1000  # the check above must have had real work to do


PARTITIONING = spec_of(
    (1, IdentityTransform(), "id"),
    (1, BucketTransform(8), "id_bucket"),
    (1, TruncateTransform(10), "id_trunc"),
    (3, TruncateTransform(2), "name_trunc"),
    (3, IdentityTransform(), "name"),
    (6, TruncateTransform(50), "amount_trunc"),
    (5, DayTransform(), "ts_day"),
    (5, HourTransform(), "ts_hour"),
    (5, MonthTransform(), "ts_month"),
    (4, YearTransform(), "day_year"),
    (4, MonthTransform(), "day_month"),
    (4, DayTransform(), "day_day"),
    (2, IdentityTransform(), "score"),
    (7, VoidTransform(), "void"),
)


def test_projection_and_partition_evaluators_never_drop_a_matching_partition():
    rng = random.Random(7)
    ptype = PARTITIONING.partition_type(SCHEMA)
    rows = [random_row(rng, center=rng.randint(-100, 100)) for _ in range(400)]
    for r in rows:
        r[3] = r[3][:3] if r[3] else r[3]  # few distinct names, so identity partitions repeat
    tuples = [
        tuple(
            pf.transform.apply(r[pf.source_id], SCHEMA.find_type(pf.source_id))
            for pf in PARTITIONING.fields
        )
        for r in rows
    ]
    # Manifests: rows grouped by a coarse key, as appends of related data would be.
    groups: dict[int, list[int]] = {}
    for i, r in enumerate(rows):
        groups.setdefault(r[1] // 40, []).append(i)
    manifests = [
        (
            Manifest(
                *(
                    summary(f.field_type, [tuples[i][pos] for i in members])
                    for pos, f in enumerate(ptype.fields)
                )
            ),
            members,
        )
        for members in groups.values()
    ]
    pruned_partitions = pruned_manifests = 0
    for _ in range(500):
        expr = random_expr(rng, rows)
        bound = rewrite_not(bind(expr, SCHEMA))
        projected = inclusive_projection(PARTITIONING, SCHEMA, expr)
        partition_eval = PartitionEvaluator(ptype, projected)
        manifest_eval = ManifestEvaluator(ptype, projected)
        hits = {i for i, r in enumerate(rows) if matches(bound, r)}
        for i, p in enumerate(tuples):
            if not partition_eval.eval(p):
                pruned_partitions += 1
                assert i not in hits, (expr, projected, rows[i], p)
        for m, members in manifests:
            if not manifest_eval.eval(m):
                pruned_manifests += 1
                assert not hits.intersection(members), (expr, projected)
    assert pruned_partitions > 10000
    assert pruned_manifests > 200


def test_dates_before_the_epoch_in_real_rows():
    # A few hand-picked rows across the epoch, through every time transform.
    spec = spec_of((5, DayTransform(), "d"), (5, HourTransform(), "h"), (5, YearTransform(), "y"))
    ptype = spec.partition_type(SCHEMA)
    stamps = [-DAY - 1, -DAY, -1, 0, 1, DAY - 1, DAY]
    for literal in stamps:
        for make in OPS[:5]:
            expr = make("ts", literal)
            bound = bind(expr, SCHEMA)
            evaluator = PartitionEvaluator(ptype, inclusive_projection(spec, SCHEMA, expr))
            for ts in stamps:
                row = {fid: None for fid in ARROW_TYPES} | {1: 0, 5: ts}
                if matches(bound, row):
                    p = tuple(pf.transform.apply(ts, TimestampType()) for pf in spec.fields)
                    assert evaluator.eval(p), (expr, ts, p)


def test_literal_dates_accept_python_dates():
    evaluator = MetricsEvaluator(SCHEMA, equal("day", dt.date(2024, 1, 1)))
    assert evaluator.eval(data_file(**bounds({4: (DateType(), 19723, 19723)})))
    assert not evaluator.eval(data_file(**bounds({4: (DateType(), 19724, 19730)})))
