"""convert_equality_deletes on tables the ingestion job wrote: afterwards no equality delete
is live, every reader (DuckDB, icecore's planner, PyIceberg) returns the same rows as before,
and the new position deletes carry sequence numbers that apply to exactly their files."""

from __future__ import annotations

import datetime as dt
import io
import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from icecore.actions.table_setup import create_table
from icecore.catalog import SqlCatalog
from icecore.data.metrics import MetricsConfig, decode, footer_metrics
from icecore.jobs.jobs import ConvertEqualityDeletesOptions
from icecore.spec.manifest import FileContent
from icecore.spec.metadata_columns import POSITION_DELETE_SCHEMA
from icecore.spec.schema import Schema
from icecore.spec.types import LongType, NestedField, StringType, TimestampType
from spark_jobs.common.cli import main
from spark_jobs.common.cli import run_job as run_in_process
from spark_jobs.convert_equality_deletes import job as equality_conversion
from spark_jobs.convert_equality_deletes import run as convert_equality_deletes
from tests.spark.delete_tables import TABLE, assert_under_partition_paths, build, cdc, live, rows
from tests.spark.templates import Built, built_warehouse  # noqa: F401 - `warehouse`
from tests.support.duckdb import duck_connection  # noqa: F401 - provides the `duck` fixture
from tests.support.reader import scan_rows
from tests.support.spark_connect import JobRun, SparkConnectServer


def _check_sequence_numbers(table: Any, before: dict[FileContent, list[Any]]) -> None:
    after = live(table)
    data_seq = {e.data_file.file_path: e.sequence_number for e in after[FileContent.DATA]}
    max_eq = max(e.sequence_number for e in before[FileContent.EQUALITY_DELETES])
    old = {e.data_file.file_path for e in before[FileContent.POSITION_DELETES]}
    new = [e for e in after[FileContent.POSITION_DELETES] if e.data_file.file_path not in old]
    assert new
    for entry in new:
        f = entry.data_file
        assert f.lower_bounds is not None and f.upper_bounds is not None
        low = f.lower_bounds[2147483546].decode()
        high = f.upper_bounds[2147483546].decode()
        named = [p for p in data_seq if low <= p <= high]
        assert named, "a position delete naming no live data file"
        assert all(data_seq[p] <= entry.sequence_number for p in named)
        assert entry.sequence_number <= max_eq


def _check_files_as_described(table: Any, before: dict[FileContent, list[Any]]) -> None:
    """The new position delete files, which the writing tasks described from the footers
    they held: required `file_path`/`pos` with their reserved ids, rows sorted, and manifest
    metrics exactly what reading the footer back gives."""
    old = {e.data_file.file_path for e in before[FileContent.POSITION_DELETES]}
    new = [
        e.data_file
        for e in live(table)[FileContent.POSITION_DELETES]
        if e.data_file.file_path not in old
    ]
    assert new
    for f in new:
        parquet = pq.ParquetFile(f.file_path)
        columns = [parquet.schema.column(i) for i in range(2)]
        assert [(c.name, c.max_definition_level) for c in columns] == [("file_path", 0), ("pos", 0)]
        ids = [int(parquet.schema_arrow.field(i).metadata[b"PARQUET:field_id"]) for i in range(2)]
        assert ids == [2147483546, 2147483545]
        written = parquet.read().to_pylist()
        assert written == sorted(written, key=lambda r: (r["file_path"], r["pos"]))
        described = decode(
            footer_metrics(table.io, f.file_path, POSITION_DELETE_SCHEMA, MetricsConfig.full())
        )
        assert {name: getattr(f, name) for name in described} == described


