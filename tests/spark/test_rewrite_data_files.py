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
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from pyiceberg.table import StaticTable
from pyspark.sql import SparkSession

from icecore.catalog import SqlCatalog
from icecore.errors import CommitConflictError
from icecore.manifest import FileContent, read_manifest
from icecore.scan import snapshot_manifests
from icecore.table import Table
from spark_jobs.common.cli import run
from spark_jobs.ingestion.job import ingest
from spark_jobs.ingestion.options import IngestOptions
from spark_jobs.maintenance.compaction import RewriteDataFilesOptions, compact
from spark_jobs.rewrite_data_files import build_parser, main, options_from_args
from spark_jobs.schema import conform
from spark_jobs.writing.files import POSITION_DELETE_SCHEMA, FileSet, RunFiles
from spark_jobs.writing.metrics import MetricsConfig
from tests.spark.submit import run_job
from tests.support.duckdb import (
    connect,
    duck_connection,  # noqa: F401 - provides the `duck` fixture
)
from tests.support.reader import scan_rows

SOURCE_SCHEMA = "id long, v string, ts timestamp_ntz, op string"
TABLE = "db.events"


def _batch(rnd: random.Random, b: int, size: int, null_keys: bool) -> list[tuple[Any, ...]]:
    keys: list[int | None] = list(range(1, 25)) + ([None] if null_keys else [])
    rows = []
    for i in range(size):
        op = "I" if b == 0 else rnd.choice("IUUD")
        ts = dt.datetime(2024, 1, 1 + rnd.randint(0, 1), rnd.randint(0, 23))
        rows.append((rnd.choice(keys), f"b{b}r{i}", ts, op))
    return rows


def _cdc(spark: SparkSession, catalog: SqlCatalog, rows: list[tuple[Any, ...]], **kw: Any) -> Any:
    frame = spark.createDataFrame(spark.sparkContext.parallelize(rows, 2), SOURCE_SCHEMA)
    options = IngestOptions(table=TABLE, mode="cdc", key=["id"], create=True, **kw)
    result = ingest(spark, catalog, options, source=frame)
    assert result["status"] == "committed"
    return result


def _rows(
    table: Table, duck: duckdb.DuckDBPyConnection | None, duckdb_bug: bool = False
) -> Counter[tuple[Any, ...]]:
    """The table's rows as our planner reads them; DuckDB must agree. `duckdb_bug`: the
    table has null partition values (a field added by evolution) and partition-scoped
    equality deletes, which duckdb-iceberg 1.5.5 cannot read (see test_ingest_changes).
    Without `duck`, only our planner reads: duckdb-iceberg 1.5.5 drops rows with a null key
    whenever an equality delete on other keys applies to their file (SQL `NOT (id = k)`
    is null), so tables with null keys are compared with DuckDB only once no delete is live."""
    ours = Counter((r["id"], r["v"], r["ts"]) for r in scan_rows(table.io, table.metadata))
    if duck is None:
        return ours
    sql = f"SELECT id, v, epoch_us(ts) FROM iceberg_scan('{table.metadata_location}')"
    con = connect()  # a fatal DuckDB error invalidates its connection
    try:
        theirs = Counter(con.execute(sql).fetchall())
    except duckdb.Error as exc:
        if duckdb_bug and "Comparison on NULL values" in str(exc):
            return ours
        raise
    finally:
        con.close()
    assert theirs == ours, "DuckDB disagrees with icecore's planner"
    return ours


def _pyiceberg_rows(table: Table) -> Counter[tuple[Any, ...]]:
    assert table.metadata_location is not None
    arrow = StaticTable.from_metadata(table.metadata_location).scan().to_arrow()
    columns = [arrow.column(n).to_pylist() for n in ("id", "v")]
    ts = arrow.column("ts").cast(pa.int64()).to_pylist()
    return Counter(zip(*columns, ts, strict=True))


def _live(table: Table) -> dict[FileContent, list[Any]]:
    out: dict[FileContent, list[Any]] = {c: [] for c in FileContent}
    snapshot = table.metadata.current_snapshot()
    assert snapshot is not None
    for manifest in snapshot_manifests(table.io, snapshot):
        spec = table.metadata.spec_by_id(manifest.partition_spec_id)
        for entry in read_manifest(table.io, manifest, spec=spec, live_only=True):
            out[entry.data_file.content].append(entry)
    return out


def _build(
    spark: SparkSession,
    catalog: SqlCatalog,
    batches: int,
    partition_by: str | None,
    *,
    seed: int,
    null_keys: bool = False,
) -> tuple[random.Random, Counter[tuple[Any, ...]]]:
    """CDC batches; the rows they leave by the model (U replaces, D removes every row of
    its key, null keys included)."""
    rnd = random.Random(seed)
    model: list[tuple[Any, ...]] = []
    for b in range(batches):
        rows = _batch(rnd, b, 40, null_keys)
        _cdc(spark, catalog, rows, partition_by=partition_by)
        for key, v, ts, op in rows:
            if op != "I":
                model = [m for m in model if m[0] != key]
            if op != "D":
                model.append((key, v, int(ts.replace(tzinfo=dt.UTC).timestamp() * 1_000_000)))
    return rnd, Counter(model)


