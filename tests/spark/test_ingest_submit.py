"""The job as Airflow runs it: `spark-submit spark_jobs/ingest.py ...` in its own process.

icecore and spark_jobs travel in a zip built on the fly and given to `--py-files` (the
documented way to ship them); the last stdout line must be the JSON counters. A run killed
while it writes must leave the table exactly as it was, and running the batch again then
commits it once. These tests pay for real Spark processes, so there are only two; the
command-line contract itself (exit codes, one-line causes) is checked in process.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from pyiceberg.table import StaticTable
from pyspark.sql import SparkSession

from icecore.catalog import SqlCatalog
from icecore.jobs.jobs import IngestOptions
from spark_jobs.common.cli import main
from spark_jobs.ingest import run as ingest
from tests.spark.submit import submit_command

CSV = (
    "id,name,ts\n"
    "1,alpha,2024-01-07T10:00:00Z\n"
    "2,beta,2024-01-08T11:00:00Z\n"
    "3,,2024-01-08T12:00:00Z\n"
)


def _submit(tmp_path: Path, args: Sequence[str]) -> subprocess.Popen[str]:
    command, env = submit_command("ingest", tmp_path, args)
    return subprocess.Popen(
        command,
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # so that a kill takes the JVM with it
    )


@pytest.mark.spark_submit
def test_spark_submit_creates_and_appends(tmp_path: Path, warehouse: Path) -> None:
    source = tmp_path / "batch.csv"
    source.write_text(CSV)
    process = _submit(
        tmp_path,
        [
            "--warehouse", str(warehouse),
            "--table", "db.events",
            "--source", str(source),
            "--create",
            "--partition-by", "day(ts), bucket(4, id)",
            "--property", "write.parquet.compression-codec=snappy",
            "--batch-id", "2024-01-08",
        ],
    )  # fmt: skip
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr[-3000:]
    result = json.loads(stdout.strip().splitlines()[-1])
    assert result["status"] == "committed"
    assert (result["table_created"], result["rows"], result["data_files"]) == (True, 3, 3)
    catalog = SqlCatalog("default", warehouse=warehouse)
    table = catalog.load_table("db.events")
    assert table.metadata.properties["write.parquet.compression-codec"] == "snappy"
    assert all(".snappy.parquet" in t.file.file_path for t in table.scan().plan_files())
    arrow = StaticTable.from_metadata(table.metadata_location).scan().to_arrow()
    assert sorted(zip(arrow["id"].to_pylist(), arrow["name"].to_pylist(), strict=True)) == [
        (1, "alpha"),
        (2, "beta"),
        (3, None),
    ]
    catalog.close()


@pytest.mark.spark_submit
def test_a_killed_run_leaves_the_table_as_it_was(
    spark: SparkSession, tmp_path: Path, warehouse: Path, catalog: SqlCatalog
) -> None:
    source = tmp_path / "batch.parquet"
    spark.range(20_000).selectExpr("id", "id % 7 AS k", "uuid() AS payload").write.parquet(
        str(source)
    )
    options = IngestOptions(table="db.k", source=str(source), create=True, batch_id="b")
    ingest(spark, catalog, IngestOptions(table="db.k", source=str(source), create=True))
    before = catalog.load_table("db.k")
    data = Path(before.metadata.location) / "data"
    runs_before = set(data.iterdir())

    process = _submit(
        tmp_path,
        ["--warehouse", str(warehouse), "--table", "db.k", "--source", str(source),
         "--batch-id", "b"],
    )  # fmt: skip
    deadline = time.monotonic() + 240
    while not set(data.iterdir()) - runs_before:  # the run has started writing files
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGKILL)
    process.communicate(timeout=60)

    after = catalog.load_table("db.k")
    assert after.metadata_location == before.metadata_location
    assert after.metadata.snapshots == before.metadata.snapshots
    # The retry commits the batch once.
    assert ingest(spark, catalog, options).status == "committed"
    assert ingest(spark, catalog, options).status == "already-committed"
    total = sum(t.file.record_count for t in catalog.load_table("db.k").scan().plan_files())
    assert total == 2 * 20_000


def test_command_line_contract(spark: SparkSession, warehouse: Path, tmp_path: Path) -> None:
    """Failures: exit 1 and a one-line cause last on stderr; usage errors exit 2."""
    out, err = io.StringIO(), io.StringIO()
    argv = ["--warehouse", str(warehouse), "--table", "db.none", "--source", str(tmp_path)]
    assert main(["ingest", *argv], stdout=out, stderr=err) == 1
    assert out.getvalue() == ""
    # No catalog yet, and only --create makes one: a mistyped warehouse stays uncreated.
    assert err.getvalue().splitlines()[-1] == (
        f"CatalogError: warehouse directory {warehouse} does not exist"
    )
    assert not warehouse.exists()
    # A CSV value that does not parse: one line naming the file, the column and the value.
    good, bad = tmp_path / "good.csv", tmp_path / "bad.csv"
    good.write_text("id,amount\n1,2.5\n")
    bad.write_text("id,amount\n2,3.0\n3,twelve\n")
    shared = ["--warehouse", str(warehouse), "--table", "db.amounts"]
    assert main(["ingest", *shared, "--source", str(good), "--create"], stdout=out) == 0
    err = io.StringIO()
    assert main(["ingest", *argv], stdout=out, stderr=err) == 1
    assert err.getvalue().splitlines()[-1] == (
        "JobError: table db.none does not exist (--create creates it)"
    )
    err = io.StringIO()
    assert main(["ingest", *shared, "--source", str(bad)], stdout=out, stderr=err) == 1
    assert err.getvalue().splitlines()[-1] == (
        f"JobError: cannot read file:{bad}: column amount: 'twelve' is not a double"
    )
    assert "Traceback" not in err.getvalue()
    err = io.StringIO()
    assert main(["--table", "db.t"], stdout=out, stderr=err) == 2  # no job named
    assert err.getvalue().startswith("unknown job '--table'; the jobs are: ingest,")
    err = io.StringIO()
    assert main(["ingest", "--table", "db.t"], stdout=out, stderr=err) == 2
    assert err.getvalue().splitlines()[-1] == "OptionError: --source: required"
