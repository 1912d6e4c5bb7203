"""Partition values computed by Spark must be icecore's, bit for bit.

A value one bucket or one day off puts a row where filtered reads never look, so every
transform the writer computes in Spark (SQL expressions, bucket hashing in pandas UDFs) is
compared with icecore's scalar transforms on edge values: the epoch and the microsecond before it,
pre-1970 and far-future timestamps, negative numbers, empty and multi-byte strings, nulls.
Then the partition directories Spark writes must parse back to the same tuples.
"""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from icecore.data.partition_texts import partition_values
from icecore.spec.partitioning import UNPARTITIONED, PartitionSpecUpdate
from icecore.spec.schema import Schema
from icecore.spec.transforms import parse_transform
from icecore.spec.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
)
from spark_jobs.schema import conform, quoted
from spark_jobs.writing.layout import PartitionLayout
from spark_jobs.writing.transforms import transform_column

UTC = dt.UTC
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = dt.timedelta(microseconds=1)

SCHEMA = Schema(
    (
        NestedField(1, "i", IntegerType()),
        NestedField(2, "l", LongType()),
        NestedField(3, "d", DateType()),
        NestedField(4, "ts", TimestamptzType()),
        NestedField(5, "ntz", TimestampType()),
        NestedField(6, "s", StringType()),
        NestedField(7, "b", BinaryType()),
        NestedField(8, "dec", DecimalType(9, 2)),
        NestedField(9, "big", DecimalType(38, 10)),
        NestedField(10, "flag", BooleanType()),
        NestedField(11, "x", DoubleType()),
    )
)

TIMESTAMPS = [
    EPOCH,
    EPOCH - MICROSECOND,
    EPOCH + MICROSECOND,
    dt.datetime(1969, 12, 31, 23, 0, tzinfo=UTC),
    dt.datetime(1900, 2, 28, 12, 30, 15, 123456, tzinfo=UTC),
    dt.datetime(1582, 10, 4, 1, tzinfo=UTC),
    dt.datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=UTC),
    dt.datetime(2400, 12, 31, 5, tzinfo=UTC),
    dt.datetime(9999, 12, 30, 23, 59, 59, 999999, tzinfo=UTC),
    dt.datetime(1, 1, 2, 1, tzinfo=UTC),
]
STRINGS = ["", "a", "abcd", "abcde", "iceberg", "é漢字🙂x", "\x01x", "__HIVE_DEFAULT_PARTITION__"]
DECIMALS = [Decimal("0.00"), Decimal("-0.01"), Decimal("10.65"), Decimal("-1234567.89")]


