"""Every job and ingestion mode on a table behind a REST catalog (Apache Iceberg's own REST
handlers with OAuth2, tests/support/rest_catalog.py), exactly as on a SQL one; PyIceberg and
DuckDB read the result through the same server."""

from __future__ import annotations

import io
import json
import os
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog as pyiceberg_catalog
from pyspark.sql import SparkSession

from icecore.catalog import load_catalog
from icecore.catalog.rest import RestCatalog
from icecore.jobs.argv import CATALOG_CREDENTIAL_ENV
from icecore.jobs.jobs import (
    ConvertEqualityDeletesOptions,
    ExpireSnapshotsOptions,
    RemoveOrphanFilesOptions,
    RewriteDataFilesOptions,
    RewritePositionDeletesOptions,
)
from icecore.spec.schema import Schema
from icecore.spec.types import LongType, NestedField, StringType, TimestampType
from spark_jobs.common.cli import main
from spark_jobs.convert_equality_deletes import run as convert_equality_deletes
from spark_jobs.expire_snapshots import run as expire_snapshots
from spark_jobs.remove_orphan_files import run as remove_orphan_files
from spark_jobs.rewrite_data_files import run as rewrite_data_files
from spark_jobs.rewrite_position_deletes import run as rewrite_position_deletes
from tests.spark.submit import submit_command
from tests.support.batches import Model, Rows, batch, feed
from tests.support.committing import rows
from tests.support.duckdb import connect, extension_path
from tests.support.objectstores import ObjectStore
from tests.support.reader import scan_rows
from tests.support.rest_catalog import RestCatalogServer

FAR_FUTURE = "2100-01-01T00:00:00"


@pytest.fixture
def catalog(rest_catalog_server: RestCatalogServer) -> Iterator[RestCatalog]:
    rest_catalog_server.reset()
    catalog = load_catalog("lake", rest_catalog_server.properties())
    assert isinstance(catalog, RestCatalog)
    if not catalog.namespace_exists("jobs"):
        catalog.create_namespace("jobs")
    yield catalog
    catalog.close()


def _pyiceberg_rows(server: RestCatalogServer, name: str) -> Rows:
    arrow = pyiceberg_catalog("py", **server.properties()).load_table(name).scan().to_arrow()
    ts = arrow.column("ts").cast(pa.int64()).to_pylist()
    ids, values = arrow.column("id").to_pylist(), arrow.column("v").to_pylist()
    return Counter(zip(ids, values, ts, strict=True))


def _duckdb_rows(server: RestCatalogServer, name: str) -> Rows:
    """DuckDB's own REST client: ATTACH with OAuth2 client credentials (needs httpfs)."""
    con = connect()
    con.execute(f"LOAD '{extension_path('httpfs')}'")
    con.execute(
        "CREATE SECRET rest (TYPE iceberg, CLIENT_ID ?, CLIENT_SECRET ?, OAUTH2_SERVER_URI ?, "
        "OAUTH2_SCOPE 'catalog')",
        [server.client_id, server.client_secret, server.token_uri],
    )
    con.execute(
        f"ATTACH '{server.warehouse_location}' AS lake "
        f"(TYPE iceberg, SECRET rest, ENDPOINT '{server.uri}')"
    )
    got = con.execute(f"SELECT id, v, epoch_us(ts) FROM lake.{name}").fetchall()
    con.close()
    return Counter(got)


def test_every_job_and_ingestion_mode_through_rest(
    spark: SparkSession, catalog: RestCatalog, rest_catalog_server: RestCatalogServer
) -> None:
    server, name, model = rest_catalog_server, "jobs.events", Model()
    feed(spark, catalog, name, mode="append", rows=batch(0, 40), model=model)
    feed(spark, catalog, name, mode="overwrite", rows=batch(0, 30, tag="o"), model=model)
    feed(spark, catalog, name, mode="cdc", rows=batch(10, 30, "IUUD", "c"), model=model)
    feed(spark, catalog, name, mode="upsert", rows=batch(20, 10, tag="u"), model=model)
    feed(spark, catalog, name, mode="delete", rows=batch(0, 5), model=model)
    table = catalog.load_table(name)
    assert table.health().totals.equality_deletes.files > 0
    assert _duckdb_rows(server, name) == model.counter()

    convert_equality_deletes(spark, catalog, ConvertEqualityDeletesOptions(table=name))
    assert catalog.load_table(name).health().totals.equality_deletes.files == 0
    assert _pyiceberg_rows(server, name) == model.counter()

    rewrite_position_deletes(
        spark, catalog, RewritePositionDeletesOptions(table=name, rewrite_all=True)
    )
    rewrite_data_files(spark, catalog, RewriteDataFilesOptions(table=name, rewrite_all=True))
    table = catalog.load_table(name)
    assert table.health().totals.position_deletes.files == 0
    assert _pyiceberg_rows(server, name) == model.counter()

    orphan = f"{table.metadata.location}/data/orphan.parquet"
    table.io.write_bytes(orphan, b"left behind by a crashed writer")
    expired = expire_snapshots(
        spark,
        catalog,
        ExpireSnapshotsOptions(table=name, older_than=FAR_FUTURE, retain_last=1, force=True),
    )
    assert expired.deleted_data_files_count > 0
    removed = remove_orphan_files(
        spark, catalog, RemoveOrphanFilesOptions(table=name, older_than=FAR_FUTURE, force=True)
    )
    assert removed.deleted_files_count == 1 and not table.io.exists(orphan)
    assert len(catalog.load_table(name).metadata.snapshots) == 1
    assert _pyiceberg_rows(server, name) == model.counter()
    assert _duckdb_rows(server, name) == model.counter()
    # Every commit went to the server as requirements + updates (none was a metadata swap).
    commits = [r for r in server.requests() if r.startswith(f"POST /v1/{server.prefix}/")]
    assert any(r.endswith("/tables/events") for r in commits)


