"""The remove_orphan_files job on real files under a real table location.

The table is built with icecore commits (no Spark needed for that), then every file's
modification time is pushed three days back, and orphans are planted: an old stray data file,
an old one two directories down (listed on the executors), a young one, and the leftovers of
a failed commit (a data file and the manifest listing it, which no snapshot references).
Old orphans must go, young and referenced files stay, and the table reads the same (icecore's
planner with the reference reader, DuckDB and PyIceberg). Paths referenced under another
scheme are refused unless declared equal.
"""

from __future__ import annotations

import io
import json
import os
import time
import uuid
from collections import Counter
from pathlib import Path

import duckdb
import pytest
from pyiceberg.table import StaticTable
from pyspark.sql import SparkSession

from icecore.catalog import SqlCatalog
from icecore.jobs.errors import JobError
from icecore.jobs.jobs import RemoveOrphanFilesOptions
from icecore.scan import snapshot_manifests
from icecore.spec.manifest import DataFile, FileFormat, ManifestWriter
from icecore.spec.schema import Schema
from icecore.spec.types import LongType, NestedField
from icecore.table import Table
from icecore.trash import TRASH_DIRECTORY, Trash
from spark_jobs.common.cli import main
from spark_jobs.remove_orphan_files import run as remove_orphans
from tests.support.catalogs import append_rows
from tests.support.duckdb import duck_connection  # noqa: F401 - provides the `duck` fixture
from tests.support.parquet import to_arrow, write_parquet
from tests.support.reader import scan_rows
from tests.support.spark_connect import JobRun

SCHEMA = Schema((NestedField(1, "id", LongType(), required=True),))
NAME = "db.t"
DAY_S = 24 * 60 * 60


def age(path: Path | str, days: float) -> None:
    then = time.time() - days * DAY_S
    os.utime(path, (then, then))


def age_everything(root: Path, days: float) -> None:
    for p in root.rglob("*"):
        if p.is_file():
            age(p, days)


def all_files(root: Path) -> set[str]:
    """Every file under `root` but those in the tables' trash."""
    return {
        str(p)
        for p in root.rglob("*")
        if p.is_file() and TRASH_DIRECTORY not in p.relative_to(root).parts
    }


def rows(table: Table, duck: duckdb.DuckDBPyConnection) -> Counter:
    ours = Counter(r["id"] for r in scan_rows(table.io, table.metadata))
    theirs = Counter(
        r[0]
        for r in duck.execute(
            f"SELECT id FROM iceberg_scan('{table.metadata_location}')"
        ).fetchall()
    )
    assert table.metadata_location is not None
    pyiceberg = Counter(
        StaticTable.from_metadata(table.metadata_location).scan().to_arrow()["id"].to_pylist()
    )
    assert ours == theirs == pyiceberg
    return ours


def failed_commit(table: Table) -> list[str]:
    """What a writer leaves when its commit fails: a data file and a manifest listing it."""
    data = Path(table.metadata.location, "data", f"{uuid.uuid4()}.parquet")
    metrics = write_parquet(str(data), to_arrow(SCHEMA.fields, [{"id": 99}]), SCHEMA.fields)
    manifest_path = f"{table.metadata.location}/metadata/{uuid.uuid4()}-m0.avro"
    writer = ManifestWriter(table.io, manifest_path, table.metadata.spec(), SCHEMA, 12345)
    writer.add(
        DataFile(
            file_path=str(data),
            file_format=FileFormat.PARQUET,
            partition=(),
            record_count=metrics.record_count,
            file_size_in_bytes=data.stat().st_size,
        )
    )
    writer.close()
    return [str(data), manifest_path]


