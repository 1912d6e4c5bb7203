"""rewrite_position_deletes on tables the ingestion job wrote: small position delete files
merge into sorted ones, dangling deletes go, equality deletes merge only within one
sequence number, and every reader returns the same rows before and after."""

from __future__ import annotations

import random
import shutil
from collections import Counter
from dataclasses import replace
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from icecore.catalog import SqlCatalog
from icecore.errors import CommitConflictError
from icecore.jobs import OptionError
from icecore.jobs.jobs import RewritePositionDeletesOptions
from icecore.spec.manifest import FileContent
from icecore.spec.snapshots import Operation
from spark_jobs.common.cli import run_job
from spark_jobs.rewrite_position_deletes import run as rewrite_position_deletes
from tests.spark.delete_tables import (
    TABLE,
    assert_under_partition_paths,
    batch,
    before_swap,
    build,
    commit_cdc,
    create,
    duck_rows,
    live,
    rows,
)
from tests.spark.templates import Built, built_warehouse  # noqa: F401 - `warehouse`
from tests.support.duckdb import duck_connection  # noqa: F401 - provides the `duck` fixture
from tests.support.reader import scan_rows
from tests.support.spark_connect import JobRun

_UNPARTITIONED = (None, None, True)
_TWO_SPECS = ("bucket(2, id)", "ts:day", False)


def _built(name: str, shape: tuple[str | None, str | None, bool]) -> Built:
    """Three CDC batches in `shape` (delete_tables.build), built once per session."""
    partition_by, respec, _ = shape

    def make(spark: SparkSession, catalog: SqlCatalog) -> None:
        build(spark, catalog, 3, partition_by, seed=9, respec=respec, size=24)

    return Built(f"rewrite-position-deletes-{name}", make)


_TWO_SPECS_TABLE = _built("two-specs", _TWO_SPECS)


@pytest.mark.parametrize(
    ("warehouse", "shape", "job_runner"),
    [
        pytest.param(
            _built("unpartitioned", _UNPARTITIONED),
            _UNPARTITIONED,
            "classic",
            id="classic-unpartitioned",
        ),
        pytest.param(_TWO_SPECS_TABLE, _TWO_SPECS, "classic", id="classic-two-specs"),
        # Over Spark Connect the partitioned table with two specs, whose deletes the server's
        # tasks read and write per partition of each spec; the unpartitioned table takes the
        # same path with one group.
        pytest.param(_TWO_SPECS_TABLE, _TWO_SPECS, "connect", id="connect-two-specs"),
    ],
    indirect=["warehouse", "job_runner"],
)
def test_merges_drops_dangling_and_keeps_rows(
    spark: SparkSession,
    catalog: SqlCatalog,
    duck: duckdb.DuckDBPyConnection,
    job_runner: JobRun,
    shape: tuple[str | None, str | None, bool],
) -> None:
    """`shape`: the partitioning, a spec change, and whether, in the table these batches
    build (`warehouse`: a copy of one build per shape, tests/spark/templates.py), a position
    delete file naming the data file dropped below names other data files too (it then stays,
    dangling for that file's rows); else every delete naming it is scoped to it and goes with
    it. Run on the local session (both shapes) and over Spark Connect (`job_runner`; the
    two-specs shape)."""
    _, respec, shared_delete = shape
    table = catalog.load_table(TABLE)
    before = live(table)
    positions = before[FileContent.POSITION_DELETES]
    assert len(positions) >= 2
    # Make some deletes dangling: drop a data file that position deletes point at.
    named = {
        p
        for e in positions
        for p in pq.read_table(e.data_file.file_path).column("file_path").to_pylist()
    }
    victim = next(e.data_file for e in before[FileContent.DATA] if e.data_file.file_path in named)
    table.new_delete().delete_file(victim).commit()
    table = catalog.load_table(TABLE)
    # Each reader must read the same before and after (DuckDB drops null-key rows while
    # equality deletes are live: see delete_tables.rows).
    duck_ok = respec is None
    expected = rows(table, None)
    duck_before = duck_rows(table, duck) if duck_ok else None
    before = live(table)
    # icecore drops file-scoped position deletes together with their data file; deletes
    # naming it among other files stay, dangling: the rewrite drops the rows naming it.
    still_named = sum(
        p == victim.file_path
        for e in before[FileContent.POSITION_DELETES]
        for p in pq.read_table(e.data_file.file_path).column("file_path").to_pylist()
    )
    assert (still_named > 0) == shared_delete
    seqs = {e.data_file.file_path: e.sequence_number for e in before[FileContent.POSITION_DELETES]}

    rewrite_all = respec is not None
    options = RewritePositionDeletesOptions(TABLE, min_input_files=2, rewrite_all=rewrite_all)
    result = job_runner("rewrite_position_deletes", options)

    table = catalog.load_table(TABLE)
    after = live(table)
    assert rows(table, None) == expected
    if duck_ok:
        assert duck_rows(table, duck) == duck_before
    assert result.status == "committed"
    assert result.dropped_position_deletes >= still_named
    old = set(seqs)
    new = [e for e in after[FileContent.POSITION_DELETES] if e.data_file.file_path not in old]
    assert_under_partition_paths(table, [e.data_file for e in new])
    assert len(after[FileContent.POSITION_DELETES]) < len(before[FileContent.POSITION_DELETES])
    assert victim.file_path not in {
        r
        for e in after[FileContent.POSITION_DELETES]
        for r in pq.read_table(e.data_file.file_path).column("file_path").to_pylist()
    }
    for entry in new:
        written = pq.read_table(entry.data_file.file_path).to_pylist()
        keys = [(r["file_path"], r["pos"]) for r in written]
        assert keys == sorted(keys) and len(set(keys)) == len(keys)
        # The largest input sequence number of the partition, never the new snapshot's.
        inputs = [
            seqs[e.data_file.file_path]
            for e in before[FileContent.POSITION_DELETES]
            if (e.data_file.spec_id, e.data_file.partition)
            == (entry.data_file.spec_id, entry.data_file.partition)
        ]
        assert entry.sequence_number == max(inputs)
    assert result.added_position_deletes == sum(e.data_file.record_count for e in new)
    if not rewrite_all:
        again = rewrite_position_deletes(spark, catalog, options)
        assert again.status == "nothing-to-rewrite"


