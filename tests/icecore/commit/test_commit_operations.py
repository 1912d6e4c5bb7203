"""Each snapshot-producing operation through a real SqlCatalog: the snapshot it writes
(operation, summary, manifests, sequence numbers) and what planning reads afterwards.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from icecore.catalog.sql import SqlCatalog
from icecore.errors import CommitConflictError, ValidationError
from icecore.expressions import equal, greater_than_or_equal, less_than
from icecore.spec.manifest import EntryStatus
from icecore.spec.manifest_list import ManifestContent
from icecore.spec.snapshots import Operation, Snapshot
from tests.support.committing import (
    UNPARTITIONED,
    CatalogTable,
    entries,
    ids,
    live,
    manifests,
    rows,
    sqlite_catalog,
)


@pytest.fixture
def catalog(tmp_path: Path) -> SqlCatalog:
    return sqlite_catalog(tmp_path)


@pytest.fixture
def t(catalog: SqlCatalog) -> CatalogTable:
    """Two partitions: a (ids 1-2, file a1; id 3, file a2) and b (ids 10-11, file b1)."""
    t = CatalogTable.create(catalog, "ops")
    t.data([{"id": 1, "cat": "a", "v": 1}, {"id": 2, "cat": "a", "v": 2}], name="a1")
    t.data([{"id": 3, "cat": "a", "v": 3}], name="a2")
    t.data([{"id": 10, "cat": "b", "v": 10}, {"id": 11, "cat": "b", "v": 11}], name="b1")
    op = t.table.new_fast_append()
    for f in (t["a1"], t["a2"], t["b1"]):
        op.append_file(f)
    op.commit()
    return t


def head(t: CatalogTable) -> Snapshot:
    snapshot = t.table.metadata.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    return snapshot


def summary(t: CatalogTable, *keys: str) -> tuple[str | None, ...]:
    props = head(t).summary.properties  # type: ignore[union-attr]
    return tuple(props.get(k) for k in keys)


def test_overwrite_by_files(t: CatalogTable) -> None:
    a3 = t.data([{"id": 1, "cat": "a", "v": 100}, {"id": 2, "cat": "a", "v": 200}], name="a3")
    t.table.new_overwrite().delete_file(t["a1"]).add_file(a3).commit()
    assert head(t).operation is Operation.OVERWRITE
    assert summary(t, "added-data-files", "deleted-data-files", "total-data-files") == (
        "1",
        "1",
        "3",
    )
    assert summary(t, "total-records", "changed-partition-count") == ("5", "1")
    assert [r["v"] for r in rows(t.table)] == [100, 200, 3, 10, 11]
    # The manifest holding a1 was rewritten: a1 DELETED by this snapshot, the rest EXISTING.
    statuses = {
        Path(e.data_file.file_path).stem: (e.status, e.sequence_number)
        for m in manifests(t.table)
        for e in entries(t.table, m)
    }
    assert statuses == {
        "a3": (EntryStatus.ADDED, 2),
        "a1": (EntryStatus.DELETED, 1),
        "a2": (EntryStatus.EXISTING, 1),
        "b1": (EntryStatus.EXISTING, 1),
    }


def test_overwrite_operation_follows_what_it_does(t: CatalogTable) -> None:
    t.table.new_overwrite().delete_file(t["a2"]).commit()
    assert head(t).operation is Operation.DELETE
    t.table.new_overwrite().add_file(t.data([{"id": 4, "cat": "a"}])).commit()
    assert head(t).operation is Operation.APPEND


def test_overwrite_by_row_filter_removes_whole_matching_files(t: CatalogTable) -> None:
    new_b = t.data([{"id": 12, "cat": "b", "v": 12}], name="b2")
    t.table.new_overwrite().overwrite_by_row_filter(equal("cat", "b")).add_file(new_b).commit()
    assert head(t).operation is Operation.OVERWRITE
    assert ids(t.table) == [1, 2, 3, 12]
    # Metrics prove v < 3 for every row of a1 only; a2 (v=3) and the rest stay.
    t.table.new_overwrite().overwrite_by_row_filter(less_than("v", 3)).commit()
    assert ids(t.table) == [3, 12]


def test_row_filter_matching_part_of_a_file_is_refused(t: CatalogTable) -> None:
    with pytest.raises(ValidationError, match=r"some, but not all, rows match filter.*a1"):
        t.table.new_overwrite().overwrite_by_row_filter(equal("id", 1)).commit()
    with pytest.raises(ValidationError, match="some, but not all"):
        t.table.new_delete().delete_from_row_filter(less_than("v", 2)).commit()
    assert ids(t.table) == [1, 2, 3, 10, 11]


def test_added_files_must_match_the_overwrite_filter_when_asked(t: CatalogTable) -> None:
    wrong = t.data([{"id": 20, "cat": "a"}])
    op = t.table.new_overwrite().overwrite_by_row_filter(equal("cat", "b")).add_file(wrong)
    with pytest.raises(ValidationError, match="do not match filter"):
        op.validate_added_files_match_overwrite_filter().commit()


def test_replace_partitions_replaces_only_partitions_it_writes(t: CatalogTable) -> None:
    t.table.new_row_delta().add_deletes(t.position_deletes([(t["a1"].file_path, 0)])).commit()
    assert ids(t.table) == [2, 3, 10, 11]
    fresh = t.data([{"id": 5, "cat": "a"}], name="fresh")
    t.table.new_replace_partitions().add_file(fresh).commit()
    assert head(t).operation is Operation.OVERWRITE
    assert summary(t, "replace-partitions", "deleted-data-files", "removed-delete-files") == (
        "true",
        "2",
        "1",
    )
    assert summary(t, "total-data-files", "total-delete-files", "total-records") == ("2", "0", "3")
    assert ids(t.table) == [5, 10, 11]


def test_replace_partitions_of_an_unpartitioned_table_replaces_everything(
    catalog: SqlCatalog,
) -> None:
    t = CatalogTable.create(catalog, "flat", spec=UNPARTITIONED)
    t.table.new_fast_append().append_file(t.data([{"id": 1}])).commit()
    t.table.new_fast_append().append_file(t.data([{"id": 2}])).commit()
    t.table.new_replace_partitions().add_file(t.data([{"id": 3}])).commit()
    assert ids(t.table) == [3]
    assert summary(t, "deleted-data-files", "total-data-files") == ("2", "1")


def test_replace_partitions_append_only_refuses_existing_partitions(t: CatalogTable) -> None:
    op = t.table.new_replace_partitions().add_file(t.data([{"id": 5, "cat": "a"}]))
    with pytest.raises(CommitConflictError, match="conflicts with existing partition") as exc:
        op.validate_append_only().commit()
    assert exc.value.snapshot_id == t.table.metadata.current_snapshot_id
    t.table.new_replace_partitions().add_file(
        t.data([{"id": 30, "cat": "c"}])
    ).validate_append_only().commit()
    assert ids(t.table) == [1, 2, 3, 10, 11, 30]


def test_delete_files_by_path_by_file_and_by_filter(t: CatalogTable) -> None:
    t.table.new_delete().delete_file(t["a2"].file_path).commit()
    assert head(t).operation is Operation.DELETE
    assert summary(t, "deleted-data-files", "deleted-records", "total-records") == ("1", "1", "4")
    t.table.new_delete().delete_file(t["a1"]).commit()
    assert ids(t.table) == [10, 11]
    t.table.new_delete().delete_from_row_filter(greater_than_or_equal("id", 10)).commit()
    assert ids(t.table) == []
    assert summary(t, "total-data-files", "total-records") == ("0", "0")


def test_deleting_a_file_that_is_not_live_fails_naming_it(t: CatalogTable) -> None:
    with pytest.raises(ValidationError, match=r"not in branch 'main'.*nowhere\.parquet"):
        t.table.new_delete().delete_file("/nowhere.parquet").commit()


def test_row_delta_with_position_and_equality_deletes(t: CatalogTable) -> None:
    pos = t.position_deletes([(t["a1"].file_path, 1)], name="pos")
    eq = t.equality_deletes([{"id": 10, "cat": "b"}], ["id", "cat"])
    op = t.table.new_row_delta().add_deletes(pos).add_deletes(eq)
    op.commit()
    assert head(t).operation is Operation.DELETE
    assert summary(
        t,
        "added-delete-files",
        "added-position-delete-files",
        "added-equality-delete-files",
        "added-position-deletes",
        "added-equality-deletes",
        "total-delete-files",
        "total-position-deletes",
        "total-equality-deletes",
    ) == ("2", "1", "1", "1", "1", "2", "1", "1")
    assert ids(t.table) == [1, 3, 11]
    plan = {
        Path(task.file.file_path).stem: sorted(Path(d.file_path).stem for d in task.deletes)
        for task in t.table.scan().plan_files()
    }
    eq_name = Path(eq.file_path).stem
    assert plan == {"a1": ["pos"], "a2": [], "b1": [eq_name]}
    deletes = [m for m in manifests(t.table) if m.content == ManifestContent.DELETES]
    assert len(deletes) == 1 and deletes[0].sequence_number == 2

    # Rows added in the same row delta are not hit by its equality deletes (same sequence).
    again = t.data([{"id": 10, "cat": "b", "v": 99}], name="again")
    eq2 = t.equality_deletes([{"id": 11, "cat": "b"}], ["id", "cat"])
    t.table.new_row_delta().add_rows(again).add_deletes(eq2).commit()
    assert head(t).operation is Operation.OVERWRITE
    assert ids(t.table) == [1, 3, 10]
    assert live(t.table)["again.parquet"].sequence_number == 3


def test_rewrite_with_the_starting_sequence_number(t: CatalogTable) -> None:
    t.table.new_row_delta().add_deletes(t.position_deletes([(t["a1"].file_path, 0)])).commit()
    compacted = t.data([{"id": 2, "cat": "a", "v": 2}, {"id": 3, "cat": "a", "v": 3}], name="ac")
    op = t.table.new_rewrite().rewrite_files([t["a1"], t["a2"]], [compacted])
    op.use_starting_sequence_number().commit()
    assert head(t).operation is Operation.REPLACE
    assert summary(
        t, "added-data-files", "deleted-data-files", "removed-position-delete-files"
    ) == (
        "1",
        "2",
        "1",  # the position delete pointed only at a1: dangling, so removed too
    )
    assert summary(t, "total-records", "total-delete-files") == ("4", "0")
    assert live(t.table)["ac.parquet"].sequence_number == 2  # the starting snapshot's
    assert head(t).sequence_number == 3
    assert [r["v"] for r in rows(t.table)] == [2, 3, 10, 11]


def test_an_empty_referenced_data_file_names_no_file(t: CatalogTable) -> None:
    """Some DuckDB releases wrote `referenced_data_file` as "" for "none": the delete is then
    scoped by its `file_path` bounds, committed without asking for a data file named "", and
    dropped with the one data file its bounds name."""
    deletes = t.position_deletes([(t["a1"].file_path, 0)], referenced_data_file="")
    t.table.new_row_delta().add_deletes(deletes).commit()
    assert [r["id"] for r in rows(t.table)] == [2, 3, 10, 11]
    compacted = t.data([{"id": 2, "cat": "a", "v": 2}], name="ac")
    t.table.new_rewrite().rewrite_files([t["a1"]], [compacted]).commit()
    assert summary(t, "removed-position-delete-files", "total-delete-files") == ("1", "0")
    assert [r["id"] for r in rows(t.table)] == [2, 3, 10, 11]


def test_rewrite_checks_its_own_shape(t: CatalogTable) -> None:
    more = t.data([{"id": 1, "cat": "a"}, {"id": 2, "cat": "a"}, {"id": 99, "cat": "a"}])
    with pytest.raises(ValidationError, match="3 added records > 2 replaced"):
        t.table.new_rewrite().rewrite_files([t["a1"]], [more]).commit()
    with pytest.raises(ValidationError, match="at least one file"):
        t.table.new_rewrite().commit()
    with pytest.raises(ValidationError, match="older than replaced data"):
        t.table.new_rewrite().rewrite_files(
            [t["a1"]], [t.data([{"id": 1, "cat": "a"}])]
        ).data_sequence_number(0).commit()
    assert ids(t.table) == [1, 2, 3, 10, 11]


def test_rewrite_of_delete_files(t: CatalogTable) -> None:
    d1 = t.position_deletes([(t["a1"].file_path, 0)], name="d1")
    d2 = t.position_deletes([(t["a2"].file_path, 0)], name="d2")
    t.table.new_row_delta().add_deletes(d1).commit()
    t.table.new_row_delta().add_deletes(d2).commit()
    both = t.position_deletes(
        [(t["a1"].file_path, 0), (t["a2"].file_path, 0)],
        name="both",
    )
    seq = live(t.table)["d1.parquet"].sequence_number
    assert seq is not None
    t.table.new_rewrite().rewrite_files(
        delete_files_to_replace=[d1, d2], delete_files_to_add=[]
    ).add_file(both, data_sequence_number=seq).commit()
    assert summary(t, "removed-position-delete-files", "added-position-delete-files") == ("2", "1")
    assert live(t.table)["both.parquet"].sequence_number == seq
    assert ids(t.table) == [2, 10, 11]


def test_deletes_older_than_all_live_data_go_with_a_rewrite(catalog: SqlCatalog) -> None:
    t = CatalogTable.create(catalog, "flat", spec=UNPARTITIONED)
    a1 = t.data([{"id": 1}, {"id": 2}])
    a2 = t.data([{"id": 3}])
    t.table.new_fast_append().append_file(a1).append_file(a2).commit()
    t.table.new_row_delta().add_deletes(t.equality_deletes([{"id": 1}], ["id"])).commit()
    t.table.new_fast_append().append_file(t.data([{"id": 1}], name="back")).commit()
    assert ids(t.table) == [1, 2, 3]
    # Compacting a1 and a2 into a file of the new snapshot's sequence number leaves no live
    # data older than the equality delete (sequence 2): it can never apply again.
    t.table.new_rewrite().rewrite_files([a1, a2], [t.data([{"id": 2}, {"id": 3}])]).commit()
    assert summary(t, "removed-equality-delete-files", "total-delete-files") == ("1", "0")
    assert ids(t.table) == [1, 2, 3]


def test_deletes_that_may_still_apply_stay(t: CatalogTable) -> None:
    eq = t.equality_deletes([{"id": 1, "cat": "a"}, {"id": 10, "cat": "a"}], ["id", "cat"])
    t.table.new_row_delta().add_deletes(eq).commit()
    t.table.new_rewrite().rewrite_files(
        [t["a1"], t["a2"]],
        [t.data([{"id": 2, "cat": "a"}, {"id": 3, "cat": "a"}])],
    ).commit()
    # b1 (sequence 1) is still older than the delete: Java's table-wide rule keeps it.
    assert summary(t, "removed-equality-delete-files", "total-delete-files") == (None, "1")
    assert ids(t.table) == [2, 3, 10, 11]


def test_a_row_filter_removes_delete_files_only_when_they_can_no_longer_apply(
    catalog: SqlCatalog,
) -> None:
    t = CatalogTable.create(catalog, "eqcols", spec=UNPARTITIONED)
    a = t.data([{"id": 1, "cat": "a"}, {"id": 2, "cat": "a"}])
    b = t.data([{"id": 1, "cat": "b"}])
    t.table.new_fast_append().append_file(a).append_file(b).commit()
    # Deletes id 1 everywhere; the file also stores cat = 'b', which is not an equality column.
    by_id = dataclasses.replace(
        t.equality_deletes([{"id": 1, "cat": "b"}], ["id", "cat"]), equality_ids=[1]
    )
    # Deletes (id 2, cat 'a') only: every row it can delete has cat 'a'.
    by_id_cat = t.equality_deletes([{"id": 2, "cat": "a"}], ["id", "cat"])
    t.table.new_row_delta().add_deletes(by_id).add_deletes(by_id_cat).commit()
    assert ids(t.table) == []

    # b goes; by_id stays, although every row it stores has cat 'b': it still deletes (1, 'a').
    t.table.new_delete().delete_from_row_filter(equal("cat", "b")).commit()
    assert summary(t, "deleted-data-files", "removed-equality-delete-files") == ("1", None)
    assert ids(t.table) == []
    # With a gone no data is left, so both deletes are older than every live data file.
    t.table.new_delete().delete_from_row_filter(equal("cat", "a")).commit()
    assert summary(t, "deleted-data-files", "removed-equality-delete-files") == ("1", "2")
    t.table.new_fast_append().append_file(t.data([{"id": 1, "cat": "c"}])).commit()
    assert ids(t.table) == [1]


def test_removing_files_never_opens_manifests_of_other_partitions(catalog: SqlCatalog) -> None:
    t = CatalogTable.create(catalog, "pruned")
    a1 = t.data([{"id": 1, "cat": "a"}])
    t.table.new_fast_append().append_file(a1).commit()
    t.table.new_fast_append().append_file(t.data([{"id": 10, "cat": "b"}])).commit()
    t.table.new_fast_append().append_file(t.data([{"id": 2, "cat": "a"}])).commit()
    b_manifest = manifests(t.table)[1].manifest_path
    hidden = Path(b_manifest + ".hidden")
    Path(b_manifest).rename(hidden)  # any attempt to read it would fail the commit
    try:
        t.table.new_rewrite().rewrite_files([a1], [t.data([{"id": 1, "cat": "a"}])]).commit()
        t.table.new_delete().delete_from_row_filter(equal("cat", "a") & equal("id", 2)).commit()
        t.table.new_overwrite().overwrite_by_row_filter(equal("cat", "a")).commit()
    finally:
        hidden.rename(b_manifest)
    assert b_manifest in {m.manifest_path for m in manifests(t.table)}
    assert summary(t, "manifests-replaced", "manifests-kept") == ("1", "1")
    assert ids(t.table) == [10]


def test_row_delta_replaces_one_dv_of_a_shared_puffin_file(catalog: SqlCatalog) -> None:
    """`remove_deletes` takes out exactly the DV it names (by path and offset): the other DV
    of the same Puffin file stays, and the replacing DV goes in by the same commit."""
    t = CatalogTable.create(catalog, "dvs", properties={"format-version": "3"})
    a1 = t.data([{"id": 1, "cat": "a"}, {"id": 2, "cat": "a"}, {"id": 3, "cat": "a"}])
    b1 = t.data([{"id": 10, "cat": "b"}, {"id": 11, "cat": "b"}])
    t.table.new_fast_append().append_file(a1).append_file(b1).commit()

    old_a, old_b = t.deletion_vectors("first", (a1, [0]), (b1, [1]))
    t.table.new_row_delta().add_deletes(old_a).add_deletes(old_b).commit()
    assert ids(t.table) == [2, 3, 10]

    (new_a,) = t.deletion_vectors("second", (a1, [0, 2]))  # merged: the old position and a new one
    t.table.new_row_delta().add_deletes(new_a).remove_deletes(old_a).commit()
    assert head(t).operation is Operation.DELETE  # Java's: deletes added, no data
    assert summary(t, "added-delete-files", "removed-delete-files", "total-delete-files") == (
        "1",
        "1",
        "2",
    )
    assert ids(t.table) == [2, 10]
    live_dvs = sorted(
        (Path(e.data_file.file_path).stem, e.data_file.referenced_data_file)
        for m in manifests(t.table)
        for e in entries(t.table, m)
        if e.status is not EntryStatus.DELETED and e.data_file.is_deletion_vector
    )
    assert live_dvs == [("first", b1.file_path), ("second", a1.file_path)]

    with pytest.raises(ValidationError, match=r"removed meanwhile|not in branch"):
        t.table.new_row_delta().remove_deletes(old_a).commit()