def test_old_orphans_go_young_and_referenced_files_stay(
    spark: SparkSession,
    catalog: SqlCatalog,
    duck: duckdb.DuckDBPyConnection,
    job_runner: JobRun,
) -> None:
    """The listing and the deletion on the executors run on the local session and over
    Spark Connect (`job_runner`)."""
    catalog.create_namespace("db")
    table = catalog.create_table(NAME, SCHEMA)
    for i in range(3):
        append_rows(table, [{"id": i}, {"id": 10 + i}])
    append_rows(table, [{"id": 7}], replace_all=True)  # older files: reachable from history
    table = catalog.load_table(NAME)
    root = Path(table.metadata.location)
    before_rows = rows(table, duck)

    stray = root / "data" / "stray.parquet"
    deep = root / "data" / "a=1" / "b=2" / "deep.parquet"
    deep.parent.mkdir(parents=True)
    stray.write_bytes(b"x")
    deep.write_bytes(b"y")
    (root / "metadata" / "version-hint.text").write_text("3")
    leftovers = failed_commit(table)
    (root / "data" / ".stray.parquet.crc").write_bytes(b"c")  # hidden: never deleted
    (root / "data" / "_temporary").mkdir()
    (root / "data" / "_temporary" / "part-0.parquet").write_bytes(b"t")
    hidden_partition = root / "data" / "_p=1" / "orphan.parquet"  # a partition dir: not hidden
    hidden_partition.parent.mkdir()
    hidden_partition.write_bytes(b"p")
    age_everything(root, 3.5)
    young = root / "data" / "young.parquet"
    young.write_bytes(b"z")
    (root / "misc").mkdir()
    (root / "misc" / "notes.txt").write_text("old")
    age(root / "misc" / "notes.txt", 10)
    expected = sorted(
        [str(stray), str(deep), str(hidden_partition), str(root / "misc" / "notes.txt"), *leftovers]
    )
    kept = all_files(root) - set(expected)
    contents = {p: Path(p).read_bytes() for p in expected}

    dry = job_runner(
        "remove_orphan_files",
        RemoveOrphanFilesOptions(table=NAME, dry_run=True, parallel_listing_threshold=1),
    )
    assert dry.orphan_file_location == expected
    assert dry.orphan_files_count == len(expected)
    assert dry.deleted_files_count == 0
    assert dry.directories_listed_on_executors > 0
    assert dry.too_young_count == 1
    assert dry.hidden_files_count == 2
    assert all_files(root) == kept | set(expected)

    result = job_runner(
        "remove_orphan_files",
        RemoveOrphanFilesOptions(
            table=NAME, executor_delete_threshold=1, parallel_listing_threshold=1
        ),
    )
    assert result.orphan_file_location == expected
    assert result.deleted_files_count == len(expected)
    assert result.deleted_on_executors
    assert result.failed_deletes_count == 0
    assert all_files(root) == kept
    # Every orphan is in the table's trash, byte for byte, named in the run's record.
    trashed = {f.path: f for f in Trash.of(table).contents()}
    assert set(trashed) == set(expected)
    assert all(Path(f.trash).read_bytes() == contents[p] for p, f in trashed.items())
    assert {(f.run, f.kind) for f in trashed.values()} == {(result.trash_run, "orphan")}
    assert young.exists()
    table = catalog.load_table(NAME)
    assert rows(table, duck) == before_rows
    for snapshot in table.metadata.snapshots:  # time travel still works everywhere
        list(scan_rows(table.io, table.metadata, snapshot_id=snapshot.snapshot_id))

    again = remove_orphans(
        spark, catalog, RemoveOrphanFilesOptions(NAME, older_than="0s", force=True)
    )
    assert again.orphan_file_location == [str(young)]
    # Everything else left is referenced, but for the two hidden files.
    assert again.referenced_files_count == len(kept) - 1 - 2

    # A manifest that cannot be read would make its files look orphaned: refuse.
    snapshot = table.metadata.current_snapshot()
    assert snapshot is not None
    manifest = next(iter(snapshot_manifests(table.io, snapshot))).manifest_path
    Path(manifest).rename(manifest + ".away")
    with pytest.raises(JobError, match=r"cannot tell the orphans of db\.t apart"):
        remove_orphans(spark, catalog, RemoveOrphanFilesOptions(NAME, older_than="0s", force=True))
    assert Path(manifest + ".away").exists()


