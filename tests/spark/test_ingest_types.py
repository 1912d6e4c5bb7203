"""Every type Spark can write, and a nested struct, read back identically by other engines.

A Parquet source holding every primitive type Spark's writer supports (with nulls, empty and
multi-byte strings, pre-1970 dates, NaN) is ingested into a new partitioned table; PyIceberg
and DuckDB must return the source's values, and the data files must be what Iceberg readers
expect: field ids on every column, timestamps as INT64 micros, footer metrics in manifests.
A table made elsewhere with uuid, fixed, time, list and map columns takes rows from a Spark
DataFrame (uuids and times as text): the job writes those files with pyarrow
(test_ingest_nested_types.py covers these types in depth).
"""

from __future__ import annotations

import datetime as dt
import math
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest
from pyiceberg.table import StaticTable
from pyspark.sql import SparkSession

from icecore.catalog import SqlCatalog
from icecore.io import FileIO
from icecore.jobs.jobs import IngestOptions
from icecore.scan import snapshot_manifests
from icecore.spec.conversions import from_bytes
from icecore.spec.manifest import read_manifest
from icecore.spec.metadata import read_table_metadata
from icecore.spec.schema import Schema
from icecore.spec.types import (
    DoubleType,
    FixedType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    TimeType,
    UUIDType,
)
from spark_jobs.ingest import run as ingest
from tests.support.duckdb import duck_connection  # noqa: F401 - provides the `duck` fixture

UTC = dt.UTC
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = dt.timedelta(microseconds=1)
SOURCE_SCHEMA = (
    "flag boolean, i int, l long, f float, d double, dec decimal(9,2), big decimal(38,10), "
    "day date, ts timestamp, ntz timestamp_ntz, s string, b binary, "
    "nested struct<x: int, y: string, inner: struct<z: double>>"
)
LONG_TEXT = "ünïcødé-text-longer-than-sixteen-characters"
ROWS = [
    (True, 1, 2**40, 1.5, 2.25, Decimal("12.34"), Decimal("-1.0000000001"),
     dt.date(2024, 2, 29), dt.datetime(2024, 2, 29, 12, 0, 0, 123456, tzinfo=UTC),
     dt.datetime(2024, 2, 29, 12, 0, 0, 654321), LONG_TEXT, b"\x00\xff",
     (1, "x", (0.5,))),
    (False, -7, -(2**62), -0.0, float("nan"), Decimal("-0.01"), Decimal("123456789.0123456789"),
     dt.date(1969, 12, 31), dt.datetime(1950, 6, 1, tzinfo=UTC), dt.datetime(1900, 1, 1, 0, 0, 1),
     "", b"", (None, None, None)),
    (None, None, None, None, None, None, None, None, None, None, None, None, None),
    (True, 2**31 - 1, -1, float("inf"), -1e300, Decimal("9999999.99"), Decimal(0),
     dt.date(1, 1, 1), dt.datetime(2262, 4, 11, 23, 47, 16, tzinfo=UTC),
     dt.datetime(9999, 12, 31, 23, 59, 59), "漢字🙂", b"binary\x01", (3, "", (float("-inf"),))),
]  # fmt: skip
COLUMNS = ["flag", "i", "l", "f", "d", "dec", "big", "day", "ts", "ntz", "s", "b", "nested"]


