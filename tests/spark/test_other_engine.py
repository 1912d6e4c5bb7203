"""A v2 table written by another engine, PyIceberg 0.12, compacted by our jobs.

PyIceberg creates the table in its own SqlCatalog (the same JDBC schema, the same SQLite
file our catalog opens) and appends the data files. It cannot write merge-on-read deletes
(`delete()` falls back to copy-on-write), so the position delete files are written with
pyarrow and committed with PyIceberg's own Avro manifest and manifest list writers and its
catalog's `commit_table`: every metadata file the jobs start from -- metadata JSON,
manifest lists, data and delete manifests -- is PyIceberg's, not icecore's.

`rewrite_position_deletes` then `rewrite_data_files` run on it; after each, PyIceberg, DuckDB
and icecore's naive reader return exactly the rows the model says, and PyIceberg can go on
appending on top of our commits.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog as PyIcebergCatalog
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestWriterV2,
    write_manifest_list,
)
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table as PyIcebergTable
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, SetSnapshotRefUpdate
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType
from pyspark.sql import SparkSession

from icecore.catalog import SqlCatalog
from icecore.jobs.jobs import RewriteDataFilesOptions, RewritePositionDeletesOptions
from icecore.spec.manifest import FileContent
from spark_jobs.rewrite_data_files import run as compact
from spark_jobs.rewrite_position_deletes import run as rewrite_position_deletes
from tests.spark.delete_tables import live
from tests.support.catalogs import pyiceberg_catalog_fixture  # noqa: F401 - `pyiceberg_catalog`
from tests.support.duckdb import duck_connection  # noqa: F401 - provides the `duck` fixture
from tests.support.reader import scan_rows

TABLE = "db.foreign"
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "part", StringType(), required=False),
    NestedField(3, "v", StringType(), required=False),
)
SPEC = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "part"))
ARROW = pa.schema([("id", pa.int64()), ("part", pa.string()), ("v", pa.string())])
POSITION_DELETES = pa.schema(
    [
        pa.field("file_path", pa.string(), False, {b"PARQUET:field_id": b"2147483546"}),
        pa.field("pos", pa.int64(), False, {b"PARQUET:field_id": b"2147483545"}),
    ]
)
Rows = Counter[tuple[Any, ...]]


class _DeleteManifestWriter(ManifestWriterV2):
    """PyIceberg's v2 manifest writer, for a manifest of delete files (PyIceberg only ever
    writes data manifests; the entry format is the same)."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


def _commit_position_deletes(table: PyIcebergTable, deletes: list[tuple[str, list[int]]]) -> None:
    """One snapshot adding a position delete file per (data file, positions), written with
    pyarrow and PyIceberg's writers, committed through PyIceberg's catalog."""
    metadata = table.metadata
    parent = metadata.current_snapshot()
    assert parent is not None
    files = {t.file.file_path: t.file for t in table.scan().plan_files()}
    snapshot_id = metadata.new_snapshot_id()
    sequence_number = metadata.next_sequence_number()
    location = metadata.location
    entries = []
    for n, (data_path, positions) in enumerate(deletes):
        data = files[data_path]
        path = f"{location}/data/part={data.partition[0]}/pos-deletes-{snapshot_id}-{n}.parquet"
        arrow = pa.table(
            {"file_path": [data_path] * len(positions), "pos": sorted(positions)},
            schema=POSITION_DELETES,
        )
        pq.write_table(arrow, path.removeprefix("file://"))
        delete_file = DataFile.from_args(
            content=DataFileContent.POSITION_DELETES,
            file_path=path,
            file_format=FileFormat.PARQUET,
            partition=Record(data.partition[0]),
            record_count=len(positions),
            file_size_in_bytes=Path(path.removeprefix("file://")).stat().st_size,
            spec_id=data.spec_id,
        )
        entries.append(
            ManifestEntry.from_args(
                status=ManifestEntryStatus.ADDED,
                snapshot_id=snapshot_id,
                sequence_number=None,
                file_sequence_number=None,
                data_file=delete_file,
            )
        )
    io = table.io
    manifest_path = f"{location}/metadata/{snapshot_id}-deletes-m0.avro"
    with _DeleteManifestWriter(
        metadata.spec(), metadata.schema(), io.new_output(manifest_path), snapshot_id, "deflate"
    ) as writer:
        for entry in entries:
            writer.add_entry(entry)
    manifest = writer.to_manifest_file()
    list_path = f"{location}/metadata/snap-{snapshot_id}-1-deletes.avro"
    with write_manifest_list(
        2, io.new_output(list_path), snapshot_id, parent.snapshot_id, sequence_number, "deflate"
    ) as lists:
        lists.add_manifests([*parent.manifests(io), manifest])
    snapshot = Snapshot(
        snapshot_id=snapshot_id,
        parent_snapshot_id=parent.snapshot_id,
        sequence_number=sequence_number,
        timestamp_ms=int(time.time() * 1000),
        manifest_list=list_path,
        summary=Summary(
            Operation.DELETE,
            **{
                "added-delete-files": str(len(entries)),
                "added-position-delete-files": str(len(entries)),
                "added-position-deletes": str(sum(len(p) for _, p in deletes)),
            },
        ),
        schema_id=metadata.current_schema_id,
    )
    table.catalog.commit_table(
        table,
        (AssertRefSnapshotId(ref="main", snapshot_id=parent.snapshot_id),),
        (
            AddSnapshotUpdate(snapshot=snapshot),
            SetSnapshotRefUpdate(ref_name="main", type="branch", snapshot_id=snapshot_id),
        ),
    )


