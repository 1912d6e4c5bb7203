"""Format v3: every job writes deletion vectors, never new position delete files.

CDC batches into a v3 table leave DVs (one per data file) for the rows a batch superseded
itself; `convert_equality_deletes` turns equality deletes into DVs merged with the DVs the
data files already have; `rewrite_position_deletes` turns the legacy position delete files of
a table upgraded from v2 into DVs and drops DVs whose data file is gone. After each step
icecore's planner with a naive reader, DuckDB and PyIceberg (when no equality delete is live)
read the rows the batches must leave. A failed ingestion leaves no Puffin file behind.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path
from typing import Any

import duckdb
import pytest
from pyspark.sql import SparkSession

from icecore.catalog import SqlCatalog
from icecore.health import table_health
from icecore.jobs.errors import JobError
from icecore.jobs.jobs import (
    ConvertEqualityDeletesOptions,
    IngestOptions,
    RewritePositionDeletesOptions,
)
from icecore.spec.deletion_vectors import read_dv, write_dvs
from icecore.spec.manifest import DataFile, FileContent
from icecore.spec.schema import Schema
from icecore.spec.types import LongType, NestedField, StringType, TimeType
from icecore.table import Table
from spark_jobs.convert_equality_deletes import run as convert_equality_deletes
from spark_jobs.ingest import run as ingest
from spark_jobs.rewrite_position_deletes import run as rewrite_position_deletes
from tests.spark.delete_tables import TABLE, cdc, live, rows
from tests.support.batches import Model
from tests.support.duckdb import duck_connection  # noqa: F401 - provides the `duck` fixture

V3 = {"format-version": "3"}
POSITIONS = FileContent.POSITION_DELETES
PARTITION_BY = "bucket(2, id)"
DAY = dt.datetime(2024, 1, 1)


def change(key: int, v: str, op: str) -> tuple[Any, ...]:
    return (key, v, DAY + dt.timedelta(hours=key % 24), op)


def dvs(table: Table) -> dict[str, DataFile]:
    """The live DVs by data file; fails if a data file has two, or if any position delete
    is a Parquet file."""
    deletes = [e.data_file for e in live(table)[FileContent.POSITION_DELETES]]
    assert all(d.is_deletion_vector for d in deletes), "a position delete file was written"
    by_file = {d.referenced_data_file: d for d in deletes}
    assert len(by_file) == len(deletes), "a data file has two deletion vectors"
    return {str(path): d for path, d in by_file.items()}


def positions(table: Table, dv: DataFile) -> set[int]:
    assert dv.content_offset is not None and dv.content_size_in_bytes is not None
    vector = read_dv(table.io, dv.file_path, dv.content_offset, dv.content_size_in_bytes)
    return set(vector.to_numpy().tolist())


def expect(table: Table, duck: duckdb.DuckDBPyConnection, model: Model) -> None:
    table.refresh()
    assert rows(table, duck) == model.counter()


# Where the conversion matches (see test_convert_equality_deletes.ROUTES).
ROUTES = {
    "driver": ConvertEqualityDeletesOptions(table=TABLE),
    "spark-tasks": ConvertEqualityDeletesOptions(table=TABLE, driver_max_bytes=0),
    "spark-join": ConvertEqualityDeletesOptions(table=TABLE, task_max_keys=0),
}


def convert(spark: SparkSession, catalog: SqlCatalog, route: str = "driver") -> dict[str, Any]:
    result = convert_equality_deletes(spark, catalog, ROUTES[route])
    assert result.status == "committed"
    assert result.matched_in == route
    return result


@pytest.mark.parametrize("route", ["driver", "spark-join"])
def test_ingest_and_conversion_write_one_merged_dv_per_data_file(
    spark: SparkSession, catalog: SqlCatalog, duck: duckdb.DuckDBPyConnection, route: str
) -> None:
    model = Model()
    # Keys 4 and 5 (one per bucket) are superseded within the batch: DVs on the batch's
    # own data files.
    first = [change(k, f"a{k}", "I") for k in range(30)]
    first += [change(5, "a5'", "U"), change(4, "", "D")]
    result = cdc(spark, catalog, first, partition_by=PARTITION_BY, properties=V3)
    model.apply("cdc", first)
    table = catalog.load_table(TABLE)
    assert table.metadata.format_version == 3
    assert (result.position_delete_files, result.deletion_vectors) == (0, 2)
    assert result.deletion_vector_positions == 2
    ingested = dvs(table)
    assert len(ingested) == 2 and {d.record_count for d in ingested.values()} == {1}
    expect(table, duck, model)

    # Equality deletes on the first batch's files, and another DV on the new batch's.
    second = [change(k, f"b{k}", "U") for k in range(1, 7)]
    second += [change(100, "b100", "I"), change(100, "b100'", "U")]
    cdc(spark, catalog, second, partition_by=PARTITION_BY)
    model.apply("cdc", second)
    expect(table, duck, model)

    done = convert(spark, catalog, route)
    assert done.added_position_delete_files == 0 and done.added_deletion_vectors == 2
    assert done.replaced_deletion_vectors == 2  # both first-batch files had one already
    table.refresh()
    assert not live(table)[FileContent.EQUALITY_DELETES]
    converted = dvs(table)
    for path, old in ingested.items():  # merged: the old positions are still deleted
        assert positions(table, converted[path]) > positions(table, old)
    expect(table, duck, model)

    # Superseded in batches 1 and 2, then rows of keys 1-3, 5 (twice: the superseded row
    # again, and its update) and 6 (4 again).
    assert sum(d.record_count for d in converted.values()) == 2 + 1 + 5
    again = converted
    report = table_health(table.io, table.metadata)
    assert report.format_version == 3
    assert report.totals.position_deletes.files == 0
    assert report.totals.deletion_vectors.files == len(again)
    assert report.totals.deletion_vectors.records == sum(d.record_count for d in again.values())
    assert report.totals.dangling_delete_files == 0


def test_upgraded_table_gets_dvs_for_legacy_position_deletes_and_loses_dangling_dvs(
    spark: SparkSession, catalog: SqlCatalog, duck: duckdb.DuckDBPyConnection
) -> None:
    model = Model()
    # Format v2: a position delete file per bucket for keys 3 and 4 (superseded).
    first = [change(k, f"a{k}", "I") for k in range(20)]
    first += [change(3, "a3'", "U"), change(4, "a4'", "U")]
    cdc(spark, catalog, first, partition_by=PARTITION_BY)
    model.apply("cdc", first)
    table = catalog.load_table(TABLE)
    legacy = {e.data_file.file_path for e in live(table)[FileContent.POSITION_DELETES]}
    assert len(legacy) == 2

    table.update_properties().set("format-version", "3").commit()
    # Updates in bucket 0 only (keys 0, 1, 2) and a row superseded in the batch (key 21).
    second = [change(k, f"b{k}", "U") for k in (0, 1, 2)]
    second += [change(21, "b21", "I"), change(21, "b21'", "U")]
    cdc(spark, catalog, second, partition_by=PARTITION_BY)
    model.apply("cdc", second)
    # The bucket-0 file's DV takes its legacy file's position (key 4's first row), which it
    # replaces; the bucket-1 file keeps its legacy file.
    done = convert(spark, catalog, "spark-tasks")
    assert done.replaced_position_delete_files == 1
    table.refresh()
    left = [e.data_file for e in live(table)[POSITIONS]]
    assert len([f for f in left if not f.is_deletion_vector]) == 1
    expect(table, duck, model)

    # Deleting key 21's data file outright drops its DV too; a DV that another writer left
    # behind for it dangles.
    new_dv = next(f for f in left if f.is_deletion_vector and f.record_count == 1)
    gone = new_dv.referenced_data_file
    assert gone is not None
    table.new_delete().delete_file(gone).commit()
    model.apply("cdc", [change(21, "", "D")])
    table.refresh()
    assert gone not in {e.data_file.referenced_data_file for e in live(table)[POSITIONS]}
    (written,) = write_dvs(table.io, f"{table.metadata.location}/data/left.puffin", {gone: [0]})
    left_behind = dataclasses.replace(
        new_dv,
        file_path=written.file_path,
        file_size_in_bytes=written.file_size_in_bytes,
        content_offset=written.content_offset,
        content_size_in_bytes=written.content_size_in_bytes,
    )
    table.new_row_delta().add_deletes(left_behind).commit()
    report = table_health(table.io, table.metadata)
    assert report.totals.dangling_deletion_vectors.files == 1
    assert report.totals.position_deletes.files == 1
    expect(table, duck, model)

    result = rewrite_position_deletes(spark, catalog, RewritePositionDeletesOptions(table=TABLE))
    assert result.status == "committed"
    assert (result.rewritten_delete_files, result.added_deletion_vectors) == (1, 1)
    assert result.removed_dangling_delete_files == 1
    table.refresh()
    converted = dvs(table)
    assert len(converted) == 2 and gone not in converted
    report = table_health(table.io, table.metadata)
    assert (report.totals.position_deletes.files, report.totals.dangling_delete_files) == (0, 0)
    expect(table, duck, model)


def test_a_failed_ingestion_leaves_no_puffin_file(
    spark: SparkSession, catalog: SqlCatalog, warehouse: Path
) -> None:
    """The DVs are written before the equality deletes, whose write fails on a key that is
    not a time: the run's files, Puffin files included, are deleted."""
    schema = Schema(
        (
            NestedField(1, "id", LongType(), required=True),
            NestedField(2, "t", TimeType(), required=True),
            NestedField(3, "v", StringType()),
        ),
        identifier_field_ids=(1, 2),
    )
    catalog.create_namespace("db")
    table = catalog.create_table("db.timed", schema, properties=V3)

    def run(rows: list[tuple[Any, ...]]) -> dict[str, Any]:
        frame = spark.createDataFrame(rows, "id long, t string, v string, op string")
        options = IngestOptions(table="db.timed", mode="cdc", key=["id", "t"])
        return ingest(spark, catalog, options, source=frame)

    good = [(1, "01:00:00", "a", "I"), (1, "01:00:00", "b", "U")]
    with pytest.raises(JobError, match="column t is time"):
        run([*good, (2, "noon", None, "D")])
    table.refresh()
    assert table.metadata.current_snapshot() is None
    assert not list(warehouse.rglob("*.puffin"))

    assert run(good).deletion_vectors == 1
    (puffin,) = warehouse.rglob("*.puffin")
    table.refresh()
    assert [d.file_path for d in dvs(table).values()] == [str(puffin)]
