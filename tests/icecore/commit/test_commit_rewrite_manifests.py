"""The manifest rewrite commit (`table.rewrite_manifests()`, Java's `RewriteManifests`) through
real SQL catalogs: what the new snapshot lists, the numbers every entry keeps, conflicts with
concurrent commits, and row lineage in v3 tables.

The new manifests are written here with `ManifestWriter.existing`, as any engine would write
them; every assertion reads back what was committed.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest

from icecore.catalog.sql import SqlCatalog
from icecore.commit.rewrite_manifests import PROCESSED_ENTRIES, RewriteManifests
from icecore.errors import CommitConflictError, ValidationError
from icecore.location_provider import metadata_file_location
from icecore.spec.conversions import to_bytes
from icecore.spec.manifest import EntryStatus, ManifestEntry, ManifestWriter, read_manifest
from icecore.spec.manifest_list import ManifestContent, ManifestFile
from icecore.spec.metadata_builder import MetadataBuilder
from icecore.spec.snapshots import Operation
from icecore.spec.types import StringType
from icecore.table import Table
from tests.support.committing import (
    CatalogTable,
    any_catalog_fixture,  # noqa: F401 - `any_catalog`
    commit_builder,
    entries,
    live,
    manifests,
    rows,
    sqlite_catalog,
)

Numbers = dict[str, tuple[int | None, int | None, int | None]]


@pytest.fixture
def catalog(tmp_path: Path) -> SqlCatalog:
    return sqlite_catalog(tmp_path)


def appended(t: CatalogTable, commits: int, cats: Sequence[str] = ("a", "b")) -> None:
    """`commits` fast appends, one data file per category each: one manifest per commit."""
    for n in range(commits):
        append = t.table.new_fast_append()
        for i, cat in enumerate(cats):
            append.append_file(t.data([{"id": n * 10 + i, "cat": cat, "v": n}]))
        append.commit()


def numbers(table: Table) -> Numbers:
    """Every live file's snapshot id, data and file sequence numbers."""
    return {
        name: (e.snapshot_id, e.sequence_number, e.file_sequence_number)
        for name, e in live(table).items()
    }