def _convert_and_check(
    spark: SparkSession,
    catalog: SqlCatalog,
    duck: duckdb.DuckDBPyConnection,
    *,
    duck_before: bool = True,
    route: str = "driver",
    run: JobRun | None = None,
) -> None:
    """Convert the table's equality deletes (matching where `route` says; by `run`, else on
    the local session in this process); every reader sees the same rows after, no equality
    delete is live, and the new files and their sequence numbers are right."""
    table = catalog.load_table(TABLE)
    before_files = live(table)
    assert before_files[FileContent.EQUALITY_DELETES]
    expected = rows(table, duck if duck_before else None)
    start = table.metadata.current_snapshot()

    if run is None:
        result = convert_equality_deletes(spark, catalog, ROUTES[route])
    else:
        result = run("convert_equality_deletes", ROUTES[route])

    table = catalog.load_table(TABLE)
    after_files = live(table)
    assert not after_files[FileContent.EQUALITY_DELETES]
    assert rows(table, duck) == expected  # PyIceberg included: no equality delete is live
    assert result.status == "committed" and result.attempts == 1
    assert result.matched_in == route
    assert result.removed_equality_delete_files == len(before_files[FileContent.EQUALITY_DELETES])
    assert result.added_position_delete_files == len(
        after_files[FileContent.POSITION_DELETES]
    ) - len(before_files[FileContent.POSITION_DELETES])
    snapshot = table.metadata.current_snapshot()
    assert snapshot.operation.value == "replace"
    assert snapshot.sequence_number == start.sequence_number + 1
    _check_sequence_numbers(table, before_files)
    _check_files_as_described(table, before_files)
    old = {e.data_file.file_path for e in before_files[FileContent.POSITION_DELETES]}
    added = [e.data_file for e in after_files[FileContent.POSITION_DELETES]]
    assert_under_partition_paths(table, [f for f in added if f.file_path not in old])
    # Nothing left to do: a second run commits nothing.
    again = convert_equality_deletes(spark, catalog, ConvertEqualityDeletesOptions(TABLE))
    assert again.status == "no-equality-deletes"


# Where the matching runs: the driver's threads (small key columns, the default here), Python
# tasks in Spark, or Spark's join (more delete keys than a task holds).
ROUTES = {
    "driver": ConvertEqualityDeletesOptions(TABLE),
    "spark-tasks": ConvertEqualityDeletesOptions(TABLE, driver_max_bytes=0),
    "spark-join": ConvertEqualityDeletesOptions(TABLE, task_max_keys=0),
}


def _built(name: str, partition_by: str | None, respec: str | None) -> Built:
    """The table of test_conversion_keeps_rows: four CDC batches (delete_tables.build: the
    ingestion job's where keys may be null; with `respec`, the last two after that partition
    field was added), built once per session."""

    def make(spark: SparkSession, catalog: SqlCatalog) -> None:
        build(spark, catalog, 4, partition_by, seed=7, respec=respec, size=20)

    return Built(f"convert-equality-deletes-{name}", make)


UNPARTITIONED = _built("unpartitioned", None, None)
TWO_SPECS = _built("two-specs", "bucket(3, id)", "ts:day")
GLOBAL_DELETES = _built("global-deletes", "day(ts)", None)


@pytest.mark.parametrize(
    ("warehouse", "route", "job_runner"),
    [
        pytest.param(UNPARTITIONED, "driver", "classic", id="unpartitioned"),
        pytest.param(UNPARTITIONED, "spark-join", "classic", id="unpartitioned-join"),
        pytest.param(TWO_SPECS, "driver", "classic", id="two-specs"),
        pytest.param(TWO_SPECS, "spark-tasks", "classic", id="two-specs-tasks"),
        pytest.param(TWO_SPECS, "spark-join", "classic", id="two-specs-join"),
        pytest.param(GLOBAL_DELETES, "spark-tasks", "classic", id="global-deletes-tasks"),
        # Over Spark Connect, the route whose Spark plan is the job's own (the join, with the
        # shipped Parquet reader and position delete writer in the server's tasks). The
        # driver's threads never contact the server: that route as a client is
        # test_the_command_line_as_a_client's. The tasks route's one `mapInArrow` of a shipped
        # function is what rewrite_data_files' bin-packing runs over Connect
        # (test_rewrite_data_files), and its matching is the classic cases'.
        pytest.param(TWO_SPECS, "spark-join", "connect", id="two-specs-join-connect"),
    ],
    indirect=["warehouse", "job_runner"],
)
def test_conversion_keeps_rows(
    spark: SparkSession,
    catalog: SqlCatalog,
    duck: duckdb.DuckDBPyConnection,
    job_runner: JobRun,
    *,
    route: str,
) -> None:
    """Optional keys (null keys in the unpartitioned case, where a null deletes a null). The
    cases of one table convert copies of one build (tests/spark/templates.py)."""
    respec = len(catalog.load_table(TABLE).metadata.partition_specs) > 1
    # Before: DuckDB trips over the spec change's null partition values (see delete_tables).
    _convert_and_check(spark, catalog, duck, duck_before=not respec, route=route, run=job_runner)


