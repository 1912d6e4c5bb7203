"""The expire_snapshots job on a table the ingestion job built: appends, CDC batches (position
and equality deletes) and an overwrite, so that expiry leaves data, delete, manifest and
manifest-list files unreachable.

Checked after each run: every retained snapshot reads exactly as before (icecore's planner
with the reference reader, and DuckDB, which applies equality deletes); the files that left
the disk are exactly the ones reported, each unreachable from every retained snapshot, and
nothing a retained snapshot reaches is gone; a dry run changes nothing; the floor refuses.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pytest
from pyspark.sql import SparkSession

from icecore.catalog import SqlCatalog
from icecore.errors import ValidationError
from icecore.jobs.errors import JobError
from icecore.jobs.jobs import ExpireSnapshotsOptions, IngestOptions, RemoveOrphanFilesOptions
from icecore.scan import snapshot_manifests
from icecore.spec.manifest import read_manifest
from icecore.spec.schema import Schema
from icecore.spec.types import LongType, NestedField
from icecore.table import Table
from icecore.trash import Trash
from spark_jobs.common.cli import main
from spark_jobs.expire_snapshots import run as expire
from spark_jobs.ingest import run as ingest
from spark_jobs.remove_orphan_files import run as remove_orphans
from tests.spark.templates import Built, built_warehouse  # noqa: F401 - `warehouse`
from tests.support.catalogs import append_rows
from tests.support.duckdb import duck_connection  # noqa: F401 - provides the `duck` fixture
from tests.support.reader import scan_rows
from tests.support.spark_connect import JobRun

SOURCE_SCHEMA = "id long, v string, op string"
NAME = "db.events"
SCHEMA = Schema((NestedField(1, "id", LongType(), required=True),))
ROOT = Path(__file__).resolve().parents[2]


def _batch(spark: SparkSession, catalog: SqlCatalog, mode: str, rows: list[tuple[Any, ...]]) -> int:
    frame = spark.createDataFrame(rows, SOURCE_SCHEMA)
    if mode != "cdc":
        frame = frame.drop("op")
    options = IngestOptions(
        table=NAME,
        mode=mode,
        key=["id"] if mode == "cdc" else [],
        create=True,
        partition_by="bucket(2, v)",  # not the key: global deletes, a second spec
    )
    result = ingest(spark, catalog, options, source=frame)
    assert result.status == "committed"
    return int(result.snapshot_id)


def build_history(spark: SparkSession, catalog: SqlCatalog) -> list[int]:
    """Five snapshots: append, cdc, overwrite, cdc, append."""
    catalog.create_namespace("db")
    return [
        _batch(spark, catalog, "append", [(i, f"a{i}", "I") for i in range(12)]),
        _batch(
            spark, catalog, "cdc", [(1, "u1", "U"), (1, "u1x", "U"), (2, "", "D"), (5, "x", "D")]
        ),
        _batch(spark, catalog, "overwrite", [(i, f"o{i}", "I") for i in range(0, 12, 2)]),
        _batch(spark, catalog, "cdc", [(4, "u4", "U"), (3, "", "D"), (1, "u1b", "U")]),
        _batch(spark, catalog, "append", [(30, "a30", "I")]),
    ]


def appended_history(catalog: SqlCatalog, count: int) -> list[int]:
    """`count` appends committed without Spark, for the tests about options and the CLI."""
    catalog.create_namespace("db")
    table = catalog.create_table(NAME, SCHEMA)
    for i in range(count):
        append_rows(table, [{"id": i}])
    return [s.snapshot_id for s in table.metadata.snapshots]


def orphans(spark: SparkSession, catalog: SqlCatalog) -> list[str]:
    options = RemoveOrphanFilesOptions(table=NAME, older_than="0s", dry_run=True)
    return remove_orphans(spark, catalog, options).orphan_file_location


def rows_at(table: Table, snapshot_id: int, duck: duckdb.DuckDBPyConnection) -> Counter:
    ours = Counter(
        (r["id"], r["v"]) for r in scan_rows(table.io, table.metadata, snapshot_id=snapshot_id)
    )
    scan = f"iceberg_scan('{table.metadata_location}', snapshot_from_id => {snapshot_id})"
    theirs = Counter(duck.execute(f"SELECT id, v FROM {scan}").fetchall())
    assert ours == theirs, f"icecore and DuckDB disagree at snapshot {snapshot_id}"
    return ours


def files_on_disk(table: Table) -> set[str]:
    """The table's files: not hidden ones, nor anything in its (hidden) trash."""
    root = Path(table.metadata.location)
    return {
        str(p)
        for p in root.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    }