def test_equality_deletes_merge_only_within_a_sequence_number(
    spark: SparkSession, catalog: SqlCatalog, duck: duckdb.DuckDBPyConnection, warehouse: object
) -> None:
    build(spark, catalog, 3, None, seed=4, size=20)
    table = catalog.load_table(TABLE)
    equality = sorted(live(table)[FileContent.EQUALITY_DELETES], key=lambda e: e.sequence_number)
    assert len(equality) == 2 and equality[0].sequence_number < equality[1].sequence_number
    # Split the first into two copies with its sequence number: a mergeable pair.
    first = equality[0]
    rewrite = table.new_rewrite().rewrite_files(delete_files_to_replace=[first.data_file])
    for n in (1, 2):
        path = first.data_file.file_path.replace(".parquet", f"-{n}.parquet")
        shutil.copyfile(first.data_file.file_path, path)
        rewrite.add_file(
            replace(first.data_file, file_path=path), data_sequence_number=first.sequence_number
        )
    rewrite.commit()
    table = catalog.load_table(TABLE)
    # Each reader compared with itself (DuckDB drops null-key rows: see delete_tables.rows).
    expected, duck_before = rows(table, None), duck_rows(table, duck)

    result = run_job(
        "rewrite_position_deletes",
        ["--warehouse", str(warehouse), "--table", TABLE, "--min-input-files", "2"],
    )

    table = catalog.load_table(TABLE)
    assert rows(table, None) == expected and duck_rows(table, duck) == duck_before
    assert (
        result["merged_equality_delete_files"] == 2 and result["added_equality_delete_files"] == 1
    )
    after = Counter(e.sequence_number for e in live(table)[FileContent.EQUALITY_DELETES])
    assert after == Counter([first.sequence_number, equality[1].sequence_number])
    merged = next(
        e
        for e in live(table)[FileContent.EQUALITY_DELETES]
        if e.sequence_number == first.sequence_number
    )
    assert merged.data_file.equality_ids == first.data_file.equality_ids
    keys = pq.read_table(first.data_file.file_path).column("id").to_pylist()
    assert merged.data_file.record_count == len(set(keys))