def _rows(count: int) -> list[tuple]:
    rnd = random.Random(42)
    rows = []
    for n in range(count):
        ts = TIMESTAMPS[n % len(TIMESTAMPS)] + dt.timedelta(
            seconds=rnd.randint(-10, 10) * (n // 10)
        )
        ints = [0, -1, 1, 2**31 - 1, -(2**31) + 10, rnd.randint(-1000, 1000)]
        longs = [0, -1, 2**63 - 1, -(2**63) + 100, rnd.randint(-(2**40), 2**40)]
        text = STRINGS[n % len(STRINGS)] + ("" if n < len(STRINGS) else str(rnd.random()))
        rows.append(
            (
                ints[n % len(ints)],
                longs[n % len(longs)],
                (ts.date() if n % 7 else None),
                ts,
                ts.replace(tzinfo=None),
                text if n % 11 else None,
                text.encode("utf-8"),
                DECIMALS[n % len(DECIMALS)],
                Decimal(rnd.randint(-(10**20), 10**20)) / Decimal(10**10),
                n % 3 == 0,
                [0.0, -0.0, 1.5, float("nan"), -2.25][n % 5],
            )
        )
    return rows


def _icecore_value(t: object, value: object) -> object:
    """A Python value from Spark as icecore's in-memory value."""
    if value is None:
        return None
    if isinstance(t, DateType):
        return (value - dt.date(1970, 1, 1)).days
    if isinstance(t, TimestamptzType):
        # Spark hands timestamps back as naive datetimes in the local zone.
        aware = value if value.tzinfo else value.astimezone(UTC)
        return (aware - EPOCH) // MICROSECOND
    if isinstance(t, TimestampType):
        return (value - EPOCH.replace(tzinfo=None)) // MICROSECOND
    return bytes(value) if isinstance(value, bytearray) else value


CASES = [
    ("l", "bucket[16]"),
    ("i", "bucket[7]"),
    ("d", "bucket[5]"),
    ("ts", "bucket[11]"),
    ("ntz", "bucket[11]"),
    ("s", "bucket[1000]"),
    ("b", "bucket[3]"),
    ("dec", "bucket[9]"),
    ("big", "bucket[9]"),
    ("i", "truncate[10]"),
    ("l", "truncate[7]"),
    ("s", "truncate[2]"),
    ("b", "truncate[3]"),
    ("dec", "truncate[50]"),
    ("d", "year"),
    ("d", "month"),
    ("d", "day"),
    ("ts", "year"),
    ("ts", "month"),
    ("ts", "day"),
    ("ts", "hour"),
    ("ntz", "year"),
    ("ntz", "month"),
    ("ntz", "day"),
    ("ntz", "hour"),
]


def _frame(spark: SparkSession, count: int) -> DataFrame:
    source = spark.createDataFrame(
        _rows(count),
        "i int, l long, d date, ts timestamp, ntz timestamp_ntz, s string, b binary, "
        "dec decimal(9,2), big decimal(38,10), flag boolean, x double",
    )
    return source.select(*conform(source.schema, SCHEMA.fields))


@pytest.fixture(scope="module")
def frame(spark: SparkSession) -> DataFrame:
    return _frame(spark, 300)


def test_spark_transforms_equal_icecore(frame: DataFrame) -> None:
    columns = []
    for n, (name, transform) in enumerate(CASES):
        source = SCHEMA.find_field(name)
        column = transform_column(parse_transform(transform), quoted(name), source.field_type)
        columns.append(column.alias(f"c{n}"))
    rows = frame.select(*(F.col(f.name) for f in SCHEMA.fields), *columns).collect()
    checked = 0
    for row in rows:
        for n, (name, transform) in enumerate(CASES):
            t = SCHEMA.find_type(name)
            expected = parse_transform(transform).apply(_icecore_value(t, row[name]), t)
            got = row[f"c{n}"]
            if transform == "day" and got is not None:
                got = (got - dt.date(1970, 1, 1)).days  # Spark gives the day as a DATE
            if isinstance(got, bytearray):
                got = bytes(got)
            assert got == expected, (name, transform, row[name])
            checked += 1
    assert checked == len(rows) * len(CASES)


def test_partition_columns_parse_back_to_icecore_tuples(spark: SparkSession) -> None:
    """Every partition value type, cast to a string by Spark (as the writing tasks get the
    partition columns) and read back."""
    update = PartitionSpecUpdate(UNPARTITIONED, SCHEMA, 2)
    for name, transform in [
        ("s", "identity"),
        ("b", "truncate[2]"),
        ("ts", "day"),
        ("ntz", "identity"),
        ("dec", "identity"),
        ("flag", "identity"),
        ("x", "identity"),
        ("l", "bucket[4]"),
        ("d", "month"),
    ]:
        update.add_field(name, transform)
    spec = update.apply(0)
    layout = PartitionLayout(spec, SCHEMA)
    sample = _frame(spark, 40)
    rendered = layout.with_partition_columns(sample).select(
        *(F.col(n).cast("string") for n in layout.names)
    )
    expected = {}
    for row in sample.collect():
        key = []
        for f in spec.fields:
            t = SCHEMA.find_type(f.source_id)
            value = _icecore_value(t, row[SCHEMA.column_name(f.source_id)])
            key.append(f.transform.apply(value, t))
        expected[tuple(str(v) for v in key)] = tuple(key)
    found = {partition_values(spec, SCHEMA, list(row)) for row in rendered.collect()}
    # NaN never equals itself: compare through str.
    assert {tuple(str(v) for v in t) for t in found} == set(expected)
