"""Partition specs and sort orders as people write them (Iceberg's Spark DDL terms)."""

from __future__ import annotations

import pytest

from icecore.errors import ValidationError
from icecore.spec.schema import Schema
from icecore.spec.sorting import NullOrder, SortDirection
from icecore.spec.terms import (
    parse_partition_spec,
    parse_partition_terms,
    parse_sort_order,
    parse_sort_terms,
    split_terms,
)
from icecore.spec.types import LongType, NestedField, StringType, StructType, TimestamptzType

SCHEMA = Schema(
    (
        NestedField(1, "id", LongType()),
        NestedField(2, "ts", TimestamptzType()),
        NestedField(3, "name", StringType()),
        NestedField(4, "x", StringType()),
        NestedField(5, "s", StructType(NestedField(6, "inner", LongType()))),
    )
)


def test_partition_by_takes_iceberg_spark_and_trino_forms() -> None:
    spec = parse_partition_spec(
        "day(ts), bucket(16, id), truncate(name, 4), identity(x), s.inner", SCHEMA
    )
    assert [(f.name, str(f.transform), f.source_id) for f in spec.fields] == [
        ("ts_day", "day", 2),
        ("id_bucket_16", "bucket[16]", 1),
        ("name_trunc_4", "truncate[4]", 3),
        ("x", "identity", 4),
        ("s.inner", "identity", 6),
    ]


def test_plural_time_transforms_and_redundancy() -> None:
    assert [f.name for f in parse_partition_spec("hours(ts)", SCHEMA).fields] == ["ts_hour"]
    with pytest.raises(ValidationError, match="redundant partition field hour"):
        parse_partition_spec("day(ts), hour(ts)", SCHEMA)


def test_bad_partition_and_sort_clauses_are_clear() -> None:
    with pytest.raises(
        ValidationError, match="cannot read 'nonsense\\(1, 2, 3\\)': expected year, month"
    ):
        parse_partition_spec("nonsense(1, 2, 3)", SCHEMA)
    with pytest.raises(ValidationError, match="bucket\\(x, id\\)"):
        parse_partition_spec("bucket(x, id)", SCHEMA)
    with pytest.raises(ValidationError, match="missing"):
        parse_partition_spec("day(missing)", SCHEMA)
    with pytest.raises(ValidationError, match="expected \\[asc\\|desc\\]"):
        parse_sort_order("id sideways", SCHEMA)


def test_sort_by_directions_and_null_orders() -> None:
    order = parse_sort_order(
        "ts, id desc, bucket(4, name) asc nulls last, x desc nulls first", SCHEMA
    )
    assert [(f.source_id, str(f.transform), f.direction, f.null_order) for f in order.fields] == [
        (2, "identity", SortDirection.ASC, NullOrder.NULLS_FIRST),
        (1, "identity", SortDirection.DESC, NullOrder.NULLS_LAST),
        (3, "bucket[4]", SortDirection.ASC, NullOrder.NULLS_LAST),
        (4, "identity", SortDirection.DESC, NullOrder.NULLS_FIRST),
    ]
    assert split_terms(" a , f(b, c),, d ") == ["a", "f(b, c)", "d"]


def test_the_syntax_alone_is_checked_without_a_schema() -> None:
    assert [c for c, _ in parse_partition_terms("day(ts), bucket(16, id)")] == ["ts", "id"]
    assert [t.direction for t in parse_sort_terms("ts desc, id")] == [
        SortDirection.DESC,
        SortDirection.ASC,
    ]
    with pytest.raises(ValidationError, match=r"sort term 'ts sideways': expected \[asc\|desc\]"):
        parse_sort_terms("ts sideways")
    with pytest.raises(ValidationError, match="partition term 'day\\(ts\\) desc'"):
        parse_partition_terms("day(ts) desc")
