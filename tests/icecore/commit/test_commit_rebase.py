"""A rewrite that rebases deletes committed meanwhile onto its new files (issue 36).

Each case plans a rewrite on one `Table` object, lets a second writer commit deletes on the
replaced files through another, then commits the rewrite: it must land on its first plan,
with every row the writer deleted still deleted (now in the new files), one DV per data file
on v3, and nothing left behind.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pytest

from icecore.actions.rebased_deletes import PositionDeleteWriter
from icecore.catalog.sql import SqlCatalog
from icecore.commit.delete_rewrite import DeleteRewrite
from icecore.commit.rewrite import RewriteFiles
from icecore.data.position_maps import Segment, SegmentMap
from icecore.errors import CommitConflictError
from icecore.spec.manifest import DataFile
from icecore.spec.types import StringType
from icecore.table import Table
from tests.support.committing import (
    CatalogTable,
    agreed_rows,
    assert_clean,
    entries,
    head_id,
    ids,
    live,
    manifests,
    sqlite_catalog,
    v3_files,
)
from tests.support.duckdb import duck_connection  # noqa: F401 - `duck`


@pytest.fixture
def catalog(tmp_path: Path) -> SqlCatalog:
    return sqlite_catalog(tmp_path)


def compact_a(
    t: CatalogTable, table: Table, *, dropped: dict[str, list[int]] | None = None
) -> RewriteFiles:
    """a1 (ids 1, 2) and a2 (id 3) into one file, in order, as a bin-pack writes them;
    `dropped`: positions already deleted at the start, which the rewrite leaves out. The
    rebase writes DVs (v3) unless the caller sets it again."""
    dropped = dropped or {}
    rows = []
    for name, source in (("a1", [1, 2]), ("a2", [3])):
        gone = set(dropped.get(name, ()))
        rows.extend({"id": i, "cat": "a"} for pos, i in enumerate(source) if pos not in gone)
    compacted = t.data(rows, name="compacted")
    rewrite = table.new_rewrite().rewrite_files([t["a1"], t["a2"]], [compacted])
    positions = rewrite_positions(t, dropped)
    return rewrite.use_starting_sequence_number().rebase_concurrent_deletes(positions)


def rewrite_positions(t: CatalogTable, dropped: dict[str, list[int]] | None = None) -> SegmentMap:
    """Where `compact_a` put the rows: a1's then a2's, less the dropped ones."""
    dropped = dropped or {}
    positions = SegmentMap({t["a1"].file_path: 2, t["a2"].file_path: 1})
    new_start = 0
    for name, rows in (("a1", 2), ("a2", 1)):
        path = t[name].file_path
        positions.add(Segment(path, 0, rows, t["compacted"].file_path, new_start))
        positions.add_dropped(path, np.array(dropped.get(name, []), np.int64))
        new_start += rows - len(dropped.get(name, []))
    return positions


def dvs_of(table: Table) -> dict[str, str]:
    """Live DVs: data file name -> DV puffin name."""
    return {
        Path(e.data_file.referenced_data_file or "").name: name
        for name, e in live(table).items()
        if e.data_file.is_deletion_vector
    }


def stray_puffins(table: Table) -> set[str]:
    """Puffin files on disk that no snapshot of the table references."""
    on_disk = {p.name for p in Path(table.metadata.location, "data").rglob("*.puffin")}
    referenced = {
        Path(e.data_file.file_path).name
        for snapshot in table.metadata.snapshots
        for m in manifests(table, snapshot)
        for e in entries(table, m)
    }
    return on_disk - referenced


def test_dvs_committed_meanwhile_follow_the_rows_into_the_new_file(
    catalog: SqlCatalog, duck: duckdb.DuckDBPyConnection
) -> None:
    t = v3_files(catalog)
    writer = t.load()
    rewrite = compact_a(t, t.table)
    (first,) = t.deletion_vectors("w1", (t["a1"], [1]))  # id 2
    writer.new_row_delta().add_deletes(first).commit()
    s1 = head_id(writer)
    (second,) = t.deletion_vectors("w2", (t["a1"], [0, 1]))  # id 1 too
    writer.new_row_delta().add_deletes(second).remove_deletes(first).commit()
    s2 = head_id(writer)
    (third,) = t.deletion_vectors("w3", (t["a2"], [0]))  # id 3
    writer.new_row_delta().add_deletes(third).commit()
    s3 = head_id(writer)

    rewrite.commit()
    table = t.table.refresh()
    assert ids(table) == [10, 11]
    assert sorted(i for i, _, _ in agreed_rows(table, duck)) == [10, 11]
    # s1's DV is in s2's (which replaced it): not read, but s1's deletes are rebased too.
    assert rewrite.rebased.snapshot_ids == {s1, s2, s3}
    assert rewrite.rebased.rows == 3
    assert list(dvs_of(table)) == ["compacted.parquet"]  # one DV, for the new file only
    (dv,) = rewrite.rebased.delete_files
    assert dv.record_count == 3 and dv.referenced_data_file.endswith("compacted.parquet")
    assert (
        live(table)["compacted.parquet"].sequence_number
        < live(table)[Path(dv.file_path).name].sequence_number
    )
    assert not stray_puffins(table)
    assert_clean(table)


def test_rows_the_rewrite_dropped_need_no_rebase(
    catalog: SqlCatalog, duck: duckdb.DuckDBPyConnection
) -> None:
    """a1's id 1 was deleted (DV) before the rewrite; the writer's next DV replaces that one
    (holding it and id 2): the rewrite's removal of the old DV is no conflict, and only id 2
    moves (id 1 is not in the new file)."""
    t = v3_files(catalog)
    (start,) = t.deletion_vectors("start", (t["a1"], [0]))
    t.table.new_row_delta().add_deletes(start).commit()
    writer = t.load()
    rewrite = compact_a(t, t.table, dropped={"a1": [0]})
    rewrite.delete_file(start)  # it applied the DV: the commit removes it
    (merged,) = t.deletion_vectors("w1", (t["a1"], [0, 1]))
    writer.new_row_delta().add_deletes(merged).remove_deletes(start).commit()

    rewrite.commit()
    table = t.table.refresh()
    assert ids(table) == [3, 10, 11]
    assert sorted(i for i, _, _ in agreed_rows(table, duck)) == [3, 10, 11]
    assert rewrite.rebased.rows == 1
    assert list(dvs_of(table)) == ["compacted.parquet"]
    assert_clean(table)


def test_a_second_attempt_rebases_what_came_in_between_and_drops_the_first(
    catalog: SqlCatalog,
) -> None:
    """The writer commits again while the rewrite's first attempt is under way: the swap is
    lost, the next attempt rebases both commits' deletes, the first attempt's Puffin file goes."""
    t = v3_files(catalog)
    writer = t.load()
    rewrite = compact_a(t, t.table)
    (first,) = t.deletion_vectors("w1", (t["a1"], [1]))
    writer.new_row_delta().add_deletes(first).commit()
    later = t.deletion_vectors("w2", (t["a2"], [0]))

    def writer_commits_once(*_: object) -> None:
        if rewrite.attempts == 1:
            writer.new_row_delta().add_deletes(later[0]).commit()

    rewrite.validate_with(writer_commits_once).commit()
    table = t.table.refresh()
    assert rewrite.attempts == 2
    assert ids(table) == [1, 10, 11]
    assert rewrite.rebased.rows == 2
    assert not stray_puffins(table)
    assert_clean(table)


def test_what_cannot_be_rebased_still_gives_way(catalog: SqlCatalog) -> None:
    """A replaced file that another commit removed meanwhile (another engine's compaction)
    is a conflict naming that commit; the rewrite's files are gone."""
    t = v3_files(catalog)
    writer = t.load()
    rewrite = compact_a(t, t.table)
    theirs = t.data([{"id": 1, "cat": "a"}, {"id": 2, "cat": "a"}], name="theirs")
    writer.new_rewrite().rewrite_files([t["a1"]], [theirs]).commit()
    (dv,) = t.deletion_vectors("w1", (theirs, [0]))
    writer.new_row_delta().add_deletes(dv).commit()

    with pytest.raises(
        CommitConflictError, match=r"a1\.parquet that this commit removes was removed meanwhile"
    ):
        rewrite.commit()
    table = t.table.refresh()
    assert ids(table) == [2, 3, 10, 11]
    assert not stray_puffins(table)
    assert_clean(table)


def test_without_rebase_the_same_interleaving_gives_way(catalog: SqlCatalog) -> None:
    """The old behaviour, as the switch leaves it: a conflict naming the writer's commit."""
    t = v3_files(catalog)
    writer = t.load()
    compacted: DataFile = t.data(
        [{"id": 1, "cat": "a"}, {"id": 2, "cat": "a"}, {"id": 3, "cat": "a"}], name="compacted"
    )
    rewrite = t.table.new_rewrite().rewrite_files([t["a1"], t["a2"]], [compacted])
    rewrite.use_starting_sequence_number()
    (dv,) = t.deletion_vectors("w1", (t["a1"], [1]))
    writer.new_row_delta().add_deletes(dv).commit()
    with pytest.raises(
        CommitConflictError, match="found new position delete for replaced data file"
    ):
        rewrite.commit()
    assert ids(t.table.refresh()) == [1, 3, 10, 11]


def test_a_dv_committed_meanwhile_merges_into_the_commits_own(
    catalog: SqlCatalog, duck: duckdb.DuckDBPyConnection
) -> None:
    """A conversion of a legacy position delete file into a DV (format v3) meets a writer's
    DV for the same data file: one DV holding both commits' positions; the writer's goes."""
    t = v3_files(catalog)
    legacy = t.position_deletes([(t["b1"].file_path, 0)])  # id 10
    t.table.new_row_delta().add_deletes(legacy).commit()
    writer = t.load()
    (ours,) = t.deletion_vectors("ours", (t["b1"], [0]))
    conversion = DeleteRewrite(t.table)
    conversion.validate_from_snapshot(head_id(t.table))
    conversion.rewrite_files((), (), [legacy], [ours])
    conversion.validate_no_new_position_deletes([t["b1"]]).merge_concurrent_deletes()
    (theirs,) = t.deletion_vectors("theirs", (t["b1"], [1]))  # id 11
    writer.new_row_delta().add_deletes(theirs).commit()
    s_writer = head_id(writer)

    conversion.commit()
    table = t.table.refresh()
    assert ids(table) == [1, 2, 3]
    assert sorted(i for i, _, _ in agreed_rows(table, duck)) == [1, 2, 3]
    assert conversion.merged.snapshot_ids == {s_writer} and conversion.merged.rows == 1
    (merged,) = conversion.merged.delete_files
    assert dvs_of(table) == {"b1.parquet": Path(merged.file_path).name}
    assert merged.record_count == 2
    assert_clean(table)


def test_without_merging_a_concurrent_dv_is_a_conflict(catalog: SqlCatalog) -> None:
    t = v3_files(catalog)
    writer = t.load()
    (ours,) = t.deletion_vectors("ours", (t["b1"], [0]))
    eq = t.equality_deletes([{"id": 10, "cat": "b"}], ["id", "cat"])
    t.table.new_row_delta().add_deletes(eq).commit()
    conversion = DeleteRewrite(t.table).validate_from_snapshot(head_id(t.table))
    conversion.rewrite_files((), (), [eq], [ours])
    conversion.validate_no_new_position_deletes([t["b1"]])
    (theirs,) = t.deletion_vectors("theirs", (t["b1"], [1]))
    writer.new_row_delta().add_deletes(theirs).commit()
    with pytest.raises(CommitConflictError, match="found new position delete"):
        conversion.commit()
    assert ids(t.table.refresh()) == [1, 2, 3]


def test_a_schema_or_spec_change_after_the_plan_gives_way(catalog: SqlCatalog) -> None:
    """The rewrite's files were written for the schema and spec it planned with: a change to
    either in between is a conflict saying so (re-planned, it writes for the new ones)."""
    t = v3_files(catalog)
    for change in ("schema", "spec"):
        other = t.load()
        planned = t.table.refresh().metadata
        compacted = t.data([{"id": 10, "cat": "b"}, {"id": 11, "cat": "b"}])
        rewrite = t.table.new_rewrite().rewrite_files([t["b1"]], [compacted])
        rewrite.validate_written_with(planned.current_schema_id, planned.default_spec_id)
        if change == "schema":
            other.update_schema().add_column("note", StringType()).commit()
        else:
            other.update_spec().add_field("id", "bucket[4]").commit()
        with pytest.raises(CommitConflictError, match=f"partition spec changed|{change} changed"):
            rewrite.commit()
        assert ids(t.table.refresh()) == [1, 2, 3, 10, 11]


def test_v2_position_deletes_committed_meanwhile_follow_the_rows(
    catalog: SqlCatalog, duck: duckdb.DuckDBPyConnection
) -> None:
    """Format v2: a writer's partition-scoped position delete file (ids 2 and 3) is rebased as
    a position delete file scoped to the new data file; the writer's stays for the files it
    names, which the rewrite removed (it applies to nothing live any more)."""
    t = CatalogTable.create(catalog, "v2_rebase")
    t.data([{"id": 1, "cat": "a"}, {"id": 2, "cat": "a"}], name="a1")
    t.data([{"id": 3, "cat": "a"}], name="a2")
    t.data([{"id": 10, "cat": "b"}], name="b1")
    t.table.new_fast_append().append_file(t["a1"]).append_file(t["a2"]).append_file(
        t["b1"]
    ).commit()
    writer = t.load()
    rewrite = compact_a(t, t.table).rebase_concurrent_deletes(
        rewrite_positions(t), PositionDeleteWriter(t.table)
    )
    theirs = t.position_deletes([(t["a1"].file_path, 1), (t["a2"].file_path, 0)], name="theirs")
    writer.new_row_delta().add_deletes(theirs).commit()

    rewrite.commit()
    table = t.table.refresh()
    assert ids(table) == [1, 10]
    assert sorted(i for i, _, _ in agreed_rows(table, duck)) == [1, 10]
    (rebased,) = rewrite.rebased.delete_files
    assert rebased.referenced_data_file == t["compacted"].file_path
    assert rebased.record_count == 2 and rewrite.rebased.rows == 2
    assert {"theirs.parquet", "compacted.parquet", Path(rebased.file_path).name} <= set(live(table))
    assert_clean(table)