def test_required_keys(
    spark: SparkSession, catalog: SqlCatalog, duck: duckdb.DuckDBPyConnection
) -> None:
    """A required identifier column, as keyed tables usually have: its keys are matched by
    plain equality rather than null-safely, and must delete exactly the same rows."""
    schema = Schema(
        (
            NestedField(1, "id", LongType(), required=True),
            NestedField(2, "v", StringType()),
            NestedField(3, "ts", TimestampType()),
        ),
        identifier_field_ids=(1,),
    )
    create_table(
        catalog,
        TABLE,
        schema,
        partition_by="bucket(3, id)",
        sort_by=None,
        properties={},
        format_version=2,
    )
    build(spark, catalog, 4, "bucket(3, id)", seed=11, size=20)
    assert catalog.load_table(TABLE).metadata.schema().find_field("id").required
    _convert_and_check(spark, catalog, duck)


def test_concurrent_rewrite_of_a_target_conflicts_then_replans(
    spark: SparkSession,
    catalog: SqlCatalog,
    duck: duckdb.DuckDBPyConnection,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A data file the conversion names is replaced (keeping its sequence number, as a
    compaction with use-starting-sequence-number may) between planning and commit: the
    commit must fail naming that snapshot, and the job re-plans and succeeds."""
    build(spark, catalog, 3, None, seed=2)
    table = catalog.load_table(TABLE)
    expected = rows(table, duck)
    real_commit = equality_conversion._commit
    raced: list[int] = []

    def racing_commit(table: Any, state: Any, **kwargs: Any) -> Any:
        if not raced:
            other = catalog.load_table(TABLE)
            # A file without position deletes: copying it loses none.
            task = next(t for t in state.tasks if t.equality_deletes and not t.position_deletes)
            copy = task.file.file_path.replace(".parquet", "-copy.parquet")
            shutil.copyfile(task.file.file_path, copy)
            rewrite = other.new_rewrite().rewrite_files(
                [task.file], [replace(task.file, file_path=copy)]
            )
            rewrite.data_sequence_number(task.data_sequence_number).commit()
            raced.append(rewrite.snapshot_id)
        return real_commit(table, state, **kwargs)

    monkeypatch.setattr(equality_conversion, "_commit", racing_commit)
    result = convert_equality_deletes(spark, catalog, ConvertEqualityDeletesOptions(TABLE))
    assert result.attempts == 2
    assert len(result.conflicts) == 1 and str(raced[0]) in result.conflicts[0]
    assert "missing data file" in result.conflicts[0]
    table = catalog.load_table(TABLE)
    assert not live(table)[FileContent.EQUALITY_DELETES]
    assert rows(table, duck) == expected


def test_cli_without_equality_deletes(
    catalog: SqlCatalog, spark: SparkSession, warehouse: Any
) -> None:
    build(spark, catalog, 1, None, seed=1)
    result = run_in_process(
        "convert_equality_deletes", ["--warehouse", str(warehouse), "--table", TABLE]
    )
    assert result["status"] == "no-equality-deletes"


def test_the_command_line_as_a_client(
    spark: SparkSession,
    catalog: SqlCatalog,
    warehouse: Path,
    tmp_path: Path,
    spark_connect: SparkConnectServer,
) -> None:
    """The delete-file jobs' command line in a process of its own (shared CLI contract), as a
    Spark Connect client: the killed-job and ingest tests pay for the spark-submits."""
    day = dt.datetime(2024, 1, 1)
    cdc(spark, catalog, [(i, f"a{i}", day, "I") for i in range(6)])
    cdc(spark, catalog, [(1, "u", day, "U"), (2, "", day, "D")])
    done = spark_connect.run_job(
        "convert_equality_deletes", ["--warehouse", str(warehouse), "--table", TABLE], cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["status"] == "committed" and result["added_position_deletes"] == 2
    table = catalog.load_table(TABLE)
    assert not live(table)[FileContent.EQUALITY_DELETES]
    got = sorted((r["id"], r["v"]) for r in scan_rows(table.io, table.metadata))
    assert got == [(0, "a0"), (1, "u"), (3, "a3"), (4, "a4"), (5, "a5")]

    out, err = io.StringIO(), io.StringIO()
    argv = ["--warehouse", str(warehouse), "--table", "db.missing"]
    assert main(["convert_equality_deletes", *argv], stdout=out, stderr=err) == 1
    assert err.getvalue().strip().splitlines()[-1]
