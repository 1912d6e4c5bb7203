"""Our jobs maintain a v3 table DuckDB wrote (inserts, deletes as deletion vectors, through the
REST catalog), and DuckDB reads what they leave: the same rows, each with the same `_row_id`
and `_last_updated_sequence_number` (DuckDB exposes both as virtual columns)."""

from __future__ import annotations

import uuid

from pyiceberg.catalog import load_catalog as pyiceberg_catalog
from pyspark.sql import SparkSession

from icecore.catalog import load_catalog
from icecore.jobs.jobs import RewriteDataFilesOptions
from spark_jobs.rewrite_data_files import run as rewrite_data_files
from tests.support.duckdb import attach_rest, connect
from tests.support.rest_catalog import RestCatalogServer

LINEAGE = "SELECT id, v, _row_id, _last_updated_sequence_number FROM lake.{} ORDER BY id"


def test_we_compact_a_duckdb_v3_table_and_duckdb_reads_the_same_rows_and_row_ids(
    spark: SparkSession, rest_catalog_server: RestCatalogServer
) -> None:
    server = rest_catalog_server
    duck = connect()
    attach_rest(duck, server)
    ns = f"duck_{uuid.uuid4().hex[:8]}"
    name = f"{ns}.t"
    duck.execute(f"CREATE SCHEMA lake.{ns}")
    duck.execute(f"CREATE TABLE lake.{name} (id BIGINT, v VARCHAR) WITH ('format-version' = '3')")
    for start in (0, 400, 800):
        rows = f"range({start}, {start + 400})"
        duck.execute(f"INSERT INTO lake.{name} SELECT range, 'v' || range FROM {rows}")
    duck.execute(f"DELETE FROM lake.{name} WHERE id % 5 = 1")
    duck.execute(f"UPDATE lake.{name} SET v = 'updated' WHERE id % 50 = 0")
    before = duck.execute(LINEAGE.format(name)).fetchall()
    assert len(before) == 960 and all(r[2] is not None for r in before)

    catalog = load_catalog("lake", server.properties())
    table = catalog.load_table(name)
    assert table.metadata.format_version == 3
    assert table.health().totals.deletion_vectors.files > 0
    result = rewrite_data_files(
        spark, catalog, RewriteDataFilesOptions(table=name, rewrite_all=True)
    )
    assert result.failed_groups == [] and result.rewritten_data_files >= 3, result
    table = catalog.load_table(name)
    assert table.health().totals.deletion_vectors.files == 0
    assert len(list(table.scan().plan_files())) < 4

    duck.execute("DETACH lake")  # a fresh attach: DuckDB caches table metadata
    attach_rest(duck, server)
    assert duck.execute(LINEAGE.format(name)).fetchall() == before
    py = pyiceberg_catalog("py", **server.properties()).load_table(name).scan().to_arrow()
    assert sorted(py.column("id").to_pylist()) == [r[0] for r in before]
    duck.close()
    catalog.close()
