"""How `rewrite_manifests` commits: with writers committing meanwhile (an ingest is rebased, a
compaction makes it plan again or refuse), when it fails or is killed (the table is as it
was, its manifests deleted or orphaned), behind a REST catalog, from the command line; and
what expiry and orphan removal do with the manifests it replaced and wrote."""

from __future__ import annotations

import io
import json
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from icefloe_airflow.results import describe
from pyspark.sql import SparkSession

from icecore.catalog import SqlCatalog, load_catalog
from icecore.catalog.rest import RestCatalog
from icecore.errors import CommitConflictError
from icecore.jobs.grammar import describe_size as size
from icecore.jobs.jobs import ExpireSnapshotsOptions, RemoveOrphanFilesOptions
from icecore.scan import snapshot_manifests
from icecore.table import Table
from spark_jobs.common.cli import main
from spark_jobs.expire_snapshots import run as expire_snapshots
from spark_jobs.remove_orphan_files import run as remove_orphan_files
from tests.spark.manifest_tables import (
    MERGE_OFF,
    CatalogTable,
    appends,
    avro_files,
    listed,
    numbers,
    referenced,
    rewrite,
)
from tests.support.committing import agreed_rows
from tests.support.duckdb import duck_connection  # noqa: F401 - provides the `duck` fixture
from tests.support.killing import commits_held, kill_once_written
from tests.support.rest_catalog import RestCatalogServer
from tests.support.spark_connect import SparkConnectServer
from tests.support.tables import LocalTable

FAR_FUTURE = "2100-01-01T00:00:00"


@pytest.fixture
def events(catalog: SqlCatalog) -> CatalogTable:
    """`db.events`: forty commits, one manifest each, some with a position delete."""
    catalog.create_namespace("db")
    t = CatalogTable.create(catalog, "events", properties=MERGE_OFF)
    appends(t, 40, deletes_every=7)
    return t


def _compact_one_file(table: Table) -> None:
    """Another writer's compaction of one data file (rows unchanged): its commit rewrites
    the manifest that listed the file."""
    assert table.catalog is not None
    other = table.catalog.load_table(table.identifier)
    victim = next(t.file for t in other.scan().plan_files() if not t.deletes)
    rows = pq.read_table(victim.file_path.removeprefix("file://")).to_pylist()
    replacement = LocalTable(other.io, other.metadata).write_data(rows)
    other.new_rewrite().rewrite_files([victim], [replacement]).commit()


def _no_spark() -> SparkSession:
    raise AssertionError("the driver's threads were enough: Spark must not start")


def test_a_batch_meanwhile_is_kept_and_a_compaction_meanwhile_makes_it_plan_again(
    spark: SparkSession, catalog: SqlCatalog, events: CatalogTable, duck: duckdb.DuckDBPyConnection
) -> None:
    rows = agreed_rows(catalog.load_table("db.events"), duck)
    gone = next(
        t.file for t in catalog.load_table("db.events").scan().plan_files() if not t.deletes
    )
    (dead,) = pq.read_table(gone.file_path.removeprefix("file://")).to_pylist()

    def ingest_meanwhile(table: Table) -> None:
        """A batch as the ingestion job commits one: a new row, and a row deleted by its
        position in a file the rewrite moves to a new manifest."""
        other = catalog.load_table("db.events")
        deletes = events.position_deletes([(gone.file_path, 0)], partition=gone.partition)
        data = events.data([{"id": -1, "cat": "z", "v": 0}])
        other.new_row_delta().add_rows(data).add_deletes(deletes).commit()

    result = rewrite(spark, catalog, "db.events", before_commit=ingest_meanwhile)
    assert result.status == "committed" and result.attempts == 1  # rebased, not re-run
    table = catalog.load_table("db.events")
    assert len(listed(table)) == 4  # the rewrite's data and delete manifests, the batch's two
    expected = rows + Counter({(-1, "z", 0): 1}) - Counter({tuple(dead.values()): 1})
    assert agreed_rows(table, duck) == expected

    appends(CatalogTable(table, events.writer), 10, start=40)
    attempts: list[int] = []

    def compact_once(table: Table) -> None:
        attempts.append(1)
        if len(attempts) == 1:
            _compact_one_file(table)

    before = catalog.load_table("db.events")
    rows = agreed_rows(before, duck)
    result = rewrite(spark, catalog, "db.events", before_commit=compact_once)
    assert result.status == "committed" and result.attempts == 2
    assert "no longer in snapshot" in result.conflicts[0]
    after = catalog.load_table("db.events")
    head = after.metadata.current_snapshot()
    assert head is not None and head.parent_snapshot_id is not None
    compaction = after.metadata.snapshot_by_id(head.parent_snapshot_id)
    assert compaction.summary is not None and compaction.summary.operation.value == "replace"
    assert compaction.snapshot_id not in {s.snapshot_id for s in before.metadata.snapshots}
    assert agreed_rows(after, duck) == rows
    assert avro_files(after) <= referenced(after)  # the first attempt's manifests are gone


