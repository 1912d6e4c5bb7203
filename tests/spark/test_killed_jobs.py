"""A maintenance job killed mid-write leaves the table exactly as it was.

Each job writes its new files first and commits last (one metadata pointer swap), so a
spark-submit killed with SIGKILL while its executors are writing must leave the same metadata
and the same rows behind; only unreferenced files may remain, and the next run succeeds. The
same holds for a Spark Connect client (`python -m spark_jobs` with SPARK_REMOTE) killed while
the server's tasks write: the client is the one that commits. Every job is killed as a
client (seconds each); one as a spark-submit. The next run is about the table the kill left
(its metadata, its orphan files), not about how a job is launched, so it runs on the tests'
shared local session in this process (`spark_jobs.<job>.run`) whatever was killed.

The commit is held back while the first run goes (tests/support/killing.py), so the kill
always lands between "files written" and "committed".
"""

from __future__ import annotations

import importlib
import subprocess
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest
from pyspark.sql import SparkSession

from icecore.catalog import SqlCatalog
from icecore.jobs.jobs import JOBS as SPECS
from tests.spark.delete_tables import TABLE, build, rows
from tests.spark.submit import submit_command
from tests.spark.templates import Built, built_warehouse  # noqa: F401 - `warehouse`
from tests.support.duckdb import duck_connection  # noqa: F401 - provides the `duck` fixture
from tests.support.killing import commits_held, kill_once_written
from tests.support.spark_connect import SparkConnectServer

JOBS: dict[str, dict[str, Any]] = {
    # job -> options that make it rewrite every file of the small test table
    "rewrite_data_files": {"rewrite_all": True},
    "convert_equality_deletes": {},
    "rewrite_position_deletes": {"rewrite_all": True},
}


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file() and p.suffix in {".parquet", ".avro"}}


def _settled(root: Path, quiet: float = 1.0, timeout: float = 120) -> set[Path]:
    """The table's files once none has appeared for `quiet` seconds: a killed Connect
    client's tasks may still be finishing on the server, and must be done before the table's
    warehouse is copied over for the next test."""
    deadline = time.monotonic() + timeout
    seen, since = _files(root), time.monotonic()
    while time.monotonic() - since < quiet:
        assert time.monotonic() < deadline, "the table's files kept changing"
        time.sleep(0.2)
        now = _files(root)
        if now != seen:
            seen, since = now, time.monotonic()
    return seen


def _table(spark: SparkSession, catalog: SqlCatalog) -> None:
    build(spark, catalog, 4, "bucket(2, id)", seed=31)


@pytest.mark.parametrize(
    ("job", "way"),
    [
        # One killed spark-submit (the driver JVM dies with its executors' writes in flight);
        # every job as a killed Connect client, whose process is the one that commits.
        pytest.param("rewrite_data_files", "spark-submit", marks=pytest.mark.spark_submit),
        *(pytest.param(job, "connect", marks=pytest.mark.servers) for job in sorted(JOBS)),
    ],
)
# Every case kills a job on a copy of one build (tests/spark/templates.py).
@pytest.mark.parametrize("warehouse", [Built("killed-jobs", _table)], ids=["built"], indirect=True)
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
    workdir: Path = request.getfixturevalue("tmp_path")
    before = catalog.load_table(TABLE)
    expected = rows(before, duck)
    location = Path(before.metadata.location)
    existing = _files(location)

    options = SPECS[job].options(table=TABLE, **JOBS[job])
    args = ["--warehouse", str(warehouse), *options.to_argv()]
    if way == "connect":
        server: SparkConnectServer = request.getfixturevalue("spark_connect")
        command, env = server.job_command(job, args)
    else:
        command, env = submit_command(job, workdir, args)
    with commits_held(warehouse):
        process = subprocess.Popen(
            command, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True,
        )  # fmt: skip
        # Killed once its executors (or the server's tasks) have started writing.
        kill_once_written(process, lambda: bool(_files(location) - existing), "a file")

    after = catalog.load_table(TABLE)
    assert after.metadata_location == before.metadata_location
    assert after.metadata.snapshots == before.metadata.snapshots
    assert rows(after, duck) == expected
    assert _settled(location) > existing  # its files stay behind, unreferenced (orphans)

    # The next run does the work, and the rows are still the same (in this process: see the
    # module's docstring).
    importlib.import_module(f"spark_jobs.{job}").run(spark, catalog, options)
    finished = catalog.load_table(TABLE)
    assert finished.metadata.current_snapshot_id != before.metadata.current_snapshot_id
    assert rows(finished, duck) == expected