def test_concurrent_rewrite_of_an_input_conflicts_then_replans(
    spark: SparkSession, catalog: SqlCatalog, warehouse: object
) -> None:
    """Another job rewrites one of the position delete files being merged right before the
    job's commit (a `replace`, not a writer's delete): the commit fails naming that
    snapshot, and the job plans again."""
    create(catalog, None)
    rnd = random.Random(9)
    for b in range(3):
        commit_cdc(catalog.load_table(TABLE), batch(rnd, b, 24, null_keys=False))
    expected = rows(catalog.load_table(TABLE), None)
    other = SqlCatalog("default", warehouse=warehouse)
    raced: list[int] = []

    def replace_an_input(swap: int) -> None:
        if swap != 1:
            return
        table = other.load_table(TABLE)
        entry = live(table)[FileContent.POSITION_DELETES][0]
        path = entry.data_file.file_path.replace(".parquet", f"-copy{len(raced)}.parquet")
        shutil.copyfile(entry.data_file.file_path, path)
        rewrite = table.new_rewrite().rewrite_files(delete_files_to_replace=[entry.data_file])
        rewrite.add_file(
            replace(entry.data_file, file_path=path), data_sequence_number=entry.sequence_number
        )
        rewrite.commit()
        raced.append(rewrite.snapshot_id)

    try:
        with before_swap(catalog, replace_an_input):
            result = rewrite_position_deletes(
                spark, catalog, RewritePositionDeletesOptions(TABLE, rewrite_all=True)
            )
        assert result.attempts == 2 and str(raced[0]) in result.conflicts[0]
        assert rows(catalog.load_table(TABLE), None) == expected

        options = RewritePositionDeletesOptions(TABLE, rewrite_all=True, max_attempts=1)
        with before_swap(catalog, replace_an_input), pytest.raises(CommitConflictError) as failed:
            rewrite_position_deletes(spark, catalog, options)
        assert f"conflicting snapshot {raced[1]}" in str(failed.value)
        assert failed.value.snapshot_id == raced[1]
        assert rows(catalog.load_table(TABLE), None) == expected
    finally:
        other.close()


def _snapshot_rows(table: Any, snapshot_id: int) -> Counter[tuple[Any, ...]]:
    return Counter(
        (r["id"], r["v"], r["ts"])
        for r in scan_rows(table.io, table.metadata, snapshot_id=snapshot_id)
    )


def _position_deletes(table: Any) -> dict[str, int]:
    return {
        e.data_file.file_path: e.data_file.file_size_in_bytes
        for e in live(table)[FileContent.POSITION_DELETES]
    }


@pytest.fixture
def many_groups(spark: SparkSession, catalog: SqlCatalog) -> tuple[Counter[Any], dict[str, int]]:
    """A partitioned table with enough position delete files for several groups (CDC
    batches laid out as the ingestion job does, committed without Spark: see commit_cdc)."""
    create(catalog, "bucket(2, id)")
    rnd = random.Random(21)
    for b in range(5):
        commit_cdc(catalog.load_table(TABLE), batch(rnd, b, 24, null_keys=False))
    table = catalog.load_table(TABLE)
    positions = _position_deletes(table)
    assert len(positions) >= 4
    return rows(table, None), positions


def test_partial_progress_commits_groups_separately(
    spark: SparkSession,
    catalog: SqlCatalog,
    warehouse: object,
    many_groups: tuple[Counter[Any], dict[str, int]],
) -> None:
    """Groups capped by --max-file-group-size-bytes, committed in several snapshots, each of
    which reads exactly the rows the table had."""
    expected, positions = many_groups
    start = catalog.load_table(TABLE).metadata.current_snapshot()
    assert start is not None
    group_size = 2 * max(positions.values())  # two files per group at most
    argv = ["--warehouse", str(warehouse), "--table", TABLE, "--rewrite-all"]
    argv += ["--max-file-group-size-bytes", str(group_size)]
    argv += ["--partial-progress.enabled", "true", "--partial-progress.max-commits", "2"]

    result = run_job("rewrite_position_deletes", argv)

    table = catalog.load_table(TABLE)
    commits = result["commits"]
    assert result["status"] == "committed" and result["failed_groups"] == []
    assert result["planned_groups"] >= 3 and len(commits) == 2
    assert result["rewritten_groups"] == result["planned_groups"]
    parents = [table.metadata.snapshot_by_id(c).parent_snapshot_id for c in commits]
    assert parents == [start.snapshot_id, commits[0]]
    for snapshot_id in commits:
        assert _snapshot_rows(table, snapshot_id) == expected
        summary = table.metadata.snapshot_by_id(snapshot_id).summary
        assert summary is not None and summary.operation == Operation.REPLACE
    assert rows(table, None) == expected
    assert result["rewritten_delete_files"] == len(positions)
    assert not set(positions) & set(_position_deletes(table))
    for entry in live(table)[FileContent.POSITION_DELETES]:
        assert entry.data_file.file_size_in_bytes <= group_size
    # Without partial progress the same plan is one commit.
    argv[-4:] = ["--partial-progress-enabled", "false"]
    again = run_job("rewrite_position_deletes", argv)
    assert len(again["commits"]) == 1 and again["planned_groups"] >= 2
    with pytest.raises(
        OptionError, match="--partial-progress-max-commits: expected a whole number of at least 1"
    ):
        run_job("rewrite_position_deletes", [*argv, "--partial-progress-max-commits", "0"])
    with pytest.raises(OptionError, match="--max-file-group-size-bytes: expected a size above 0"):
        RewritePositionDeletesOptions(TABLE, max_file_group_size_bytes=0)


