"""The ingestion job's parsing: partition and sort clauses, options, metrics modes.

No Spark session is needed here; these are the job's pure-Python parts.
"""

from __future__ import annotations

import pytest

from icecore.spec.schema import Schema
from icecore.spec.sorting import NullOrder, SortDirection
from icecore.spec.types import LongType, NestedField, StringType, StructType, TimestamptzType
from spark_jobs.common.errors import JobError
from spark_jobs.ingestion.options import IngestOptions, build_parser, options_from_args
from spark_jobs.ingestion.table_setup import partition_spec, sort_order, split_terms
from spark_jobs.writing.metrics import MetricsConfig

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
    spec = partition_spec(
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
    assert [f.name for f in partition_spec("hours(ts)", SCHEMA).fields] == ["ts_hour"]
    with pytest.raises(JobError, match="redundant partition field hour"):
        partition_spec("day(ts), hour(ts)", SCHEMA)


def test_bad_partition_and_sort_clauses_are_clear() -> None:
    with pytest.raises(JobError, match="cannot parse 'nonsense\\(1, 2, 3\\)'"):
        partition_spec("nonsense(1, 2, 3)", SCHEMA)
    with pytest.raises(JobError, match="bucket\\(x, id\\)"):
        partition_spec("bucket(x, id)", SCHEMA)
    with pytest.raises(JobError, match="missing"):
        partition_spec("day(missing)", SCHEMA)
    with pytest.raises(JobError, match="expected \\[asc\\|desc\\]"):
        sort_order("id sideways", SCHEMA)


def test_sort_by_directions_and_null_orders() -> None:
    order = sort_order("ts, id desc, bucket(4, name) asc nulls last, x desc nulls first", SCHEMA)
    assert [(f.source_id, str(f.transform), f.direction, f.null_order) for f in order.fields] == [
        (2, "identity", SortDirection.ASC, NullOrder.NULLS_FIRST),
        (1, "identity", SortDirection.DESC, NullOrder.NULLS_LAST),
        (3, "bucket[4]", SortDirection.ASC, NullOrder.NULLS_LAST),
        (4, "identity", SortDirection.DESC, NullOrder.NULLS_FIRST),
    ]
    assert split_terms(" a , f(b, c),, d ") == ["a", "f(b, c)", "d"]


def test_command_line_options() -> None:
    args = build_parser().parse_args(
        [
            "--warehouse", "/wh", "--table", "db.t", "--source", "/in",
            "--mode", "cdc", "--key", "id, region", "--property", "a=b=c",
            "--source-option", "delimiter=;", "--batch-id", "42",
        ]
    )  # fmt: skip
    options = options_from_args(args)
    assert (options.key, options.properties, options.source_options) == (
        ["id", "region"],
        {"a": "b=c"},
        {"delimiter": ";"},
    )
    assert (options.mode, options.op_column, options.batch_id) == ("cdc", "op", "42")
    with pytest.raises(JobError, match="--mode must be one of"):
        IngestOptions(table="db.t", mode="merge")
    with pytest.raises(JobError, match="--property takes key=value"):
        options_from_args(build_parser().parse_args(
            ["--table", "db.t", "--source", "/in", "--property", "novalue"]
        ))  # fmt: skip


def test_metrics_modes_follow_table_properties() -> None:
    config = MetricsConfig.for_table(
        {
            "write.metadata.metrics.column.name": "full",
            "write.metadata.metrics.column.s.inner": "counts",
            "write.metadata.metrics.column.gone": "none",
        },
        SCHEMA,
    )
    assert [config.mode(i) for i in (1, 3, 6)] == ["truncate(16)", "full", "counts"]
    limited = MetricsConfig.for_table(
        {"write.metadata.metrics.max-inferred-column-defaults": "2"}, SCHEMA
    )
    assert [limited.mode(i) for i in (1, 2, 3, 4, 6)] == [
        "truncate(16)",
        "truncate(16)",
        "none",
        "none",
        "none",
    ]
    explicit = MetricsConfig.for_table(
        {
            "write.metadata.metrics.default": "counts",
            "write.metadata.metrics.max-inferred-column-defaults": "1",
        },
        SCHEMA,
    )
    assert explicit.mode(4) == "counts"  # an explicit default applies to every column
    with pytest.raises(JobError, match="none, counts, full or truncate"):
        MetricsConfig.for_table({"write.metadata.metrics.default": "some"}, SCHEMA)
