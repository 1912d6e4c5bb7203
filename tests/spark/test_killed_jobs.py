"""A maintenance job killed mid-write leaves the table exactly as it was.

Each job writes its new files first and commits last (one metadata pointer swap), so a
spark-submit killed with SIGKILL while its executors are writing must leave the same metadata
and the same rows behind; only unreferenced files may remain, and the next run succeeds. The
same holds for a Spark Connect client (`python -m spark_jobs` with SPARK_REMOTE) killed while
the server's tasks write: the client is the one that commits.

The test holds SQLite's write lock on the catalog while the first run goes: the job reads the
table (WAL lets readers on) and writes its files, but its commit waits on the lock, so the
kill always lands between "files written" and "committed", however fast or loaded the
machine is.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import duckdb
import pytest
from pyspark.sql import SparkSession

from icecore.catalog import SqlCatalog
from icecore.catalog.sql import SQLITE_FILE
from tests.spark.delete_tables import TABLE, build, rows
from tests.spark.submit import submit_command
from tests.support.duckdb import duck_connection  # noqa: F401 - provides the `duck` fixture
from tests.support.spark_connect import SparkConnectServer

JOBS = {
    # job -> options that make it rewrite every file of the small test table
    "rewrite_data_files": ["--rewrite-all"],
    "convert_equality_deletes": [],
    "rewrite_position_deletes": ["--rewrite-all"],
}


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file() and p.suffix in {".parquet", ".avro"}}


@pytest.mark.parametrize(
    ("job", "way"),
    [*((job, "spark-submit") for job in sorted(JOBS)), ("rewrite_data_files", "connect")],
)
def test_a_job_killed_while_writing_leaves_the_table_as_it_was(
    spark: SparkSession,
    catalog: SqlCatalog,
    warehouse: Path,
    duck: duckdb.DuckDBPyConnection,
    request: pytest.FixtureRequest,
    *,
    job: str,
    way: str,
) -> None:
    workdir = warehouse.parent
    build(spark, catalog, 4, "bucket(2, id)", seed=31)
    before = catalog.load_table(TABLE)
    expected = rows(before, duck)
    location = Path(before.metadata.location)
    existing = _files(location)

    args = ["--warehouse", str(warehouse), "--table", TABLE, *JOBS[job]]
    if way == "connect":
        server: SparkConnectServer = request.getfixturevalue("spark_connect")
        command, env = server.job_command(job, args)
    else:
        command, env = submit_command(job, workdir, args)
    lock = sqlite3.connect(warehouse / SQLITE_FILE, isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")  # no commit can land until the kill
    process = subprocess.Popen(
        command,
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + 240
    while not _files(location) - existing:  # the job's executors have started writing
        if process.poll() is not None:
            _, err = process.communicate()
            pytest.fail(f"{job} ended before it wrote a file: {err.decode()[-3000:]}")
        assert time.monotonic() < deadline, f"{job} wrote nothing in 240 s"
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGKILL)
    _, err = process.communicate(timeout=60)
    lock.rollback()
    lock.close()
    assert process.returncode == -signal.SIGKILL, err.decode()[-3000:]

    after = catalog.load_table(TABLE)
    assert after.metadata_location == before.metadata_location
    assert after.metadata.snapshots == before.metadata.snapshots
    assert rows(after, duck) == expected
    assert _files(location) > existing  # its files stay behind, unreferenced (orphans)

    # The next run does the work, and the rows are still the same.
    done = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    finished = catalog.load_table(TABLE)
    assert finished.metadata.current_snapshot_id != before.metadata.current_snapshot_id
    assert rows(finished, duck) == expected
