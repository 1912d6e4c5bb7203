"""A job killed with SIGKILL while it uploads a table file to S3 leaves the table as it was.

tests/spark/test_killed_jobs.py kills jobs writing to a local disk. On S3 a file larger than
one part (10 MiB) is a multipart upload: parts are stored as they arrive and the object
appears only when the upload completes. A killed writer cannot complete it, and cannot abort
it either, so what it leaves is an unfinished upload: no object, nothing a reader or a listing
sees, but parts stored (and billed) until aborted, which `remove_orphan_files` does.

Nothing here is timed: the job reaches moto through the throttle proxy, which holds its first
part upload of a data file (`ThrottleProxy.hold`) and tells the test; the job is killed while
it waits in the middle of that upload, its multipart upload begun and never finished.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from icefloe_airflow.results import SENTENCES
from pyspark.sql import SparkSession

from icecore.actions.referenced_files import referenced_files
from icecore.catalog import SqlCatalog
from icecore.jobs.argv import CATALOG_PROPERTIES_ENV
from icecore.jobs.jobs import IngestOptions, RemoveOrphanFilesOptions, RewriteDataFilesOptions
from icecore.table import Table
from spark_jobs.ingest import run as ingest
from spark_jobs.remove_orphan_files import run as remove_orphan_files
from spark_jobs.rewrite_data_files import run as rewrite_data_files
from tests.spark.submit import submit_command
from tests.support.batches import SOURCE, pyiceberg_rows
from tests.support.objectstores import ObjectStore
from tests.support.reader import scan_rows
from tests.support.throttle_proxy import Request, ThrottleProxy

TABLE = "db.big"
PART = 10 * 1024 * 1024
# Two appends of 1,700 rows holding 4 KiB of random text each, stored uncompressed: the
# compaction writes them into one file of about 14 MiB, a multipart upload of two parts.
ROWS_PER_APPEND = 1700
TS = dt.datetime(2024, 1, 2, 3)
Rows = Counter[tuple[int, str, int]]


def _batch(first: int) -> list[tuple[int, str, dt.datetime, str]]:
    return [
        (k, base64.b64encode(os.urandom(3072)).decode(), TS, "I")
        for k in range(first, first + ROWS_PER_APPEND)
    ]


def _expected(batches: list[list[tuple[int, str, dt.datetime, str]]]) -> Rows:
    micros = (TS - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)
    return Counter((k, v, micros) for rows in batches for k, v, _, _ in rows)


def _icecore_rows(table: Table) -> Rows:
    return Counter((r["id"], r["v"], r["ts"]) for r in scan_rows(table.io, table.metadata))


def _objects(table: Table) -> set[tuple[str, int]]:
    return {(f.location, f.size) for f in table.io.list_prefix(table.metadata.location)}


def _uploads(store: ObjectStore, bucket: str, prefix: str) -> list[str]:
    """The keys of the unfinished uploads, asked of moto with boto3, not through icecore."""
    answer = store.extra["client"].list_multipart_uploads(Bucket=bucket, Prefix=prefix)
    return sorted(u["Key"] for u in answer.get("Uploads", []))


def _is_data_part(request: Request) -> bool:
    return request.method == "PUT" and "partNumber=" in request.query and "/data/" in request.path


@pytest.mark.spark_submit
def test_a_job_killed_mid_upload_leaves_the_s3_table_as_it_was(
    spark: SparkSession,
    s3_store: ObjectStore,
    held_s3_proxy: tuple[ObjectStore, ThrottleProxy],
    tmp_path: Path,
) -> None:
    proxied, throttle = held_s3_proxy
    root = s3_store.new_bucket()
    bucket = root.removeprefix("s3://")
    uri = f"sqlite:///{tmp_path}/catalog.db"
    catalog = SqlCatalog("default", uri=uri, warehouse=f"{root}/wh", properties=s3_store.properties)
    try:
        batches = [_batch(0), _batch(ROWS_PER_APPEND)]
        for rows in batches:
            options = IngestOptions(
                table=TABLE,
                mode="append",
                create=True,
                properties={"write.parquet.compression-codec": "uncompressed"},
            )
            frame = spark.createDataFrame(rows, SOURCE).drop("op")
            assert ingest(spark, catalog, options, source=frame).status == "committed"
        expected = _expected(batches)
        before = catalog.load_table(TABLE)
        assert pyiceberg_rows(before, s3_store.properties) == expected
        objects = _objects(before)
        location = before.metadata.location
        table_prefix = location.removeprefix(f"{root}/") + "/"

        # The compaction in its own spark-submit, through the proxy; killed mid-upload.
        throttle.hold(_is_data_part)
        args = ["--catalog-uri", uri, "--warehouse", f"{root}/wh", "--table", TABLE]
        command, env = submit_command("rewrite_data_files", tmp_path, [*args, "--rewrite-all"])
        env[CATALOG_PROPERTIES_ENV] = json.dumps(proxied.properties)
        job = subprocess.Popen(
            command,
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        deadline = time.monotonic() + 300
        while not throttle.held.wait(timeout=0.2):
            if job.poll() is not None:
                _, err = job.communicate()
                pytest.fail(f"the job ended before it uploaded a part: {err.decode()[-3000:]}")
            assert time.monotonic() < deadline, "the job uploaded no part in 300 s"
        os.killpg(job.pid, signal.SIGKILL)
        job.communicate(timeout=60)
        assert job.returncode == -signal.SIGKILL
        throttle.release()  # the held part is dropped: moto never sees it

        # The table is exactly as it was: same metadata, same rows, same objects.
        after = catalog.load_table(TABLE)
        assert after.metadata_location == before.metadata_location
        assert after.metadata.snapshots == before.metadata.snapshots
        assert pyiceberg_rows(after, s3_store.properties) == expected
        assert _icecore_rows(after) == expected
        assert _objects(after) == objects  # nothing added, nothing lost or truncated
        # Every file the metadata references is there whole (a SQL catalog writes no
        # version-hint.text, which orphan removal protects all the same).
        referenced = referenced_files(after.io, after.metadata, TABLE)
        hint = f"{location}/metadata/version-hint.text"
        assert {loc for loc, _ in objects} >= referenced - {hint}
        for task in after.scan().plan_files():
            assert (task.file.file_path, task.file.file_size_in_bytes) in objects

        # What the kill left: one unfinished upload of a data file under the table, which
        # neither the listing above nor a reader sees.
        [key] = _uploads(s3_store, bucket, table_prefix)
        assert key.startswith(f"{table_prefix}data/rewrite-data-files-")
        assert key.endswith(".parquet")
        # A sibling table's upload (`big_2` shares the raw key prefix `big`) is not ours.
        sibling = f"{table_prefix.rstrip('/')}_2/data/in-progress.parquet"
        s3_store.extra["client"].create_multipart_upload(Bucket=bucket, Key=sibling)

        def remove_orphans(dry_run: bool) -> dict[str, object]:
            options = RemoveOrphanFilesOptions(
                table=TABLE, older_than="2100-01-01T00:00:00", force=True, dry_run=dry_run
            )
            return remove_orphan_files(spark, catalog, options)

        dry = remove_orphans(dry_run=True)
        assert dry.abandoned_upload_location == [f"{root}/{key}"]
        assert (dry.abandoned_uploads_count, dry.aborted_uploads_count) == (1, 0)
        assert _uploads(s3_store, bucket, table_prefix) == [key]
        assert SENTENCES["remove_orphan_files"](dry).endswith("; found 1 unfinished upload")
        removed = remove_orphans(dry_run=False)
        assert (removed.aborted_uploads_count, removed.failed_aborts) == (1, {})
        sentence = SENTENCES["remove_orphan_files"](removed)  # what the Airflow UI shows
        assert sentence.endswith("; aborted 1 of 1 unfinished upload")
        assert removed.orphan_files_count == 0
        assert _uploads(s3_store, bucket, table_prefix) == []
        assert _uploads(s3_store, bucket, sibling) == [sibling]
        assert _objects(catalog.load_table(TABLE)) == objects

        # The next run does the work, into one file of more than a part.
        rewrite_data_files(spark, catalog, RewriteDataFilesOptions(table=TABLE, rewrite_all=True))
        finished = catalog.load_table(TABLE)
        assert finished.metadata.current_snapshot_id != before.metadata.current_snapshot_id
        assert pyiceberg_rows(finished, s3_store.properties) == expected
        [task] = list(finished.scan().plan_files())
        assert task.file.file_size_in_bytes > PART
        assert _uploads(s3_store, bucket, table_prefix) == []
    finally:
        catalog.close()
