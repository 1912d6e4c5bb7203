"""Tables with position and equality deletes made of CDC batches, a model of their rows, and
the readers that must agree (for the delete-file job tests). A batch is committed by the
ingestion job where its keys may be null, else by `commit_cdc`: the same batch laid out as the
ingestion job lays it out but written with pyarrow and committed as an icecore row delta (no
Spark: fast enough to build every table of those tests, and to commit concurrently with a
job); `before_swap` is the seam the race tests commit through."""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import duckdb
import pyarrow as pa
from pyiceberg.table import StaticTable
from pyspark.sql import SparkSession
from sqlalchemy import event

from icecore.actions.table_setup import create_table, unpartitioned_spec
from icecore.catalog import SqlCatalog
from icecore.jobs.jobs import IngestOptions
from icecore.scan import snapshot_manifests
from icecore.spec.manifest import DataFile, FileContent, ManifestEntry, read_manifest
from icecore.spec.schema import Schema
from icecore.spec.types import LongType, NestedField, StringType, TimestampType
from icecore.table import Table
from spark_jobs.ingest import run as ingest
from tests.support.batches import Rows, cdc_frame, micros
from tests.support.reader import scan_rows
from tests.support.tables import LocalTable

TABLE = "db.deletes"


def batch(rnd: random.Random, b: int, size: int, null_keys: bool) -> list[tuple[Any, ...]]:
    keys: list[int | None] = list(range(1, 25)) + ([None] if null_keys else [])
    rows = []
    for i in range(size):
        op = "I" if b == 0 else rnd.choice("IUUD")
        ts = dt.datetime(2024, 1, 1 + rnd.randint(0, 2), rnd.randint(0, 23))
        rows.append((rnd.choice(keys), f"b{b}r{i}", ts, op))
    return rows


def cdc(spark: SparkSession, catalog: SqlCatalog, rows: list[tuple[Any, ...]], **kw: Any) -> Any:
    frame = cdc_frame(spark, rows)
    options = IngestOptions(table=TABLE, mode="cdc", key=["id"], create=True, **kw)
    result = ingest(spark, catalog, options, source=frame)
    assert result.status == "committed"
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
    """CDC batches; with `respec` ("ts:day"), half of them after adding that partition field.

    Unpartitioned, keys may be null and the ingestion job commits each batch. Partitioned,
    keys are never null and `commit_cdc` lays each batch out as the job does, without Spark:
    a fiftieth of the time, which the delete-file jobs' tests spend on their subject instead
    (the ingestion job's own tables are test_ingest_*'s)."""
    rnd = random.Random(seed)
    null_keys = partition_by is None
    for b in range(batches):
        if respec and b == batches // 2:
            column, transform = respec.split(":")
            catalog.load_table(TABLE).update_spec().add_field(column, transform).commit()
        commit_batch(spark, catalog, batch(rnd, b, size, null_keys), partition_by, null_keys)
    return rnd


def commit_batch(
    spark: SparkSession,
    catalog: SqlCatalog,
    rows: list[tuple[Any, ...]],
    partition_by: str | None,
    null_keys: bool,
) -> None:
    """One CDC batch into TABLE, created at the first: by the ingestion job where keys may be
    null, else by `commit_cdc`."""
    if null_keys:
        cdc(spark, catalog, rows, partition_by=partition_by)
        return
    if not catalog.table_exists(TABLE):  # as the job's `create` does
        create(catalog, partition_by)
    commit_cdc(catalog.load_table(TABLE), rows)


def create(
    catalog: SqlCatalog, partition_by: str | None, name: str = TABLE, format_version: int = 2
) -> Table:
    """The table the ingestion job creates for SOURCE (keyed by `id`)."""
    schema = Schema(
        (
            NestedField(1, "id", LongType()),
            NestedField(2, "v", StringType()),
            NestedField(3, "ts", TimestampType()),
        )
    )
    return create_table(
        catalog,
        name,
        schema,
        partition_by=partition_by,
        sort_by=None,
        properties={},
        format_version=format_version,
    )