def rewritten(table: Table, replaced: Sequence[ManifestFile], parts: int = 1) -> list[ManifestFile]:
    """The live entries of `replaced`, sorted by category then path, as `parts` new
    manifests of existing files (sequence numbers unassigned, as a job writes them)."""
    spec = table.metadata.spec_by_id(replaced[0].partition_spec_id)
    found: list[ManifestEntry] = [
        e for m in replaced for e in read_manifest(table.io, m, spec=spec, live_only=True)
    ]
    found.sort(key=lambda e: (e.data_file.partition, e.data_file.file_path))
    out = []
    for p in range(parts):
        location = metadata_file_location(table.metadata, f"rewritten-{uuid.uuid4()}.avro")
        writer = ManifestWriter(
            table.io,
            location,
            spec,
            table.metadata.schema(),
            snapshot_id=1,
            content=replaced[0].content,
            format_version=table.metadata.format_version,
        )
        for e in found[p * len(found) // parts : (p + 1) * len(found) // parts]:
            writer.existing(e)
        out.append(writer.close())
    return out


def replacing_all(table: Table, parts: int = 1) -> tuple[RewriteManifests, list[ManifestFile]]:
    """A rewrite of every data manifest into `parts` (not committed yet); the new ones."""
    old = data_manifests(table)
    rewrite = table.rewrite_manifests()
    for m in old:
        rewrite.delete_manifest(m)
    new = rewritten(table, old, parts)
    for m in new:
        rewrite.add_manifest(m)
    return rewrite, new


def data_manifests(table: Table) -> list[ManifestFile]:
    return [m for m in manifests(table) if m.content == ManifestContent.DATA]


def test_rewrite_keeps_every_entry_with_its_numbers(any_catalog: SqlCatalog) -> None:
    t = CatalogTable.create(any_catalog, "events")
    appended(t, 6)
    # Deletes of both kinds, so that sequence numbers matter: the position delete names the
    # first commit's file of id 0, the equality delete id 50 (written at sequence 6); a
    # later commit writes id 50 again, which the equality delete must not reach.
    first = min(live(t.table).values(), key=lambda e: e.sequence_number or 0)
    t.table.new_row_delta().add_deletes(
        t.position_deletes([(first.data_file.file_path, 0)], partition=first.data_file.partition)
    ).add_deletes(t.equality_deletes([{"id": 50, "cat": "a"}], ["id"])).commit()
    t.table.new_fast_append().append_file(t.data([{"id": 50, "cat": "a", "v": 99}])).commit()
    before_rows, before = rows(t.table), numbers(t.table)
    assert (0 not in {r["id"] for r in before_rows}) and {
        "id": 50,
        "cat": "a",
        "v": 99,
    } in before_rows
    assert {"id": 50, "cat": "a", "v": 5} not in before_rows
    head = t.table.metadata.current_snapshot()
    assert head is not None and head.summary is not None
    assert len(data_manifests(t.table)) == 7

    rewrite, new = replacing_all(t.table, parts=2)
    committed = rewrite.commit()

    snapshot = committed.snapshot_by_id(rewrite.snapshot_id)
    assert snapshot.parent_snapshot_id == head.snapshot_id
    assert snapshot.sequence_number == head.sequence_number + 1
    assert snapshot.summary is not None and snapshot.summary.operation is Operation.REPLACE
    summary = snapshot.summary.properties
    assert summary["manifests-created"] == "2" and summary["manifests-replaced"] == "7"
    assert summary["manifests-kept"] == "1"  # the delete manifest
    assert summary[PROCESSED_ENTRIES] == "13"
    for total in ("total-records", "total-data-files", "total-delete-files", "total-files-size"):
        assert summary[total] == head.summary.properties[total]
    assert "added-data-files" not in summary and "deleted-data-files" not in summary

    listed = manifests(t.table)
    assert [m.manifest_path for m in listed[:2]] == [m.manifest_path for m in new]
    assert [m.content for m in listed] == [ManifestContent.DATA] * 2 + [ManifestContent.DELETES]
    for m in listed[:2]:
        assert m.added_snapshot_id == snapshot.snapshot_id
        assert m.sequence_number == snapshot.sequence_number
        assert m.added_files_count == m.deleted_files_count == 0
        found = entries(t.table, m)
        assert {e.status for e in found} == {EntryStatus.EXISTING}
        assert m.existing_rows_count == sum(e.data_file.record_count for e in found)
        assert m.min_sequence_number == min(e.sequence_number or 0 for e in found)
        cats = sorted(e.data_file.partition[0] for e in found)
        summary_of_cat = m.partitions[0] if m.partitions else None
        assert summary_of_cat is not None
        assert summary_of_cat.lower_bound == to_bytes(StringType(), cats[0])
        assert summary_of_cat.upper_bound == to_bytes(StringType(), cats[-1])
    assert sum(m.existing_files_count or 0 for m in listed[:2]) == 13
    cats = [e.data_file.partition[0] for m in listed[:2] for e in entries(t.table, m)]
    assert cats == sorted(["a"] * 7 + ["b"] * 6)
    assert numbers(t.table) == before  # snapshot ids, data and file sequence numbers
    assert rows(t.table) == before_rows  # every delete applies as it did, and no other


def test_a_replaced_manifest_rewritten_meanwhile_is_a_conflict(catalog: SqlCatalog) -> None:
    t = CatalogTable.create(catalog, "events")
    appended(t, 3)
    rewrite, new = replacing_all(t.table)
    # Another writer compacts two of the files: its commit rewrites a manifest we replace.
    other = t.load()
    victim = sorted(live(other).values(), key=lambda e: e.data_file.file_path)[0]
    merged = t.data([{"id": 99, "cat": victim.data_file.partition[0], "v": 0}])
    other.new_rewrite().rewrite_files([victim.data_file], [merged]).commit()
    expected_rows = rows(other)

    with pytest.raises(CommitConflictError, match="no longer in snapshot") as failure:
        rewrite.commit()
    assert failure.value.snapshot_id == other.metadata.current_snapshot().snapshot_id  # type: ignore[union-attr]
    reloaded = t.load()
    assert reloaded.metadata.current_snapshot() == other.metadata.current_snapshot()
    assert rows(reloaded) == expected_rows
    # The new manifest is the writer's to delete, not the commit's.
    assert Path(new[0].manifest_path.removeprefix("file://")).exists()


def test_an_append_committed_meanwhile_is_kept(catalog: SqlCatalog) -> None:
    t = CatalogTable.create(catalog, "events")
    appended(t, 4)
    rewrite, _ = replacing_all(t.table)
    other = t.load()
    other.new_fast_append().append_file(t.data([{"id": 500, "cat": "z", "v": 1}])).commit()
    concurrent = data_manifests(other)[0]

    committed = rewrite.commit()

    assert rewrite.attempts == 2  # the lost swap was retried on the new head
    snapshot = committed.snapshot_by_id(rewrite.snapshot_id)
    assert snapshot.parent_snapshot_id == other.metadata.current_snapshot().snapshot_id  # type: ignore[union-attr]
    listed = data_manifests(t.table)
    assert len(listed) == 2 and listed[1].manifest_path == concurrent.manifest_path
    assert 500 in {r["id"] for r in rows(t.table)} and len(rows(t.table)) == 9


def test_new_manifests_must_hold_the_replaced_files_and_only_existing_ones(
    catalog: SqlCatalog,
) -> None:
    t = CatalogTable.create(catalog, "events")
    appended(t, 3)
    old = data_manifests(t.table)
    fewer = t.table.rewrite_manifests()
    for m in old:
        fewer.delete_manifest(m)
    fewer.add_manifest(rewritten(t.table, old[:2])[0])
    with pytest.raises(ValidationError, match="same live files"):
        fewer.commit()
    with pytest.raises(ValidationError, match="lists added or deleted files"):
        t.table.rewrite_manifests().add_manifest(old[0])  # its files are ADDED
    with pytest.raises(ValidationError, match="at least one manifest"):
        t.table.rewrite_manifests().commit()
    assert len(data_manifests(t.load())) == 3


def test_v3_rows_keep_their_ids_and_take_no_new_ones(catalog: SqlCatalog) -> None:
    t = CatalogTable.create(catalog, "events", properties={"format-version": "3"})
    appended(t, 5)
    ids_before = {n: e.data_file.first_row_id for n, e in live(t.table).items()}
    next_row_id = t.table.metadata.next_row_id
    assert None not in ids_before.values() and len(set(ids_before.values())) == 10
    rewrite, _ = replacing_all(t.table, parts=2)
    committed = rewrite.commit()

    snapshot = committed.snapshot_by_id(rewrite.snapshot_id)
    assert {n: e.data_file.first_row_id for n, e in live(t.table).items()} == ids_before
    assert committed.next_row_id == next_row_id  # the rows already had their ids
    assert snapshot.first_row_id == next_row_id and snapshot.added_rows == 0
    for m in data_manifests(t.table):  # every entry carries its id; the list gave a range
        assert m.first_row_id == next_row_id
        assert all(e.data_file.first_row_id is not None for e in entries(t.table, m))


def test_v3_upgrade_assigns_ids_to_rewritten_rows(catalog: SqlCatalog) -> None:
    """A table upgraded from v2 whose current snapshot predates the upgrade: its manifests
    have no first_row_id, and the rewrite is the first commit to assign ids (spec: "Row
    Lineage for Upgraded Tables")."""
    t = CatalogTable.create(catalog, "events")
    appended(t, 3)
    commit_builder(t.table, MetadataBuilder(t.table.metadata).upgrade_format_version(3))
    assert all(e.data_file.first_row_id is None for e in live(t.table).values())
    rewrite, _ = replacing_all(t.table, parts=2)
    committed = rewrite.commit()

    assigned = sorted(e.data_file.first_row_id for e in live(t.table).values())  # type: ignore[type-var]
    assert assigned == list(range(6))  # one row per file, ids 0..5, none twice
    assert committed.next_row_id == 6
