"""PyIceberg 0.12's SqlCatalog and ours share one database, on SQLite and on PostgreSQL.

Both directions, with real data: PyIceberg lists, loads, reads and commits to tables we
created; we list, load, read and commit to tables PyIceberg created, and each side then sees
the other's commits. Java's JdbcCatalog uses the same two tables, which PyIceberg mirrors.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog as PySqlCatalog
from pyiceberg.schema import Schema as PySchema
from pyiceberg.types import LongType as PyLongType
from pyiceberg.types import NestedField as PyNestedField
from pyiceberg.types import StringType as PyStringType

from icecore.catalog import SqlCatalog
from icecore.catalog.metastore import metadata_version
from icecore.spec.schema import Schema
from icecore.spec.types import LongType, NestedField, StringType
from tests.support.catalogs import append_rows
from tests.support.reader import scan_rows

pytestmark = pytest.mark.interop

SCHEMA = Schema(
    (
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "data", StringType()),
    )
)
PY_SCHEMA = PySchema(
    PyNestedField(1, "id", PyLongType(), required=True),
    PyNestedField(2, "data", PyStringType(), required=False),
)
ARROW_SCHEMA = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), pa.field("data", pa.string())]
)


def pyiceberg_catalog(catalog: SqlCatalog, warehouse: Path) -> PySqlCatalog:
    return PySqlCatalog(catalog.name, uri=catalog.uri, warehouse=str(warehouse))


def their_rows(table) -> list[dict]:
    return sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])


def our_rows(table) -> list[dict]:
    return sorted(scan_rows(table.io, table.metadata), key=lambda r: r["id"])


def test_pyiceberg_reads_and_commits_to_our_tables(catalog: SqlCatalog, tmp_path: Path) -> None:
    catalog.create_namespace("db", {"owner": "etl"})
    catalog.create_namespace("db.nested")
    table = catalog.create_table("db.events", SCHEMA, properties={"commit.retry.num-retries": "9"})
    append_rows(table, [{"id": 1, "data": "a"}, {"id": 2, "data": None}])
    append_rows(table, [{"id": 3, "data": "c"}])

    theirs = pyiceberg_catalog(catalog, tmp_path / "warehouse")
    try:
        assert theirs.list_namespaces() == [("db",)]
        assert theirs.list_namespaces("db") == [("db", "nested")]
        assert theirs.load_namespace_properties("db")["owner"] == "etl"
        assert theirs.list_tables("db") == [("db", "events")]
        loaded = theirs.load_table("db.events")
        assert loaded.metadata_location == table.metadata_location
        assert loaded.properties["commit.retry.num-retries"] == "9"
        assert their_rows(loaded) == [
            {"id": 1, "data": "a"},
            {"id": 2, "data": None},
            {"id": 3, "data": "c"},
        ]

        loaded.append(pa.Table.from_pylist([{"id": 4, "data": "d"}], schema=ARROW_SCHEMA))
        ours = catalog.load_table("db.events")
        assert ours.metadata_location == loaded.metadata_location
        assert [r["id"] for r in our_rows(ours)] == [1, 2, 3, 4]
        append_rows(ours, [{"id": 5, "data": "e"}])  # and we go on after their commit
        assert [r["id"] for r in their_rows(theirs.load_table("db.events"))] == [1, 2, 3, 4, 5]
    finally:
        theirs.close()


def test_we_read_and_commit_to_tables_pyiceberg_created(
    catalog: SqlCatalog, tmp_path: Path
) -> None:
    warehouse = tmp_path / "pyiceberg"
    warehouse.mkdir()
    theirs = pyiceberg_catalog(catalog, warehouse)
    try:
        theirs.create_namespace("raw", {"team": "ingest"})
        created = theirs.create_table("raw.clicks", PY_SCHEMA)
        rows = [{"id": i, "data": f"click {i}"} for i in range(10)]
        created.append(pa.Table.from_pylist(rows, schema=ARROW_SCHEMA))
        created.append(pa.Table.from_pylist([{"id": 10, "data": None}], schema=ARROW_SCHEMA))

        assert catalog.list_namespaces() == [("raw",)]
        assert catalog.load_namespace_properties("raw") == {"team": "ingest"}
        assert catalog.list_tables("raw") == [("raw", "clicks")]
        table = catalog.load_table("raw.clicks")
        assert table.metadata_location == theirs.load_table("raw.clicks").metadata_location
        assert our_rows(table) == [*rows, {"id": 10, "data": None}]

        append_rows(table, [{"id": 11, "data": "ours"}])
        assert metadata_version(table.metadata_location) == 3  # 0 create, 2 appends, ours
        after = theirs.load_table("raw.clicks")
        assert after.metadata_location == table.metadata_location
        assert [r["id"] for r in their_rows(after)] == list(range(12))
        assert after.metadata.snapshot_log[-1].snapshot_id == table.metadata.current_snapshot_id

        catalog.rename_table("raw.clicks", "raw.clicks_v2")
        assert theirs.list_tables("raw") == [("raw", "clicks_v2")]
        catalog.drop_table("raw.clicks_v2")
        assert theirs.list_tables("raw") == []
        theirs.drop_namespace("raw")
        assert not catalog.namespace_exists("raw")
    finally:
        theirs.close()