def test_a_conflict_on_the_last_attempt_refuses_and_leaves_the_other_commit(
    spark: SparkSession, catalog: SqlCatalog, events: CatalogTable, duck: duckdb.DuckDBPyConnection
) -> None:
    with pytest.raises(CommitConflictError, match="commit conflict on each of 1 attempt"):
        rewrite(spark, catalog, "db.events", max_attempts=1, before_commit=_compact_one_file)
    table = catalog.load_table("db.events")
    head = table.metadata.current_snapshot()
    assert head is not None and head.summary is not None
    assert "icefloe.job" not in head.summary.properties  # the compaction's commit, not ours
    assert len(listed(table)) == 40 + 6 + 1  # its new manifest, and the one it rewrote
    assert avro_files(table) <= referenced(table)  # nothing of ours left behind
    agreed_rows(table, duck)


def test_a_failed_run_leaves_the_table_as_it_was(
    spark: SparkSession, catalog: SqlCatalog, events: CatalogTable, duck: duckdb.DuckDBPyConnection
) -> None:
    before = catalog.load_table("db.events")
    files, rows = avro_files(before), agreed_rows(before, duck)

    def fail(table: Table) -> None:
        assert len(avro_files(table)) > len(files)  # the new manifests are written
        raise RuntimeError("the driver died")

    with pytest.raises(RuntimeError, match="the driver died"):
        rewrite(spark, catalog, "db.events", before_commit=fail)
    after = catalog.load_table("db.events")
    assert after.metadata_location == before.metadata_location
    assert avro_files(after) == files
    assert agreed_rows(after, duck) == rows


