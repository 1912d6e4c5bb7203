"""Jobs as clients of a Spark Connect server (tests/support/spark_connect.py: a stock server
from the pinned pyspark whose Python workers cannot import the project).

The job tests parametrized over both sessions (`job_runner`) live with the jobs, the killed
client with the killed spark-submits (test_killed_jobs.py); here: the shipping of the
packages, the command line's contract over Connect, ingestion from files in its modes and
from an object store Spark cannot read, and `make spark-connect` as the README uses it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from icecore.catalog import SqlCatalog
from icecore.io import FileIO
from icecore.jobs.jobs import IngestOptions
from icecore.spec.manifest import FileContent
from icecore.table import Table
from spark_jobs.ingest import run as ingest
from tests.spark.delete_tables import TABLE, build, live, rows
from tests.spark.templates import Built, built_warehouse  # noqa: F401 - `warehouse`
from tests.support.duckdb import duck_connection  # noqa: F401 - provides the `duck` fixture
from tests.support.objectstores import S3_SECRET_KEY, ObjectStore, free_port
from tests.support.reader import scan_rows
from tests.support.spark_connect import (
    ROOT,
    SparkConnectServer,
    clean_environment,
    result_of,
)

_SHIPPING = """\
import sys
from pyspark.sql import SparkSession
from spark_jobs.common.connect import ship_packages

def tasks_import(batches):
    import icecore.spec.manifest  # what every job's tasks import
    for batch in batches:
        yield batch

spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
def run():
    return spark.range(0, 2, 1, 2).mapInArrow(tasks_import, "id long").count()
try:
    run()
except Exception as exc:
    print("before:", str(exc).splitlines()[-1] if str(exc).strip() else type(exc).__name__)
else:
    print("before: imported")
