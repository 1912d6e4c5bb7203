"""Major compaction on tables built by the ingestion job: rows never change, files shrink.

Tables get position deletes (keys repeated within a CDC batch) and equality deletes (updates
and deletes), unpartitioned and partitioned with two specs after a partition change. Before
and after, the rows read by DuckDB and by icecore's planner with a naive reader must be the
same; after, no delete is live, so PyIceberg must read them too. Races are committed from
the job's hook between writing and committing.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest
from pyspark.sql import SparkSession

from icecore.actions.run_files import FileSet, RunFiles
from icecore.catalog import SqlCatalog
from icecore.data.arrow_schema import arrow_schema
from icecore.data.live_batches import DataRef, DeleteRef, LiveBatches
from icecore.errors import CommitConflictError
from icecore.jobs.argv import parse_job_args
from icecore.jobs.jobs import JOBS, RewriteDataFilesOptions
from icecore.spec.manifest import FileContent
from icecore.spec.metadata_columns import POSITION_DELETE_SCHEMA
from icecore.table import Table
from spark_jobs.common.cli import main
from spark_jobs.rewrite_data_files import run as compact
from spark_jobs.schema import conform
from spark_jobs.writing.files import write_frame
from tests.spark.delete_tables import (
    TABLE,
    assert_under_partition_paths,
    batch,
    cdc,
    commit_batch,
    create,
    live,
    rows,
)
from tests.spark.templates import Built, built_warehouse  # noqa: F401 - `warehouse`
from tests.support.batches import Model
from tests.support.duckdb import duck_connection  # noqa: F401 - provides the `duck` fixture
from tests.support.reader import scan_rows
from tests.support.spark_connect import JobRun, SparkConnectServer
from tests.support.tables import LocalTable


def _build(
    spark: SparkSession,
    catalog: SqlCatalog,
    batches: int,
    partition_by: str | None,
    *,
    seed: int,
    null_keys: bool = False,
) -> tuple[random.Random, Counter[tuple[Any, ...]]]:
    """CDC batches (through the ingestion job where keys may be null, delete_tables.build
    says why); the rows they leave by the CDC model."""
    rnd = random.Random(seed)
    model = Model()
    for b in range(batches):
        changes = batch(rnd, b, 40, null_keys)
        commit_batch(spark, catalog, changes, partition_by, null_keys)
        model.apply("cdc", changes)
    return rnd, model.counter()


@pytest.mark.parametrize("job_runner", ["classic"], indirect=True)
def test_unpartitioned_compaction_applies_every_delete(
    spark: SparkSession,
    catalog: SqlCatalog,
    duck: duckdb.DuckDBPyConnection,
    job_runner: JobRun,
) -> None:
    """Bin-packed in the tasks, on the local session. Over Spark Connect the bin-packing
    tasks run in test_two_specs_rewritten_into_the_current_one (the groups already in the
    current spec) and test_the_command_line_as_a_client (an unpartitioned table with
    position and equality deletes)."""
    _, model = _build(spark, catalog, 3, None, seed=3, null_keys=True)
    table = catalog.load_table(TABLE)
    before = rows(table, None)
    assert before == model
    files = live(table)
    assert files[FileContent.POSITION_DELETES] and files[FileContent.EQUALITY_DELETES]
    start = table.metadata.current_snapshot()
    assert start is not None

    argv = ["--table", TABLE, "--warehouse", "x", "--min-input-files", "2"]
    result = job_runner(
        "rewrite_data_files", parse_job_args(JOBS["rewrite_data_files"], argv).options
    )

    table = catalog.load_table(TABLE)
    assert rows(table, duck) == before
    live_after = live(table)
    assert result.rewritten_data_files == len(files[FileContent.DATA])
    assert result.added_data_files == len(live_after[FileContent.DATA]) == 1
    assert result.removed_delete_files == len(files[FileContent.POSITION_DELETES]) + len(
        files[FileContent.EQUALITY_DELETES]
    )
    assert not live_after[FileContent.POSITION_DELETES]
    assert not live_after[FileContent.EQUALITY_DELETES]
    assert result.failed_groups == [] and len(result.commits) == 1
    # New files keep the starting snapshot's sequence number (use-starting-sequence-number).
    assert [e.sequence_number for e in live_after[FileContent.DATA]] == [start.sequence_number]
    snapshot = table.metadata.current_snapshot()
    assert snapshot is not None and snapshot.sequence_number == start.sequence_number + 1


def _two_specs(spark: SparkSession, catalog: SqlCatalog) -> None:
    """bucket(id) with partition-scoped equality deletes, then day(ts) added and a third
    batch, whose deletes are global (the key no longer determines the partition)."""
    rnd, _ = _build(spark, catalog, 2, "bucket(2, id)", seed=5)
    catalog.load_table(TABLE).update_spec().add_field("ts", "day").commit()
    commit_batch(spark, catalog, batch(rnd, 2, 40, null_keys=False), None, null_keys=False)


@pytest.mark.parametrize(
    "warehouse", [Built("rewrite-data-files-two-specs", _two_specs)], ids=["built"], indirect=True
)
def test_two_specs_rewritten_into_the_current_one(
    spark: SparkSession,
    catalog: SqlCatalog,
    duck: duckdb.DuckDBPyConnection,
    job_runner: JobRun,
) -> None:
    """bucket(id) with partition-scoped equality deletes, then day(ts) added: later deletes
    are global (the key no longer determines the partition). Rewritten through Spark's
    shuffles (bucket partition values, then a sort), on the local session and over Connect,
    each on a copy of one build (tests/spark/templates.py)."""
    table = catalog.load_table(TABLE)
    before = rows(table, None)  # DuckDB: null partition values, see delete_tables
    files = live(table)
    current = table.metadata.default_spec_id
    assert {e.data_file.spec_id for e in files[FileContent.DATA]} == {0, current}
    eq_specs = {e.data_file.spec_id for e in files[FileContent.EQUALITY_DELETES]}
    assert 0 in eq_specs and len(eq_specs) == 2

    options = RewriteDataFilesOptions(table=TABLE, rewrite_all=True)
    result = job_runner("rewrite_data_files", options)
    table = catalog.load_table(TABLE)
    assert rows(table, duck) == before
    after = live(table)
    assert {e.data_file.spec_id for e in after[FileContent.DATA]} == {current}
    assert {e.data_file.partition[1] for e in after[FileContent.DATA]} != {None}
    assert_under_partition_paths(table, [e.data_file for e in after[FileContent.DATA]])
    assert result.rewritten_data_files == len(files[FileContent.DATA])
    assert len(after[FileContent.DATA]) < len(files[FileContent.DATA])
    assert not after[FileContent.POSITION_DELETES] and not after[FileContent.EQUALITY_DELETES]

    # Back into the first spec with --output-spec-id, sorted by v: still the same rows.
    options = RewriteDataFilesOptions(
        table=TABLE, rewrite_all=True, output_spec_id=0, strategy="sort", sort_order="v desc"
    )
    job_runner("rewrite_data_files", options)
    table = catalog.load_table(TABLE)
    data = [e.data_file for e in live(table)[FileContent.DATA]]
    assert {f.spec_id for f in data} == {0} and len({f.partition for f in data}) == 2
    assert_under_partition_paths(table, data)
    assert rows(table, duck) == before


def test_the_callers_session_never_sees_the_write_settings(
    spark: SparkSession, catalog: SqlCatalog
) -> None:
    """The compaction write needs adaptive execution and union output partitioning off; they
    live in a session of its own, so the caller's session, and queries running in it meanwhile,
    keep theirs throughout, and the caller's settings (field ids) still reach the files."""
    _, model = _build(spark, catalog, 3, "bucket(2, id)", seed=5)
    keys = [
        "spark.sql.adaptive.enabled",
        "spark.sql.unionOutputPartitioning",
    ]
    spark.conf.set("spark.sql.adaptive.enabled", "true")
    before = {k: spark.conf.get(k, None) for k in keys}
    seen: list[dict[str, str | None]] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.append({k: spark.conf.get(k, None) for k in keys})
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = compact(spark, catalog, RewriteDataFilesOptions(table=TABLE, rewrite_all=True))
    finally:
        done.set()
        watcher.join()
    assert result.added_data_files > 0 and result.failed_groups == []
    assert len(seen) > 10 and all(s == before for s in seen)
    assert before["spark.sql.adaptive.enabled"] == "true"
    assert rows(catalog.load_table(TABLE), None) == model


