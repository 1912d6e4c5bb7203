"""Every icecore operation as the REST spec's requirements + updates.

For each kind of change: the events `TableCommit.between` derives, replayed on the base with
`apply_updates`, give back exactly the metadata the operation built (this is how the SQL
catalog commits, and what a REST server does); the JSON uses the spec's names and round-trips;
and the requirements pin what the change assumed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from icecore.commit.changes import TableCommit, apply_updates, diff_metadata, updates_landed
from icecore.commit.update import TableUpdate
from icecore.errors import CommitFailedError, ValidationError
from icecore.spec.metadata import TableMetadata
from icecore.spec.metadata_updates import update_from_json
from icecore.spec.requirements import requirement_from_json
from icecore.spec.types import IntegerType, StringType
from icecore.table import Table
from tests.support.committing import CatalogTable, sqlite_catalog


@pytest.fixture
def t(tmp_path: Path) -> CatalogTable:
    t = CatalogTable.create(sqlite_catalog(tmp_path), "changes")
    t.data([{"id": 1, "cat": "a", "v": 1}, {"id": 2, "cat": "a", "v": 2}], name="a1")
    t.data([{"id": 10, "cat": "b", "v": 10}], name="b1")
    t.table.new_fast_append().append_file(t["a1"]).commit()
    t.table.new_fast_append().append_file(t["b1"]).commit()
    return t


def _snapshot_ids(table: Table) -> list[int]:
    return [s.snapshot_id for s in table.metadata.snapshots]


def _shape(metadata: TableMetadata) -> dict[str, object]:
    doc = metadata.to_json()
    for key in ("last-updated-ms", "metadata-log", "snapshot-log"):
        doc.pop(key)
    for snapshot in doc["snapshots"]:
        snapshot.pop("timestamp-ms")
        snapshot.pop("manifest-list")
    return doc


OPERATIONS: dict[str, Callable[[CatalogTable], TableUpdate]] = {
    "append": lambda t: t.table.new_append().append_file(
        t.data([{"id": 3, "cat": "a", "v": 3}], name="a2")
    ),
    "overwrite": lambda t: t.table.new_overwrite().delete_file(t["a1"]),
    "row delta": lambda t: t.table.new_row_delta().add_deletes(
        t.position_deletes([(t["a1"].file_path, 0)], name="d1")
    ),
    "rewrite": lambda t: t.table.new_rewrite().rewrite_files(
        [t["a1"]], [t.data([{"id": 1, "cat": "a", "v": 1}], name="a9")]
    ),
    "delete": lambda t: t.table.new_delete().delete_file(t["b1"]),
    "branch commit": lambda t: t.table.new_fast_append("audit").append_file(
        t.data([{"id": 4, "cat": "a", "v": 4}], name="a4")
    ),
    "expire": lambda t: t.table.expire_snapshots().expire_snapshot_id(_snapshot_ids(t.table)[0]),
    "schema": lambda t: (
        t.table.update_schema().add_column("note", StringType()).rename_column("v", "value")
    ),
    "spec": lambda t: t.table.update_spec().add_field("id", "bucket[4]"),
    "sort order": lambda t: t.table.replace_sort_order().asc("id"),
    "properties": lambda t: t.table.update_properties().set("a", "1").remove("write.x"),
    "tag": lambda t: t.table.manage_snapshots().create_tag("v1", _snapshot_ids(t.table)[0]),
    "rollback": lambda t: t.table.manage_snapshots().rollback_to(_snapshot_ids(t.table)[0]),
}

EXPECTED_ACTIONS = {
    "append": ["add-snapshot", "set-snapshot-ref"],
    "overwrite": ["add-snapshot", "set-snapshot-ref"],
    "row delta": ["add-snapshot", "set-snapshot-ref"],
    "rewrite": ["add-snapshot", "set-snapshot-ref"],
    "delete": ["add-snapshot", "set-snapshot-ref"],
    "branch commit": ["add-snapshot", "set-snapshot-ref"],
    "expire": ["remove-snapshots"],
    "schema": ["add-schema", "set-current-schema"],
    "spec": ["add-spec", "set-default-spec"],
    "sort order": ["add-sort-order", "set-default-sort-order"],
    "properties": ["set-properties", "remove-properties"],
    "tag": ["set-snapshot-ref"],
    "rollback": ["set-snapshot-ref"],
}


@pytest.mark.parametrize("name", list(OPERATIONS))
def test_replaying_the_events_gives_the_metadata_the_operation_built(
    t: CatalogTable, name: str
) -> None:
    if name == "properties":
        t.table.update_properties().set("write.x", "y").commit()
    base = t.table.metadata
    update = OPERATIONS[name](t)
    updated = update.apply()
    commit = TableCommit.between(base, updated)

    assert [u.to_json()["action"] for u in commit.updates] == EXPECTED_ACTIONS[name]
    replayed = apply_updates(base, commit.updates, updated.last_updated_ms)
    assert replayed.to_json() == updated.to_json()
    # Nothing left to say once the events are applied.
    assert diff_metadata(replayed, updated) == []

    # The wire form: spec names, valid JSON, and it parses back to the same events.
    wire = json.loads(json.dumps(commit.to_json()))
    assert [update_from_json(u) for u in wire["updates"]] == list(commit.updates)
    assert [requirement_from_json(r) for r in wire["requirements"]] == list(commit.requirements)
    assert wire["requirements"][0] == {"type": "assert-table-uuid", "uuid": base.table_uuid}

    # The commit through the SQL catalog (which applies the events) lands the same change;
    # a commit re-runs the operation, so only timestamps may differ.
    update.commit()
    assert _shape(t.table.metadata) == _shape(updated)


def test_requirements_pin_what_each_change_assumed(t: CatalogTable) -> None:
    base = t.table.metadata
    main = base.refs["main"].snapshot_id

    append = TableCommit.between(base, OPERATIONS["append"](t).apply())
    assert [r.to_json() for r in append.requirements] == [
        {"type": "assert-table-uuid", "uuid": base.table_uuid},
        {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": main},
    ]
    branch = TableCommit.between(base, OPERATIONS["branch commit"](t).apply())
    assert {"type": "assert-ref-snapshot-id", "ref": "audit", "snapshot-id": None} in [
        r.to_json() for r in branch.requirements
    ]
    schema = TableCommit.between(base, OPERATIONS["schema"](t).apply())
    assert [r.to_json()["type"] for r in schema.requirements] == [
        "assert-table-uuid",
        "assert-last-assigned-field-id",
        "assert-current-schema-id",
    ]
    spec = TableCommit.between(base, OPERATIONS["spec"](t).apply())
    assert {
        "type": "assert-last-assigned-partition-id",
        "last-assigned-partition-id": base.last_partition_id,
    } in [r.to_json() for r in spec.requirements]
    order = TableCommit.between(base, OPERATIONS["sort order"](t).apply())
    assert {"type": "assert-default-sort-order-id", "default-sort-order-id": 0} in [
        r.to_json() for r in order.requirements
    ]
    # Expiry pins every ref: nothing may move onto a snapshot it removes.
    expire = TableCommit.between(base, OPERATIONS["expire"](t).apply())
    assert {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": main} in [
        r.to_json() for r in expire.requirements
    ]


def test_requirements_fail_on_a_moved_table(t: CatalogTable) -> None:
    base = t.table.metadata
    commit = TableCommit.between(base, OPERATIONS["append"](t).apply())
    t.table.new_delete().delete_file(t["b1"]).commit()
    moved = t.table.metadata
    with pytest.raises(CommitFailedError, match=r"ref 'main' is .* expected"):
        for requirement in commit.requirements:
            requirement.check(moved)
    for requirement in commit.requirements:
        requirement.check(base)


def test_new_schema_is_set_current_as_the_last_added(t: CatalogTable) -> None:
    base = t.table.metadata
    updated = t.table.update_schema().add_column("n", IntegerType()).apply()
    wire = TableCommit.between(base, updated).to_json()["updates"]
    assert wire[0]["action"] == "add-schema"
    assert wire[0]["last-column-id"] == updated.last_column_id
    assert wire[1] == {"action": "set-current-schema", "schema-id": -1}


def test_landed_commit_is_recognised_by_its_snapshot(t: CatalogTable) -> None:
    base = t.table.metadata
    update = OPERATIONS["append"](t)
    commit = TableCommit.between(base, update.apply())
    assert not updates_landed(base, commit)
    committed = update.commit()
    assert updates_landed(committed, commit)

    props = TableCommit.between(committed, t.table.update_properties().set("k", "v").apply())
    assert not updates_landed(committed, props)
    assert updates_landed(t.table.update_properties().set("k", "v").commit(), props)


def test_events_that_do_not_fit_the_base_are_refused(t: CatalogTable) -> None:
    base: TableMetadata = t.table.metadata
    bad = update_from_json({"action": "set-current-schema", "schema-id": 42})
    with pytest.raises(ValidationError, match="schema id 42 does not exist"):
        apply_updates(base, [bad])
    with pytest.raises(ValidationError, match="unknown table update action 'frobnicate'"):
        update_from_json({"action": "frobnicate"})
    with pytest.raises(ValidationError, match="cannot downgrade"):
        apply_updates(base, [update_from_json({"action": "upgrade-format-version",
                                                "format-version": 1})])  # fmt: skip
