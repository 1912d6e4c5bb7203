"""rewrite_position_deletes on tables the ingestion job wrote: small position delete files
merge into sorted ones, dangling deletes go, equality deletes merge only within one
sequence number, and every reader returns the same rows before and after."""

from __future__ import annotations

import shutil
from collections import Counter
from dataclasses import replace
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from icecore.catalog import SqlCatalog
from icecore.manifest import FileContent
from spark_jobs.common.errors import JobError
from spark_jobs.maintenance import delete_compaction
from spark_jobs.maintenance.delete_compaction import RewriteDeletesOptions, rewrite_position_deletes
from spark_jobs.rewrite_position_deletes import main
from tests.spark.delete_tables import TABLE, build, duck_rows, live, rows
from tests.support.duckdb import duck_connection  # noqa: F401 - provides the `duck` fixture


@pytest.mark.parametrize(
    ("partition_by", "respec"),
    [(None, None), ("bucket(2, id)", "ts:day")],
    ids=["unpartitioned", "two-specs"],
)
def test_merges_drops_dangling_and_keeps_rows(
    spark: SparkSession,
    catalog: SqlCatalog,
    duck: duckdb.DuckDBPyConnection,
    partition_by: str | None,
    respec: str | None,
) -> None:
    build(spark, catalog, 3, partition_by, seed=9, respec=respec, size=24)
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
    # naming it among other files stay, dangling.
    still_named = victim.file_path in {
        p
        for e in before[FileContent.POSITION_DELETES]
        for p in pq.read_table(e.data_file.file_path).column("file_path").to_pylist()
    }
    seqs = {e.data_file.file_path: e.sequence_number for e in before[FileContent.POSITION_DELETES]}

    rewrite_all = respec is not None
    options = RewriteDeletesOptions(TABLE, min_input_files=2, rewrite_all=rewrite_all)
    result = rewrite_position_deletes(spark, catalog, options)

    table = catalog.load_table(TABLE)
    after = live(table)
    assert rows(table, None) == expected
    if duck_ok:
        assert duck_rows(table, duck) == duck_before
    assert result["status"] == "committed"
    if still_named:
        assert result["removed_dangling_delete_files"] + result["dropped_position_deletes"] >= 1
    old = set(seqs)
    new = [e for e in after[FileContent.POSITION_DELETES] if e.data_file.file_path not in old]
    assert len(after[FileContent.POSITION_DELETES]) < len(before[FileContent.POSITION_DELETES])
    assert victim.file_path not in {
        r for e in new for r in pq.read_table(e.data_file.file_path).column("file_path").to_pylist()
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
    assert result["added_position_deletes"] == sum(e.data_file.record_count for e in new)
    if not rewrite_all:
        again = rewrite_position_deletes(spark, catalog, options)
        assert again["status"] == "nothing-to-rewrite"


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

    result = main(["--warehouse", str(warehouse), "--table", TABLE, "--min-input-files", "2"])

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
    spark: SparkSession, catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another job replaces one of the position delete files being merged (between writing
    and committing): the commit fails naming that snapshot, and the job plans again."""
    build(spark, catalog, 3, None, seed=9, size=24)
    expected = rows(catalog.load_table(TABLE), None)
    real_finish = delete_compaction.finish
    raced: list[int] = []

    def racing_finish(run: Any, groups: Any) -> Any:
        if not raced:
            other = catalog.load_table(TABLE)
            entry = live(other)[FileContent.POSITION_DELETES][0]
            path = entry.data_file.file_path.replace(".parquet", "-copy.parquet")
            shutil.copyfile(entry.data_file.file_path, path)
            rewrite = other.new_rewrite().rewrite_files(delete_files_to_replace=[entry.data_file])
            rewrite.add_file(
                replace(entry.data_file, file_path=path), data_sequence_number=entry.sequence_number
            )
            rewrite.commit()
            raced.append(rewrite.snapshot_id)
        return real_finish(run, groups)

    monkeypatch.setattr(delete_compaction, "finish", racing_finish)
    result = rewrite_position_deletes(
        spark, catalog, RewriteDeletesOptions(TABLE, rewrite_all=True)
    )
    assert result["attempts"] == 2 and str(raced[0]) in result["conflicts"][0]
    assert rows(catalog.load_table(TABLE), None) == expected

    raced.clear()
    options = RewriteDeletesOptions(TABLE, rewrite_all=True, max_attempts=1)
    with pytest.raises(JobError, match=r"conflicting snapshot \d+"):
        rewrite_position_deletes(spark, catalog, options)
    assert rows(catalog.load_table(TABLE), None) == expected