def reached_by(table: Table, snapshot_ids: list[int]) -> set[str]:
    """Manifest lists, manifests and live content files of these snapshots."""
    reached = set()
    for snapshot_id in snapshot_ids:
        snapshot = table.metadata.snapshot_by_id(snapshot_id)
        reached.add(snapshot.manifest_list)
        for manifest in snapshot_manifests(table.io, snapshot):
            reached.add(manifest.manifest_path)
            spec = table.metadata.spec_by_id(manifest.partition_spec_id)
            for entry in read_manifest(table.io, manifest, spec=spec, live_only=True):
                reached.add(entry.data_file.file_path)
    return reached


@pytest.mark.parametrize(
    "warehouse", [Built("expire-snapshots-history", build_history)], ids=["built"], indirect=True
)
def test_expiry_keeps_retained_snapshots_readable_and_deletes_only_unreachable_files(
    spark: SparkSession,
    catalog: SqlCatalog,
    duck: duckdb.DuckDBPyConnection,
    job_runner: JobRun,
) -> None:
    """Run on the local session and over Spark Connect (`job_runner`), each on a copy of one
    `build_history` (tests/spark/templates.py)."""
    table = catalog.load_table(NAME)
    history = [s.snapshot_id for s in table.metadata.snapshots]
    assert len(history) == 5
    assert len(table.metadata.partition_specs) == 2  # data by bucket(v), deletes unpartitioned
    before_rows = {s: rows_at(table, s, duck) for s in history}
    before_files = files_on_disk(table)
    before_bytes = {p: Path(p).read_bytes() for p in before_files}
    # The ingestion job's files are all referenced: an orphan scan finds none.
    assert orphans(spark, catalog) == []

    dry = expire(
        spark,
        catalog,
        ExpireSnapshotsOptions(
            table=NAME, older_than="0s", retain_last=2, min_age="0s", dry_run=True
        ),
    )
    assert dry.dry_run and not dry.committed
    assert dry.expired_snapshot_ids == sorted(history[:3])
    assert files_on_disk(table) == before_files
    assert catalog.load_table(NAME).metadata_location == table.metadata_location
    assert all(
        v == 0
        for k, v in dry.to_dict().items()
        if k.startswith("deleted_") and k.endswith("_count")
    )

    result = job_runner(
        "expire_snapshots",
        ExpireSnapshotsOptions(
            table=NAME,
            older_than="0s",
            retain_last=2,
            min_age="0s",
            executor_delete_threshold=1,  # exercise the deletion on the executors
        ),
    )
    assert result.committed and result.deleted_on_executors
    assert result.expired_snapshot_ids == sorted(history[:3])
    assert result.failed_deletes_count == 0
    deletes = result.deleted_position_delete_files_count
    assert deletes + result.deleted_equality_delete_files_count > 0
    for kind in ("data_files", "manifest_files", "manifest_lists"):
        assert getattr(result, f"deleted_{kind}_count") > 0, kind
    for key, value in dry.to_dict().items():
        if key.startswith("unreachable_"):
            assert getattr(result, key.replace("unreachable_", "deleted_")) == value, key

    table = catalog.load_table(NAME)
    retained = history[3:]
    assert [s.snapshot_id for s in table.metadata.snapshots] == retained
    for snapshot_id in retained:
        assert rows_at(table, snapshot_id, duck) == before_rows[snapshot_id]
    after_files = files_on_disk(table)
    gone = before_files - after_files
    deleted_count = sum(
        v for k, v in result.to_dict().items() if k.startswith("deleted_") and k.endswith("_count")
    )
    assert len(gone) == deleted_count
    assert not gone & reached_by(table, retained), "a reachable file was deleted"
    # Each went into the table's trash, whole, named in this run's record.
    trashed = {f.path: f for f in Trash.of(table).contents()}
    assert set(trashed) == gone and {f.run for f in trashed.values()} == {result.trash_run}
    assert all(Path(f.trash).read_bytes() == before_bytes[p] for p, f in trashed.items())
    assert result.trashed_files_count == len(gone) == result.trash_files_count
    # Nothing is left behind: every file but the metadata JSON is reached by a retained
    # snapshot (the job deleted everything the expired ones alone reached).
    leftover = {p for p in after_files if not p.endswith(".metadata.json")}
    assert leftover <= reached_by(table, retained)
    assert orphans(spark, catalog) == []