def commit_cdc(table: Table, batch_rows: list[tuple[Any, ...]]) -> int:
    """Commit a CDC batch (id, v, ts, op) as one row delta laid out like the ingestion
    job's: data files of the I and U rows per partition, position deletes of the rows a
    later change of the batch supersedes, equality deletes on `id` of the keys U and D
    touch (per partition when the spec partitions by `id` only, else global). Returns the
    snapshot id. Keys must not be null (the ingestion job's null-key handling is not
    modelled here)."""
    table.refresh()
    spec = table.metadata.spec()
    local = LocalTable(table.io, table.metadata)
    by_id = {f.source_id for f in spec.fields} <= {1}
    written: list[dict[str, Any]] = []
    superseded: set[int] = set()
    touched: dict[Any, None] = {}
    for key, v, ts, op in batch_rows:
        assert key is not None, "commit_cdc does not model null keys"
        if op != "I":
            superseded.update(i for i, r in enumerate(written) if r["id"] == key)
            touched[key] = None
        if op != "D":
            written.append({"id": key, "v": v, "ts": micros(ts)})
    files: list[DataFile] = []
    positions: dict[tuple[Any, ...], list[tuple[str, int]]] = {}
    by_partition: dict[tuple[Any, ...], list[int]] = {}
    for i, r in enumerate(written):
        by_partition.setdefault(local.partition_of(r), []).append(i)
    for partition, members in by_partition.items():
        data = local.write_data([written[i] for i in members])
        files.append(data)
        gone = [(data.file_path, pos) for pos, i in enumerate(members) if i in superseded]
        if gone:
            positions.setdefault(partition, []).extend(gone)
    for partition, deletes in positions.items():
        files.append(local.write_position_deletes(deletes, partition=partition))
    keys = [{"id": k} for k in touched]
    if keys and by_id:
        grouped: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
        for k in keys:
            grouped.setdefault(local.partition_of(k), []).append(k)
        for partition, members in grouped.items():
            files.append(local.write_equality_deletes(members, ["id"], partition=partition))
    elif keys:
        global_spec = unpartitioned_spec(table)
        local = LocalTable(table.io, table.metadata)
        files.append(
            local.write_equality_deletes(keys, ["id"], partition=(), spec_id=global_spec.spec_id)
        )
    delta = table.new_row_delta()
    for f in files:
        if f.content == FileContent.DATA:
            delta.add_rows(f)
        else:
            delta.add_deletes(f)
    delta.commit()
    return delta.snapshot_id


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


def assert_under_partition_paths(table: Table, files: Iterable[DataFile]) -> None:
    """Each file (but a DV, in a Puffin file of many partitions) lies directly below the path
    Java gives its manifest partition (`partitionToPath`), as Java's writers put it; none below
    a directory of the job's own (a `_group=` one)."""
    schema = table.metadata.schema()
    for f in files:
        assert "_group" not in f.file_path, f.file_path
        spec = table.metadata.spec_by_id(f.spec_id)
        if f.is_deletion_vector or spec.is_unpartitioned:
            continue
        directory = f.file_path.rsplit("/", 1)[0]
        assert directory.endswith("/" + spec.partition_path(f.partition, schema)), f.file_path


@contextmanager
def before_swap(catalog: SqlCatalog, action: Callable[[int], None]) -> Iterator[None]:
    """Run `action(n)` right before the n-th (from 1) metadata swap `catalog` sends to its
    database: a commit has written its snapshot and is about to compare-and-swap the
    table's metadata pointer. Whatever `action` commits (through another catalog) lands in
    between, exactly as a concurrent writer would: the swap then fails and icecore
    re-validates on the new state. It is SQLAlchemy's event API, not a patch of our code."""
    swaps = 0

    def hook(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        nonlocal swaps
        if statement.lstrip().upper().startswith("UPDATE ICEBERG_TABLES SET METADATA_LOCATION"):
            swaps += 1
            action(swaps)

    event.listen(catalog.engine, "before_cursor_execute", hook)
    try:
        yield
    finally:
        event.remove(catalog.engine, "before_cursor_execute", hook)
