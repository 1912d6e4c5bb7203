"""v3 tables with deletion vectors written by another engine (DuckDB 1.5.5, through the REST
catalog of the tests): icecore plans them, pairs every DV with exactly its data file, reads
the same rows DuckDB and PyIceberg read, and refuses a table with two DVs for one file."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import duckdb
import pytest
from pyiceberg.catalog import load_catalog as pyiceberg_catalog

from icecore.catalog import load_catalog
from icecore.catalog.rest import RestCatalog
from icecore.errors import ValidationError
from icecore.scan import TableScan
from icecore.spec.deletion_vectors import write_dvs
from icecore.spec.manifest import DataFile, FileContent, FileFormat
from tests.support.duckdb import attach_rest, connect
from tests.support.reader import scan_rows
from tests.support.rest_catalog import RestCatalogServer


@pytest.fixture
def duck(rest_catalog_server: RestCatalogServer) -> Iterator[duckdb.DuckDBPyConnection]:
    con = connect()
    attach_rest(con, rest_catalog_server)
    yield con
    con.close()


@pytest.fixture
def table_name(duck: duckdb.DuckDBPyConnection) -> str:
    """A v3 table DuckDB wrote: 3 inserts (3 data files), then two DELETEs (DVs, merged)."""
    ns = f"v3_{uuid.uuid4().hex[:8]}"
    duck.execute(f"CREATE SCHEMA lake.{ns}")
    duck.execute(f"CREATE TABLE lake.{ns}.t (id BIGINT, v VARCHAR) WITH ('format-version' = '3')")
    for start in (0, 1000, 2000):
        rows = f"range({start}, {start + 1000})"
        duck.execute(f"INSERT INTO lake.{ns}.t SELECT range, 'v' || range FROM {rows}")
    duck.execute(f"DELETE FROM lake.{ns}.t WHERE id % 7 = 3")
    duck.execute(f"DELETE FROM lake.{ns}.t WHERE id BETWEEN 1500 AND 1600 OR id = 2999")
    return f"{ns}.t"


def _duckdb_ids(duck: duckdb.DuckDBPyConnection, name: str) -> list[int]:
    return [r[0] for r in duck.execute(f"SELECT id FROM lake.{name} ORDER BY id").fetchall()]


def test_icecore_plans_and_reads_duckdb_deletion_vectors(
    duck: duckdb.DuckDBPyConnection, table_name: str, rest_catalog_server: RestCatalogServer
) -> None:
    catalog = load_catalog("lake", rest_catalog_server.properties())
    table = catalog.load_table(table_name)
    assert table.metadata.format_version == 3
    tasks = list(TableScan(table.io, table.metadata).plan_files())
    assert len(tasks) == 3
    for task in tasks:
        assert len(task.deletes) == 1
        (dv,) = task.deletes
        assert dv.is_deletion_vector and dv.referenced_data_file == task.file.file_path

    expected = _duckdb_ids(duck, table_name)
    assert expected == [
        i for i in range(3000) if i % 7 != 3 and not 1500 <= i <= 1600 and i != 2999
    ]
    assert sorted(r["id"] for r in scan_rows(table.io, table.metadata)) == expected
    py = pyiceberg_catalog("py", **rest_catalog_server.properties()).load_table(table_name)
    assert sorted(py.scan().to_arrow().column("id").to_pylist()) == expected
    health = table.health()
    assert health.totals.data.files == 3
    catalog.close()


def test_two_deletion_vectors_for_one_data_file_is_a_corrupt_table(
    table_name: str, rest_catalog_server: RestCatalogServer
) -> None:
    catalog = load_catalog("lake", rest_catalog_server.properties())
    assert isinstance(catalog, RestCatalog)
    table = catalog.load_table(table_name)
    task = next(iter(TableScan(table.io, table.metadata).plan_files()))
    data = task.file
    puffin = f"{table.metadata.location}/data/{uuid.uuid4()}-deletes.puffin"
    (written,) = write_dvs(table.io, puffin, {data.file_path: [0]})
    second = DataFile(
        file_path=written.file_path,
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
    table.new_row_delta().add_deletes(second).commit()
    with pytest.raises(ValidationError, match=r"corrupt table: data file .* two deletion vectors"):
        list(TableScan(table.io, table.metadata).plan_files())
    catalog.close()