def _position_delete(spark: SparkSession, table: Table, path: str, pos: int) -> Any:
    """Commit a position delete of row `pos` of data file `path` (as a MERGE would)."""
    schema = POSITION_DELETE_SCHEMA
    frame = spark.createDataFrame([(path, pos)], "file_path string, pos long")
    frame = frame.select(*conform(frame.schema, schema.fields))
    spec = table.metadata.spec()
    assert spec.is_unpartitioned
    run = RunFiles(table.io, table.metadata, "test")
    write_frame(run, frame.coalesce(1), FileSet.position_deletes(spec, name="pos"))
    table.refresh()
    delta = table.new_row_delta()
    for f in run.files():
        delta.add_deletes(f)
    delta.commit()
    return delta.snapshot_id


def test_races_equality_delete_applies_position_delete_is_rebased(
    spark: SparkSession, catalog: SqlCatalog, duck: duckdb.DuckDBPyConnection
) -> None:
    rnd, model = _build(spark, catalog, 1, None, seed=8)
    table = catalog.load_table(TABLE)
    before = rows(table, duck)
    assert before == model

    # 1. A CDC batch deleting a key commits while the job writes: its equality delete
    #    still applies to the rewritten files (they keep the starting sequence number).
    victim = next(k for (k, _, _), n in before.items() if k is not None and n)
    late = [
        (victim, "late", dt.datetime(2024, 1, 2), "D"),
        (99, "new", dt.datetime(2024, 1, 2), "I"),
    ]

    def delete_key(_: Table) -> None:
        cdc(spark, catalog, late)

    result = compact(
        spark,
        catalog,
        RewriteDataFilesOptions(table=TABLE, rewrite_all=True),
        before_commit=delete_key,
    )
    assert result.failed_groups == []
    table = catalog.load_table(TABLE)
    expected = Counter({r: n for r, n in before.items() if r[0] != victim})
    expected[(99, "new", int(dt.datetime(2024, 1, 2, tzinfo=dt.UTC).timestamp() * 1e6))] += 1
    after = rows(table, duck)
    assert after == expected

    # 2. A position delete on a file the job replaces follows the row into the new file: the
    #    job commits on its first plan, the row stays deleted.
    _build_more = batch(rnd, 5, 30, null_keys=False)
    cdc(spark, catalog, _build_more)
    table = catalog.load_table(TABLE)
    target, live_pos = _live_position(table)
    made: list[int] = []

    def delete_position(t: Table) -> None:
        made.append(_position_delete(spark, catalog.load_table(TABLE), target, live_pos))

    options = RewriteDataFilesOptions(table=TABLE, rewrite_all=True, max_attempts=1)
    result = compact(spark, catalog, options, before_commit=delete_position)
    assert (result.attempts, result.conflicts, result.failed_groups) == (1, [], [])
    assert (result.rebased_commits, result.rebased_rows) == (1, 1)
    table = catalog.load_table(TABLE)
    at_delete = scan_rows(table.io, table.metadata, snapshot_id=made[0])
    assert rows(table, duck) == Counter((r["id"], r["v"], r["ts"]) for r in at_delete)
    (rebased,) = live(table)[FileContent.POSITION_DELETES]
    assert rebased.data_file.referenced_data_file in {
        e.data_file.file_path for e in live(table)[FileContent.DATA]
    }

    # 3. Without the rebase, as before: a conflict naming the writer's snapshot...
    made.clear()
    target = _first(table)
    options = RewriteDataFilesOptions(
        table=TABLE, rewrite_all=True, max_attempts=1, rebase_concurrent_deletes=False
    )
    with pytest.raises(CommitConflictError) as raised:
        compact(spark, catalog, options, before_commit=delete_position)
    message = str(raised.value)
    assert "found new position delete for replaced data file" in message
    assert str(made[0]) in message
    table = catalog.load_table(TABLE)
    current = table.metadata.current_snapshot()
    assert current is not None and current.snapshot_id == made[0]  # the job committed nothing
    rows(table, duck)

    # ... which a retry from a fresh plan resolves.
    calls: list[int] = []

    def once(t: Table) -> None:
        if not calls:
            calls.append(_position_delete(spark, catalog.load_table(TABLE), _first(t), 1))

    options = RewriteDataFilesOptions(
        table=TABLE, rewrite_all=True, rebase_concurrent_deletes=False
    )
    result = compact(spark, catalog, options, before_commit=once)
    assert result.attempts == 2 and result.failed_groups == []
    assert len(result.conflicts) == 1 and str(calls[0]) in result.conflicts[0]
    table = catalog.load_table(TABLE)
    at_delete = scan_rows(table.io, table.metadata, snapshot_id=calls[0])
    assert rows(table, duck) == Counter((r["id"], r["v"], r["ts"]) for r in at_delete)
    assert not live(table)[FileContent.POSITION_DELETES]


