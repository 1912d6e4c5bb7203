"""Concurrent commits and Iceberg's validation rules, through a real SqlCatalog.

Each case plans an operation on one `Table` object, commits something else through a second
one, then commits the first: it must either succeed with the right rows or fail with a
`CommitConflictError` naming the snapshot it conflicts with, and leave nothing behind.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from icecore.catalog.sql import SqlCatalog
from icecore.errors import CommitConflictError
from icecore.expressions import equal
from icecore.spec.metadata_builder import MetadataBuilder
from icecore.spec.refs import SnapshotRef, SnapshotRefType
from icecore.spec.snapshots import Snapshot
from icecore.table import Table
from tests.support.committing import (
    CatalogTable,
    any_catalog_fixture,  # noqa: F401 - `any_catalog`
    assert_clean,
    head_id,
    ids,
    live,
    sqlite_catalog,
    v3_files,
)


@pytest.fixture
def catalog(tmp_path: Path) -> SqlCatalog:
    return sqlite_catalog(tmp_path)


def three_files(catalog: SqlCatalog) -> CatalogTable:
    """Partition a: file a1 (ids 1, 2) and a2 (id 3); partition b: file b1 (id 10)."""
    t = CatalogTable.create(catalog, "conflicts")
    t.data([{"id": 1, "cat": "a"}, {"id": 2, "cat": "a"}], name="a1")
    t.data([{"id": 3, "cat": "a"}], name="a2")
    t.data([{"id": 10, "cat": "b"}], name="b1")
    t.table.new_fast_append().append_file(t["a1"]).append_file(t["a2"]).append_file(
        t["b1"]
    ).commit()
    return t


@pytest.fixture
def t(catalog: SqlCatalog) -> CatalogTable:
    return three_files(catalog)


def compaction(t: CatalogTable, table: Table) -> object:
    rows_ = [{"id": 1, "cat": "a"}, {"id": 2, "cat": "a"}, {"id": 3, "cat": "a"}]
    compacted = t.data(rows_, name=f"compacted-{len(t.files)}")
    return table.new_rewrite().rewrite_files([t["a1"], t["a2"]], [compacted])


def test_rewrite_fails_on_a_position_delete_added_for_a_replaced_file(t: CatalogTable) -> None:
    other = t.load()
    rewrite = compaction(t, t.table).use_starting_sequence_number()
    other.new_row_delta().add_deletes(t.position_deletes([(t["a1"].file_path, 0)])).commit()
    delta_id = head_id(other)

    with pytest.raises(CommitConflictError) as exc:
        rewrite.commit()
    assert exc.value.snapshot_id == delta_id
    message = str(exc.value)
    assert "found new position delete for replaced data file" in message
    assert t["a1"].file_path in message and str(delta_id) in message
    assert rewrite.attempts == 2  # the stale attempt lost the swap, the retry found the conflict
    assert ids(t.table.refresh()) == [2, 3, 10]  # the row delta's outcome, intact
    assert_clean(t.table)


def test_rewrite_keeps_equality_deletes_committed_meanwhile(t: CatalogTable) -> None:
    other = t.load()
    rewrite = compaction(t, t.table).use_starting_sequence_number()
    eq = t.equality_deletes([{"id": 2, "cat": "a"}], ["id", "cat"])
    other.new_row_delta().add_deletes(eq).commit()
    assert ids(other) == [1, 3, 10]

    rewrite.commit()
    table = t.table
    assert rewrite.attempts == 2
    compacted = next(e for name, e in live(table).items() if name.startswith("compacted"))
    assert compacted.sequence_number == 1  # the starting snapshot's: the delete (2) applies
    assert ids(table) == [1, 3, 10]
    assert_clean(table)


def test_rewrite_without_the_starting_sequence_number_fails_on_equality_deletes(
    t: CatalogTable,
) -> None:
    other = t.load()
    rewrite = compaction(t, t.table)
    other.new_row_delta().add_deletes(
        t.equality_deletes([{"id": 2, "cat": "a"}], ["id", "cat"])
    ).commit()
    with pytest.raises(CommitConflictError, match="found new equality delete") as exc:
        rewrite.commit()
    assert exc.value.snapshot_id == head_id(other)
    assert ids(t.table.refresh()) == [1, 3, 10]
    assert_clean(t.table)


def test_rewrite_fails_when_an_input_file_was_removed_meanwhile(t: CatalogTable) -> None:
    other = t.load()
    rewrite = compaction(t, t.table)
    other.new_delete().delete_file(t["a2"]).commit()
    with pytest.raises(
        CommitConflictError, match=r"a2\.parquet that this commit removes was removed meanwhile"
    ) as exc:
        rewrite.commit()
    assert exc.value.snapshot_id == head_id(other)
    assert ids(t.table.refresh()) == [1, 2, 10]
    assert_clean(t.table)


def test_row_delta_fails_when_the_file_its_deletes_reference_was_rewritten(
    t: CatalogTable,
) -> None:
    other = t.load()
    delta = t.table.new_row_delta().add_deletes(
        t.position_deletes([(t["a1"].file_path, 0)], referenced_data_file=t["a1"].file_path)
    )
    compaction(t, other).commit()
    rewrite_id = head_id(other)
    with pytest.raises(CommitConflictError, match=r"missing data file .*a1\.parquet") as exc:
        delta.commit()
    assert exc.value.snapshot_id == rewrite_id
    assert ids(t.table.refresh()) == [1, 2, 3, 10]
    assert_clean(t.table)


def test_validate_data_files_exist_names_files_removed_meanwhile(t: CatalogTable) -> None:
    other = t.load()
    # Not file-scoped (no referenced file, bounds cover two paths): named explicitly.
    deletes = t.position_deletes([(t["a1"].file_path, 0), (t["a2"].file_path, 0)])
    delta = t.table.new_row_delta().add_deletes(deletes)
    delta.validate_data_files_exist([t["a1"].file_path, t["a2"].file_path])
    other.new_overwrite().delete_file(t["a2"]).add_file(t.data([{"id": 3, "cat": "a"}])).commit()
    with pytest.raises(CommitConflictError, match=r"a2\.parquet") as exc:
        delta.commit()
    assert exc.value.snapshot_id == head_id(other)


def test_a_delete_snapshot_only_conflicts_when_asked(t: CatalogTable) -> None:
    other = t.load()
    deletes = t.position_deletes([(t["a1"].file_path, 0), (t["a2"].file_path, 0)])
    lenient = t.table.new_row_delta().add_deletes(deletes)
    lenient.validate_data_files_exist([t["a2"].file_path])
    other.new_delete().delete_file(t["a2"]).commit()
    lenient.commit()  # Java's default: deleting a whole file leaves the row delta right
    assert ids(t.table) == [2, 10]

    strict = t.table.new_row_delta().add_deletes(t.position_deletes([(t["b1"].file_path, 0)]))
    strict.validate_data_files_exist([t["b1"].file_path]).validate_deleted_files()
    t.load().new_delete().delete_file(t["b1"]).commit()
    with pytest.raises(CommitConflictError, match=r"b1\.parquet"):
        strict.commit()


@pytest.mark.parametrize("rewrite_first", [True, False])
def test_rewrite_racing_a_row_delta_has_exactly_one_outcome(
    any_catalog: SqlCatalog, rewrite_first: bool
) -> None:
    t = three_files(any_catalog)
    writer_a, writer_b = t.load(), t.load()
    rewrite = compaction(t, writer_a).use_starting_sequence_number()
    delta = writer_b.new_row_delta().add_deletes(
        t.position_deletes([(t["a1"].file_path, 1)], referenced_data_file=t["a1"].file_path)
    )
    first, second = (rewrite, delta) if rewrite_first else (delta, rewrite)
    first.commit()
    with pytest.raises(CommitConflictError):
        second.commit()
    # The winner's rows: the compaction keeps id 2; the row delta deletes it.
    assert ids(t.table.refresh()) == ([1, 2, 3, 10] if rewrite_first else [1, 3, 10])
    assert_clean(t.table)


def test_overwrite_with_a_conflict_filter_fails_when_matching_data_was_added(
    t: CatalogTable,
) -> None:
    other = t.load()
    new_a = t.data([{"id": 4, "cat": "a"}])
    overwrite = (
        t.table.new_overwrite()
        .overwrite_by_row_filter(equal("cat", "a"))
        .add_file(new_a)
        .validate_no_conflicting_data()
    )
    other.new_fast_append().append_file(t.data([{"id": 20, "cat": "b"}])).commit()
    other.new_fast_append().append_file(t.data([{"id": 5, "cat": "a"}], name="late")).commit()
    late_id = head_id(other)
    with pytest.raises(CommitConflictError, match=r"late\.parquet.*cat == 'a'") as exc:
        overwrite.commit()
    assert exc.value.snapshot_id == late_id
    assert ids(t.table.refresh()) == [1, 2, 3, 5, 10, 20]
    assert_clean(t.table)


def test_overwrite_succeeds_when_only_other_data_was_added(t: CatalogTable) -> None:
    other = t.load()
    overwrite = (
        t.table.new_overwrite()
        .overwrite_by_row_filter(equal("cat", "a"))
        .add_file(t.data([{"id": 4, "cat": "a"}]))
        .validate_no_conflicting_data()
    )
    other.new_fast_append().append_file(t.data([{"id": 20, "cat": "b"}])).commit()
    overwrite.commit()
    assert ids(t.table) == [4, 10, 20]  # nothing lost: the concurrent append survives


def test_replace_partitions_conflicts_only_on_its_own_partitions(t: CatalogTable) -> None:
    other = t.load()
    replace = (
        t.table.new_replace_partitions()
        .add_file(t.data([{"id": 7, "cat": "a"}]))
        .validate_no_conflicting_data()
    )
    other.new_fast_append().append_file(t.data([{"id": 20, "cat": "b"}])).commit()
    replace.commit()
    assert ids(t.table) == [7, 10, 20]

    replace = (
        t.table.new_replace_partitions()
        .add_file(t.data([{"id": 8, "cat": "a"}]))
        .validate_no_conflicting_data()
    )
    other.refresh().new_fast_append().append_file(t.data([{"id": 9, "cat": "a"}])).commit()
    with pytest.raises(CommitConflictError, match="partitions") as exc:
        replace.commit()
    assert exc.value.snapshot_id == head_id(other)


def test_a_starting_snapshot_no_longer_in_the_history_is_a_conflict(t: CatalogTable) -> None:
    start = head_id(t.table)
    other = t.load()
    rewrite = compaction(t, t.table).use_starting_sequence_number()
    # Someone resets main to a new lineage: a fresh branch head without the start.
    other.new_fast_append().append_file(t.data([{"id": 50, "cat": "c"}])).commit()
    base = other.metadata
    head = base.current_snapshot()
    assert head is not None
    orphan = Snapshot(
        snapshot_id=head.snapshot_id + 1,
        timestamp_ms=head.timestamp_ms + 1,
        manifest_list=head.manifest_list,
        sequence_number=base.last_sequence_number + 1,
        summary=head.summary,
    )
    builder = MetadataBuilder(base).add_snapshot(orphan)
    builder.set_ref("main", SnapshotRef(orphan.snapshot_id, SnapshotRefType.BRANCH))
    other.commit_metadata(base, builder.build())
    with pytest.raises(CommitConflictError, match=f"starting snapshot {start}"):
        rewrite.commit()
    assert ids(t.table.refresh()) == [1, 2, 3, 10, 50]


def test_compaction_commits_alongside_ingest_and_unrelated_deletes(t: CatalogTable) -> None:
    other = t.load()
    rewrite = compaction(t, t.table).use_starting_sequence_number()
    other.new_fast_append().append_file(t.data([{"id": 4, "cat": "a"}])).commit()
    other.new_row_delta().add_deletes(t.position_deletes([(t["b1"].file_path, 0)])).commit()
    other.new_fast_append().append_file(t.data([{"id": 20, "cat": "b"}])).commit()
    rewrite.commit()
    assert rewrite.attempts == 2
    assert ids(t.table) == [1, 2, 3, 4, 20]
    assert_clean(t.table)


def test_row_delta_commits_alongside_a_compaction_of_other_files(t: CatalogTable) -> None:
    other = t.load()
    delta = t.table.new_row_delta().add_deletes(
        t.position_deletes([(t["b1"].file_path, 0)], referenced_data_file=t["b1"].file_path)
    )
    compaction(t, other).commit()
    delta.commit()
    assert ids(t.table) == [1, 2, 3]
    assert_clean(t.table)


def replace_dv_twice(t: CatalogTable, writer: Table) -> int:
    """A merge-on-read writer deletes a1's row 0 (a DV), then row 1 too (a DV merging the
    first, which it removes): one live DV for a1 at every snapshot. Returns the last one."""
    (first,) = t.deletion_vectors("writer-1", (t["a1"], [0]))
    writer.new_row_delta().add_deletes(first).commit()
    (second,) = t.deletion_vectors("writer-2", (t["a1"], [0, 1]))
    writer.new_row_delta().add_deletes(second).remove_deletes(first).commit()
    return head_id(writer)


def test_a_dv_replaced_meanwhile_is_no_corrupt_table(catalog: SqlCatalog) -> None:
    """Two DVs for one data file, one after the other, across the commits a rewrite validates
    (each replacing the last): every snapshot has one live DV, so a rewrite of other files
    commits (Iceberg Java failed here too, apache/iceberg#17764: "Can't index multiple DVs")."""
    t = v3_files(catalog)
    other = t.load()
    compacted = t.data([{"id": 10, "cat": "b"}, {"id": 11, "cat": "b"}], name="b-compacted")
    rewrite = t.table.new_rewrite().rewrite_files([t["b1"]], [compacted])
    rewrite.use_starting_sequence_number()
    replace_dv_twice(t, other)

    rewrite.commit()
    assert ids(t.table.refresh()) == [3, 10, 11]
    assert {"a1.parquet", "b-compacted.parquet", "writer-2.puffin"} <= set(live(t.table))
    assert_clean(t.table)


def test_a_dv_replaced_meanwhile_for_a_replaced_file_is_a_conflict(catalog: SqlCatalog) -> None:
    """The same writer's DVs on a file the rewrite replaces: a conflict naming the live DV's
    snapshot, never "corrupt table"; the writer's rows stay deleted."""
    t = v3_files(catalog)
    other = t.load()
    rewrite = compaction(t, t.table).use_starting_sequence_number()
    last = replace_dv_twice(t, other)

    with pytest.raises(CommitConflictError) as exc:
        rewrite.commit()
    assert exc.value.snapshot_id == last
    assert "found new position delete for replaced data file" in str(exc.value)
    assert "writer-2.puffin" in str(exc.value)
    assert ids(t.table.refresh()) == [3, 10, 11]
    assert_clean(t.table)