def _normal(value: Any) -> Any:
    """Values of any reader in one comparable form (NaN as a string, aware times in UTC)."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(UTC)
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, dict):
        return tuple(_normal(v) for v in value.values())
    if isinstance(value, tuple):
        return tuple(_normal(v) for v in value)
    return value


def _expected() -> list[tuple]:
    return sorted((tuple(_normal(v) for v in row) for row in ROWS), key=repr)


@pytest.fixture(scope="module")
def table_location(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("types")
    source = root / "source"
    spark.createDataFrame(ROWS, SOURCE_SCHEMA).coalesce(1).write.parquet(str(source))
    catalog = SqlCatalog("default", warehouse=root / "warehouse")
    result = ingest(
        spark,
        catalog,
        IngestOptions(
            table="db.types",
            source=str(source),
            create=True,
            partition_by="identity(flag), truncate(4, s), month(ts)",
        ),
    )
    assert result.status == "committed" and result.rows == len(ROWS)
    metadata_location = catalog.load_table("db.types").metadata_location
    catalog.close()
    assert metadata_location is not None
    return root, metadata_location


def test_pyiceberg_reads_every_value(table_location: tuple[Path, str]) -> None:
    rows = StaticTable.from_metadata(table_location[1]).scan().to_arrow().to_pylist()
    got = sorted((tuple(_normal(r[c]) for c in COLUMNS) for r in rows), key=repr)
    assert got == _expected()


def test_duckdb_reads_every_value(
    table_location: tuple[Path, str], duck: duckdb.DuckDBPyConnection
) -> None:
    scan = f"iceberg_scan('{table_location[1]}')"
    # timestamptz as epoch microseconds: DuckDB's Python conversion of it needs pytz.
    selected = ", ".join("epoch_us(ts)" if c == "ts" else c for c in COLUMNS)
    rows = duck.execute(f"SELECT {selected} FROM {scan}").fetchall()
    got = sorted((tuple(_normal(v) for v in row) for row in rows), key=repr)
    ts = COLUMNS.index("ts")
    expected = [
        (*row[:ts], None if row[ts] is None else (row[ts] - EPOCH) // MICROSECOND, *row[ts + 1 :])
        for row in _expected()
    ]
    assert got == sorted(expected, key=repr)
    # Pruning on our partition values and bounds finds the rows it must.
    assert duck.execute(f"SELECT count(*) FROM {scan} WHERE s = ''").fetchone() == (1,)
    assert duck.execute(f"SELECT count(*) FROM {scan} WHERE flag IS NULL").fetchone() == (1,)


def test_data_files_carry_field_ids_micros_and_footer_metrics(
    table_location: tuple[Path, str],
) -> None:
    io = FileIO()
    metadata = read_table_metadata(io, table_location[1])
    schema = metadata.schema()
    snapshot = metadata.current_snapshot()
    assert snapshot is not None
    files = [
        entry.data_file
        for manifest in snapshot_manifests(io, snapshot)
        for entry in read_manifest(io, manifest, spec=metadata.spec())
    ]
    assert len(files) == len(ROWS)  # one row per partition here
    for data_file in files:
        parquet = pq.ParquetFile(data_file.file_path)
        described = str(parquet.schema)
        assert "int96" not in described.lower()
        columns = described.splitlines()[2:]  # below the object line and the root group
        assert all("field_id=-1" not in line for line in columns), described
        assert data_file.record_count == parquet.metadata.num_rows
    by_text = {f.partition[1]: f for f in files}  # (flag, s_trunc_4, ts_month)
    long_file = by_text[LONG_TEXT[:4]]
    s_id = schema.find_field("s").field_id
    # String bounds are truncated to 16 characters, the upper one rounded up.
    assert from_bytes(StringType(), long_file.lower_bounds[s_id]) == LONG_TEXT[:16]
    upper = from_bytes(StringType(), long_file.upper_bounds[s_id])
    assert len(upper) == 16 and upper > LONG_TEXT[:16]
    d_id = schema.find_field("d").field_id
    nan_file = by_text[""]
    # NaN counted as written; Parquet's min/max leave NaN out, so a file of NaN has no bounds.
    assert nan_file.nan_value_counts[d_id] == 1
    assert d_id not in (nan_file.lower_bounds or {})
    assert long_file.nan_value_counts[d_id] == 0
    assert from_bytes(DoubleType(), long_file.lower_bounds[d_id]) == 2.25
    nested_x = schema.find_field("nested.x").field_id
    assert long_file.value_counts[nested_x] == 1 and long_file.null_value_counts[nested_x] == 0
    assert long_file.split_offsets == [4]


def test_table_with_types_spark_cannot_write_takes_a_dataframe(
    spark: SparkSession, catalog: SqlCatalog, duck: duckdb.DuckDBPyConnection
) -> None:
    catalog.create_namespace("db")
    schema = Schema(
        (
            NestedField(1, "id", LongType()),
            NestedField(2, "u", UUIDType()),
            NestedField(3, "t", TimeType()),
            NestedField(4, "fx", FixedType(3)),
            NestedField(5, "li", ListType(7, StringType(), element_required=False)),
            NestedField(6, "m", MapType(8, StringType(), 9, LongType(), value_required=False)),
        )
    )
    catalog.create_table("db.others", schema)
    u = uuid.UUID("123e4567-e89b-12d3-a456-426614174000")
    frame = spark.createDataFrame(
        [
            (1, str(u), "08:30:00.25", b"abc", ["x", None], {"k": 2}),
            (2, None, None, None, None, None),
        ],
        "id long, u string, t string, fx binary, li array<string>, m map<string, long>",
    )
    result = ingest(spark, catalog, IngestOptions(table="db.others"), source=frame)
    assert result.status == "committed" and result.rows == 2
    location = catalog.load_table("db.others").metadata_location
    rows = duck.execute(f"SELECT * FROM iceberg_scan('{location}') ORDER BY id").fetchall()
    assert rows == [
        (1, u, dt.time(8, 30, 0, 250000), b"abc", ["x", None], {"k": 2}),
        (2, None, None, None, None, None),
    ]