def _live_position(table: Table) -> tuple[str, int]:
    """A data file and the position of a row of it no delete removes yet."""
    schema = table.metadata.schema()
    for task in table.scan().plan_files():
        refs = [DeleteRef.of(d) for d in task.deletes]
        path = task.file.file_path
        reader = LiveBatches(table.io, schema.fields, arrow_schema(schema.fields), refs, [path])
        data = DataRef(path, 0, 2**62, 0, deletes=tuple(range(len(refs))))
        gone = set(reader.deleted_positions(data)) | set(reader.equality_deleted(data))
        kept = [p for p in range(task.file.record_count) if p not in gone]
        if kept:
            return path, kept[0]
    raise AssertionError("no live row")


def _first(table: Table) -> str:
    return live(table)[FileContent.DATA][0].data_file.file_path


def test_plan_only_options_are_checked(catalog: SqlCatalog, spark: SparkSession) -> None:
    cdc(spark, catalog, [(1, "a", dt.datetime(2024, 1, 1), "I")])
    bad: list[Callable[[], Any]] = [
        lambda: compact(spark, catalog, RewriteDataFilesOptions(TABLE, strategy="zorder")),
        lambda: compact(spark, catalog, RewriteDataFilesOptions(TABLE, output_spec_id=7)),
        lambda: compact(spark, catalog, RewriteDataFilesOptions(TABLE, strategy="sort")),
        lambda: compact(spark, catalog, RewriteDataFilesOptions(TABLE, where="id >")),
    ]
    for call in bad:
        with pytest.raises(Exception, match=r"strategy|output-spec-id|sort order|--where"):
            call()
    # Nothing worth rewriting: one small file.
    result = compact(spark, catalog, RewriteDataFilesOptions(TABLE))
    assert result.planned_groups == 0 and result.commits == []


