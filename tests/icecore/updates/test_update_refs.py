"""Branches, tags, rollback and retention settings through a real SqlCatalog.

Tables hold real appended data, so a rollback is checked by the rows read afterwards and
branches and tags by what a scan of them returns, ours and PyIceberg's.
"""

from __future__ import annotations

import pytest
from pyiceberg.catalog.sql import SqlCatalog as PySqlCatalog

from icecore.catalog import SqlCatalog
from icecore.errors import CommitConflictError, NotFoundError, ValidationError
from icecore.spec.metadata_builder import MetadataBuilder
from icecore.spec.refs import SnapshotRefType
from icecore.spec.schema import Schema
from icecore.spec.types import LongType, NestedField
from icecore.table import Table
from tests.support.catalogs import append_rows
from tests.support.reader import scan_rows

SCHEMA = Schema((NestedField(1, "id", LongType(), required=True),))


def ids(table: Table, **scan_options) -> list[int]:
    return sorted(r["id"] for r in scan_rows(table.io, table.metadata, **scan_options))


@pytest.fixture
def table(catalog: SqlCatalog) -> Table:
    """Three appends on main: snapshots s1 (id 1), s2 (+2), s3 (+3)."""
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", SCHEMA)
    for i in (1, 2, 3):
        append_rows(table, [{"id": i}])
    return table


def history(table: Table) -> list[int]:
    """Snapshot ids of main's ancestry, oldest first."""
    head = table.metadata.current_snapshot_id
    assert head is not None
    return [s.snapshot_id for s in table.metadata.ancestors_of(head)][::-1]


def test_branches_and_tags(catalog: SqlCatalog, table: Table) -> None:
    s1, s2, s3 = history(table)
    table.manage_snapshots().create_tag("v1", s1).create_branch("audit", s2).create_branch(
        "head"
    ).commit()
    refs = catalog.load_table("db.t").metadata.refs
    assert {name: (r.snapshot_id, r.type) for name, r in refs.items()} == {
        "main": (s3, SnapshotRefType.BRANCH),
        "v1": (s1, SnapshotRefType.TAG),
        "audit": (s2, SnapshotRefType.BRANCH),
        "head": (s3, SnapshotRefType.BRANCH),
    }
    assert ids(table, ref="v1") == [1]
    assert ids(table, ref="audit") == [1, 2]

    table.manage_snapshots().replace_tag("v1", s2).rename_branch("audit", "review").remove_branch(
        "head"
    ).commit()
    assert set(table.metadata.refs) == {"main", "v1", "review"}
    assert table.metadata.refs["v1"].snapshot_id == s2
    table.manage_snapshots().fast_forward("review", "main").remove_tag("v1").commit()
    assert table.metadata.refs["review"].snapshot_id == s3
    assert set(table.metadata.refs) == {"main", "review"}

    theirs = PySqlCatalog(catalog.name, uri=catalog.uri, warehouse=catalog.properties["warehouse"])
    try:
        loaded = theirs.load_table("db.t")
        assert loaded.metadata.refs["review"].snapshot_id == s3
        review = loaded.scan(snapshot_id=loaded.metadata.refs["review"].snapshot_id).to_arrow()
        assert sorted(review["id"].to_pylist()) == [1, 2, 3]
    finally:
        theirs.engine.dispose()


def test_ref_errors(table: Table) -> None:
    s1, s2, _ = history(table)
    table.manage_snapshots().create_tag("v1", s1).create_branch("b", s1).commit()
    cases = [
        (lambda m: m.create_tag("v1", s2), "a tag named 'v1' already exists"),
        (lambda m: m.create_branch("main", s2), "a branch named 'main' already exists"),
        (lambda m: m.create_tag("new", 42), "snapshot 42 not found"),
        (lambda m: m.remove_branch("main"), "main branch cannot be removed"),
        (lambda m: m.rename_branch("main", "trunk"), "main branch cannot be removed or renamed"),
        (lambda m: m.remove_tag("b"), "'b' is a branch, not a tag"),
        (lambda m: m.remove_branch("v1"), "'v1' is a tag, not a branch"),
        (lambda m: m.replace_branch("v1", s2), "'v1' is a tag, not a branch"),
        (lambda m: m.remove_tag("nope"), "no tag named 'nope'"),
        (lambda m: m.fast_forward("main", "b"), "not an ancestor of 'b'"),
        (lambda m: m.set_min_snapshots_to_keep("v1", 2), "'v1' is a tag"),
        (lambda m: m.set_min_snapshots_to_keep("b", 0), "must be greater than 0"),
        (lambda m: m.set_max_snapshot_age_ms("b", -5), "must be greater than 0"),
        (lambda m: m.set_max_ref_age_ms("v1", 0), "must be greater than 0"),
        (lambda m: m.create_tag("", s1), "non-empty name"),
    ]
    for call, message in cases:
        with pytest.raises((ValidationError, NotFoundError), match=message):
            call(table.manage_snapshots())
    # A failed call leaves the update usable: the bad call was not recorded.
    update = table.manage_snapshots().create_tag("v2", s2)
    with pytest.raises(ValidationError):
        update.create_tag("v2", s1)
    update.commit()
    assert table.metadata.refs["v2"].snapshot_id == s2