def test_unpartitioned_compaction_applies_every_delete(
    spark: SparkSession, catalog: SqlCatalog, duck: duckdb.DuckDBPyConnection
) -> None:
    _, model = _build(spark, catalog, 3, None, seed=3, null_keys=True)
    table = catalog.load_table(TABLE)
    before = _rows(table, None)
    assert before == model
    live = _live(table)
    assert live[FileContent.POSITION_DELETES] and live[FileContent.EQUALITY_DELETES]
    start = table.metadata.current_snapshot()
    assert start is not None

    argv = ["--table", TABLE, "--warehouse", "x", "--min-input-files", "2"]
    result = compact(spark, catalog, options_from_args(build_parser().parse_args(argv)))

    table = catalog.load_table(TABLE)
    assert _rows(table, duck) == before
    live_after = _live(table)
    assert result["rewritten_data_files"] == len(live[FileContent.DATA])
    assert result["added_data_files"] == len(live_after[FileContent.DATA]) == 1
    assert result["removed_delete_files"] == len(live[FileContent.POSITION_DELETES]) + len(
        live[FileContent.EQUALITY_DELETES]
    )
    assert not live_after[FileContent.POSITION_DELETES]
    assert not live_after[FileContent.EQUALITY_DELETES]
    assert result["failed_groups"] == [] and len(result["commits"]) == 1
    # New files keep the starting snapshot's sequence number (use-starting-sequence-number).
    assert [e.sequence_number for e in live_after[FileContent.DATA]] == [start.sequence_number]
    snapshot = table.metadata.current_snapshot()
    assert snapshot is not None and snapshot.sequence_number == start.sequence_number + 1
    assert _pyiceberg_rows(table) == before


def test_two_specs_rewritten_into_the_current_one(
    spark: SparkSession, catalog: SqlCatalog, duck: duckdb.DuckDBPyConnection
) -> None:
    """bucket(id) with partition-scoped equality deletes, then day(ts) added: later deletes
    are global (the key no longer determines the partition)."""
    rnd, _ = _build(spark, catalog, 2, "bucket(2, id)", seed=5)
    table = catalog.load_table(TABLE)
    table.update_spec().add_field("ts", "day").commit()
    _cdc(spark, catalog, _batch(rnd, 2, 40, null_keys=False))
    table = catalog.load_table(TABLE)
    before = _rows(table, duck, duckdb_bug=True)
    live = _live(table)
    current = table.metadata.default_spec_id
    assert {e.data_file.spec_id for e in live[FileContent.DATA]} == {0, current}
    eq_specs = {e.data_file.spec_id for e in live[FileContent.EQUALITY_DELETES]}
    assert 0 in eq_specs and len(eq_specs) == 2

    options = RewriteDataFilesOptions(table=TABLE, rewrite_all=True)
    result = compact(spark, catalog, options)
    table = catalog.load_table(TABLE)
    assert _rows(table, duck) == before
    after = _live(table)
    assert {e.data_file.spec_id for e in after[FileContent.DATA]} == {current}
    assert result["rewritten_data_files"] == len(live[FileContent.DATA])
    assert len(after[FileContent.DATA]) < len(live[FileContent.DATA])
    assert not after[FileContent.POSITION_DELETES] and not after[FileContent.EQUALITY_DELETES]
    assert _pyiceberg_rows(table) == before

    # Back into the first spec with --output-spec-id, sorted by v: still the same rows.
    options = RewriteDataFilesOptions(
        table=TABLE, rewrite_all=True, output_spec_id=0, strategy="sort", sort_order="v desc"
    )
    compact(spark, catalog, options)
    table = catalog.load_table(TABLE)
    assert {e.data_file.spec_id for e in _live(table)[FileContent.DATA]} == {0}
    assert _rows(table, duck) == before


def _position_delete(spark: SparkSession, table: Table, path: str, pos: int) -> Any:
    """Commit a position delete of row `pos` of data file `path` (as a MERGE would)."""
    schema = POSITION_DELETE_SCHEMA
    frame = spark.createDataFrame([(path, pos)], "file_path string, pos long")
    frame = frame.select(*conform(frame.schema, schema.fields))
    spec = table.metadata.spec()
    assert spec.is_unpartitioned
    run = RunFiles(spark, table.io, table.metadata, "test")
    file_set = FileSet(
        "pos", FileContent.POSITION_DELETES, schema, spec, None, MetricsConfig.full()
    )
    run.write(frame.coalesce(1), file_set)
    table.refresh()
    delta = table.new_row_delta()
    for f in run.files():
        delta.add_deletes(f)
    delta.commit()
    return delta.snapshot_id


