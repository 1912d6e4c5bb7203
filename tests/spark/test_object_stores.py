"""Every job and ingestion mode on object-store warehouses, on this project's PySpark with no
Hadoop connector for them: table files go through icecore's FileIO in the Spark tasks.

The stores are real servers on 127.0.0.1 (tests/support/objectstores.py): moto's S3 server,
the GCS emulator and Azurite. Rows are checked against a model of the batches in PyIceberg
and, on S3, in DuckDB (httpfs with an S3 secret pointing at moto); on Azure PyIceberg reads
through its fsspec FileIO (adlfs), see `_pyiceberg_properties`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from pyspark.sql import SparkSession

from icecore.catalog import SqlCatalog
from icecore.jobs.jobs import (
    ConvertEqualityDeletesOptions,
    ExpireSnapshotsOptions,
    RemoveOrphanFilesOptions,
    RewriteDataFilesOptions,
    RewritePositionDeletesOptions,
)
from icecore.table import Table
from spark_jobs.convert_equality_deletes import run as convert_equality_deletes
from spark_jobs.expire_snapshots import run as expire_snapshots
from spark_jobs.remove_orphan_files import run as remove_orphan_files
from spark_jobs.rewrite_data_files import run as rewrite_data_files
from spark_jobs.rewrite_position_deletes import run as rewrite_position_deletes
from tests.support.batches import Model, Rows, batch, feed, pyiceberg_rows
from tests.support.duckdb import connect, extension_path
from tests.support.objectstores import AZURITE_ACCOUNT, AZURITE_KEY, ObjectStore
from tests.support.reader import scan_rows


def _pyiceberg_properties(store: ObjectStore) -> dict[str, str]:
    """What PyIceberg needs to read a table of `store`.

    GCS: the emulator takes any token; without one pyarrow waits for Google's metadata server.
    Azure: PyIceberg 0.12's PyArrowFileIO sends `container@account.dfs.core.windows.net` to
    Azure as the container name, so it cannot read `abfss://container@account...` locations;
    its FsspecFileIO (adlfs) splits them as Azure does (PyIceberg's first choice for abfss://
    once adlfs is installed; named here so it stays the one tested). adlfs's `account_host`
    always means https, so it reaches Azurite through a connection string naming the blob
    endpoint (the account in the path, as Azurite addresses accounts on an IP host).
    """
    if store.name == "gcs":
        return {
            **store.properties,
            "gcs.oauth2.token": "emulator",
            "gcs.oauth2.token-expires-at": str(4_102_444_800_000),
        }
    if store.name == "azure":
        account, key = AZURITE_ACCOUNT, AZURITE_KEY
        return {
            "py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO",
            "adls.connection-string": (
                f"DefaultEndpointsProtocol=http;AccountName={account};AccountKey={key};"
                f"BlobEndpoint={store.endpoint}/{account};"
            ),
        }
    return store.properties


def _icecore_rows(table: Table) -> Rows:
    """The rows as icecore plans them and a plain reader applies the deletes."""
    return Counter((r["id"], r["v"], r["ts"]) for r in scan_rows(table.io, table.metadata))


def _duckdb_rows(table: Table, store: ObjectStore) -> Rows:
    endpoint = urlsplit(store.properties["s3.endpoint"])
    con = connect()
    con.execute(f"LOAD '{extension_path('httpfs')}'")
    con.execute(
        "CREATE SECRET moto (TYPE s3, KEY_ID ?, SECRET ?, ENDPOINT ?, URL_STYLE 'path', "
        "USE_SSL false, REGION ?)",
        [
            store.properties["s3.access-key-id"],
            store.properties["s3.secret-access-key"],
            endpoint.netloc,
            store.properties.get("s3.region", "us-east-1"),
        ],
    )
    sql = f"SELECT id, v, epoch_us(ts) FROM iceberg_scan('{table.metadata_location}')"
    return Counter(con.execute(sql).fetchall())


def _catalog(store: ObjectStore, tmp_path: Path) -> SqlCatalog:
    """A SQLite catalog (on local disk) whose warehouse is a new bucket of `store`."""
    return SqlCatalog(
        "default",
        uri=f"sqlite:///{tmp_path}/catalog.db",
        warehouse=f"{store.new_bucket()}/wh",
        properties=store.properties,
    )


@pytest.fixture
def s3_catalog(s3_store: ObjectStore, tmp_path: Path) -> Iterator[SqlCatalog]:
    catalog = _catalog(s3_store, tmp_path)
    yield catalog
    catalog.close()


def test_every_job_and_ingestion_mode_on_s3(
    spark: SparkSession, s3_catalog: SqlCatalog, s3_store: ObjectStore
) -> None:
    catalog, table_name, model = s3_catalog, "db.t", Model()
    spark_conf = spark.sparkContext.getConf()
    assert not any("hadoop-aws" in v for _, v in spark_conf.getAll())  # no S3A connector

    feed(spark, catalog, table_name, mode="append", rows=batch(0, 40), model=model)
    feed(spark, catalog, table_name, mode="overwrite", rows=batch(0, 30, tag="o"), model=model)
    feed(spark, catalog, table_name, mode="cdc", rows=batch(10, 30, "IUUD", "c"), model=model)
    feed(spark, catalog, table_name, mode="upsert", rows=batch(20, 10, tag="u"), model=model)
    feed(spark, catalog, table_name, mode="delete", rows=batch(0, 5), model=model)
    table = catalog.load_table(table_name)
    assert table.health().totals.equality_deletes.files > 0
    assert _duckdb_rows(table, s3_store) == model.counter()

    convert_equality_deletes(spark, catalog, ConvertEqualityDeletesOptions(table=table_name))
    table = catalog.load_table(table_name)
    assert table.health().totals.equality_deletes.files == 0
    assert pyiceberg_rows(table, s3_store.properties) == model.counter()

    rewrite_position_deletes(
        spark, catalog, RewritePositionDeletesOptions(table=table_name, rewrite_all=True)
    )
    rewrite_data_files(spark, catalog, RewriteDataFilesOptions(table=table_name, rewrite_all=True))
    table = catalog.load_table(table_name)
    assert table.health().totals.position_deletes.files == 0
    assert pyiceberg_rows(table, s3_store.properties) == model.counter()
    assert _duckdb_rows(table, s3_store) == model.counter()

    # A sibling table whose location shares the prefix `<wh>/db/t` (S3 lists raw prefixes).
    sibling, sibling_model = "db.t_2", Model()
    feed(spark, catalog, sibling, mode="append", rows=batch(100, 10), model=sibling_model)
    location = table.metadata.location
    orphan = f"{location}/data/orphan.parquet"
    table.io.write_bytes(orphan, b"left behind by a crashed writer")

    expired = expire_snapshots(
        spark,
        catalog,
        ExpireSnapshotsOptions(
            table=table_name, older_than="2100-01-01T00:00:00", retain_last=1, force=True
        ),
    )
    assert expired.deleted_data_files_count > 0
    removed = remove_orphan_files(
        spark,
        catalog,
        RemoveOrphanFilesOptions(table=table_name, older_than="2100-01-01T00:00:00", force=True),
    )
    assert removed.deleted_files_count == 1
    assert not table.io.exists(orphan)
    table = catalog.load_table(table_name)
    assert pyiceberg_rows(table, s3_store.properties) == model.counter()
    assert _duckdb_rows(table, s3_store) == model.counter()
    other = catalog.load_table(sibling)
    assert pyiceberg_rows(other, s3_store.properties) == sibling_model.counter()


@pytest.mark.parametrize("store_name", ["gcs_store", "azure_store"])
def test_ingest_compact_and_remove_orphans(
    spark: SparkSession, store_name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    store: ObjectStore = request.getfixturevalue(store_name)
    catalog = _catalog(store, tmp_path)
    try:
        model = Model()
        feed(spark, catalog, "db.t", mode="append", rows=batch(0, 30), model=model)
        feed(spark, catalog, "db.t", mode="cdc", rows=batch(10, 20, "IUUD", "c"), model=model)
        convert_equality_deletes(spark, catalog, ConvertEqualityDeletesOptions(table="db.t"))
        rewrite_data_files(spark, catalog, RewriteDataFilesOptions(table="db.t", rewrite_all=True))
        table = catalog.load_table("db.t")
        orphan = f"{table.metadata.location}/data/orphan.parquet"
        table.io.write_bytes(orphan, b"orphan")
        removed = remove_orphan_files(
            spark,
            catalog,
            RemoveOrphanFilesOptions(table="db.t", older_than="2100-01-01T00:00:00", force=True),
        )
        assert removed.deleted_files_count >= 1, removed.to_json()
        assert not table.io.exists(orphan)
        table = catalog.load_table("db.t")
        assert _icecore_rows(table) == model.counter()
        assert pyiceberg_rows(table, _pyiceberg_properties(store)) == model.counter()
    finally:
        catalog.close()