@pytest.mark.spark_submit
def test_spark_submit_on_a_rest_table_takes_the_secret_from_the_environment(
    tmp_path: Path, catalog: RestCatalog, rest_catalog_server: RestCatalogServer
) -> None:
    server = rest_catalog_server
    source = tmp_path / "batch.csv"
    source.write_text("id,v\n1,a\n2,b\n")
    args = [
        "--catalog-type", "rest",
        "--catalog-uri", server.uri,
        "--warehouse", server.warehouse_location,
        "--catalog-property", f"oauth2-server-uri={server.token_uri}",
        "--table", "jobs.submitted",
        "--source", str(source),
        "--create",
    ]  # fmt: skip
    command, env = submit_command("ingest", tmp_path, args)
    env[CATALOG_CREDENTIAL_ENV] = f"{server.client_id}:{server.client_secret}"
    done = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["status"] == "committed"
    assert server.client_secret not in done.stdout + done.stderr
    assert sorted(r["id"] for r in rows(catalog.load_table("jobs.submitted"))) == [1, 2]

    # A secret on the command line is refused before anything runs; a wrong one names the
    # catalog in one line.
    shared = ["--catalog-uri", server.uri, "--warehouse", server.warehouse_location,
              "--table", "jobs.submitted", "--source", str(source)]  # fmt: skip
    err = io.StringIO()
    on_argv = ["--catalog-property", f"credential={server.client_id}:x"]
    assert main(["ingest", *shared, *on_argv], stdout=io.StringIO(), stderr=err) == 1
    assert f"set ${CATALOG_CREDENTIAL_ENV} instead" in err.getvalue().splitlines()[-1]
    os.environ[CATALOG_CREDENTIAL_ENV] = f"{server.client_id}:wrong"
    try:
        err = io.StringIO()
        assert main(["ingest", *shared], stdout=io.StringIO(), stderr=err) == 1
    finally:
        del os.environ[CATALOG_CREDENTIAL_ENV]
    last = err.getvalue().splitlines()[-1]
    assert last.startswith("CatalogError: catalog 'default'") and "refused" in last, last


def test_credentials_the_catalog_vends_reach_the_spark_tasks(
    spark: SparkSession,
    catalog: RestCatalog,
    rest_catalog_server: RestCatalogServer,
    s3_store: ObjectStore,
    tmp_path: Path,
) -> None:
    """The client knows nothing of the S3 server; the catalog vends its endpoint and keys
    with each table (the table's metadata stays local: the test server has no S3 client)."""
    server, name, model = rest_catalog_server, "jobs.vended", Model()
    assert not any(k.startswith("s3.") for k in catalog.io.properties)
    location = f"{s3_store.new_bucket()}/vended"
    server.vend(s3_store.properties)
    try:
        catalog.create_table(
            name,
            Schema((NestedField(1, "id", LongType()), NestedField(2, "v", StringType()),
                    NestedField(3, "ts", TimestampType()))),
            location=location,
            properties={"write.metadata.path": str(tmp_path / "metadata")},
        )  # fmt: skip
        feed(spark, catalog, name, mode="append", rows=batch(0, 30), model=model)
        feed(spark, catalog, name, mode="cdc", rows=batch(10, 20, "IUUD", "c"), model=model)
        rewrite_data_files(spark, catalog, RewriteDataFilesOptions(table=name, rewrite_all=True))
        table = catalog.load_table(name)
        assert table.io.properties["s3.endpoint"] == s3_store.properties["s3.endpoint"]
        files = [t.file.file_path for t in table.scan().plan_files()]
        assert files and all(f.startswith(location) for f in files)
        got = Counter((r["id"], r["v"], r["ts"]) for r in scan_rows(table.io, table.metadata))
        assert got == model.counter()
    finally:
        server.vend({})
