"""`RestoreSnapshot`: an expired snapshot back in the metadata, tagged, the current state and
the table's counters as they were, accepted by the SQL catalog and by Iceberg's own REST
catalog handlers (Java's `TableMetadata.Builder` validates every update there), in v2 and v3.

The restored snapshot holds a delete that must apply to exactly the data it applied to when
it was written: its sequence numbers come from its manifest list, not from the number the
snapshot gets back. icecore's reader, DuckDB and PyIceberg read it by id.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from pyiceberg.table import StaticTable

from icecore.catalog import SqlCatalog, load_catalog
from icecore.catalog.base import Catalog
from icecore.errors import ValidationError
from icecore.spec.manifest import DataFile
from icecore.updates.restore import RestoreSnapshot
from tests.support.committing import CatalogTable, rows
from tests.support.duckdb import duck_connection  # noqa: F401 - provides the `duck` fixture
from tests.support.rest_catalog import RestCatalogServer


@pytest.fixture(params=["sql", "rest"])
def any_catalog(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Catalog]:
    if request.param == "sql":
        warehouse = tmp_path / "warehouse"
        warehouse.mkdir()
        catalog: Catalog = SqlCatalog("restore", None, warehouse)
    else:
        server: RestCatalogServer = request.getfixturevalue("rest_catalog_server")
        server.reset()
        catalog = load_catalog("lake", server.properties())
    if not catalog.namespace_exists("db"):
        catalog.create_namespace("db")
    yield catalog
    catalog.close()


def _deletes(t: CatalogTable, data: DataFile, position: int) -> DataFile:
    """A delete of one row of `data`: a position delete file (v2) or a DV (v3)."""
    if t.table.metadata.format_version < 3:
        return t.position_deletes([(data.file_path, position)])
    (dv,) = t.deletion_vectors(f"dv-{uuid.uuid4()}", (data, [position]))
    return dv


@pytest.mark.parametrize("version", ["2", "3"])
def test_an_expired_snapshot_comes_back_as_it_read(
    any_catalog: Catalog, version: str, duck: duckdb.DuckDBPyConnection
) -> None:
    t = CatalogTable.create(
        any_catalog, f"r{version}_{uuid.uuid4().hex[:6]}", properties={"format-version": version}
    )
    table = t.table
    a1 = t.data([{"id": i, "cat": "a", "v": i} for i in range(4)])
    table.new_fast_append().append_file(a1).commit()
    table.new_row_delta().add_deletes(_deletes(t, a1, 1)).commit()
    wanted = table.metadata.current_snapshot()
    assert wanted is not None
    expected = rows(table)
    assert [r["id"] for r in expected] == [0, 2, 3]
    # Rewritten since: the deletes' snapshot is only history now; then expired.
    a2 = t.data([{"id": 9, "cat": "a", "v": 9}])
    table.new_overwrite().delete_file(a1).add_file(a2).commit()
    current = table.metadata.current_snapshot_id
    table.expire_snapshots().expire_older_than(wanted.timestamp_ms + 1).commit()
    assert all(s.snapshot_id != wanted.snapshot_id for s in table.metadata.snapshots)
    before = table.metadata

    RestoreSnapshot(table, wanted).commit()

    after = table.refresh().metadata
    restored = after.snapshot_by_id(wanted.snapshot_id)
    assert after.current_snapshot_id == current and after.refs["main"] == before.refs["main"]
    assert after.refs[f"restored-{wanted.snapshot_id}"].snapshot_id == wanted.snapshot_id
    assert restored.manifest_list == wanted.manifest_list
    assert restored.timestamp_ms == wanted.timestamp_ms
    assert restored.parent_snapshot_id == wanted.parent_snapshot_id
    # A fresh sequence number, so the table's counter only moves forward ...
    assert restored.sequence_number == before.last_sequence_number + 1
    assert after.last_sequence_number == before.last_sequence_number + 1
    # ... and it reads what it read: the delete applies to the row it deleted, nothing else.
    assert rows(table, snapshot_id=wanted.snapshot_id) == expected
    scan = f"iceberg_scan('{after.metadata_location}', snapshot_from_id => {wanted.snapshot_id})"
    assert sorted(r[0] for r in duck.execute(f"SELECT id FROM {scan}").fetchall()) == [0, 2, 3]
    theirs = StaticTable.from_metadata(str(after.metadata_location))
    pyiceberg_ids = theirs.scan(snapshot_id=wanted.snapshot_id).to_arrow().column("id")
    assert sorted(pyiceberg_ids.to_pylist()) == [0, 2, 3]
    if version == "3":  # no row id is assigned twice
        assert restored.first_row_id == before.next_row_id and restored.added_rows == 0
        assert after.next_row_id == before.next_row_id

    # The table goes on: a commit after the restore takes the next number and row ids.
    table.new_fast_append().append_file(t.data([{"id": 20, "cat": "a", "v": 0}])).commit()
    latest = table.metadata.current_snapshot()
    assert latest is not None and latest.sequence_number == after.last_sequence_number + 1
    assert [r["id"] for r in rows(table)] == [9, 20]
    assert rows(table, snapshot_id=wanted.snapshot_id) == expected
    with pytest.raises(ValidationError, match="is in the table"):
        RestoreSnapshot(table, wanted).commit()


def test_a_table_with_a_ref_age_keeps_the_restored_tag_that_long(any_catalog: Catalog) -> None:
    t = CatalogTable.create(
        any_catalog,
        f"age_{uuid.uuid4().hex[:6]}",
        properties={"history.expire.max-ref-age-ms": "3600000"},
    )
    table = t.table
    table.new_fast_append().append_file(t.data([{"id": 1, "cat": "a", "v": 1}])).commit()
    old = table.metadata.current_snapshot()
    assert old is not None
    table.new_fast_append().append_file(t.data([{"id": 2, "cat": "a", "v": 2}])).commit()
    table.expire_snapshots().expire_snapshot_id(old.snapshot_id).commit()
    later = old.timestamp_ms + 10 * 3_600_000  # restored ten hours after it was written
    RestoreSnapshot(table, old, now_ms=later).commit()
    tag = table.metadata.refs[f"restored-{old.snapshot_id}"]
    assert tag.max_ref_age_ms == 11 * 3_600_000
    # The next expiry keeps it: its age is counted from the restore.
    table.expire_snapshots(now_ms=later + 60_000).commit()
    assert f"restored-{old.snapshot_id}" in table.refresh().metadata.refs
