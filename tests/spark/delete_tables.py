"""Tables with position and equality deletes built by the ingestion job (CDC batches), a
model of their rows, and the readers that must agree (for the delete-file job tests)."""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter
from typing import Any

import duckdb
import pyarrow as pa
from pyiceberg.table import StaticTable
from pyspark.sql import SparkSession

from icecore.catalog import SqlCatalog
from icecore.manifest import FileContent, ManifestEntry, read_manifest
from icecore.scan import snapshot_manifests
from icecore.table import Table
from spark_jobs.ingestion.job import ingest
from spark_jobs.ingestion.options import IngestOptions
from tests.support.reader import scan_rows

SOURCE_SCHEMA = "id long, v string, ts timestamp_ntz, op string"
TABLE = "db.deletes"
Rows = Counter[tuple[Any, ...]]


def batch(rnd: random.Random, b: int, size: int, null_keys: bool) -> list[tuple[Any, ...]]:
    keys: list[int | None] = list(range(1, 25)) + ([None] if null_keys else [])
    rows = []
    for i in range(size):
        op = "I" if b == 0 else rnd.choice("IUUD")
        ts = dt.datetime(2024, 1, 1 + rnd.randint(0, 2), rnd.randint(0, 23))
        rows.append((rnd.choice(keys), f"b{b}r{i}", ts, op))
    return rows


def cdc(spark: SparkSession, catalog: SqlCatalog, rows: list[tuple[Any, ...]], **kw: Any) -> Any:
    frame = spark.createDataFrame(spark.sparkContext.parallelize(rows, 2), SOURCE_SCHEMA)
    options = IngestOptions(table=TABLE, mode="cdc", key=["id"], create=True, **kw)
    result = ingest(spark, catalog, options, source=frame)
    assert result["status"] == "committed"
    return result


def build(
    spark: SparkSession,
    catalog: SqlCatalog,
    batches: int,
    partition_by: str | None,
    seed: int,
    *,
    size: int = 30,
    respec: str | None = None,
) -> random.Random:
    """CDC batches; with `respec` ("ts:day"), half of them after adding that partition field."""
    rnd = random.Random(seed)
    null_keys = partition_by is None
    for b in range(batches):
        if respec and b == batches // 2:
            column, transform = respec.split(":")
            catalog.load_table(TABLE).update_spec().add_field(column, transform).commit()
        cdc(spark, catalog, batch(rnd, b, size, null_keys), partition_by=partition_by)
    return rnd


def rows(table: Table, duck: duckdb.DuckDBPyConnection | None) -> Rows:
    """The rows as icecore's planner and a naive reader see them; DuckDB must agree, and
    PyIceberg too when no equality delete is live.

    duckdb-iceberg 1.5.5 drops every null-key row of a data file that any equality delete
    applies to (even one without null keys: a NOT IN-style anti-join), so while equality
    deletes are live DuckDB is compared on non-null keys only. Pass `duck=None` where it
    fails outright (null partition values with partition-scoped equality deletes)."""
    ours = Counter((r["id"], r["v"], r["ts"]) for r in scan_rows(table.io, table.metadata))
    equality_live = bool(live(table)[FileContent.EQUALITY_DELETES])
    if duck is not None:
        theirs = duck_rows(table, duck)
        mine = ours
        if equality_live:
            theirs = Counter({k: n for k, n in theirs.items() if k[0] is not None})
            mine = Counter({k: n for k, n in ours.items() if k[0] is not None})
        assert theirs == mine, f"DuckDB disagrees: {theirs - mine} extra, {mine - theirs} missing"
    if not equality_live:
        assert table.metadata_location is not None
        arrow = StaticTable.from_metadata(table.metadata_location).scan().to_arrow()
        ts = arrow.column("ts").cast(pa.int64()).to_pylist()
        theirs = Counter(
            zip(arrow.column("id").to_pylist(), arrow.column("v").to_pylist(), ts, strict=True)
        )
        assert theirs == ours, "PyIceberg disagrees with icecore"
    return ours


def duck_rows(table: Table, duck: duckdb.DuckDBPyConnection) -> Rows:
    sql = f"SELECT id, v, epoch_us(ts) FROM iceberg_scan('{table.metadata_location}')"
    return Counter(duck.execute(sql).fetchall())


def live(table: Table) -> dict[FileContent, list[ManifestEntry]]:
    out: dict[FileContent, list[ManifestEntry]] = {c: [] for c in FileContent}
    snapshot = table.metadata.current_snapshot()
    if snapshot is None:
        return out
    for manifest in snapshot_manifests(table.io, snapshot):
        spec = table.metadata.spec_by_id(manifest.partition_spec_id)
        for entry in read_manifest(table.io, manifest, spec=spec, live_only=True):
            out[entry.data_file.content].append(entry)
    return out