ship_packages(spark)
ship_packages(spark)  # once per session: the second call uploads nothing
print("after:", run())
spark.stop()
"""


def test_tasks_import_the_project_only_because_the_job_shipped_it(
    spark_connect: SparkConnectServer, tmp_path: Path
) -> None:
    """The same task on the same server fails to import icecore in a session that has not
    shipped the packages, and runs once `ship_packages` added them (as a job does)."""
    script = tmp_path / "shipping.py"
    script.write_text(_SHIPPING)
    done = subprocess.run(
        [sys.executable, str(script), spark_connect.url],
        cwd=tmp_path, env=clean_environment(), capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    lines = done.stdout.strip().splitlines()
    assert "No module named 'icecore'" in lines[0], lines
    assert lines[-1] == "after: 2"


def _two_batches(spark: SparkSession, catalog: SqlCatalog) -> None:
    build(spark, catalog, 2, None, seed=3)


# Two CDC batches of the ingestion job, for a compaction: built once for the two tests that
# compact it over Connect (tests/spark/templates.py).
TWO_BATCHES = Built("connect-jobs-two-batches", _two_batches)


@pytest.mark.parametrize("warehouse", [TWO_BATCHES], ids=["built"], indirect=True)
def test_command_line_contract_over_connect(
    catalog: SqlCatalog, warehouse: Path, spark_connect: SparkConnectServer, tmp_path: Path
) -> None:
    """`--remote` as well as the variable; the result file, the job's log lines on stderr,
    a bad `--remote` refused (exit 2) before anything runs, a failure's one-line cause last,
    and a server nobody listens on named at once."""
    before = rows(catalog.load_table(TABLE), None)
    workdir = tmp_path
    result_file = workdir / "result.json"
    command, env = spark_connect.job_command(
        "rewrite_data_files",
        ["--warehouse", str(warehouse), "--table", TABLE, "--rewrite-all",
         "--remote", spark_connect.url],
        {"ICEFLOE_RESULT_FILE": str(result_file)},
    )  # fmt: skip
    del env["SPARK_REMOTE"]  # the flag alone
    done = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    result = result_of(done)
    assert json.loads(result_file.read_text()) == {"result": result}
    assert result["added_data_files"] == 1 and result["failed_groups"] == []
    assert "icefloe.rewrite_data_files: plan: " in done.stderr
    assert rows(catalog.load_table(TABLE), None) == before

    def run(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return spark_connect.run_job(
            "rewrite_data_files", ["--warehouse", str(warehouse), *args], cwd=workdir, env=extra
        )

    bad = run("--table", TABLE, "--remote", "localhost:15002")
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1] == (
        "--remote: 'localhost:15002' is not a Spark Connect URL (sc://host:port)"
    )
    secret = run("--table", TABLE, "--remote", "sc://h:1/;token=abc")
    assert secret.returncode == 2 and "set $SPARK_REMOTE instead" in secret.stderr
    missing = run("--table", "db.nothing")
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines()[-1].startswith("NoSuchTableError: ")
    nobody = run("--table", TABLE, "--rewrite-all", SPARK_REMOTE="sc://127.0.0.1:9")
    assert nobody.returncode == 1
    assert (
        nobody.stderr.strip()
        .splitlines()[-1]
        .startswith("JobError: no Spark Connect server answers at sc://127.0.0.1:9: ")
    )


def _shape(table: Table) -> list[tuple[Any, ...]]:
    """What two runs of the same jobs must agree on, file names aside: each live file's
    content, spec, partition, record count and sequence numbers."""
    return sorted(
        (c.value, e.data_file.spec_id, repr(e.data_file.partition), e.data_file.record_count,
         e.sequence_number, e.file_sequence_number)
        for c, entries in live(table).items()
        for e in entries
    )  # fmt: skip


def _sources(directory: Path) -> list[IngestOptions]:
    """A partitioned, sorted table created from Parquet, upserted from CSV, then a CDC batch
    (updates, a delete, an insert) from Parquet: every mode that writes deletes."""
    directory.mkdir()
    day = dt.datetime(2024, 1, 1)
    first = pa.table(
        {
            "id": pa.array(range(1, 9), pa.int64()),
            "v": [f"a{i}" for i in range(1, 9)],
            "ts": pa.array([day + dt.timedelta(hours=i) for i in range(8)], pa.timestamp("us")),
        }
    )
    pq.write_table(first, directory / "first.parquet")
    (directory / "upsert.csv").write_text(
        "id,v,ts\n2,b2,2024-01-02 00:00:00\n3,b3,2024-01-02 01:00:00\n9,b9,2024-01-02 02:00:00\n"
    )
    changes = first.slice(3, 2).append_column("op", pa.array(["U", "D"]))
    changes = changes.set_column(1, "v", pa.array(["c4", "c5"]))
    extra = pa.table({"id": [10], "v": ["c10"], "ts": pa.array([day], pa.timestamp("us")),
                      "op": ["I"]}).cast(changes.schema)  # fmt: skip
    pq.write_table(pa.concat_tables([changes, extra]), directory / "cdc.parquet")
    return [
        IngestOptions(table="db.t", source=str(directory / "first.parquet"), create=True,
                      partition_by="bucket(2, id)", sort_by="v"),
        IngestOptions(table="db.t", source=str(directory / "upsert.csv"), mode="upsert",
                      key=["id"], source_options={"header": "true"}),
        IngestOptions(table="db.t", source=str(directory / "cdc.parquet"), mode="cdc",
                      key=["id"]),
    ]  # fmt: skip


def test_ingest_modes_give_the_tables_the_local_session_gives(
    spark: SparkSession,
    catalog: SqlCatalog,
    warehouse: Path,
    spark_connect: SparkConnectServer,
    duck: duckdb.DuckDBPyConnection,
) -> None:
    """The same batches into two tables, one by the local session in this process, the
    other by `python -m spark_jobs ingest` over Spark Connect: same rows for every reader,
    same files, partitions and sequence numbers after each batch."""
    for step, options in enumerate(_sources(warehouse.parent / "sources")):
        ingest(spark, catalog, replace(options, table="db.local"))
        args = ["--warehouse", str(warehouse), *replace(options, table="db.remote").to_argv()]
        result = result_of(spark_connect.run_job("ingest", args, cwd=warehouse.parent))
        assert result["status"] == "committed", result
        local, remote = catalog.load_table("db.local"), catalog.load_table("db.remote")
        assert _shape(remote) == _shape(local), f"after step {step}"
        assert rows(remote, duck) == rows(local, duck), f"after step {step}"
    assert live(remote)[FileContent.EQUALITY_DELETES]  # the CDC batch deleted by key
    assert sorted(k for k, *_ in rows(remote, None).elements()) == [1, 2, 3, 4, 6, 7, 8, 9, 10]


def test_json_on_an_object_store_spark_cannot_read(
    spark: SparkSession, s3_store: ObjectStore, spark_connect: SparkConnectServer, tmp_path: Path
) -> None:
    """A JSON batch on S3, which the server's Spark has no FileSystem for, read through FileIO
    in the tasks with Spark's own JSON inference (Connect's `Parse` relation): the same table
    as the local session makes, the catalog's credentials only in the environment."""
    catalog_db = tmp_path / "catalog.db"
    bucket = s3_store.new_bucket()
    catalog = SqlCatalog("default", uri=f"sqlite:///{catalog_db}", warehouse=f"{bucket}/wh",
                         properties=s3_store.properties)  # fmt: skip
    FileIO(s3_store.properties).write_bytes(
        f"{bucket}/in/batch.json",
        b'{"n": 1, "x": 0.5, "d": "2024-03-04", "tags": ["a", "b"], "s": "j"}\n\n'
        b'{"n": 2, "t": "2024-03-04T05:06:07Z", "s": "k", "nested": {"p": 1}}\n',
    )
    options = IngestOptions(table="db.local", source=f"{bucket}/in", source_format="json",
                            create=True)  # fmt: skip
    try:
        ingest(spark, catalog, options)
        args = ["--catalog-uri", f"sqlite:///{catalog_db}", "--warehouse", f"{bucket}/wh",
                *replace(options, table="db.remote").to_argv()]  # fmt: skip
        secrets = {"ICEFLOE_CATALOG_PROPERTIES": json.dumps(s3_store.properties)}
        done = spark_connect.run_job("ingest", args, cwd=tmp_path, env=secrets)
        assert result_of(done)["status"] == "committed"
        assert S3_SECRET_KEY not in " ".join(args)
        local, remote = catalog.load_table("db.local"), catalog.load_table("db.remote")
        assert remote.metadata.schema().fields == local.metadata.schema().fields
        assert _shape(remote) == _shape(local)
        read = [sorted(scan_rows(t.io, t.metadata), key=lambda r: r["n"]) for t in (local, remote)]
        assert read[1] == read[0] and [r["n"] for r in read[1]] == [1, 2]
    finally:
        catalog.close()


