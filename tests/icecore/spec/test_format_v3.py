"""Format v3 metadata: row lineage (next-row-id, snapshot first-row-id / added-rows, manifest
list first_row_id, data files' inherited first_row_id), the upgrade of a v2 table, and
PyIceberg and DuckDB reading what icecore commits to a v3 table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyiceberg.table import StaticTable

from icecore.errors import ValidationError
from icecore.scan import snapshot_manifests
from icecore.spec.deletion_vectors import WrittenDV, write_dvs
from icecore.spec.manifest import DataFile, FileContent, FileFormat, read_manifest
from icecore.table import Table
from tests.support.committing import CatalogTable, rows, sqlite_catalog
from tests.support.duckdb import connect


@pytest.fixture
def v3(tmp_path: Path) -> CatalogTable:
    return CatalogTable.create(sqlite_catalog(tmp_path), "v3", properties={"format-version": "3"})


def _first_row_ids(table: Table) -> dict[str, int | None]:
    snapshot = table.metadata.current_snapshot()
    assert snapshot is not None
    return {
        Path(e.data_file.file_path).stem: e.data_file.first_row_id
        for m in snapshot_manifests(table.io, snapshot)
        for e in read_manifest(table.io, m, live_only=True)
    }


def test_new_rows_take_ids_from_next_row_id(v3: CatalogTable) -> None:
    table = v3.table
    assert table.metadata.format_version == 3 and table.metadata.next_row_id == 0
    assert "format-version" not in table.metadata.properties

    a1 = v3.data([{"id": i, "cat": "a", "v": i} for i in range(3)], name="a1")
    b1 = v3.data([{"id": 10, "cat": "b", "v": 10}, {"id": 11, "cat": "b", "v": 11}], name="b1")
    table.new_fast_append().append_file(a1).append_file(b1).commit()
    first = table.metadata.current_snapshot()
    assert first is not None and (first.first_row_id, first.added_rows) == (0, 5)
    assert table.metadata.next_row_id == 5
    # Files inherit consecutive ranges in manifest order.
    assert _first_row_ids(table) == {"a1": 0, "b1": 3}

    a2 = v3.data([{"id": 4, "cat": "a", "v": 4}], name="a2")
    table.new_append().append_file(a2).commit()
    second = table.metadata.current_snapshot()
    assert second is not None and (second.first_row_id, second.added_rows) == (5, 1)
    assert table.metadata.next_row_id == 6
    ids = _first_row_ids(table)
    assert ids["a2"] == 5 and (ids["a1"], ids["b1"]) == (0, 3)

    # A rewrite keeps the old files' ids on the entries it carries and gives new ones. As in
    # Java, each new data manifest reserves room for its existing rows too (b1's manifest,
    # rewritten without a1): 1 added + 2 existing.
    merged = v3.data([{"id": 1, "cat": "a", "v": 1}], name="a9")
    table.new_rewrite().rewrite_files([a1], [merged]).commit()
    ids = _first_row_ids(table)
    assert (ids["b1"], ids["a2"]) == (3, 5) and ids["a9"] in (6, 8)
    assert table.metadata.next_row_id == 9

    written = json.loads(Path(table.metadata_location or "").read_text())
    assert written["format-version"] == 3 and written["next-row-id"] == 9
    assert {"first-row-id", "added-rows"} <= set(written["snapshots"][-1])


def test_a_v2_table_upgrades_to_v3_and_old_files_get_ids_at_the_next_commit(
    tmp_path: Path,
) -> None:
    t = CatalogTable.create(sqlite_catalog(tmp_path), "up")
    a1 = t.data([{"id": 1, "cat": "a", "v": 1}, {"id": 2, "cat": "a", "v": 2}], name="a1")
    t.table.new_fast_append().append_file(a1).commit()
    assert t.table.metadata.format_version == 2

    t.table.update_properties().set("format-version", "3").commit()
    metadata = t.table.metadata
    assert (metadata.format_version, metadata.next_row_id) == (3, 0)
    assert "format-version" not in metadata.properties
    assert _first_row_ids(t.table) == {"a1": None}  # listed by a v2 manifest list

    b1 = t.data([{"id": 3, "cat": "b", "v": 3}], name="b1")
    t.table.new_fast_append().append_file(b1).commit()
    # The first v3 list gives every data manifest a range: the new one (1 row), then a1's.
    assert _first_row_ids(t.table) == {"b1": 0, "a1": 1}
    assert t.table.metadata.next_row_id == 3
    with pytest.raises(ValidationError, match="cannot downgrade format version 3 to 2"):
        t.table.update_properties().set("format-version", "2").commit()


def test_other_readers_read_a_v3_table_we_wrote(v3: CatalogTable) -> None:
    table = v3.table
    a1 = v3.data([{"id": i, "cat": "a", "v": i} for i in range(4)], name="a1")
    table.new_fast_append().append_file(a1).commit()
    deletes = v3.position_deletes([(a1.file_path, 1)])
    table.new_row_delta().add_deletes(deletes).commit()
    expected = [r["id"] for r in rows(table)]
    assert expected == [0, 2, 3]

    location = table.metadata_location
    assert location is not None
    py = StaticTable.from_metadata(location)
    assert py.metadata.format_version == 3
    assert sorted(py.scan().to_arrow().column("id").to_pylist()) == expected
    con = connect()
    got = con.execute(f"SELECT id FROM iceberg_scan('{location}') ORDER BY id").fetchall()
    assert [r[0] for r in got] == expected


def _dv(t: CatalogTable, puffin: str, written: WrittenDV, data: DataFile) -> DataFile:
    return DataFile(
        file_path=puffin,
        file_format=FileFormat.PUFFIN,
        partition=data.partition,
        record_count=written.record_count,
        file_size_in_bytes=written.file_size_in_bytes,
        content=FileContent.POSITION_DELETES,
        referenced_data_file=data.file_path,
        content_offset=written.content_offset,
        content_size_in_bytes=written.content_size_in_bytes,
        spec_id=data.spec_id,
    )


def test_a_puffin_file_shared_by_dvs_lives_while_any_of_its_dvs_does(v3: CatalogTable) -> None:
    """Expiry and purge work on files; a Puffin file holds several DVs, and replacing one of
    them (by content offset) must neither drop the others nor delete the file early."""
    table = v3.table
    a = v3.data([{"id": i, "cat": "a", "v": i} for i in range(4)], name="a")
    b = v3.data([{"id": 10 + i, "cat": "a", "v": i} for i in range(4)], name="b")
    table.new_fast_append().append_file(a).append_file(b).commit()
    first = f"{table.metadata.location}/data/first-deletes.puffin"
    dvs = write_dvs(table.io, first, {a.file_path: [0], b.file_path: [1]})
    written = {w.referenced_data_file: w for w in dvs}
    dv_a, dv_b = (_dv(v3, first, written[f.file_path], f) for f in (a, b))
    table.new_row_delta().add_deletes(dv_a).add_deletes(dv_b).commit()
    assert [r["id"] for r in rows(table)] == [1, 2, 3, 10, 12, 13]

    second = f"{table.metadata.location}/data/second-deletes.puffin"
    (merged,) = write_dvs(table.io, second, {a.file_path: [0, 3]})
    table.new_rewrite().rewrite_files(
        delete_files_to_replace=[dv_a], delete_files_to_add=[_dv(v3, second, merged, a)]
    ).commit()
    assert [r["id"] for r in rows(table)] == [1, 2, 10, 12, 13]  # b's DV is still applied

    table.expire_snapshots().expire_snapshot_id(table.metadata.snapshots[0].snapshot_id).commit()
    result = (
        table.expire_snapshots()
        .expire_snapshot_id(table.metadata.snapshots[0].snapshot_id)
        .commit()
    )
    assert first not in result.files.all_paths()  # b's DV in it is live
    assert table.io.exists(first) and table.io.exists(second)
    assert [r["id"] for r in rows(table)] == [1, 2, 10, 12, 13]


def test_the_worked_merge_on_read_example_with_a_deletion_vector(v3: CatalogTable) -> None:
    """The seed's example on v3: snapshot 1 adds a; 2 adds equality delete b (id = 2) and c;
    3 adds a DV for c's first row, and e. Each snapshot reads as the spec's rules say, in
    icecore and in DuckDB (PyIceberg cannot apply equality deletes)."""
    table = v3.table
    a = v3.data([{"id": 1, "cat": "a", "v": 1}, {"id": 2, "cat": "a", "v": 2}], name="a")
    table.new_fast_append().append_file(a).commit()
    b = v3.equality_deletes([{"id": 2, "cat": "a"}], ["id"])
    c = v3.data([{"id": 3, "cat": "a", "v": 3}, {"id": 2, "cat": "a", "v": 20}], name="c")
    table.new_row_delta().add_rows(c).add_deletes(b).commit()
    puffin = f"{table.metadata.location}/data/d-deletes.puffin"
    (written,) = write_dvs(table.io, puffin, {c.file_path: [0]})
    e = v3.data([{"id": 4, "cat": "a", "v": 4}], name="e")
    table.new_row_delta().add_rows(e).add_deletes(_dv(v3, puffin, written, c)).commit()

    s1, s2, s3 = (s.snapshot_id for s in table.metadata.snapshots)
    expected = {s1: [(1, 1), (2, 2)], s2: [(1, 1), (2, 20), (3, 3)], s3: [(1, 1), (2, 20), (4, 4)]}
    for snapshot_id, want in expected.items():
        got = sorted((r["id"], r["v"]) for r in rows(table, snapshot_id=snapshot_id))
        assert got == want, snapshot_id
    con = connect()
    sql = f"SELECT id, v FROM iceberg_scan('{table.metadata_location}') ORDER BY id"
    assert con.execute(sql).fetchall() == expected[s3]
    # The DV pairs with c alone, at c's sequence number or later (spec: "Scan Planning").
    tasks = {Path(t.file.file_path).stem: t for t in table.scan().plan_files()}
    assert [d.is_deletion_vector for d in tasks["c"].deletes] == [True]
    assert all(not d.is_deletion_vector for d in tasks["a"].deletes)