def test_the_floor_refuses_young_snapshots_and_the_current_one(
    spark: SparkSession, catalog: SqlCatalog
) -> None:
    history = appended_history(catalog, 3)
    location = catalog.load_table(NAME).metadata_location
    with pytest.raises(JobError, match="--min-age floor"):
        expire(spark, catalog, ExpireSnapshotsOptions(table=NAME, older_than="0s"))
    with pytest.raises(JobError, match=rf"refusing to expire snapshot\(s\) \[{history[0]}\]"):
        expire(spark, catalog, ExpireSnapshotsOptions(table=NAME, snapshot_ids=[history[0]]))
    current = catalog.load_table(NAME).metadata.current_snapshot()
    assert current is not None
    with pytest.raises(ValidationError, match="still referenced by \\['main'\\]"):
        expire(
            spark,
            catalog,
            ExpireSnapshotsOptions(table=NAME, snapshot_ids=[current.snapshot_id], force=True),
        )
    assert catalog.load_table(NAME).metadata_location == location  # nothing committed
    table = catalog.load_table(NAME)
    table.update_properties().set("write.metadata.delete-after-commit.enabled", "true").set(
        "write.metadata.previous-versions-max", "1"
    ).commit()
    metadata_files = {m.metadata_file for m in table.refresh().metadata.metadata_log}
    forced = expire(
        spark, catalog, ExpireSnapshotsOptions(table=NAME, snapshot_ids=[history[0]], force=True)
    )
    assert forced.expired_snapshot_ids == [history[0]]
    assert forced.deleted_manifest_lists_count == 1
    # The commit's catalog dropped the metadata files past previous-versions-max.
    assert forced.deleted_metadata_files_count == len(metadata_files)
    assert not any(Path(p).exists() for p in metadata_files)


@pytest.mark.spark_submit
def test_spark_submit_prints_the_counters(
    spark: SparkSession, catalog: SqlCatalog, warehouse: Path, tmp_path: Path
) -> None:
    history = appended_history(catalog, 2)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    submit = [
        str(Path(sys.executable).parent / "spark-submit"),
        "--master",
        "local[1]",
        "--conf",
        "spark.ui.enabled=false",
        str(ROOT / "spark_jobs" / "main.py"),
        "expire_snapshots",
        "--warehouse",
        str(warehouse),
    ]

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*submit, *argv],
            check=False,
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            cwd=tmp_path,
        )

    done = run("--table", NAME, "--older-than", "2000-01-01T00:00:00Z",
               "--snapshot-ids", str(history[0]), "--force")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["expired_snapshot_ids"] == [history[0]]
    assert result["deleted_manifest_lists_count"] == 1
    assert [s.snapshot_id for s in catalog.load_table(NAME).metadata.snapshots] == history[1:]
    # Spark's own logging: its start-up lines only (spark-submit starts the JVM before the
    # job can turn it down; the Airflow operator configures it from the start). The job's own
    # lines come through Python's stderr, which spark-submit merges into its stdout.
    assert len([line for line in done.stderr.splitlines() if " INFO " in line]) < 50
    assert "icefloe.expire_snapshots: plan: expire 1 of 2 snapshots" in done.stdout

    # A failure inside the job: the cause is the last line on stderr, after Spark stopped
    # (no shutdown log after it), and nothing on stdout but what Spark printed before.
    failed = run("--table", "db.missing")
    assert failed.returncode == 1
    cause = failed.stderr.strip().splitlines()[-1]
    assert cause.startswith("NoSuchTableError: table db.missing does not exist"), cause
    assert "NoSuchTableError" not in failed.stdout

    # A bad value: refused before a session exists, exit 2, one line naming the flag.
    started = time.monotonic()
    refused = subprocess.run(
        [sys.executable, str(ROOT / "spark_jobs" / "main.py"), "expire_snapshots",
         "--warehouse", str(warehouse), "--table", NAME, "--older-than", "yesterday-ish"],
        check=False, capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "OptionError: --older-than: expected an age such as 3d or 12h, or an ISO timestamp such "
        "as 2024-01-07T00:00:00Z, got 'yesterday-ish'"
    ]
    assert time.monotonic() - started < 5  # no JVM: a Python start-up and a parse

    # The CLI contract, in process.
    out, err = io.StringIO(), io.StringIO()
    argv = ["--warehouse", str(warehouse), "--table", NAME, "--retain-last", "0"]
    assert main(["expire_snapshots", *argv], stdout=out, stderr=err) == 2
    assert out.getvalue() == ""
    assert err.getvalue().splitlines()[-1] == (
        "OptionError: --retain-last: expected a whole number of at least 1, got 0"
    )