def test_a_killed_run_leaves_the_table_as_it_was(
    catalog: SqlCatalog,
    warehouse: Path,
    events: CatalogTable,
    duck: duckdb.DuckDBPyConnection,
    spark_connect: SparkConnectServer,
) -> None:
    """A job killed while the Spark tasks write manifests (the Spark route, as a Connect
    client: the process that commits)."""
    before = catalog.load_table("db.events")
    files, rows, kept = avro_files(before), agreed_rows(before, duck), numbers(before)
    args = ["--warehouse", str(warehouse), "--table", "db.events", "--driver-max-bytes", "0"]
    command, env = spark_connect.job_command("rewrite_manifests", args)
    with commits_held(warehouse):
        process = subprocess.Popen(
            command, cwd=warehouse.parent, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        kill_once_written(
            process,
            lambda: any("-m-" in Path(p).name for p in avro_files(before) - files),
            "a manifest",
        )

    after = catalog.load_table("db.events")
    assert after.metadata_location == before.metadata_location
    assert agreed_rows(after, duck) == rows
    assert avro_files(after) > files  # what it wrote stays behind, unreferenced
    # The next run (in the driver) does the work.
    assert rewrite(_no_spark, catalog, "db.events").status == "committed"
    done = catalog.load_table("db.events")
    assert agreed_rows(done, duck) == rows and numbers(done) == kept


@pytest.fixture
def rest(rest_catalog_server: RestCatalogServer) -> Iterator[RestCatalog]:
    rest_catalog_server.reset()
    catalog = load_catalog("lake", rest_catalog_server.properties())
    assert isinstance(catalog, RestCatalog)
    if not catalog.namespace_exists("db"):
        catalog.create_namespace("db")
    yield catalog
    catalog.close()


def test_behind_a_rest_catalog(
    spark: SparkSession,
    rest: RestCatalog,
    rest_catalog_server: RestCatalogServer,
    duck: duckdb.DuckDBPyConnection,
) -> None:
    t = CatalogTable.create(rest, "manifests", properties=MERGE_OFF)  # type: ignore[arg-type]
    appends(t, 30, deletes_every=4)
    before = rest.load_table("db.manifests")
    rows = agreed_rows(before, duck)
    calls: list[int] = []

    def meanwhile(table: Table) -> None:
        calls.append(1)
        if len(calls) == 1:
            _compact_one_file(table)  # the first attempt conflicts
        else:
            other = rest.load_table("db.manifests")
            data = LocalTable(other.io, other.metadata).write_data([{"id": -5, "cat": "q", "v": 1}])
            other.new_fast_append().append_file(data).commit()  # the second is rebased

    result = rewrite(spark, rest, "db.manifests", before_commit=meanwhile)
    assert result.status == "committed" and result.attempts == 2
    after = rest.load_table("db.manifests")
    assert len(listed(after)) == 3
    assert agreed_rows(after, duck) == rows + Counter({(-5, "q", 1): 1})
    assert avro_files(after) <= referenced(after)
    commits = [r for r in rest_catalog_server.requests() if r.startswith("POST ")]
    assert any(r.endswith("/tables/manifests") for r in commits)


def test_expiry_deletes_the_replaced_manifests_and_orphan_removal_keeps_listed_ones(
    spark: SparkSession, catalog: SqlCatalog, events: CatalogTable, duck: duckdb.DuckDBPyConnection
) -> None:
    rewrite(spark, catalog, "db.events")
    table = catalog.load_table("db.events")
    rows = agreed_rows(table, duck)
    head = table.metadata.current_snapshot()
    assert head is not None and head.parent_snapshot_id is not None
    parent = table.metadata.snapshot_by_id(head.parent_snapshot_id)
    old = {m.manifest_path for m in snapshot_manifests(table.io, parent)}
    new = {m.manifest_path for m in listed(table)}
    assert len(old) == 46 and len(new) == 2
    stray = f"{table.metadata.location}/metadata/{'0' * 8}-m-stray.avro"
    table.io.write_bytes(stray, b"a manifest no snapshot lists")

    orphans = remove_orphan_files(
        spark,
        catalog,
        RemoveOrphanFilesOptions(table="db.events", older_than=FAR_FUTURE, force=True),
    )
    assert orphans.deleted_files_count == 1 and not table.io.exists(stray)
    assert all(table.io.exists(p) for p in old | new)  # every manifest a snapshot lists

    expired = expire_snapshots(
        spark,
        catalog,
        ExpireSnapshotsOptions(table="db.events", older_than=FAR_FUTURE, retain_last=1, force=True),
    )
    assert expired.deleted_manifest_files_count == len(old)
    assert expired.deleted_data_files_count == 0
    assert not any(table.io.exists(p) for p in old)
    assert all(table.io.exists(p) for p in new)
    again = remove_orphan_files(
        spark,
        catalog,
        RemoveOrphanFilesOptions(table="db.events", older_than=FAR_FUTURE, force=True),
    )
    assert again.deleted_files_count == 0
    assert agreed_rows(catalog.load_table("db.events"), duck) == rows


def test_the_command_line(catalog: SqlCatalog, warehouse: Path, events: CatalogTable) -> None:
    common = ["rewrite_manifests", "--warehouse", str(warehouse), "--table", "db.events"]
    err = io.StringIO()
    assert main([*common, "--sort-by", "nope"], stdout=io.StringIO(), stderr=err) == 1
    assert (
        err.getvalue()
        .splitlines()[-1]
        .endswith(
            "sort_by: 'nope' is not a partition field of spec 0 (its fields: cat); choose the spec "
            "with spec_id"
        )
    )
    out = io.StringIO()
    assert main([*common, "--spec-id", "0"], stdout=out, stderr=io.StringIO()) == 0
    result = json.loads(out.getvalue().strip().splitlines()[-1])
    assert result["status"] == "committed" and result["rewritten_in"] == "driver"
    assert (result["data_manifests_before"], result["data_manifests_after"]) == (40, 1)
    assert describe("rewrite_manifests", result) == (  # what the task log and the page say
        f"rewrote 46 manifests ({size(result['rewritten_bytes'])}, 86 entries) into 2: the "
        "table lists 2 manifests, was 46, in 1 commit"
    )
