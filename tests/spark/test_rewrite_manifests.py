"""`rewrite_manifests` on tables of hundreds of manifests: a PyIceberg table of one manifest
per commit (the issue's bar), a CDC table of equality and position deletes from our ingest,
two partition specs rewritten by Spark tasks, and a v3 table whose rows keep their ids.

After every rewrite the rows are the same in every reader (icecore, PyIceberg, DuckDB, Iceberg
Java), the planned files are the same with the same deletes, and every live file keeps its
snapshot id and sequence numbers: a delete that applied still applies, one that did not
still does not.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pytest
from pyiceberg.table import StaticTable
from pyspark.sql import SparkSession

from icecore.actions.manifest_ranges import manifest_ranges, overlapping
from icecore.catalog import SqlCatalog
from icecore.jobs.jobs import RewriteManifestsOptions
from icecore.spec.manifest_list import ManifestContent
from tests.spark.delete_tables import TABLE, batch, cdc, commit_cdc, rows
from tests.spark.manifest_tables import (
    MERGE_OFF,
    TARGET,
    CatalogTable,
    appends,
    listed,
    numbers,
    planned,
    rewrite,
)
from tests.spark.templates import Built, built_warehouse  # noqa: F401 - `warehouse`
from tests.support.batches import Model
from tests.support.committing import agreed_rows
from tests.support.duckdb import duck_connection  # noqa: F401 - provides the `duck` fixture
from tests.support.iceberg_java import java_read
from tests.support.pyiceberg_appends import pyiceberg_appends
from tests.support.spark_connect import JobRun
from tests.support.tables import LocalTable


def _pyiceberg_read(metadata_location: str) -> tuple[Counter[tuple[Any, ...]], dict[str, Any]]:
    table = StaticTable.from_metadata(metadata_location)
    arrow = table.scan().to_arrow()
    rows = Counter(
        zip(arrow.column("id").to_pylist(), arrow.column("part").to_pylist(), strict=True)
    )
    files = {
        t.file.file_path: frozenset(d.file_path for d in t.delete_files)
        for t in table.scan().plan_files()
    }
    return rows, files


def test_a_pyiceberg_table_of_300_appends_becomes_one_manifest(
    spark: SparkSession,
    catalog: SqlCatalog,
    warehouse: Path,
    duck: duckdb.DuckDBPyConnection,
) -> None:
    """The issue's bar (the speed-up is measured by bench/manifest_benchmark.py)."""
    pyiceberg_appends(warehouse, catalog, 300)
    before = catalog.load_table("py.events")
    assert before.metadata_location is not None
    assert len(listed(before)) == 300  # one per commit
    rows_before, files_before = _pyiceberg_read(before.metadata_location)
    assert sum(rows_before.values()) == 2400 and len(files_before) == 1200
    duck_sql = "SELECT id, part FROM iceberg_scan('{}')"
    assert (
        Counter(duck.execute(duck_sql.format(before.metadata_location)).fetchall()) == rows_before
    )

    result = rewrite(spark, catalog, "py.events")

    assert result.status == "committed" and result.rewritten_in == "driver"
    assert (result.data_manifests_before, result.data_manifests_after) == (300, 1)
    assert result.rewritten_manifests == 300 and result.entries == 1200
    after = catalog.load_table("py.events")
    assert after.metadata_location is not None
    assert len(listed(after, ManifestContent.DATA)) <= 4
    assert _pyiceberg_read(after.metadata_location) == (rows_before, files_before)
    assert Counter(duck.execute(duck_sql.format(after.metadata_location)).fetchall()) == rows_before
    assert numbers(after) == numbers(before)
    again = rewrite(spark, catalog, "py.events")
    assert again.status == "nothing-to-rewrite"


def test_a_cdc_table_reads_the_model_in_iceberg_java_and_duckdb(
    spark: SparkSession, catalog: SqlCatalog, duck: duckdb.DuckDBPyConnection
) -> None:
    """Two batches through the ingestion job, sixty more laid out as it lays them out
    (`commit_cdc`): equality deletes per bucket, position deletes of rows a batch replaced."""
    rnd, model = random.Random(11), Model()
    for b in range(2):
        rows_of_batch = batch(rnd, b, 30, null_keys=False)
        cdc(spark, catalog, rows_of_batch, partition_by="bucket(4, id)", properties=MERGE_OFF)
        model.apply("cdc", rows_of_batch)
    for b in range(2, 62):
        rows_of_batch = batch(rnd, b, 8, null_keys=False)
        commit_cdc(catalog.load_table(TABLE), rows_of_batch)
        model.apply("cdc", rows_of_batch)
    before = catalog.load_table(TABLE)
    assert len(listed(before)) > 120
    assert {m.content for m in listed(before)} == {ManifestContent.DATA, ManifestContent.DELETES}
    assert rows(before, duck) == model.counter()
    assert before.metadata_location is not None
    java_before = java_read(before.metadata_location, ["id", "v", "ts"])
    assert java_before.rows == model.counter()

    result = rewrite(spark, catalog, TABLE)

    assert result.status == "committed"
    assert result.data_manifests_after == 1 and result.delete_manifests_after == 1
    after = catalog.load_table(TABLE)
    assert after.metadata_location is not None
    assert rows(after, duck) == model.counter()  # icecore and DuckDB
    java_after = java_read(after.metadata_location, ["id", "v", "ts"])
    assert java_after.rows == model.counter()
    assert java_after.files == java_before.files  # each data file with the same deletes
    assert planned(after) == planned(before)
    assert numbers(after) == numbers(before)