@pytest.mark.parametrize("warehouse", [TWO_BATCHES], ids=["built"], indirect=True)
def test_make_spark_connect_serves_a_job_as_the_readme_says(
    catalog: SqlCatalog, warehouse: Path, tmp_path: Path
) -> None:
    """`make spark-connect SPARK_CONNECT_PORT=...` in the foreground, then the README's
    `SPARK_REMOTE=sc://localhost:PORT .venv/bin/python -m spark_jobs ...` from a shell."""
    expected = rows(catalog.load_table(TABLE), None)
    port = free_port()
    log = tmp_path / "make-spark-connect.log"
    with open(log, "wb") as out:
        make = subprocess.Popen(
            ["make", "spark-connect", f"SPARK_CONNECT_PORT={port}"], cwd=ROOT,
            env=clean_environment(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while f"Spark Connect server started at: 127.0.0.1:{port}" not in log.read_text():
            assert make.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        command = (
            f"SPARK_REMOTE=sc://localhost:{port} .venv/bin/python -m spark_jobs "
            f"rewrite_data_files --warehouse {warehouse} --table {TABLE}"
        )
        done = subprocess.run(
            ["sh", "-c", command], cwd=ROOT, env=clean_environment(), capture_output=True,
            text=True, timeout=300, check=False,
        )  # fmt: skip
        assert result_of(done)["added_data_files"] == 1
        assert rows(catalog.load_table(TABLE), None) == expected
    finally:
        os.killpg(make.pid, signal.SIGTERM)
        make.wait(timeout=60)
