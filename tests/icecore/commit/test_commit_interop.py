"""Engines nobody here wrote read what the snapshot producers commit.

A table is built through the public operations (fast and merge appends, row deltas with
position and equality deletes, rewrites keeping the starting sequence number, partition
overwrites, deletes), one snapshot at a time, next to a Python model of its rows. At every
snapshot DuckDB (equality and position deletes) and PyIceberg (position deletes; it does not
apply equality deletes) must return exactly the model's rows, and so must icecore's planner.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from pyiceberg.table import StaticTable

from icecore.catalog.sql import SqlCatalog
from icecore.expressions import equal
from icecore.table import Table
from tests.support.committing import UNPARTITIONED, CatalogTable, ids, sqlite_catalog
from tests.support.duckdb import duck_connection  # noqa: F401 - provides the `duck` fixture
from tests.support.reader import arrow_values

pytestmark = pytest.mark.interop


@pytest.fixture
def catalog(tmp_path: Path) -> SqlCatalog:
    return sqlite_catalog(tmp_path)


def head_id(table: Table) -> int:
    snapshot_id = table.metadata.current_snapshot_id
    assert snapshot_id is not None
    return snapshot_id


def duck_ids(duck: duckdb.DuckDBPyConnection, table: Table, snapshot_id: int) -> list[int]:
    scan = f"iceberg_scan('{table.metadata_location}', snapshot_from_id => {snapshot_id})"
    return [r[0] for r in duck.execute(f"SELECT id FROM {scan} ORDER BY id").fetchall()]


def pyiceberg_ids(table: Table, snapshot_id: int) -> list[int]:
    assert table.metadata_location is not None
    theirs = StaticTable.from_metadata(table.metadata_location)
    arrow = theirs.scan(snapshot_id=snapshot_id).to_arrow()
    field = table.metadata.schema().find_field("id")
    return sorted(arrow_values(arrow.column("id"), field.field_type))


def test_duckdb_reads_every_snapshot_we_commit(
    catalog: SqlCatalog, duck: duckdb.DuckDBPyConnection
) -> None:
    t = CatalogTable.create(catalog, "duck", spec=UNPARTITIONED)
    table = t.table
    expected: dict[int, list[int]] = {}

    def check(model: list[int]) -> None:
        expected[head_id(table)] = model
        assert ids(table) == model

    f1 = t.data([{"id": 1}, {"id": 2}, {"id": 3}])
    f2 = t.data([{"id": 4}, {"id": 5}])
    table.new_fast_append().append_file(f1).append_file(f2).commit()
    check([1, 2, 3, 4, 5])

    eq = t.equality_deletes([{"id": 2}, {"id": 4}], ["id"])
    pos = t.position_deletes([(f1.file_path, 0)], referenced_data_file=f1.file_path)
    table.new_row_delta().add_deletes(eq).add_deletes(pos).commit()
    check([3, 5])

    f3 = t.data([{"id": 2}, {"id": 6}])  # id 2 again: the older equality delete spares it
    table.new_fast_append().append_file(f3).commit()
    check([2, 3, 5, 6])

    fc = t.data([{"id": 3}, {"id": 5}])
    table.new_rewrite().rewrite_files([f1, f2], [fc]).use_starting_sequence_number().commit()
    check([2, 3, 5, 6])

    # A compaction of f3 races an equality delete of id 6: it commits second, keeps the
    # starting sequence number, and the delete still applies to the compacted file.
    other = t.load()
    compaction = table.new_rewrite().rewrite_files([f3], [t.data([{"id": 2}, {"id": 6}])])
    compaction.use_starting_sequence_number()
    other.new_row_delta().add_deletes(t.equality_deletes([{"id": 6}], ["id"])).commit()
    expected[head_id(other)] = [2, 3, 5]
    compaction.commit()
    check([2, 3, 5])

    table.new_delete().delete_file(fc).commit()
    check([2])
    table.new_append().append_file(t.data([{"id": 7}, {"id": 8}])).commit()
    check([2, 7, 8])

    for snapshot_id, model in expected.items():
        assert duck_ids(duck, table, snapshot_id) == model, snapshot_id
        assert ids(table, snapshot_id=snapshot_id) == model


def test_pyiceberg_reads_every_snapshot_we_commit(catalog: SqlCatalog) -> None:
    t = CatalogTable.create(catalog, "py", properties={"commit.manifest.min-count-to-merge": "3"})
    table = t.table
    expected: dict[int, list[int]] = {}

    def check(model: list[int]) -> None:
        expected[head_id(table)] = model
        assert ids(table) == model

    a1 = t.data([{"id": 1, "cat": "a"}, {"id": 2, "cat": "a"}])
    b1 = t.data([{"id": 10, "cat": "b"}, {"id": 11, "cat": "b"}])
    table.new_fast_append().append_file(a1).append_file(b1).commit()
    check([1, 2, 10, 11])

    deletes = t.position_deletes([(a1.file_path, 1)], referenced_data_file=a1.file_path)
    table.new_row_delta().add_deletes(deletes).commit()
    check([1, 10, 11])

    ac = t.data([{"id": 1, "cat": "a"}])
    table.new_rewrite().rewrite_files([a1], [ac]).use_starting_sequence_number().commit()
    check([1, 10, 11])

    b2 = t.data([{"id": 12, "cat": "b"}])
    table.new_replace_partitions().add_file(b2).commit()
    check([1, 12])

    c1 = t.data([{"id": 20, "cat": "c"}])
    table.new_row_delta().add_rows(c1).add_deletes(t.position_deletes([(b2.file_path, 0)])).commit()
    check([1, 20])

    table.new_overwrite().overwrite_by_row_filter(equal("cat", "c")).add_file(
        t.data([{"id": 21, "cat": "c"}])
    ).commit()
    check([1, 21])

    table.new_append().append_file(t.data([{"id": 5, "cat": "a"}])).commit()
    check([1, 5, 21])
    table.new_fast_append().append_file(t.data([{"id": 6, "cat": "b"}])).commit()
    check([1, 5, 6, 21])

    for snapshot_id, model in expected.items():
        assert pyiceberg_ids(table, snapshot_id) == model, snapshot_id