def test_the_target_size_defaults_to_the_tables_delete_target(
    spark: SparkSession,
    catalog: SqlCatalog,
    many_groups: tuple[Counter[Any], dict[str, int]],
) -> None:
    """Without `--target-file-size-bytes` the merged files roll at the table's
    `write.delete.target-file-size-bytes`: a third of what a partition's delete files hold
    splits its merged output into several files, where the 64 MB default makes one per
    partition (a partition's files are one group, written by one task)."""
    expected, positions = many_groups
    table = catalog.load_table(TABLE)
    by_partition: dict[Any, int] = Counter()
    records: dict[Any, int] = Counter()
    for e in live(table)[FileContent.POSITION_DELETES]:
        by_partition[e.data_file.partition] += e.data_file.file_size_in_bytes
        records[e.data_file.partition] += e.data_file.record_count
    assert min(records.values()) >= 3
    target = min(by_partition.values()) // 3
    table.update_properties().set("write.delete.target-file-size-bytes", str(target)).commit()

    result = rewrite_position_deletes(
        spark, catalog, RewritePositionDeletesOptions(TABLE, rewrite_all=True)
    )

    table = catalog.load_table(TABLE)
    after = live(table)[FileContent.POSITION_DELETES]
    assert result.status == "committed" and result.rewritten_delete_files == len(positions)
    assert result.planned_groups == len(by_partition)
    assert result.added_delete_files == len(after) > len(by_partition)
    for partition in by_partition:
        mine = [e.data_file for e in after if e.data_file.partition == partition]
        assert len(mine) >= 2 and sum(f.record_count for f in mine) <= records[partition]
    assert rows(table, None) == expected


@pytest.mark.parametrize("max_attempts", [1, 3])
def test_a_conflicting_group_leaves_the_other_commits(
    spark: SparkSession,
    catalog: SqlCatalog,
    warehouse: object,
    many_groups: tuple[Counter[Any], dict[str, int]],
    max_attempts: int,
) -> None:
    """Before the job's second commit another writer replaces a delete file a later group
    rewrites: that group's commit conflicts naming the writer's snapshot; the commits of
    the other groups stand. With attempts left, the group's partition is planned again."""
    expected, positions = many_groups
    other = SqlCatalog("default", warehouse=warehouse)
    raced: list[int] = []
    copies: list[str] = []

    def replace_an_input(swap: int) -> None:
        if swap != 2:
            return
        table = other.load_table(TABLE)
        live_positions = live(table)[FileContent.POSITION_DELETES]
        entry = next(e for e in live_positions if e.data_file.file_path in positions)
        path = entry.data_file.file_path.replace(".parquet", "-copy.parquet")
        shutil.copyfile(entry.data_file.file_path, path)
        rewrite = table.new_rewrite().rewrite_files(delete_files_to_replace=[entry.data_file])
        rewrite.add_file(
            replace(entry.data_file, file_path=path), data_sequence_number=entry.sequence_number
        )
        rewrite.commit()
        raced.append(rewrite.snapshot_id)
        copies.append(path)

    options = RewritePositionDeletesOptions(
        TABLE,
        rewrite_all=True,
        max_file_group_size_bytes=1,  # every file its own group
        partial_progress_enabled=True,
        partial_progress_max_commits=len(positions),
        max_attempts=max_attempts,
    )
    try:
        with before_swap(catalog, replace_an_input):
            result = rewrite_position_deletes(spark, catalog, options)
    finally:
        other.close()

    table = catalog.load_table(TABLE)
    assert len(raced) == 1 and str(raced[0]) in result.conflicts[0]
    assert rows(table, None) == expected
    for snapshot_id in result.commits:
        assert _snapshot_rows(table, snapshot_id) == expected
    if max_attempts == 1:
        assert result.status == "partially-committed"
        assert (
            len(result.failed_groups) == 1 and f"snapshot {raced[0]}" in (result.failed_groups[0])
        )
        assert len(result.commits) == len(positions) - 1
        # The conflicting group's input stays (as the other writer's copy), uncompacted.
        assert copies[0] in _position_deletes(table)
    else:
        assert result.failed_groups == [] and result.attempts == 2
        assert len(result.commits) >= len(positions)
        assert copies[0] not in _position_deletes(table)
    assert not set(positions) & set(_position_deletes(table))
