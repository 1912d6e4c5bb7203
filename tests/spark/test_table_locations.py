"""Tables that say where their files go get every file our jobs write there: ingest
(append, upsert, CDC: data, equality and position delete files or deletion vectors), the
conversion of equality deletes and the compaction. With `write.data.path`, below that path
and nothing below `<location>/data`; with `write.object-storage.enabled`, in the hash
directories Java's `ObjectStoreLocationProvider` gives a file of that name and partition
(`icecore.location_provider`, checked against Java in tests/icecore/test_location_provider.py).
PyIceberg reads exactly the rows the batches leave, also from a table PyIceberg created."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog as PyIcebergCatalog
from pyiceberg.schema import Schema as PySchema
from pyiceberg.types import LongType, NestedField, StringType, TimestampType
from pyspark.sql import SparkSession

from icecore.catalog import SqlCatalog
from icecore.jobs.jobs import (
    ConvertEqualityDeletesOptions,
    IngestOptions,
    RewriteDataFilesOptions,
    RewritePositionDeletesOptions,
)
from icecore.location_provider import locations_for
from icecore.spec.manifest import DataFile
from icecore.table import Table
from spark_jobs.convert_equality_deletes import run as convert_equality_deletes
from spark_jobs.ingest import run as ingest
from spark_jobs.rewrite_data_files import run as rewrite_data_files
from spark_jobs.rewrite_position_deletes import run as rewrite_position_deletes
from tests.support.batches import EPOCH, SOURCE, Model, batch, feed, pyiceberg_rows
from tests.support.catalogs import pyiceberg_catalog_fixture  # noqa: F401 - `pyiceberg_catalog`

TABLE = "db.placed"
OBJECT_STORAGE = {"write.object-storage.enabled": "true"}


def run_jobs(spark: SparkSession, catalog: SqlCatalog, model: Model, **properties: str) -> None:
    """Three ingestion batches (creating the table with `properties` if it does not exist),
    a conversion of the equality deletes, a rewrite of the position delete files (v2), then a
    compaction of every file."""
    feed(
        spark, catalog, TABLE, mode="append", rows=batch(0, 40), model=model, properties=properties
    )
    feed(spark, catalog, TABLE, mode="upsert", rows=batch(20, 40, tag="u"), model=model)
    feed(spark, catalog, TABLE, mode="cdc", rows=batch(50, 30, "IUUD", tag="c"), model=model)
    converted = convert_equality_deletes(spark, catalog, ConvertEqualityDeletesOptions(TABLE))
    assert converted.status == "committed", converted
    if catalog.load_table(TABLE).metadata.format_version == 2:
        options = RewritePositionDeletesOptions(TABLE, rewrite_all=True)
        merged = rewrite_position_deletes(spark, catalog, options)
        assert merged.status == "committed" and merged.added_delete_files > 0, merged
    compacted = rewrite_data_files(spark, catalog, RewriteDataFilesOptions(TABLE, rewrite_all=True))
    assert compacted.failed_groups == [] and compacted.rewritten_data_files > 0


def written_files(table: Table) -> list[DataFile]:
    """Every data and delete file any snapshot of the table holds (all written by us)."""
    found: dict[str, DataFile] = {}
    for snapshot in table.metadata.snapshots:
        for task in table.scan(snapshot_id=snapshot.snapshot_id).plan_files():
            for f in (task.file, *task.deletes):
                found[f.file_path] = f
    return list(found.values())


def kinds(files: list[DataFile]) -> set[str]:
    return {"dv" if f.is_deletion_vector else f.content.name.lower() for f in files}


def assert_hashed(table: Table, files: list[DataFile]) -> None:
    """Each file sits exactly where the table's location provider (Java's layout) puts a file
    of its name and partition; deletion vectors, of no partition, directly below the hash."""
    provider = locations_for(table.metadata.location, table.metadata.properties)
    schema = table.metadata.schema()
    for f in files:
        name = f.file_path.rsplit("/", 1)[-1]
        path = None
        if not f.is_deletion_vector:
            path = table.metadata.spec_by_id(f.spec_id).partition_path(f.partition, schema)
        assert f.file_path == provider.new_data_location(name, path), f.file_path


@pytest.mark.parametrize("version", ["2", "3"])
def test_every_file_goes_below_write_data_path(
    spark: SparkSession, catalog: SqlCatalog, tmp_path: Path, version: str
) -> None:
    elsewhere = tmp_path / "elsewhere"
    model = Model()
    run_jobs(
        spark,
        catalog,
        model,
        **{"format-version": version, "write.data.path": f"{elsewhere}/"},
    )

    table = catalog.load_table(TABLE)
    files = written_files(table)
    expected_kinds = {"data", "equality_deletes", "position_deletes" if version == "2" else "dv"}
    assert expected_kinds <= kinds(files)
    assert all(f.file_path.startswith(f"{elsewhere}/") for f in files)
    assert not Path(table.metadata.location, "data").exists()  # not even a failed attempt's
    assert pyiceberg_rows(table, {}) == model.counter()


@pytest.mark.parametrize(
    "properties",
    [
        {"format-version": "3", **OBJECT_STORAGE},
        {
            "format-version": "2",
            **OBJECT_STORAGE,
            "write.object-storage.partitioned-paths": "false",
        },
    ],
    ids=["v3", "v2-no-partition-paths"],
)
def test_object_storage_spreads_every_file_over_javas_hash_directories(
    spark: SparkSession, catalog: SqlCatalog, tmp_path: Path, properties: dict[str, str]
) -> None:
    model = Model()
    run_jobs(spark, catalog, model, **properties, **{"write.data.path": f"{tmp_path}/objects"})

    table = catalog.load_table(TABLE)
    files = written_files(table)
    deletes = "dv" if properties["format-version"] == "3" else "position_deletes"
    assert {"data", "equality_deletes", deletes} <= kinds(files)
    assert_hashed(table, files)
    # Outside the table's location: Java's `<hash>/<db>/<table>` context keeps tables apart.
    assert all("/db/placed/" in f.file_path for f in files)
    hashes = {f.file_path[len(f"{tmp_path}/objects/") :][:19] for f in files}
    assert len(hashes) > len(files) // 2  # spread, not gathered in a run's directory
    assert not Path(table.metadata.location, "data").exists()
    assert pyiceberg_rows(table, {}) == model.counter()


def test_a_table_pyiceberg_created_for_object_storage_gets_our_files_hashed_like_its_own(
    spark: SparkSession, catalog: SqlCatalog, pyiceberg_catalog: PyIcebergCatalog
) -> None:
    schema = PySchema(
        NestedField(1, "id", LongType()),
        NestedField(2, "v", StringType()),
        NestedField(3, "ts", TimestampType()),
    )
    pyiceberg_catalog.create_namespace("db")
    created = pyiceberg_catalog.create_table(
        TABLE, schema, properties={"format-version": "2", **OBJECT_STORAGE}
    )
    rows = batch(100, 20, tag="py")
    created.append(
        pa.Table.from_pylist(
            [{"id": k, "v": v, "ts": ts} for k, v, ts, _ in rows], created.schema().as_arrow()
        )
    )
    model = Model()
    model.apply("append", rows)
    theirs = [f.file_path for f in written_files(catalog.load_table(TABLE))]

    run_jobs(spark, catalog, model)

    table = catalog.load_table(TABLE)
    files = written_files(table)
    assert {f.file_path for f in files} > set(theirs)
    assert {"data", "equality_deletes", "position_deletes"} <= kinds(files)
    assert_hashed(table, files)  # PyIceberg's files and ours alike
    assert pyiceberg_rows(table, {}) == model.counter()


def test_a_failed_compaction_of_an_object_storage_table_deletes_its_hashed_files(
    spark: SparkSession, catalog: SqlCatalog, tmp_path: Path
) -> None:
    """No run directory to delete: the run deletes each file it wrote, wherever it hashed."""
    model = Model()  # rows are not compared: PyIceberg cannot read the equality deletes
    objects = tmp_path / "objects"
    properties = {**OBJECT_STORAGE, "write.data.path": str(objects)}
    feed(
        spark, catalog, TABLE, mode="append", rows=batch(0, 40), model=model, properties=properties
    )
    feed(spark, catalog, TABLE, mode="upsert", rows=batch(20, 40, tag="u"), model=model)
    before = sorted(p for p in objects.rglob("*") if p.is_file())
    snapshot = catalog.load_table(TABLE).metadata.current_snapshot()
    written: list[str] = []

    def fail(table: Table) -> None:
        written.extend(str(p) for p in objects.rglob("*") if p.is_file() and p not in set(before))
        raise RuntimeError("the commit never happens")

    with pytest.raises(RuntimeError, match="the commit never happens"):
        rewrite_data_files(
            spark, catalog, RewriteDataFilesOptions(TABLE, rewrite_all=True), before_commit=fail
        )

    assert written  # the compaction had written its files, under hash directories
    assert sorted(p for p in objects.rglob("*") if p.is_file()) == before
    assert catalog.load_table(TABLE).metadata.current_snapshot() == snapshot


def test_ingested_files_go_under_javas_partition_path_below_the_hash(
    spark: SparkSession, catalog: SqlCatalog, tmp_path: Path
) -> None:
    """Spark's partition directories render an hour as a number and leave a space or `+`
    alone; hashed, a file goes under Java's path for its partition (`ts_hour=2024-01-01-04`,
    `v=a+b%2Bc`), as Java would put a file of that name there."""
    rows = [(k, ["a b+c", "x/y", "", None][k % 4], EPOCH.replace(year=2024, hour=k), "I")
            for k in range(12)]  # fmt: skip
    frame = spark.createDataFrame(rows, SOURCE).drop("op")
    options = IngestOptions(
        table=TABLE,
        create=True,
        partition_by="hour(ts), v",
        properties={**OBJECT_STORAGE, "write.data.path": f"{tmp_path}/objects"},
    )
    assert ingest(spark, catalog, options, source=frame).status == "committed"

    table = catalog.load_table(TABLE)
    files = written_files(table)
    assert len(files) == 12
    assert_hashed(table, files)
    assert any("/ts_hour=2024-01-01-04/v=a+b%2Bc/" in f.file_path for f in files), files
    model = Model()
    model.apply("append", rows)
    assert pyiceberg_rows(table, {}) == model.counter()