def test_tags_cannot_be_committed_to(table: Table) -> None:
    s1, _, s3 = history(table)
    table.manage_snapshots().create_tag("v1", s1).commit()
    with pytest.raises(ValidationError, match="tags cannot be committed to"):
        MetadataBuilder(table.metadata).set_branch_snapshot("v1", s3)


def test_retention_settings(catalog: SqlCatalog, table: Table) -> None:
    s1, *_ = history(table)
    table.manage_snapshots().create_tag("v1", s1).create_branch("b", s1).set_min_snapshots_to_keep(
        "b", 3
    ).set_max_snapshot_age_ms("b", 60_000).set_max_ref_age_ms("b", 86_400_000).set_max_ref_age_ms(
        "v1", 3_600_000
    ).set_max_snapshot_age_ms("main", 1_000).commit()
    refs = catalog.load_table("db.t").metadata.refs
    assert refs["b"].to_json() == {
        "snapshot-id": s1,
        "type": "branch",
        "min-snapshots-to-keep": 3,
        "max-snapshot-age-ms": 60_000,
        "max-ref-age-ms": 86_400_000,
    }
    assert refs["v1"].to_json() == {"snapshot-id": s1, "type": "tag", "max-ref-age-ms": 3_600_000}
    assert refs["main"].max_snapshot_age_ms == 1_000
    # Retention survives moving the branch.
    table.manage_snapshots().replace_branch("b", history(table)[-1]).commit()
    assert table.metadata.refs["b"].min_snapshots_to_keep == 3


def test_rollback_and_set_current(catalog: SqlCatalog, table: Table) -> None:
    s1, s2, s3 = history(table)
    before_ms = table.metadata.last_updated_ms
    table.manage_snapshots().rollback_to(s2).commit()
    assert table.metadata.current_snapshot_id == s2
    assert ids(catalog.load_table("db.t")) == [1, 2]
    # The log says s2 became current at the rollback, not when s2 was written: a time-travel
    # query between the two must still see s3.
    last = table.metadata.snapshot_log[-1]
    assert last.snapshot_id == s2
    assert last.timestamp_ms == table.metadata.last_updated_ms >= before_ms
    with pytest.raises(ValidationError, match="not an ancestor of the branch head"):
        table.manage_snapshots().rollback_to(s3)
    table.manage_snapshots().set_current_snapshot(s3).commit()  # any snapshot will do
    assert ids(table) == [1, 2, 3]
    table.manage_snapshots().rollback_to_time(
        table.metadata.snapshot_by_id(s2).timestamp_ms
    ).commit()
    assert table.metadata.current_snapshot_id == s1


def test_rollback_racing_an_append_is_a_conflict(catalog: SqlCatalog, table: Table) -> None:
    s1, _, s3 = history(table)
    rollback = table.manage_snapshots().rollback_to(s1)
    appended = append_rows(catalog.load_table("db.t"), [{"id": 4}])
    with pytest.raises(CommitConflictError, match=f"moved from snapshot {s3} to") as raised:
        rollback.commit()
    assert raised.value.snapshot_id == appended.current_snapshot_id
    assert ids(catalog.load_table("db.t")) == [1, 2, 3, 4]  # the append was not lost


def test_racing_ref_changes(catalog: SqlCatalog, table: Table) -> None:
    s1, s2, _ = history(table)
    mine = table.manage_snapshots().create_tag("t", s1).create_branch("mine", s1)
    catalog.load_table("db.t").manage_snapshots().create_branch("theirs", s2).commit()
    mine.commit()  # independent refs: replayed and both land
    assert mine.attempts == 2
    assert set(catalog.load_table("db.t").metadata.refs) == {"main", "t", "mine", "theirs"}

    racing = catalog.load_table("db.t").manage_snapshots().create_tag("x", s2)
    table.refresh().manage_snapshots().create_tag("x", s1).commit()
    with pytest.raises(CommitConflictError, match="a tag named 'x' already exists"):
        racing.commit()
    assert catalog.load_table("db.t").metadata.refs["x"].snapshot_id == s1
