"""Ingestion sources on S3 (moto's server on 127.0.0.1), on this project's PySpark, which has
no Hadoop S3 connector: the batch is read through FileIO with the catalog's properties, into
an `s3://` table. Rows are checked in PyIceberg against a model of the batches."""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.table import StaticTable
from pyspark.sql import SparkSession

from icecore.catalog import SqlCatalog
from icecore.io import FileIO
from icecore.jobs.errors import JobError
from icecore.jobs.jobs import ConvertEqualityDeletesOptions, IngestOptions
from spark_jobs.convert_equality_deletes import run as convert_equality_deletes
from spark_jobs.ingest import run as ingest
from spark_jobs.ingest.object_source import source_files, spark_cannot_read
from tests.support.batches import Model, Rows, batch
from tests.support.objectstores import S3_SECRET_KEY, ObjectStore


@pytest.fixture
def s3_catalog(s3_store: ObjectStore, tmp_path: Path) -> Iterator[SqlCatalog]:
    catalog = SqlCatalog(
        "default",
        uri=f"sqlite:///{tmp_path}/catalog.db",
        warehouse=f"{s3_store.new_bucket()}/wh",
        properties=s3_store.properties,
    )
    yield catalog
    catalog.close()


def _rows(catalog: SqlCatalog, table: str) -> Rows:
    """The table's rows as PyIceberg reads them from S3: (id, v, ts in microseconds)."""
    location = catalog.load_table(table).metadata_location
    assert location is not None
    arrow = StaticTable.from_metadata(location, catalog.io.properties).scan().to_arrow()
    ts = arrow.column("ts").cast(pa.int64()).to_pylist()
    return Counter(
        zip(arrow.column("id").to_pylist(), arrow.column("v").to_pylist(), ts, strict=True)
    )


def _csv(rows: list[tuple[object, ...]], cdc: bool = False) -> bytes:
    header = "id,v,ts" + (",op" if cdc else "")
    lines = [
        ",".join([str(k), v, ts.isoformat(sep=" "), *([op] if cdc else [])])
        for k, v, ts, op in rows
    ]
    return ("\n".join([header, *lines]) + "\n").encode()


def _parquet(rows: list[tuple[object, ...]]) -> bytes:
    table = pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "v": pa.array([r[1] for r in rows], pa.string()),
            "ts": pa.array([r[2] for r in rows], pa.timestamp("us")),
        }
    )
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def _ingest(spark: SparkSession, catalog: SqlCatalog, source: str, **options: object) -> dict:
    result = ingest(spark, catalog, IngestOptions(table="db.t", source=source, **options))
    assert result.status == "committed", result
    return result


def test_spark_reads_only_schemes_it_has_a_filesystem_for(spark: SparkSession) -> None:
    """This Spark has no S3A: s3/s3a/gs/abfss sources go through FileIO; local ones and
    schemes the user configured a Hadoop FileSystem for stay with Spark's reader."""
    for path in ("s3://b/in", "s3a://b/in", "gs://b/in", "abfss://c@a.dfs.core.windows.net/in"):
        assert spark_cannot_read(spark, path), path
    assert not spark_cannot_read(spark, "/tmp/in")
    assert not spark_cannot_read(spark, "file:/tmp/in")
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    conf.set("fs.s3.impl", "org.apache.hadoop.fs.RawLocalFileSystem")  # as S3A/EMRFS would be
    try:
        assert not spark_cannot_read(spark, "s3://b/in")
    finally:
        conf.unset("fs.s3.impl")


def test_source_listing_skips_hidden_files_and_refuses_partition_directories(
    s3_store: ObjectStore,
) -> None:
    fileio, root = FileIO(s3_store.properties), s3_store.new_bucket()
    for name in ("in/b.csv", "in/a.csv", "in/_SUCCESS", "in/.a.csv.crc", "in/_tmp/x.csv",
                 "in_2/c.csv", "parts/day=1/d.csv"):  # fmt: skip
        fileio.write_bytes(f"{root}/{name}", b"id\n1\n")
    assert [f for f, _ in source_files(fileio, f"{root}/in")] == [
        f"{root}/in/a.csv",
        f"{root}/in/b.csv",
    ]  # not the sibling prefix in_2/ either
    assert source_files(fileio, f"{root}/in/b.csv") == [(f"{root}/in/b.csv", 5)]
    with pytest.raises(JobError, match="partition directories"):
        source_files(fileio, f"{root}/parts")
    with pytest.raises(JobError, match=rf"source {root}/nothing not found"):
        source_files(fileio, f"{root}/nothing")


