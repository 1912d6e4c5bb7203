"""Appends through a real SqlCatalog: snapshots, manifest reuse and merging, branches, retries.

Every assertion reads back what was committed (manifest lists, manifests, inherited sequence
numbers, files on disk), so a producer that wrote more than it should, forgot to reuse a
manifest or let a retry rewrite manifests fails here.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import fastavro
import pytest

from icecore.avro.container import AvroFile
from icecore.catalog.sql import SqlCatalog
from icecore.errors import CommitConflictError, CommitFailedError, ValidationError
from icecore.spec.manifest import EntryStatus, FileContent
from icecore.spec.manifest_list import ManifestContent, ManifestListWriter
from icecore.spec.metadata import TableMetadata
from icecore.spec.metadata_builder import MetadataBuilder
from icecore.spec.partitioning import PartitionField, PartitionSpec
from icecore.spec.refs import MAIN_BRANCH
from icecore.spec.snapshots import Operation, Snapshot
from icecore.spec.transforms import parse_transform
from tests.support.committing import (
    UNPARTITIONED,
    CatalogTable,
    add_spec,
    any_catalog_fixture,  # noqa: F401 - `any_catalog`
    entries,
    ids,
    live,
    manifests,
    metadata_files,
    referenced_files,
    sqlite_catalog,
    tag,
)


@pytest.fixture
def catalog(tmp_path: Path) -> SqlCatalog:
    return sqlite_catalog(tmp_path)


def name_of(path: str) -> str:
    return Path(path).name


def test_fast_append_snapshot_summary_manifests_and_inherited_sequence_numbers(
    catalog: SqlCatalog,
) -> None:
    t = CatalogTable.create(catalog, "events")
    a = t.data([{"id": 1, "cat": "a"}, {"id": 2, "cat": "a"}], name="a")
    b = t.data([{"id": 3, "cat": "b"}], name="b")
    op = t.table.new_fast_append().append_file(a).append_file(b).snapshot_property("job", "ingest")
    committed = op.commit()

    s1 = committed.current_snapshot()
    assert s1 is not None and s1.snapshot_id == op.snapshot_id
    assert (s1.sequence_number, s1.parent_snapshot_id, committed.last_sequence_number) == (
        1,
        None,
        1,
    )
    assert s1.operation is Operation.APPEND
    assert s1.summary is not None
    assert s1.summary.properties == {
        "job": "ingest",
        "manifests-created": "1",
        "manifests-kept": "0",
        "manifests-replaced": "0",
        "added-data-files": "2",
        "added-records": "3",
        "added-files-size": str(a.file_size_in_bytes + b.file_size_in_bytes),
        "changed-partition-count": "2",
        "total-records": "3",
        "total-files-size": str(a.file_size_in_bytes + b.file_size_in_bytes),
        "total-data-files": "2",
        "total-delete-files": "0",
        "total-position-deletes": "0",
        "total-equality-deletes": "0",
    }
    assert s1.manifest_list is not None
    assert re.fullmatch(
        rf"snap-{s1.snapshot_id}-1-[0-9a-f-]{{36}}\.avro", name_of(s1.manifest_list)
    )
    (m1,) = manifests(t.table)
    assert re.fullmatch(r"[0-9a-f-]{36}-m0\.avro", name_of(m1.manifest_path))
    assert Path(m1.manifest_path).parent == Path(committed.location, "metadata")
    assert (m1.added_snapshot_id, m1.sequence_number, m1.min_sequence_number) == (
        s1.snapshot_id,
        1,
        1,
    )
    assert (m1.added_files_count, m1.existing_files_count, m1.added_rows_count) == (2, 0, 3)
    for e in entries(t.table, m1):
        assert (e.status, e.snapshot_id, e.sequence_number, e.file_sequence_number) == (
            EntryStatus.ADDED,
            s1.snapshot_id,
            1,
            1,
        )

    c = t.data([{"id": 4, "cat": "a"}], name="c")
    s2 = t.table.new_fast_append().append_file(c).commit().current_snapshot()
    assert s2 is not None
    assert (s2.sequence_number, s2.parent_snapshot_id) == (2, s1.snapshot_id)
    assert s2.summary is not None
    assert s2.summary.get("total-data-files") == "3"
    assert s2.summary.get("total-records") == "4"
    assert s2.summary.get("manifests-kept") == "1"
    new, old = manifests(t.table)
    assert old == m1  # carried over untouched, same path and numbers
    assert (new.sequence_number, new.added_snapshot_id) == (2, s2.snapshot_id)
    assert {k: v.sequence_number for k, v in live(t.table).items()} == {
        "a.parquet": 1,
        "b.parquet": 1,
        "c.parquet": 2,
    }
    assert ids(t.table) == [1, 2, 3, 4]


def test_append_to_table_with_many_manifests_writes_one_manifest_and_one_list(
    catalog: SqlCatalog,
) -> None:
    t = CatalogTable.create(catalog, "many", spec=UNPARTITIONED)
    for i in range(12):
        t.table.new_fast_append().append_file(t.data([{"id": i}])).commit()
    before = metadata_files(t.table)
    old_manifests = manifests(t.table)
    assert len(old_manifests) == 12

    op = t.table.new_fast_append().append_file(t.data([{"id": 100}]))
    op.commit()

    written = metadata_files(t.table) - before
    snapshot = t.table.metadata.current_snapshot()
    assert snapshot is not None
    new_manifest = manifests(t.table)[0]
    assert written == {snapshot.manifest_list, new_manifest.manifest_path}
    assert manifests(t.table)[1:] == old_manifests
    assert ids(t.table) == [*range(12), 100]


def test_merge_append_merges_only_past_min_count(catalog: SqlCatalog) -> None:
    t = CatalogTable.create(
        catalog,
        "merged",
        spec=UNPARTITIONED,
        properties={"commit.manifest.min-count-to-merge": "4"},
    )
    snapshots = []
    for i in range(3):
        t.table.new_append().append_file(t.data([{"id": i}], name=f"f{i}")).commit()
        snapshots.append(t.table.metadata.current_snapshot())
    assert len(manifests(t.table)) == 3  # 3 < min count: each append added one manifest

    op = t.table.new_append().append_file(t.data([{"id": 3}], name="f3"))
    op.commit()
    (merged,) = manifests(t.table)
    snapshot = t.table.metadata.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    assert (
        snapshot.summary.get("manifests-created"),
        snapshot.summary.get("manifests-replaced"),
    ) == (
        "1",
        "3",
    )
    assert (merged.added_snapshot_id, merged.sequence_number, merged.min_sequence_number) == (
        op.snapshot_id,
        4,
        1,
    )
    assert (merged.added_files_count, merged.existing_files_count) == (1, 3)
    by_name = {name_of(e.data_file.file_path): e for e in entries(t.table, merged)}
    assert by_name["f3.parquet"].status is EntryStatus.ADDED
    assert by_name["f3.parquet"].sequence_number == 4
    for i, s in enumerate(snapshots):
        old = by_name[f"f{i}.parquet"]
        assert (old.status, old.snapshot_id, old.sequence_number) == (
            EntryStatus.EXISTING,
            s.snapshot_id,
            i + 1,
        )
    assert ids(t.table) == [0, 1, 2, 3]


def test_merge_honours_target_size_and_the_enabled_switch(catalog: SqlCatalog) -> None:
    small = CatalogTable.create(
        catalog,
        "small_target",
        spec=UNPARTITIONED,
        properties={
            "commit.manifest.min-count-to-merge": "2",
            "commit.manifest.target-size-bytes": "1",
        },
    )
    off = CatalogTable.create(
        catalog,
        "merge_off",
        spec=UNPARTITIONED,
        properties={
            "commit.manifest.min-count-to-merge": "2",
            "commit.manifest-merge.enabled": "false",
        },
    )
    for t in (small, off):
        for i in range(3):
            t.table.new_append().append_file(t.data([{"id": i}])).commit()
        assert len(manifests(t.table)) == 3


def test_merging_never_mixes_specs_or_data_with_deletes(catalog: SqlCatalog) -> None:
    t = CatalogTable.create(
        catalog, "mixed", properties={"commit.manifest.min-count-to-merge": "2"}
    )
    a = t.data([{"id": 1, "cat": "a"}])
    t.table.new_fast_append().append_file(a).commit()
    t.table.new_fast_append().append_file(t.data([{"id": 2, "cat": "b"}])).commit()
    t.table.new_row_delta().add_deletes(t.position_deletes([(a.file_path, 0)])).commit()
    by_v = PartitionSpec(1, (PartitionField(3, 1001, parse_transform("identity"), "v"),))
    spec_id = add_spec(t.table, by_v)
    t.table.new_fast_append().append_file(t.data([{"id": 3, "v": 7}], spec_id=spec_id)).commit()

    t.table.new_append().append_file(t.data([{"id": 4, "v": 8}], spec_id=spec_id)).commit()

    result = manifests(t.table)
    for m in result:
        contents = {e.data_file.content for e in entries(t.table, m)}
        if m.content == ManifestContent.DATA:
            assert contents == {FileContent.DATA}
        else:
            assert contents == {FileContent.POSITION_DELETES}
        assert {e.data_file.spec_id for e in entries(t.table, m)} == {m.partition_spec_id}
    data = [m for m in result if m.content == ManifestContent.DATA]
    # Two spec-0 manifests merged into one, the two spec-1 manifests into another.
    assert sorted(m.partition_spec_id for m in data) == [0, 1]
    assert ids(t.table) == [2, 3, 4]


def test_branch_commits_leave_main_untouched(catalog: SqlCatalog) -> None:
    t = CatalogTable.create(catalog, "branches")
    t.table.new_fast_append().append_file(t.data([{"id": 1, "cat": "a"}])).commit()
    main_head = t.table.metadata.current_snapshot_id
    log = t.table.metadata.snapshot_log

    # A new branch forks from main's head.
    t.table.new_fast_append(branch="audit").append_file(t.data([{"id": 2, "cat": "a"}])).commit()
    t.table.new_delete(branch="audit").delete_file(
        next(iter(live(t.table).values())).data_file
    ).commit()
    t.table.new_append(branch="audit").append_file(t.data([{"id": 3, "cat": "b"}])).commit()
    assert t.table.metadata.current_snapshot_id == main_head
    assert t.table.metadata.snapshot_log == log
    assert ids(t.table) == [1]
    assert ids(t.table, ref="audit") == [2, 3]

    t.table.new_fast_append().append_file(t.data([{"id": 4, "cat": "b"}])).commit()
    assert ids(t.table) == [1, 4]
    assert ids(t.table, ref="audit") == [2, 3]
    audit = t.table.metadata.snapshot_for_ref("audit")
    main = t.table.metadata.snapshot_for_ref(MAIN_BRANCH)
    assert (audit.sequence_number, main.sequence_number) == (4, 5)
    chain = [s.snapshot_id for s in t.table.metadata.ancestors_of(audit.snapshot_id)]
    assert chain[-1] == main_head and len(chain) == 4


def test_commit_to_a_tag_is_refused(catalog: SqlCatalog) -> None:
    t = CatalogTable.create(catalog, "tagged")
    t.table.new_fast_append().append_file(t.data([{"id": 1, "cat": "a"}])).commit()
    snapshot_id = t.table.metadata.current_snapshot_id
    assert snapshot_id is not None
    tag(t.table, "v1", snapshot_id)
    with pytest.raises(ValidationError, match="'v1' is a tag, not a branch"):
        t.table.new_fast_append(branch="v1")
    with pytest.raises(ValidationError, match="'v1' is a tag"):
        t.table.new_rewrite(branch="v1")


def test_retry_rewrites_only_the_manifest_list_and_reuses_manifests(
    any_catalog: SqlCatalog,
) -> None:
    t = CatalogTable.create(any_catalog, "retried")
    stale = t.load()  # a second writer, loaded before the first one commits
    t.table.new_fast_append().append_file(t.data([{"id": 1, "cat": "a"}], name="first")).commit()

    op = stale.new_fast_append().append_file(t.data([{"id": 2, "cat": "b"}], name="second"))
    before = metadata_files(t.table)
    op.commit()

    assert op.attempts == 2
    written = metadata_files(t.table) - before
    lists = sorted(name_of(p) for p in written if name_of(p).startswith("snap-"))
    manifests_written = [p for p in written if not name_of(p).startswith("snap-")]
    # Attempt 1's list was deleted after the commit; attempt 2's is the snapshot's.
    assert len(lists) == 1 and lists[0].startswith(f"snap-{op.snapshot_id}-2-")
    assert len(manifests_written) == 1
    snapshot = stale.metadata.current_snapshot()
    assert snapshot is not None and snapshot.sequence_number == 2
    new = manifests(stale)[0]
    assert new.manifest_path == manifests_written[0]
    # Written when sequence number 1 looked next; inheritance gives it 2.
    assert live(stale)["second.parquet"].sequence_number == 2
    assert live(stale)["first.parquet"].sequence_number == 1
    assert ids(stale) == [1, 2]
    assert metadata_files(stale) == referenced_files(stale)


def test_retry_of_a_merging_commit_reuses_its_manifests(any_catalog: SqlCatalog) -> None:
    t = CatalogTable.create(any_catalog, "retried_delta")
    a = t.data([{"id": 1, "cat": "a"}, {"id": 2, "cat": "a"}])
    t.table.new_fast_append().append_file(a).commit()
    stale = t.load()
    t.table.new_fast_append().append_file(t.data([{"id": 3, "cat": "b"}])).commit()

    op = stale.new_row_delta().add_deletes(t.position_deletes([(a.file_path, 0)]))
    op.add_rows(t.data([{"id": 4, "cat": "a"}]))
    before = metadata_files(t.table)
    op.commit()

    assert op.attempts == 2
    written = metadata_files(t.table) - before
    assert len([p for p in written if name_of(p).startswith("snap-")]) == 1
    assert len(written) == 3  # one data manifest, one delete manifest, one list
    assert ids(stale) == [2, 3, 4]
    assert metadata_files(stale) == referenced_files(stale)


def test_exhausted_retries_fail_and_leave_no_files_behind(catalog: SqlCatalog) -> None:
    t = CatalogTable.create(catalog, "exhausted", properties={"commit.retry.num-retries": "0"})
    stale = t.load()
    t.table.new_fast_append().append_file(t.data([{"id": 1, "cat": "a"}])).commit()
    before = metadata_files(t.table)
    with pytest.raises(CommitFailedError):
        stale.new_fast_append().append_file(t.data([{"id": 2, "cat": "a"}])).commit()
    assert metadata_files(t.table) == before
    t.table.refresh()
    assert ids(t.table) == [1]


def test_fast_append_copies_a_large_parent_list_block_by_block(catalog: SqlCatalog) -> None:
    t = CatalogTable.create(catalog, "large", spec=UNPARTITIONED)
    t.table.new_fast_append().append_file(t.data([{"id": 1}])).commit()
    (real,) = manifests(t.table)
    # A parent list of 400 entries spans many Avro blocks (fastavro closes one every 16 kB).
    base = t.table.metadata
    parent = base.current_snapshot()
    assert parent is not None
    # Entries without live files: planning skips them, so they need no file on disk.
    fake = [
        dataclasses.replace(
            real,
            manifest_path=f"{real.manifest_path}.{i}.avro",
            added_files_count=0,
            added_rows_count=0,
            deleted_files_count=i,
        )
        for i in range(399)
    ]
    snapshot_id = parent.snapshot_id + 1
    location = f"{base.location}/metadata/snap-{snapshot_id}-1-handmade.avro"
    with ManifestListWriter(
        t.table.io, location, snapshot_id, parent.snapshot_id, base.last_sequence_number + 1
    ) as writer:
        writer.add_all([real, *fake])
    with open(location, "rb") as f:
        assert len(list(fastavro.block_reader(f))) > 2
    handmade = dataclasses.replace(
        parent,
        snapshot_id=snapshot_id,
        parent_snapshot_id=parent.snapshot_id,
        manifest_list=location,
        sequence_number=base.last_sequence_number + 1,
    )
    builder = MetadataBuilder(base).add_snapshot(handmade)
    t.table.commit_metadata(base, builder.set_branch_snapshot(MAIN_BRANCH, snapshot_id).build())
    carried = manifests(t.table)

    op = t.table.new_fast_append().append_file(t.data([{"id": 2}]))
    op.commit()

    new, *rest = manifests(t.table)
    assert rest == carried
    assert (new.added_snapshot_id, new.sequence_number) == (op.snapshot_id, 3)
    snapshot = t.table.metadata.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    assert snapshot.summary.get("manifests-kept") == "400"
    assert ids(t.table) == [1, 2]


def test_fast_append_re_encodes_a_parent_list_of_another_format(catalog: SqlCatalog) -> None:
    t = CatalogTable.create(catalog, "codecs", spec=UNPARTITIONED)
    t.table.new_fast_append().append_file(t.data([{"id": 1}])).commit()
    carried = manifests(t.table)
    builder = MetadataBuilder(t.table.metadata).set_properties(
        {"write.manifest.compression-codec": "none"}
    )
    t.table.commit_metadata(t.table.metadata, builder.build())

    t.table.new_fast_append().append_file(t.data([{"id": 2}])).commit()

    snapshot = t.table.metadata.current_snapshot()
    assert snapshot is not None and snapshot.manifest_list is not None
    codec = AvroFile(t.table.io, snapshot.manifest_list, "manifest list").metadata["avro.codec"]
    assert codec == "null"
    assert manifests(t.table)[1:] == carried
    assert ids(t.table) == [1, 2]


def test_caller_check_runs_on_every_attempt_against_the_refreshed_table(
    catalog: SqlCatalog,
) -> None:
    """A caller's rule sees what was committed meanwhile, and refusing leaves nothing behind."""
    t = CatalogTable.create(catalog, "guarded")
    stale = t.load()
    t.table.new_fast_append().append_file(t.data([{"id": 1, "cat": "a"}], name="first")).commit()
    seen: list[int | None] = []

    def no_second_writer(base: TableMetadata, parent: Snapshot | None) -> None:
        seen.append(None if parent is None else parent.snapshot_id)
        if parent is not None:
            raise CommitConflictError("someone committed first", snapshot_id=parent.snapshot_id)

    op = stale.new_fast_append().append_file(t.data([{"id": 2, "cat": "b"}], name="second"))
    with pytest.raises(CommitConflictError, match="someone committed first"):
        op.validate_with(no_second_writer).commit()

    first = t.table.refresh().metadata.current_snapshot()
    assert first is not None
    assert seen == [None, first.snapshot_id]  # attempt 1 on the stale base, 2 refreshed
    assert ids(t.table) == [1]
    assert metadata_files(t.table) == referenced_files(t.table)