def test_a_path_referenced_under_another_scheme_is_refused(
    spark: SparkSession, catalog: SqlCatalog, warehouse: Path
) -> None:
    catalog.create_namespace("db")
    location = f"file://{warehouse}/db/odd"
    table = catalog.create_table(NAME, SCHEMA, location=location)
    append_rows_at = Path(warehouse, "db", "odd", "data")
    append_rows_at.mkdir(parents=True)
    local = append_rows_at / "shared.parquet"
    local.write_bytes(b"x")
    age(local, 5)
    spelled = f"s3://bucket{local}"  # the same path under another scheme and authority
    data_file = DataFile(spelled, FileFormat.PARQUET, (), 1, 1)
    table.new_fast_append().append_file(data_file).commit()
    age_everything(Path(warehouse, "db", "odd"), 5)

    with pytest.raises(JobError, match=rf"file://{local} is referenced as {spelled}"):
        remove_orphans(spark, catalog, RemoveOrphanFilesOptions(table=NAME))
    assert local.exists()
    ignored = remove_orphans(
        spark, catalog, RemoveOrphanFilesOptions(table=NAME, prefix_mismatch_mode="ignore")
    )
    assert ignored.prefix_mismatch_count == 1 and ignored.orphan_files_count == 0
    with pytest.raises(JobError, match="other scheme or authority"):
        remove_orphans(
            spark,
            catalog,
            RemoveOrphanFilesOptions(table=NAME, location=f"s3://bucket{local.parent}"),
        )
    # Declared equal, the file is the referenced one; in delete mode it is deleted.
    equal = RemoveOrphanFilesOptions(
        table=NAME, equal_schemes={"s3": "file"}, equal_authorities={"bucket": ""}
    )
    assert remove_orphans(spark, catalog, equal).orphan_files_count == 0
    deleted = remove_orphans(
        spark, catalog, RemoveOrphanFilesOptions(table=NAME, prefix_mismatch_mode="delete")
    )
    assert deleted.orphan_file_location == [f"file://{local}"]
    assert not local.exists()


def test_command_line(spark: SparkSession, catalog: SqlCatalog, warehouse: Path) -> None:
    """The shared CLI contract, in process (the spark-submit round trip is tested for
    expire_snapshots; every job goes through the same launcher): a result on stdout, and bad
    values refused before anything runs, exit 2, one line on stderr naming the flag."""
    catalog.create_namespace("db")
    table = catalog.create_table(NAME, SCHEMA)
    append_rows(table, [{"id": 1}])
    orphan = Path(table.metadata.location, "data", "orphan.parquet")
    orphan.write_bytes(b"x")

    def job(*argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        shared = ["--warehouse", str(warehouse), "--table", NAME]
        code = main(["remove_orphan_files", *shared, *argv], stdout=out, stderr=err)
        lines = err.getvalue().strip().splitlines()
        return code, out.getvalue(), lines[-1] if lines else ""

    code, out, _ = job("--older-than", "0s", "--dry-run")
    assert code == 0
    result = json.loads(out.splitlines()[-1])
    assert result["orphan_file_location"] == [str(orphan)] and result["dry_run"]
    code, _, cause = job("--prefix-mismatch-mode", "nope")
    assert (code, cause) == (
        2,
        "OptionError: --prefix-mismatch-mode: expected one of error, ignore, delete, got 'nope'",
    )
    # Deleting with a cutoff inside the --min-age floor would take in-flight commits' files.
    code, out, cause = job("--older-than", "0s")
    assert (code, out) == (2, "")
    assert cause.startswith("OptionError: --older-than: 0s is later than 1d ago")
    code, _, cause = job("--older-than", "soon")
    assert (code, cause.split(", or")[0]) == (
        2,
        "OptionError: --older-than: expected an age such as 3d or 12h",
    )
    code, _, cause = job("--equal-schemes", "s3a")
    assert (code, cause) == (
        2,
        "OptionError: --equal-schemes: expected FROM[,FROM...]=TO, got 's3a'",
    )
    assert orphan.exists()
