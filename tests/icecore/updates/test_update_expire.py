"""Snapshot expiry through a real SqlCatalog: which snapshots and refs go, and exactly which
files become unreachable.

The history is built with real Parquet data and delete files, real manifests (rewritten with
DELETED entries where files go) and a branch and a tag, then registered in the catalog. After
each expiry the test deletes exactly the files reported, as the Spark job would, and reads
every remaining ref, with our reader and PyIceberg: a file reported wrongly would break a read,
and a file missed would stay on disk, which the test also checks.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog as PySqlCatalog

from icecore.catalog import SqlCatalog
from icecore.errors import NotFoundError, ValidationError
from icecore.scan import snapshot_manifests
from icecore.spec.metadata_builder import MetadataBuilder
from icecore.spec.refs import SnapshotRefType
from icecore.spec.schema import Schema
from icecore.spec.types import LongType, NestedField
from icecore.table import Table
from icecore.updates import ExpirationResult, UnreachableFiles
from tests.support.catalogs import append_rows
from tests.support.reader import scan_rows
from tests.support.tables import LocalTable

SCHEMA = Schema((NestedField(1, "id", LongType(), required=True),))
DAY_MS = 24 * 60 * 60 * 1000


def ids(table: Table, **scan_options) -> list[int]:
    return sorted(r["id"] for r in scan_rows(table.io, table.metadata, **scan_options))


def pyiceberg_ids(catalog: SqlCatalog, snapshot_id: int) -> list[int]:
    theirs = PySqlCatalog(catalog.name, uri=catalog.uri, warehouse=catalog.properties["warehouse"])
    try:
        scan = theirs.load_table("db.t").scan(snapshot_id=snapshot_id)
        return sorted(scan.to_arrow()["id"].to_pylist())
    finally:
        theirs.engine.dispose()


def manifests_of(table: Table, snapshot_id: int) -> set[str]:
    snapshot = table.metadata.snapshot_by_id(snapshot_id)
    return {m.manifest_path for m in snapshot_manifests(table.io, snapshot)}


def delete_reported(result: ExpirationResult) -> None:
    """What the Spark job does with the result."""
    for path in result.files.all_paths():
        Path(path).unlink()


class History:
    """A table with data, position and equality deletes, a tag and a branch:

    s1  add A(1,2) B(3,4)                        M1{A+ B+}
    s2  add C(5,6)                               M2{C+} M1          <- tag t2
    s3  remove A                                 M2 M3{A- B=}
    s4  add P1 (B pos 0), E1 (id = 6)            M4{P1+ E1+} M2 M3
    s5  rewrite deletes: P1, E1 -> P2, P3        M5{P2+ P3+} M2 M3 M4'{P1- E1-}   <- main
    s6  on branch b (from s3): add F(7)          M6{F+} M2 M3       <- branch b
    """

    def __init__(self, catalog: SqlCatalog) -> None:
        catalog.create_namespace("db")
        local = LocalTable.create(Path(catalog.properties["warehouse"], "db", "t"), SCHEMA)
        self.A = local.write_data([{"id": 1}, {"id": 2}])
        self.B = local.write_data([{"id": 3}, {"id": 4}])
        self.s1 = local.commit(add=[self.A, self.B]).snapshot_id
        self.C = local.write_data([{"id": 5}, {"id": 6}])
        self.s2 = local.commit(add=[self.C]).snapshot_id
        self.s3 = local.commit(remove=[self.A]).snapshot_id
        self.P1 = local.write_position_deletes([(self.B.file_path, 0)])
        self.E1 = local.write_equality_deletes([{"id": 6}], ["id"])
        self.s4 = local.commit(add=[self.P1, self.E1]).snapshot_id
        self.P2 = local.write_position_deletes([(self.B.file_path, 0)])
        self.P3 = local.write_position_deletes([(self.C.file_path, 1)])
        self.s5 = local.commit(add=[self.P2, self.P3], remove=[self.P1, self.E1]).snapshot_id
        local.set_ref("t2", self.s2, SnapshotRefType.TAG)
        local.set_ref("b", self.s3, SnapshotRefType.BRANCH)
        self.F = local.write_data([{"id": 7}])
        self.s6 = local.commit(add=[self.F], branch="b").snapshot_id
        self.table = catalog.register_table("db.t", local.metadata_location)
        self.catalog = catalog
        self.lists = {s.snapshot_id: s.manifest_list for s in self.table.metadata.snapshots}
        self.manifests = {s: manifests_of(self.table, s) for s in self.lists}

    def new_manifests(self, snapshot_id: int) -> set[str]:
        """Manifests first listed by `snapshot_id` (M1, M2, ... above)."""
        parent = self.table.metadata.snapshot_by_id(snapshot_id).parent_snapshot_id
        return self.manifests[snapshot_id] - (self.manifests[parent] if parent else set())

    def check_reads(self, expected: dict[str, list[int]]) -> None:
        table = self.catalog.load_table("db.t")
        for ref, rows in expected.items():
            assert ids(table, ref=ref) == rows, ref
            assert pyiceberg_ids(self.catalog, table.metadata.refs[ref].snapshot_id) == rows


@pytest.fixture
def history(catalog: SqlCatalog) -> History:
    return History(catalog)


def test_reads_before_expiry(history: History) -> None:
    history.check_reads({"main": [4, 5], "t2": [1, 2, 3, 4, 5, 6], "b": [3, 4, 5, 6, 7]})


@pytest.mark.interop
def test_expiry_reports_exactly_the_unreachable_files(history: History) -> None:
    h, table = history, history.table
    (m4,) = h.new_manifests(h.s4)
    (m1,) = h.new_manifests(h.s1)
    (m6,) = h.new_manifests(h.s6)
    (m2,) = h.new_manifests(h.s2)

    # 1. Keep one snapshot per branch: main keeps s5, b keeps s6, tag t2 keeps s2. s1, s3, s4
    # go; of their manifests only M4 is unreferenced, and of its files P1 and E1 are live in no
    # retained manifest (M4' lists them DELETED).
    plan = table.expire_snapshots().expire_older_than(2**62).retain_last(1).plan()
    assert not plan.committed
    result = table.expire_snapshots().expire_older_than(2**62).retain_last(1).commit()
    assert result.committed and result.files == plan.files
    assert result.expired_snapshot_ids == {h.s1, h.s3, h.s4}
    assert result.removed_refs == frozenset()
    assert result.files == UnreachableFiles(
        position_delete_files=frozenset({h.P1.file_path}),
        equality_delete_files=frozenset({h.E1.file_path}),
        manifests=frozenset({m4}),
        manifest_lists=frozenset({h.lists[h.s1], h.lists[h.s3], h.lists[h.s4]}),
    )
    assert {s.snapshot_id for s in h.catalog.load_table("db.t").metadata.snapshots} == {
        h.s2, h.s5, h.s6
    }  # fmt: skip
    delete_reported(result)
    h.check_reads({"main": [4, 5], "t2": [1, 2, 3, 4, 5, 6], "b": [3, 4, 5, 6, 7]})

    # 2. The tag outlives its max-ref-age: it and s2 go. M1 is now unreferenced; of its files,
    # B is still live in M3 (EXISTING) but A only appears DELETED there.
    table.manage_snapshots().set_max_ref_age_ms("t2", 1).commit()
    s2_ms = table.metadata.snapshot_by_id(h.s2).timestamp_ms
    result = table.expire_snapshots(now_ms=s2_ms + 1000).expire_older_than(2**62).commit()
    assert result.removed_refs == {"t2"}
    assert result.expired_snapshot_ids == {h.s2}
    assert result.files == UnreachableFiles(
        data_files=frozenset({h.A.file_path}),
        manifests=frozenset({m1}),
        manifest_lists=frozenset({h.lists[h.s2]}),
    )
    delete_reported(result)
    h.check_reads({"main": [4, 5], "b": [3, 4, 5, 6, 7]})

    # 3. Drop the branch: s6 is in no ref's history and older than the cutoff. M6 goes with
    # F; M2 and M3, which s6 shares with main's head, stay.
    table.manage_snapshots().remove_branch("b").commit()
    result = table.expire_snapshots().expire_older_than(2**62).commit()
    assert result.expired_snapshot_ids == {h.s6}
    assert result.files == UnreachableFiles(
        data_files=frozenset({h.F.file_path}),
        manifests=frozenset({m6}),
        manifest_lists=frozenset({h.lists[h.s6]}),
    )
    assert m2 in h.manifests[h.s5]
    delete_reported(result)
    h.check_reads({"main": [4, 5]})

    # Everything the table references is still on disk, and nothing else is left but
    # metadata JSON files, which expiry never touches.
    left = {str(p) for p in Path(table.metadata.location).rglob("*") if p.is_file()}
    live = {table.metadata.current_snapshot().manifest_list, *h.manifests[h.s5]}
    live |= {h.B.file_path, h.C.file_path, h.P2.file_path, h.P3.file_path}
    assert {p for p in left if not p.endswith((".metadata.json", "version-hint.text"))} == live


def test_statistics_files_of_expired_snapshots(history: History, tmp_path: Path) -> None:
    table = history.table
    stats = {}
    for name in ("s1", "s5"):
        path = tmp_path / f"{name}.stats"
        path.write_bytes(b"PFA1")
        stats[name] = str(path)
    partition_stats = tmp_path / "s1.partition-stats"
    partition_stats.write_bytes(b"PAR1")
    extra = {
        "statistics": [
            {"snapshot-id": history.s1, "statistics-path": stats["s1"], "file-size-in-bytes": 4,
             "file-footer-size-in-bytes": 4, "blob-metadata": []},
            {"snapshot-id": history.s5, "statistics-path": stats["s5"], "file-size-in-bytes": 4,
             "file-footer-size-in-bytes": 4, "blob-metadata": []},
        ],
        "partition-statistics": [
            {"snapshot-id": history.s1, "statistics-path": str(partition_stats),
             "file-size-in-bytes": 4},
        ],
    }  # fmt: skip
    base = table.metadata
    table.commit_metadata(base, dataclasses.replace(MetadataBuilder(base).build(), extra=extra))
    result = table.expire_snapshots().expire_snapshot_id(history.s1).commit()
    assert result.expired_snapshot_ids >= {history.s1}
    assert result.files.statistics_files == {stats["s1"], str(partition_stats)}
    kept = history.catalog.load_table("db.t").metadata.extra
    assert [s["statistics-path"] for s in kept["statistics"]] == [stats["s5"]]
    assert kept["partition-statistics"] == []


def test_branch_retention_rules(catalog: SqlCatalog) -> None:
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", SCHEMA)
    for i in range(6):
        append_rows(table, [{"id": i}])
    head = table.metadata.current_snapshot_id
    snaps = [s for s in table.metadata.ancestors_of(head)][::-1]  # oldest first
    ts = [s.timestamp_ms for s in snaps]
    now = ts[-1] + 10 * DAY_MS

    def kept(update) -> list[int]:
        result = update.plan()
        return [i for i, s in enumerate(snaps) if s.snapshot_id not in result.expired_snapshot_ids]

    # Defaults: 5 days, keep 1. Everything is 10 days old: only the head stays.
    assert kept(table.expire_snapshots(now_ms=now)) == [5]
    assert kept(table.expire_snapshots(now_ms=ts[-1])) == [0, 1, 2, 3, 4, 5]
    assert kept(table.expire_snapshots(now_ms=now).retain_last(3)) == [3, 4, 5]
    assert kept(table.expire_snapshots(now_ms=now).expire_older_than(ts[2])) == [2, 3, 4, 5]
    # The walk stops at the first snapshot past both limits, as in Java.
    assert kept(table.expire_snapshots(now_ms=now).expire_older_than(ts[4]).retain_last(2)) == [
        4, 5
    ]  # fmt: skip
    # Table properties set the defaults ...
    table.update_properties().set("history.expire.min-snapshots-to-keep", 4).commit()
    assert kept(table.expire_snapshots(now_ms=now)) == [2, 3, 4, 5]
    # ... and the branch's own settings win over both.
    table.manage_snapshots().set_min_snapshots_to_keep("main", 2).set_max_snapshot_age_ms(
        "main", now - ts[1]
    ).commit()
    assert kept(table.expire_snapshots(now_ms=now).retain_last(5)) == [1, 2, 3, 4, 5]
    table.manage_snapshots().set_max_snapshot_age_ms("main", 1).commit()
    assert kept(table.expire_snapshots(now_ms=now).expire_older_than(ts[0])) == [4, 5]


def test_branch_walk_stops_at_the_first_expired_ancestor(catalog: SqlCatalog) -> None:
    """An ancestor past the window ends the branch's history even if an older one looks young
    (a writer with a fast clock): Java keeps no history with holes in it."""
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", SCHEMA)
    for i in range(4):
        append_rows(table, [{"id": i}])
    base = table.metadata
    s3, s2, s1, s0 = base.ancestors_of(base.current_snapshot_id)
    skewed = dataclasses.replace(s1, timestamp_ms=s3.timestamp_ms + DAY_MS)
    updated = MetadataBuilder(base).build()
    snapshots = tuple(skewed if s.snapshot_id == s1.snapshot_id else s for s in updated.snapshots)
    table.commit_metadata(base, dataclasses.replace(updated, snapshots=snapshots))
    result = table.expire_snapshots().expire_older_than(s3.timestamp_ms).plan()
    assert result.expired_snapshot_ids == {s0.snapshot_id, s1.snapshot_id, s2.snapshot_id}


def test_refs_and_unreferenced_snapshots(catalog: SqlCatalog) -> None:
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", SCHEMA)
    for i in range(4):
        append_rows(table, [{"id": i}])
    snaps = [s.snapshot_id for s in table.metadata.ancestors_of(table.metadata.current_snapshot_id)]
    s3, s2, s1, s0 = snaps
    ts = {s: table.metadata.snapshot_by_id(s).timestamp_ms for s in snaps}
    table.manage_snapshots().create_tag("old", s0).create_branch("b", s1).set_max_ref_age_ms(
        "b", 1_000
    ).set_max_ref_age_ms("main", 1).rollback_to(s2).commit()
    # s3 is now in no ref's history: kept while younger than the cutoff, then expired.
    plan = table.expire_snapshots(now_ms=ts[s3] + 500).expire_older_than(ts[s3]).plan()
    assert plan.expired_snapshot_ids == set()
    plan = table.expire_snapshots(now_ms=ts[s3] + 500).expire_older_than(ts[s3] + 1).plan()
    assert plan.expired_snapshot_ids == {s3}  # s1 stays: branch b is younger than 1s
    # Later, b is older than its max-ref-age and goes with s1; main never goes, whatever its
    # max-ref-age; the tag keeps s0.
    result = table.expire_snapshots(now_ms=ts[s1] + 5_000).expire_older_than(2**62).commit()
    assert result.removed_refs == {"b"}
    assert result.expired_snapshot_ids == {s1, s3}
    assert set(table.metadata.refs) == {"main", "old"}
    assert {s.snapshot_id for s in table.metadata.snapshots} == {s0, s2}
    assert ids(table) == [0, 1, 2]
    assert ids(table, ref="old") == [0]


def test_explicit_ids(catalog: SqlCatalog) -> None:
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", SCHEMA)
    for i in range(3):
        append_rows(table, [{"id": i}])
    s2, s1, s0 = (
        s.snapshot_id for s in table.metadata.ancestors_of(table.metadata.current_snapshot_id)
    )
    s1_list = table.metadata.snapshot_by_id(s1).manifest_list
    table.manage_snapshots().create_tag("keep", s0).commit()
    with pytest.raises(ValidationError, match=rf"snapshot {s2} .*still referenced by \['main'\]"):
        table.expire_snapshots().expire_snapshot_id(s2).commit()
    with pytest.raises(ValidationError, match=r"still referenced by \['keep'\]"):
        table.expire_snapshots().expire_snapshot_id(s0).plan()
    with pytest.raises(NotFoundError, match="snapshot 7 not found"):
        table.expire_snapshots().expire_snapshot_id(7)
    # A young snapshot goes when named, whatever the retention.
    result = table.expire_snapshots().expire_snapshot_id(s1).commit()
    assert result.expired_snapshot_ids == {s1}
    assert result.files == UnreachableFiles(manifest_lists=frozenset({s1_list}))
    assert ids(table) == [0, 1, 2]


def test_nothing_to_expire_commits_nothing(catalog: SqlCatalog) -> None:
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", SCHEMA)
    append_rows(table, [{"id": 1}])
    append_rows(table, [{"id": 2}])
    before = table.metadata_location
    result = table.expire_snapshots().commit()  # both younger than 5 days
    assert not result.committed and result.expired_snapshot_ids == set()
    assert catalog.load_table("db.t").metadata_location == before


def test_gc_disabled_refuses_expiry(catalog: SqlCatalog) -> None:
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", SCHEMA, properties={"gc.enabled": "false"})
    append_rows(table, [{"id": 1}])
    with pytest.raises(ValidationError, match=r"gc\.enabled is false"):
        table.expire_snapshots().expire_older_than(2**62).commit()


def test_expiry_racing_an_append_retries_and_keeps_it(catalog: SqlCatalog) -> None:
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", SCHEMA)
    for i in range(3):
        append_rows(table, [{"id": i}])
    expire = table.expire_snapshots().expire_older_than(2**62)
    appended = append_rows(catalog.load_table("db.t"), [{"id": 3}])
    result = expire.commit()
    assert expire.attempts == 2
    final = catalog.load_table("db.t").metadata
    assert {s.snapshot_id for s in final.snapshots} == {appended.current_snapshot_id}
    assert len(result.expired_snapshot_ids) == 3
    # Pure appends: every manifest is still listed by the head, only manifest lists go.
    assert len(result.files.manifest_lists) == 3 and len(result.files) == 3
    delete_reported(result)
    assert ids(catalog.load_table("db.t")) == [0, 1, 2, 3]
