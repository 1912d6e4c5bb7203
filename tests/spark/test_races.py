"""CDC batches committed while each maintenance job runs, many rounds per job.

Every round the job runs in a thread on the shared SparkSession and a CDC batch (laid out as
the ingestion job lays it out, `commit_cdc`, or in the first round of the conversion and
the compaction ingested by the ingestion job itself) is committed through a second catalog
while the job works: in some rounds while the job's Spark work is running (seen through
Spark's status tracker), in the others right before the job's first metadata swap
(`before_swap`, which holds that swap until the batch is in). The overlap is certain either
way: the job planned before the batch and commits after it, so icecore's retry
re-validates on the new state.

After each round the table must read exactly as the Python model of every batch says (no
row lost, no deleted row back) through icecore's naive reader, DuckDB and, where no equality
delete is live, PyIceberg (`delete_tables.rows`), and a rewrite's own snapshot must read the
same as its parent. Where a job must yield -- a position delete committed meanwhile on a
data file the compaction replaces -- it re-plans, or with no attempts left fails naming the
conflicting snapshot. Orphan removal runs while a commit is in flight. ICEFLOE_RACE_ROUNDS
sets the rounds per job (default 5; expiry and orphan removal, which are cheap, run twice
as many).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pytest
from pyspark.sql import SparkSession

from icecore.actions.referenced_files import referenced_files
from icecore.catalog import SqlCatalog
from icecore.errors import CommitConflictError
from icecore.jobs.grammar import format_ms
from icecore.jobs.jobs import (
    ConvertEqualityDeletesOptions,
    ExpireSnapshotsOptions,
    RemoveOrphanFilesOptions,
    RewriteDataFilesOptions,
    RewritePositionDeletesOptions,
)
from icecore.spec.manifest import FileContent
from spark_jobs.convert_equality_deletes import run as convert_equality_deletes
from spark_jobs.expire_snapshots import run as expire
from spark_jobs.remove_orphan_files import run as remove_orphans
from spark_jobs.rewrite_data_files import run as compact
from spark_jobs.rewrite_position_deletes import run as rewrite_position_deletes
from tests.spark.delete_tables import (
    TABLE,
    before_swap,
    live,
)
from tests.spark.racing import (
    ROUNDS,
    RacedTable,
    check,
    check_rewrite,
    race,
    result_of,
    snapshot_rows,
)
from tests.support.duckdb import duck_connection  # noqa: F401 - provides the `duck` fixture


def test_rewrite_position_deletes_races_cdc(
    spark: SparkSession,
    catalog: SqlCatalog,
    other: SqlCatalog,
    duck: duckdb.DuckDBPyConnection,
) -> None:
    model = RacedTable(catalog, "bucket(2, id)", seed=1)
    for _ in range(3):
        model.commit()
    places = Counter[str]()
    for n in range(ROUNDS):
        model.commit()  # new small position delete files to merge
        options = RewritePositionDeletesOptions(
            TABLE, rewrite_all=True, partial_progress_enabled=n % 3 == 2
        )
        outcome, where = race(
            spark,
            catalog,
            lambda options=options: rewrite_position_deletes(spark, catalog, options),
            lambda: model.commit(other),
            during_write=n % 2 == 0,
        )
        result = result_of(outcome)
        places[where] += 1
        table = catalog.load_table(TABLE)
        assert result.status == "committed", result
        check(table, model, duck)
        check_rewrite(table, result.commits)
    assert places["swap"] + places["spark-write"] == ROUNDS, places
    assert places["spark-write"] >= 1 or ROUNDS < 2, places


def test_convert_equality_deletes_races_cdc(
    spark: SparkSession,
    catalog: SqlCatalog,
    other: SqlCatalog,
    duck: duckdb.DuckDBPyConnection,
) -> None:
    model = RacedTable(catalog, None, seed=2)
    for _ in range(3):
        model.commit()
    places = Counter[str]()
    for n in range(ROUNDS):
        model.commit()  # new equality deletes to convert
        raced: list[int] = []

        def racer(raced: list[int] = raced, real: bool = n == 0) -> int:
            # Round 0: the ingestion job itself, its Spark work overlapping the job's.
            raced.append(model.ingest(spark, other) if real else model.commit(other))
            return raced[0]

        # Racing its Spark work needs Spark tasks; at the swap, the driver's own threads.
        during_write = n % 2 == 0
        options = ConvertEqualityDeletesOptions(TABLE)
        if during_write:
            options = ConvertEqualityDeletesOptions(TABLE, driver_max_bytes=0)
        outcome, where = race(
            spark,
            catalog,
            lambda options=options: convert_equality_deletes(spark, catalog, options),
            racer,
            during_write=during_write,
        )
        result = result_of(outcome)
        places[where] += 1
        table = catalog.load_table(TABLE)
        check(table, model, duck)
        check_rewrite(table, [result.snapshot_id])
        # Only the racing batch's equality deletes are left: it committed after the plan.
        left = live(table)[FileContent.EQUALITY_DELETES]
        racing = table.metadata.snapshot_by_id(raced[0]).sequence_number
        assert left and all(e.sequence_number == racing for e in left)
    assert places["swap"] + places["spark-write"] == ROUNDS, places
    assert places["spark-write"] >= 1 or ROUNDS < 2, places


def test_rewrite_data_files_races_cdc_and_rebases_position_deletes(
    spark: SparkSession,
    catalog: SqlCatalog,
    other: SqlCatalog,
    duck: duckdb.DuckDBPyConnection,
) -> None:
    """CDC batches (equality deletes, new data) do not conflict: the new files keep the
    starting sequence number, so the racing equality deletes still apply to them. A
    position delete on a replaced file is rebased onto the new file on the first plan; with
    the rebase switched off (round 1) it is a conflict naming the delete's snapshot."""
    model = RacedTable(catalog, "bucket(2, id)", seed=3)
    for _ in range(3):
        model.commit()
    places = Counter[str]()
    for n in range(ROUNDS):
        model.commit()
        yields = n % 2 == 1
        rebase = n != 1
        options = RewriteDataFilesOptions(
            TABLE, rewrite_all=True, max_attempts=1, rebase_concurrent_deletes=rebase
        )
        raced: list[int] = []

        def racer(yields: bool = yields, raced: list[int] = raced, real: bool = n == 0) -> int:
            if yields:
                raced.append(model.delete_row(other))
            else:  # round 0: the ingestion job itself, its Spark work overlapping the job's
                raced.append(model.ingest(spark, other) if real else model.commit(other))
            return raced[0]

        outcome, where = race(
            spark,
            catalog,
            lambda options=options: compact(spark, catalog, options),
            racer,
            during_write=n % 3 != 2,
        )
        places[where] += 1
        table = catalog.load_table(TABLE)
        if yields and not rebase:
            assert isinstance(outcome, CommitConflictError), outcome
            assert str(raced[0]) in str(outcome)
        else:
            result = result_of(outcome)
            assert result.commits and result.failed_groups == []
            assert (result.attempts, result.conflicts) == (1, []), result
            assert (result.rebased_commits, result.rebased_rows) == ((1, 1) if yields else (0, 0))
            check_rewrite(table, result.commits)
        check(table, model, duck)
    assert places["swap"] + places["spark-write"] == ROUNDS, places
    assert places["spark-write"] >= 1 or ROUNDS < 2, places


