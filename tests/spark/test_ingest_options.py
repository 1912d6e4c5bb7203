"""The ingestion job's parsing: options and metrics modes.

No Spark session is needed here; these are the job's pure-Python parts.
"""

from __future__ import annotations

import pytest

from icecore.data.metrics import MetricsConfig
from icecore.errors import ValidationError
from icecore.jobs import JOBS, OptionError
from icecore.jobs.argv import parse_job_args
from icecore.jobs.jobs import IngestOptions
from icecore.spec.schema import Schema
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


def test_command_line_options() -> None:
    options = parse_job_args(
        JOBS["ingest"],
        [
            "--warehouse", "/wh", "--table", "db.t", "--source", "/in",
            "--mode", "cdc", "--key", "id, region", "--property", "a=b=c",
            "--source-option", "delimiter=;", "--batch-id", "42",
        ],
    ).options  # fmt: skip
    assert isinstance(options, IngestOptions)
    assert (options.key, options.properties, options.source_options) == (
        ["id", "region"],
        {"a": "b=c"},
        {"delimiter": ";"},
    )
    assert (options.mode, options.op_column, options.batch_id) == ("cdc", "op", "42")
    with pytest.raises(OptionError, match="--mode: expected one of append"):
        IngestOptions(table="db.t", mode="merge")
    with pytest.raises(OptionError, match="--property: expected key=value, got 'novalue'"):
        parse_job_args(
            JOBS["ingest"], ["--table", "db.t", "--source", "/in", "--property", "novalue"]
        )


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
    with pytest.raises(ValidationError, match="none, counts, full or truncate"):
        MetricsConfig.for_table({"write.metadata.metrics.default": "some"}, SCHEMA)