def test_races_equality_delete_applies_position_delete_conflicts(
    spark: SparkSession, catalog: SqlCatalog, duck: duckdb.DuckDBPyConnection
) -> None:
    rnd, model = _build(spark, catalog, 1, None, seed=8)
    table = catalog.load_table(TABLE)
    before = _rows(table, duck)
    assert before == model

    # 1. A CDC batch deleting a key commits while the job writes: its equality delete
    #    still applies to the rewritten files (they keep the starting sequence number).
    victim = next(k for (k, _, _), n in before.items() if k is not None and n)
    late = [
        (victim, "late", dt.datetime(2024, 1, 2), "D"),
        (99, "new", dt.datetime(2024, 1, 2), "I"),
    ]

    def delete_key(_: Table) -> None:
        _cdc(spark, catalog, late)

    result = compact(
        spark,
        catalog,
        RewriteDataFilesOptions(table=TABLE, rewrite_all=True),
        before_commit=delete_key,
    )
    assert result["failed_groups"] == []
    table = catalog.load_table(TABLE)
    expected = Counter({r: n for r, n in before.items() if r[0] != victim})
    expected[(99, "new", int(dt.datetime(2024, 1, 2, tzinfo=dt.UTC).timestamp() * 1e6))] += 1
    after = _rows(table, duck)
    assert after == expected

    # 2. A position delete on a file the job replaces is a conflict naming its snapshot...
    _build_more = _batch(rnd, 5, 30, null_keys=False)
    _cdc(spark, catalog, _build_more)
    table = catalog.load_table(TABLE)
    before = _rows(table, duck)
    target = _live(table)[FileContent.DATA][0].data_file.file_path
    made: list[int] = []

    def delete_position(t: Table) -> None:
        made.append(_position_delete(spark, catalog.load_table(TABLE), target, 0))

    options = RewriteDataFilesOptions(table=TABLE, rewrite_all=True, max_retries=0)
    with pytest.raises(CommitConflictError) as raised:
        compact(spark, catalog, options, before_commit=delete_position)
    message = str(raised.value)
    assert "found new position delete for replaced data file" in message
    assert str(made[0]) in message
    table = catalog.load_table(TABLE)
    current = table.metadata.current_snapshot()
    assert current is not None and current.snapshot_id == made[0]  # the job committed nothing
    _rows(table, duck)

    # ... which a retry from a fresh plan resolves.
    calls: list[int] = []

    def once(t: Table) -> None:
        if not calls:
            calls.append(_position_delete(spark, catalog.load_table(TABLE), _first(t), 1))

    result = compact(
        spark, catalog, RewriteDataFilesOptions(table=TABLE, rewrite_all=True), before_commit=once
    )
    assert result["retries"] == 1 and result["failed_groups"] == []
    table = catalog.load_table(TABLE)
    at_delete = scan_rows(table.io, table.metadata, snapshot_id=calls[0])
    assert _rows(table, duck) == Counter((r["id"], r["v"], r["ts"]) for r in at_delete)
    assert not _live(table)[FileContent.POSITION_DELETES]


def _first(table: Table) -> str:
    return _live(table)[FileContent.DATA][0].data_file.file_path


def test_plan_only_options_are_checked(catalog: SqlCatalog, spark: SparkSession) -> None:
    _cdc(spark, catalog, [(1, "a", dt.datetime(2024, 1, 1), "I")])
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
    assert result["planned_groups"] == 0 and result["commits"] == []


def test_spark_submit_and_command_line(
    spark: SparkSession, catalog: SqlCatalog, warehouse: Path, tmp_path: Path
) -> None:
    _cdc(spark, catalog, [(i, f"a{i}", dt.datetime(2024, 1, 1), "I") for i in range(6)])
    day = dt.datetime(2024, 1, 1)
    _cdc(spark, catalog, [(1, "u", day, "U"), (2, "", day, "D")])
    done = run_job(
        "rewrite_data_files",
        tmp_path,
        [
            "--warehouse",
            str(warehouse),
            "--table",
            TABLE,
            "--min-input-files",
            "2",
            "--partial-progress.enabled",
        ],
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["added_data_files"] == 1 and result["removed_delete_files"] >= 1
    table = catalog.load_table(TABLE)
    assert sorted(r["id"] for r in scan_rows(table.io, table.metadata)) == [0, 1, 3, 4, 5]

    out, err = io.StringIO(), io.StringIO()
    argv = ["--warehouse", str(warehouse), "--table", TABLE]
    assert run(main, [*argv, "--strategy", "zorder"], stdout=out, stderr=err) == 2
    assert run(main, [*argv, "--strategy", "sort"], stdout=out, stderr=err) == 1
    assert "no sort order" in err.getvalue().strip().splitlines()[-1]