def test_parquet_then_csv_sources_on_s3(
    spark: SparkSession, s3_catalog: SqlCatalog, s3_store: ObjectStore
) -> None:
    fileio, bucket, model = FileIO(s3_store.properties), s3_store.new_bucket(), Model()
    first, second = batch(0, 30), batch(30, 20)
    fileio.write_bytes(f"{bucket}/in/p/part-0.parquet", _parquet(first[:10]))
    fileio.write_bytes(f"{bucket}/in/p/part-1.parquet", _parquet(first[10:]))
    fileio.write_bytes(f"{bucket}/in/p/_SUCCESS", b"")
    _ingest(spark, s3_catalog, f"{bucket}/in/p", create=True)
    model.apply("append", first)
    assert _rows(s3_catalog, "db.t") == model.counter()

    # CSV carries no types: values are read as the table's (long, timestamp without zone).
    fileio.write_bytes(f"{bucket}/in/c/batch.csv", _csv(second))
    assert _ingest(spark, s3_catalog, f"{bucket}/in/c").rows == 20
    model.apply("append", second)
    assert _rows(s3_catalog, "db.t") == model.counter()

    bad = f"{bucket}/in/bad/batch.csv"
    fileio.write_bytes(bad, b"id,v,ts\n60,x,2024-01-01 00:00:00\ntwelve,y,2024-01-01 00:00:00\n")
    with pytest.raises(JobError) as failed:
        _ingest(spark, s3_catalog, bad)
    assert str(failed.value) == f"cannot read {bad}: column id: 'twelve' is not a bigint"
    with pytest.raises(JobError, match="read FAILFAST only"):  # never a silent null
        _ingest(spark, s3_catalog, bad, source_options={"mode": "PERMISSIVE"})
    assert _rows(s3_catalog, "db.t") == model.counter()

    for missing in (f"{bucket}/in/missing", f"{bucket}/in/missing.csv"):
        with pytest.raises(JobError, match=rf"source {missing} not found") as failed:
            _ingest(spark, s3_catalog, missing)
        assert S3_SECRET_KEY not in str(failed.value)


def test_cdc_csv_files_on_s3_apply_in_file_then_row_order(
    spark: SparkSession, s3_catalog: SqlCatalog, s3_store: ObjectStore
) -> None:
    """Key 1 changes in both files and twice within each: only file order, then row order,
    leaves the model's rows (read the other way round, 1 keeps `a2` and 2 keeps `y`)."""
    fileio, bucket, model = FileIO(s3_store.properties), s3_store.new_bucket(), Model()
    start = batch(0, 4, tag="s")
    fileio.write_bytes(f"{bucket}/start/rows.csv", _csv(start))
    _ingest(spark, s3_catalog, f"{bucket}/start/rows.csv", create=True)
    model.apply("append", start)
    ts = start[0][2]
    in_a = [(1, "a1", ts, "U"), (1, "a2", ts, "U"), (2, "y", ts, "U"), (5, "n", ts, "I")]
    in_b = [(1, "b1", ts, "U"), (2, "", ts, "D"), (1, "b2", ts, "U"), (3, "", ts, "D")]
    fileio.write_bytes(f"{bucket}/cdc/a.csv", _csv(in_a, cdc=True))
    fileio.write_bytes(f"{bucket}/cdc/b.csv", _csv(in_b, cdc=True))
    result = _ingest(spark, s3_catalog, f"{bucket}/cdc", mode="cdc", key=["id"])
    model.apply("cdc", in_a + in_b)
    # PyIceberg reads no equality deletes: they become position deletes first.
    convert_equality_deletes(spark, s3_catalog, ConvertEqualityDeletesOptions(table="db.t"))
    assert _rows(s3_catalog, "db.t") == model.counter()
    assert result.superseded_in_batch > 0, result


def test_new_table_from_csv_and_json_on_s3_infers_types(
    spark: SparkSession, s3_catalog: SqlCatalog, s3_store: ObjectStore
) -> None:
    fileio, bucket = FileIO(s3_store.properties), s3_store.new_bucket()
    fileio.write_bytes(
        f"{bucket}/typed.csv",
        b"n,big,x,d,t,flag,s,empty\n"
        b"1,3000000000,1.5,2024-01-02,2024-01-02 03:04:05,true,a,\n"
        b"2,4,2,2024-02-03,2024-02-03 00:00:00,FALSE,,\n",
    )
    _ingest(spark, s3_catalog, f"{bucket}/typed.csv", create=True)
    table = s3_catalog.load_table("db.t")
    types = {f.name: str(f.field_type) for f in table.metadata.schema().fields}
    assert types == {
        "n": "int", "big": "long", "x": "double", "d": "date", "t": "timestamptz",
        "flag": "boolean", "s": "string", "empty": "string",
    }  # fmt: skip
    location = table.metadata_location
    assert location is not None
    rows = StaticTable.from_metadata(location, s3_catalog.io.properties).scan().to_arrow()
    assert sorted(rows.column("x").to_pylist()) == [1.5, 2.0]
    assert sorted(rows.column("flag").to_pylist()) == [False, True]
    assert rows.column("s").to_pylist().count(None) == 1

    # JSON lines into the same table: its columns take the table's types; `extra` is new.
    fileio.write_bytes(
        f"{bucket}/more.json",
        b'{"n": 3, "big": 5, "x": 0.25, "d": "2024-03-04", "flag": false, "s": "j"}\n\n'
        b'{"n": 4, "t": "2024-03-04T05:06:07Z", "s": "k", "extra": [1, 2]}\n',
    )
    _ingest(spark, s3_catalog, f"{bucket}/more.json", merge_schema=True)
    table = s3_catalog.load_table("db.t")
    location = table.metadata_location
    assert location is not None
    rows = StaticTable.from_metadata(location, s3_catalog.io.properties).scan().to_arrow()
    by_n = {r["n"]: r for r in rows.to_pylist()}
    assert sorted(by_n) == [1, 2, 3, 4]
    assert (by_n[3]["x"], by_n[3]["d"].isoformat(), by_n[3]["flag"], by_n[3]["s"]) == (
        0.25, "2024-03-04", False, "j",
    )  # fmt: skip
    assert (by_n[4]["t"].isoformat(), by_n[4]["extra"]) == ("2024-03-04T05:06:07+00:00", [1, 2])
    fileio.write_bytes(f"{bucket}/bad.json", b'{"n": 5, "x": "lots"}\n')
    with pytest.raises(JobError, match=r"bad.json: column x: 'lots' is not a double"):
        _ingest(spark, s3_catalog, f"{bucket}/bad.json")
