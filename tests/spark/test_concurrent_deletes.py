"""Maintenance beside a merge-on-read writer (issue 36): the writer's deletes, committed
between a job's plan and its commit, follow the rows instead of making the job give way.

Deterministic interleavings: the job plans and writes, the writer commits (in
`rewrite_data_files`' `before_commit`, or right before the job's first metadata swap,
`racing.race`), then the job commits. Each case runs on format v2 (position delete files)
and v3 (deletion vectors), reads back exactly as the model says through icecore, DuckDB and
PyIceberg (`racing.check`), and keeps one DV per data file on v3.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import duckdb
import pytest
from pyspark.sql import SparkSession

from icecore.catalog import SqlCatalog
from icecore.data.position_maps import ROW_MAPS
from icecore.errors import CommitConflictError
from icecore.jobs.jobs import (
    ConvertEqualityDeletesOptions,
    RewriteDataFilesOptions,
    RewritePositionDeletesOptions,
)
from icecore.spec.manifest import FileContent
from icecore.table import Table
from spark_jobs.convert_equality_deletes import run as convert_equality_deletes
from spark_jobs.rewrite_data_files import run as compact
from spark_jobs.rewrite_position_deletes import run as rewrite_position_deletes
from tests.spark.delete_tables import TABLE, live
from tests.spark.racing import RacedTable, check, check_rewrite, race, result_of
from tests.support.duckdb import duck_connection  # noqa: F401 - provides the `duck` fixture

VERSIONS = [pytest.param(2, id="v2"), pytest.param(3, id="v3")]


def one_dv_per_data_file(table: Table) -> None:
    dvs = Counter(
        e.data_file.referenced_data_file
        for e in live(table)[FileContent.POSITION_DELETES]
        if e.data_file.is_deletion_vector
    )
    assert all(n == 1 for n in dvs.values()), dvs


@pytest.mark.parametrize("version", VERSIONS)
def test_compaction_rebases_what_our_ingest_and_conversion_delete_meanwhile(
    spark: SparkSession,
    catalog: SqlCatalog,
    other: SqlCatalog,
    duck: duckdb.DuckDBPyConnection,
    version: int,
) -> None:
    """The busy table of icefloe itself: while the compaction writes, our ingest commits
    upserts and deletes of rows in the files it replaces (equality deletes), and the
    conversion turns them into position deletes (v2) or DVs (v3) on those very files. The
    compaction commits on its first plan, the converted deletes on its new files; switched
    off, the rebase gives way as before."""
    model = RacedTable(catalog, "bucket(2, id)", seed=11, format_version=version)
    for _ in range(4):
        model.ingest(spark, catalog)
    writer: list[int] = []

    def ingest_then_convert(_: Table) -> None:
        writer.append(model.ingest(spark, other))
        converted = convert_equality_deletes(spark, other, ConvertEqualityDeletesOptions(TABLE))
        assert converted.status == "committed" and converted.snapshot_id is not None
        writer.append(converted.snapshot_id)
        model.at[converted.snapshot_id] = model.expected

    options = RewriteDataFilesOptions(TABLE, rewrite_all=True, max_attempts=1)
    result = compact(spark, catalog, options, before_commit=ingest_then_convert)
    table = catalog.load_table(TABLE)
    assert (result.attempts, result.conflicts, result.failed_groups) == (1, [], [])
    assert result.rebased_commits == 1 and result.rebased_rows > 0, result
    check(table, model, duck)
    check_rewrite(table, result.commits)
    one_dv_per_data_file(table)
    replaced = {e.data_file.file_path for e in live(table)[FileContent.DATA]}
    deletes = live(table)[FileContent.POSITION_DELETES]
    rebased = [e for e in deletes if e.snapshot_id == result.commits[0]]
    assert rebased and all(e.data_file.referenced_data_file in replaced for e in rebased)

    # The old behaviour, switched off: the conversion's deletes on replaced files conflict.
    model.ingest(spark, catalog)
    writer.clear()
    options = RewriteDataFilesOptions(
        TABLE, rewrite_all=True, max_attempts=1, rebase_concurrent_deletes=False
    )
    with pytest.raises(CommitConflictError, match="found new position delete") as raised:
        compact(spark, catalog, options, before_commit=ingest_then_convert)
    assert str(writer[1]) in str(raised.value)
    check(catalog.load_table(TABLE), model, duck)


def test_conversion_merges_a_dv_a_writer_added_meanwhile(
    spark: SparkSession, catalog: SqlCatalog, other: SqlCatalog, duck: duckdb.DuckDBPyConnection
) -> None:
    """v3: while equality deletes are converted into DVs, a writer gives every data file a
    DV of its own; the conversion commits on its first plan with one DV per data file
    holding both."""
    model = RacedTable(catalog, None, seed=12, format_version=3)
    for _ in range(4):
        model.commit()
    outcome, _ = race(
        spark,
        catalog,
        lambda: convert_equality_deletes(spark, catalog, ConvertEqualityDeletesOptions(TABLE)),
        lambda: model.delete_rows_as_dvs(other),
        during_write=False,
    )
    result = result_of(outcome)
    table = catalog.load_table(TABLE)
    assert (result.status, result.attempts, result.conflicts) == ("committed", 1, [])
    assert result.rebased_commits == 1 and result.rebased_rows > 0, result
    check(table, model, duck)
    one_dv_per_data_file(table)
    assert not live(table)[FileContent.EQUALITY_DELETES]


@pytest.mark.parametrize("version", VERSIONS)
def test_delete_compaction_keeps_both_sides(
    spark: SparkSession,
    catalog: SqlCatalog,
    other: SqlCatalog,
    duck: duckdb.DuckDBPyConnection,
    version: int,
) -> None:
    """While delete files are compacted (v2: merged; v3: legacy files turned into DVs), a
    writer deletes a row of every data file (v2: a position delete file; v3: a DV replacing
    the file's DV). The compaction commits on its first plan and neither side's deletes are
    lost."""
    model = RacedTable(catalog, "bucket(2, id)", seed=13)
    for _ in range(4):
        model.commit()
    if version == 3:  # legacy position delete files, for the compaction to turn into DVs
        catalog.load_table(TABLE).update_properties().set("format-version", "3").commit()
    racer = model.delete_rows_as_dvs if version == 3 else model.delete_row
    outcome, _ = race(
        spark,
        catalog,
        lambda: rewrite_position_deletes(
            spark, catalog, RewritePositionDeletesOptions(TABLE, rewrite_all=True)
        ),
        lambda: racer(other),
        during_write=False,
    )
    result = result_of(outcome)
    table = catalog.load_table(TABLE)
    assert (result.status, result.attempts, result.conflicts) == ("committed", 1, [])
    if version == 3:
        assert result.added_deletion_vectors > 0 and result.rebased_commits == 1
    check(table, model, duck)
    check_rewrite(table, result.commits)
    one_dv_per_data_file(table)


@pytest.mark.parametrize(
    "case", [f"{shuffle}-v{version}" for shuffle in ("sort", "respec") for version in (2, 3)]
)
def test_shuffled_rewrite_follows_the_rows_through_its_row_maps(
    spark: SparkSession,
    catalog: SqlCatalog,
    other: SqlCatalog,
    duck: duckdb.DuckDBPyConnection,
    case: str,
) -> None:
    """Rows a sort or a move to a new partition spec puts in an order no input gives: the
    writer's deletes (v2: a position delete file; v3: a DV on every data file) land between
    the rewrite's write and its commit, and the rewrite rebases them through the row maps its
    writers left beside the new files, on its first plan; the row maps are gone after."""
    shuffle, number = case.split("-v")
    version = int(number)
    model = RacedTable(catalog, "bucket(2, id)", seed=14, format_version=version)
    for _ in range(4):
        model.commit()
    if shuffle == "respec":
        catalog.load_table(TABLE).update_spec().add_field("ts", "day").commit()
        options = RewriteDataFilesOptions(TABLE, rewrite_all=True, max_attempts=1)
    else:
        options = RewriteDataFilesOptions(
            TABLE, rewrite_all=True, max_attempts=1, strategy="sort", sort_order="v desc"
        )
    racer = model.delete_rows_as_dvs if version == 3 else model.delete_row
    deleting: list[int] = []
    result = compact(spark, catalog, options, before_commit=lambda _: deleting.append(racer(other)))
    table = catalog.load_table(TABLE)
    assert (result.attempts, result.conflicts, result.failed_groups) == (1, [], [])
    assert result.rebased_commits == 1 and result.rebased_rows > 0, result
    check(table, model, duck)
    check_rewrite(table, result.commits)
    one_dv_per_data_file(table)
    if shuffle == "respec":
        current = table.metadata.default_spec_id
        assert {e.data_file.spec_id for e in live(table)[FileContent.DATA]} == {current}
    left = [p for p in Path(table.metadata.location).rglob("*") if ROW_MAPS in p.parts]
    assert not [p for p in left if p.is_file()], left