@pytest.mark.parametrize("rule", ["older-than", "retain-last"])
def test_expire_snapshots_races_cdc(
    spark: SparkSession,
    catalog: SqlCatalog,
    other: SqlCatalog,
    duck: duckdb.DuckDBPyConnection,
    rule: str,
) -> None:
    """The expiry commits on top of the racing batch: it removes only what it planned, the
    batch's files all stay, and every retained snapshot reads as it did."""
    model = RacedTable(catalog, None, seed=4)
    for _ in range(3):
        model.commit()
    for _ in range(2 * ROUNDS):
        head = model.commit()
        if rule == "older-than":  # everything older than the head, which stays
            stamp = catalog.load_table(TABLE).metadata.snapshot_by_id(head).timestamp_ms
            options = ExpireSnapshotsOptions(TABLE, older_than=format_ms(stamp), force=True)
            kept = 1
        else:
            options = ExpireSnapshotsOptions(TABLE, older_than="0s", retain_last=2, force=True)
            kept = 2
        outcome, where = race(
            spark,
            catalog,
            lambda options=options: expire(spark, catalog, options),
            lambda: model.commit(other),
            during_write=False,
        )
        result = result_of(outcome)
        assert where == "swap" and result.committed, (where, result)
        table = catalog.load_table(TABLE)
        retained = {s.snapshot_id for s in table.metadata.snapshots}
        assert not retained & set(result.expired_snapshot_ids)
        assert len(retained) == kept + 1  # and the racing batch's on top
        # Reading a snapshot reads its manifest list, manifests, data and delete files.
        for snapshot_id in retained:
            assert snapshot_rows(table, snapshot_id) == model.at[snapshot_id]
        assert result.deleted_data_files_count + result.deleted_manifest_lists_count > 0
        check(table, model, duck)


def test_remove_orphan_files_spares_a_commit_in_flight(
    spark: SparkSession,
    catalog: SqlCatalog,
    other: SqlCatalog,
    duck: duckdb.DuckDBPyConnection,
) -> None:
    """Orphan removal runs while a batch has written every file (data, deletes, manifests,
    manifest list, metadata JSON) but not yet swapped the table pointer: those files are
    unreferenced then, and only --older-than protects them. A real old orphan goes."""
    model = RacedTable(catalog, "bucket(2, id)", seed=5)
    model.commit()
    for n in range(2 * ROUNDS):
        planted = Path(catalog.load_table(TABLE).metadata.location, "data", f"stale-{n}.parquet")
        planted.write_bytes(b"not referenced")
        four_days_ago = time.time() - 4 * 86_400
        os.utime(planted, (four_days_ago, four_days_ago))
        found: list[dict[str, Any]] = []

        def sweep(swap: int, found: list[dict[str, Any]] = found) -> None:
            if swap != 1:
                return
            # What a too-short --older-than would take: the batch's files are orphans now.
            soon = format_ms(int(time.time() * 1000) + 60_000)
            too_short = RemoveOrphanFilesOptions(TABLE, older_than=soon, dry_run=True)
            found.append(remove_orphans(spark, catalog, too_short))
            found.append(remove_orphans(spark, catalog, RemoveOrphanFilesOptions(TABLE)))

        before = catalog.load_table(TABLE)
        earlier = referenced_files(before.io, before.metadata, TABLE)
        with before_swap(other, sweep):
            model.commit(other)
        in_flight, result = found
        table = catalog.load_table(TABLE)
        batch_files = referenced_files(table.io, table.metadata, TABLE) - earlier
        assert len(batch_files) >= 4  # data, deletes, manifests, manifest list, metadata
        assert all(os.path.exists(p) for p in batch_files)
        assert batch_files | {str(planted)} == set(in_flight.orphan_file_location)
        assert result.orphan_files_count == 1 and result.deleted_files_count == 1
        assert result.orphan_file_location == [str(planted)] and not planted.exists()
        assert result.too_young_count >= len(batch_files)
        check(table, model, duck)