def test_the_command_line_as_a_client(
    spark: SparkSession,
    catalog: SqlCatalog,
    warehouse: Path,
    tmp_path: Path,
    spark_connect: SparkConnectServer,
) -> None:
    cdc(spark, catalog, [(i, f"a{i}", dt.datetime(2024, 1, 1), "I") for i in range(6)])
    day = dt.datetime(2024, 1, 1)
    cdc(spark, catalog, [(1, "u", day, "U"), (2, "", day, "D")])
    done = spark_connect.run_job(
        "rewrite_data_files",
        [
            "--warehouse",
            str(warehouse),
            "--table",
            TABLE,
            "--min-input-files",
            "2",
            "--partial-progress.enabled",
        ],
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["added_data_files"] == 1 and result["removed_delete_files"] >= 1
    table = catalog.load_table(TABLE)
    assert sorted(r["id"] for r in scan_rows(table.io, table.metadata)) == [0, 1, 3, 4, 5]

    out, err = io.StringIO(), io.StringIO()
    argv = ["--warehouse", str(warehouse), "--table", TABLE]
    assert main(["rewrite_data_files", *argv, "--strategy", "zorder"], stdout=out, stderr=err) == 2
    assert main(["rewrite_data_files", *argv, "--strategy", "sort"], stdout=out, stderr=err) == 1
    assert "no sort order" in err.getvalue().strip().splitlines()[-1]


def test_deletes_apply_only_within_their_group(
    spark: SparkSession, catalog: SqlCatalog, duck: duckdb.DuckDBPyConnection
) -> None:
    """One Spark job writes every group, with one broadcast per kind of delete: a
    partition's equality delete must not reach the same key in another partition, nor a
    newer file of its own partition, and a position delete only its own file's row."""
    table = create(catalog, "v")
    local = LocalTable(table.io, table.metadata)
    day = 1_704_067_200_000_000
    a_rows = [{"id": i, "v": "a", "ts": day + i} for i in range(4)]
    b_rows = [{"id": i, "v": "b", "ts": day + i} for i in range(4)]
    files = [local.write_data(a_rows), local.write_data(b_rows), local.write_data(a_rows[:2])]
    delta = table.new_row_delta()
    for f in files:
        delta.add_rows(f)
    delta.commit()
    table.refresh()
    local = LocalTable(table.io, table.metadata)
    eq = local.write_equality_deletes([{"id": 1}, {"id": 2}], ["id"], partition=("a",))
    pos = local.write_position_deletes([(files[1].file_path, 3)], partition=("b",))
    delta = table.new_row_delta()
    delta.add_deletes(eq)
    delta.add_deletes(pos)
    delta.commit()
    table.refresh()
    newer = LocalTable(table.io, table.metadata).write_data([{"id": 1, "v": "a", "ts": day}])
    delta = table.new_row_delta()
    delta.add_rows(newer)
    delta.commit()
    table = catalog.load_table(TABLE)
    # Not DuckDB: duckdb-iceberg 1.5.5 applies a's equality delete to b's rows too.
    before = rows(table, None)
    # a: 1 and 2 deleted in both older files, the newer 1 stays; b: only position 3 goes.
    assert before == Counter(
        {
            (0, "a", day): 2,
            (3, "a", day + 3): 1,
            (1, "a", day): 1,
            (0, "b", day): 1,
            (1, "b", day + 1): 1,
            (2, "b", day + 2): 1,
        }
    )

    result = compact(spark, catalog, RewriteDataFilesOptions(TABLE, rewrite_all=True))
    assert result.planned_groups == 2 and result.added_data_files == 2
    table = catalog.load_table(TABLE)
    assert rows(table, duck) == before
    after = live(table)
    assert not after[FileContent.EQUALITY_DELETES] and not after[FileContent.POSITION_DELETES]