def _two_specs(_: SparkSession, catalog: SqlCatalog) -> None:
    """200 appends (every fifth with deletes), the second hundred after a spec change."""
    catalog.create_namespace("db")
    t = CatalogTable.create(catalog, "events", properties=MERGE_OFF)
    appends(t, 100, deletes_every=5)
    t.table.update_spec().add_field("id", "bucket[4]", "id_bucket").commit()
    appends(t, 100, start=100, deletes_every=5)
    t.table.update_properties().set(TARGET, "6000").commit()  # a few dozen entries each


@pytest.mark.parametrize(
    "warehouse", [Built("rewrite-manifests-two-specs", _two_specs)], ids=["built"], indirect=True
)
def test_two_partition_specs_rewritten_by_spark_tasks(
    spark: SparkSession,
    catalog: SqlCatalog,
    duck: duckdb.DuckDBPyConnection,
    job_runner: JobRun,
) -> None:
    """On the local session and over Spark Connect (`job_runner`), each on a copy of one
    build (tests/spark/templates.py)."""
    before = catalog.load_table("db.events")
    expected_rows = agreed_rows(before, duck)
    expected_plan, expected_numbers = planned(before), numbers(before)
    spec0 = {m.manifest_path for m in listed(before) if m.partition_spec_id == 0}
    assert len(spec0) == 120 and len(listed(before)) == 240

    # One spec, sorted by its second field.
    options = RewriteManifestsOptions(
        table="db.events", spec_id=1, sort_by=["id_bucket"], driver_max_bytes=0
    )
    result = job_runner("rewrite_manifests", options)
    assert result.status == "committed" and result.rewritten_in == "spark-tasks"
    mid = catalog.load_table("db.events")
    assert {m.manifest_path for m in listed(mid) if m.partition_spec_id == 0} == spec0
    new_data = [m for m in listed(mid, ManifestContent.DATA) if m.partition_spec_id == 1]
    assert 3 <= len(new_data) <= 8
    spec1 = mid.metadata.spec_by_id(1)
    by_bucket = manifest_ranges(spec1, mid.metadata.schema(), new_data, 1)
    assert by_bucket is not None and overlapping(by_bucket) == set()  # clustered by bucket
    assert agreed_rows(mid, duck) == expected_rows

    # Every spec, sorted by the spec's fields.
    options = RewriteManifestsOptions(table="db.events", driver_max_bytes=0)
    result = job_runner("rewrite_manifests", options)
    assert result.status == "committed"
    after = catalog.load_table("db.events")
    for spec_id in (0, 1):
        for content in ManifestContent:
            group = [m for m in listed(after, content) if m.partition_spec_id == spec_id]
            assert group, (spec_id, content)
            ranges = manifest_ranges(
                after.metadata.spec_by_id(spec_id), after.metadata.schema(), group, 0
            )
            assert ranges is not None and overlapping(ranges) == set()
            assert all(m.manifest_length <= 6000 * 1.2 + 4000 for m in group)
    assert agreed_rows(after, duck) == expected_rows
    assert planned(after) == expected_plan
    assert numbers(after) == expected_numbers
    assert rewrite(spark, catalog, "db.events", driver_max_bytes=0).status == "nothing-to-rewrite"


def test_v3_rows_keep_their_ids(
    spark: SparkSession, catalog: SqlCatalog, duck: duckdb.DuckDBPyConnection
) -> None:
    """Deletion vectors from the ingestion job, and sixty small appends."""
    rnd, model = random.Random(3), Model()
    for b in range(3):
        rows_of_batch = batch(rnd, b, 30, null_keys=False)
        cdc(
            spark,
            catalog,
            rows_of_batch,
            partition_by="bucket(4, id)",
            properties=MERGE_OFF,
            format_version=3,
        )
        model.apply("cdc", rows_of_batch)
    for n in range(60):
        table = catalog.load_table(TABLE)
        row = {"id": 1000 + n, "v": f"a{n}", "ts": 1_700_000_000_000_000 + n}
        data = LocalTable(table.io, table.metadata).write_data([row])
        table.new_fast_append().append_file(data).commit()
        model.rows.append((row["id"], row["v"], row["ts"]))
    before = catalog.load_table(TABLE)
    assert before.metadata.format_version == 3 and len(listed(before)) > 60
    assert any("#" in key for key in numbers(before))  # deletion vectors (Puffin offsets)
    ids_before = {p: n[4] for p, n in numbers(before).items() if n[0] == 0}
    assert None not in ids_before.values()
    assert before.metadata_location is not None
    java_before = java_read(before.metadata_location, ["id", "v", "ts"])
    assert java_before.first_row_ids == {
        p.removeprefix("file://"): i for p, i in ids_before.items()
    }  # Java's inheritance gives each file the ids ours does
    next_row_id = before.metadata.next_row_id

    assert rewrite(spark, catalog, TABLE).status == "committed"

    after = catalog.load_table(TABLE)
    assert {p: n[4] for p, n in numbers(after).items() if n[0] == 0} == ids_before
    assert after.metadata.next_row_id == next_row_id
    assert after.metadata_location is not None
    java_after = java_read(after.metadata_location, ["id", "v", "ts"])
    assert java_after.first_row_ids == java_before.first_row_ids
    assert java_after.rows == java_before.rows == model.counter()
    assert rows(after, duck) == model.counter()