def _append(table: PyIcebergTable, batch: int, model: Rows) -> None:
    rows = [(i, "ab"[i % 2], f"b{batch}-{i}") for i in range(batch * 100, batch * 100 + 40)]
    table.append(
        pa.Table.from_pylist([dict(zip(ARROW.names, r, strict=True)) for r in rows], ARROW)
    )
    model.update(rows)


def _build(engine: PyIcebergCatalog) -> Rows:
    """Three appends, two snapshots of position deletes (one file per data file each),
    then an append the deletes do not touch."""
    engine.create_namespace("db")
    table = engine.create_table(
        TABLE, SCHEMA, partition_spec=SPEC, properties={"format-version": "2"}
    )
    model: Rows = Counter()
    for b in range(3):
        _append(table, b, model)
    for remainder in (0, 1):
        table = engine.load_table(TABLE)
        deletes = []
        for task in table.scan().plan_files():
            ids = pq.read_table(task.file.file_path.removeprefix("file://")).column("id")
            positions = [p for p, i in enumerate(ids.to_pylist()) if i % 5 == remainder]
            deletes.append((task.file.file_path, positions))
            for p in positions:
                data = pq.read_table(task.file.file_path.removeprefix("file://")).slice(p, 1)
                model[tuple(data.to_pylist()[0].values())] -= 1
        _commit_position_deletes(table, deletes)
    _append(engine.load_table(TABLE), 3, model)
    return +model


def _readers_agree(
    engine: PyIcebergCatalog, catalog: SqlCatalog, duck: duckdb.DuckDBPyConnection, model: Rows
) -> None:
    arrow = engine.load_table(TABLE).scan().to_arrow()
    assert Counter(tuple(r.values()) for r in arrow.to_pylist()) == model, "PyIceberg"
    table = catalog.load_table(TABLE)
    ours = Counter((r["id"], r["part"], r["v"]) for r in scan_rows(table.io, table.metadata))
    assert ours == model, "icecore"
    sql = f"SELECT id, part, v FROM iceberg_scan('{table.metadata_location}')"
    assert Counter(duck.execute(sql).fetchall()) == model, "DuckDB"


def test_pyiceberg_table_with_position_deletes_is_compacted(
    spark: SparkSession,
    catalog: SqlCatalog,
    pyiceberg_catalog: PyIcebergCatalog,
    duck: duckdb.DuckDBPyConnection,
) -> None:
    model = _build(pyiceberg_catalog)
    _readers_agree(pyiceberg_catalog, catalog, duck, model)
    before = live(catalog.load_table(TABLE))
    assert len(before[FileContent.POSITION_DELETES]) == 12  # 2 x 6 data files

    merged = rewrite_position_deletes(
        spark, catalog, RewritePositionDeletesOptions(TABLE, min_input_files=2)
    )

    assert merged.status == "committed" and merged.rewritten_delete_files == 12
    after = live(catalog.load_table(TABLE))
    assert len(after[FileContent.POSITION_DELETES]) == 2  # one per partition
    _readers_agree(pyiceberg_catalog, catalog, duck, model)

    compacted = compact(spark, catalog, RewriteDataFilesOptions(TABLE, rewrite_all=True))

    assert compacted.rewritten_data_files == 8 and compacted.removed_delete_files == 2
    after = live(catalog.load_table(TABLE))
    assert not after[FileContent.POSITION_DELETES] and len(after[FileContent.DATA]) == 2
    _readers_agree(pyiceberg_catalog, catalog, duck, model)
    # PyIceberg goes on writing on top of our commits.
    _append(pyiceberg_catalog.load_table(TABLE), 4, model)
    _readers_agree(pyiceberg_catalog, catalog, duck, model)
