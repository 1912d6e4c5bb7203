"""The way back, end to end, on a table another engine wrote: PyIceberg 0.12 creates and
writes it, our expire_snapshots and remove_orphan_files take files out of it into its trash,
and `icefloe restore`, run as a user runs it (the installed command, in a plain environment),
brings back an expired snapshot, which PyIceberg and DuckDB then read by its id and by its
tag, and the removed orphans, byte for byte, while the table's current rows stay as they were.
With `icefloe.trash.retention` at `0s` the next run deletes at once, and empties the trash.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import duckdb
import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog as PyIcebergCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType
from pyspark.sql import SparkSession

from icecore.catalog import SqlCatalog
from icecore.jobs.jobs import ExpireSnapshotsOptions, RemoveOrphanFilesOptions
from icecore.trash import Trash
from icecore.trash.records import PurgeRecord
from spark_jobs.expire_snapshots import run as expire
from spark_jobs.remove_orphan_files import run as remove_orphans
from tests.support.catalogs import pyiceberg_catalog_fixture  # noqa: F401 - `pyiceberg_catalog`
from tests.support.duckdb import duck_connection  # noqa: F401 - provides the `duck` fixture

NAME = "py.events"
ARROW = pa.schema([("id", pa.int64()), ("v", pa.string())])
ICEFLOE = Path(sys.executable).parent / "icefloe"


def _icefloe(warehouse: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """The installed command in a plain environment: no PYTHONPATH, no Airflow home, no
    state store; as README shows it."""
    env = {"PATH": os.environ["PATH"], "HOME": str(warehouse.parent), "NO_COLOR": "1"}
    command = [str(ICEFLOE), *argv, "--warehouse", str(warehouse)]
    return subprocess.run(command, env=env, capture_output=True, text=True, check=False)


def _rows(arrow: pa.Table) -> Counter:
    return Counter((r["id"], r["v"]) for r in arrow.to_pylist())


def _duck_rows(duck: duckdb.DuckDBPyConnection, metadata: str, snapshot_id: int) -> Counter:
    scan = f"iceberg_scan('{metadata}', snapshot_from_id => {snapshot_id})"
    return Counter(duck.execute(f"SELECT id, v FROM {scan}").fetchall())


def test_an_expired_snapshot_and_removed_orphans_come_back(
    spark: SparkSession,
    catalog: SqlCatalog,
    warehouse: Path,
    pyiceberg_catalog: PyIcebergCatalog,
    duck: duckdb.DuckDBPyConnection,
) -> None:
    pyiceberg_catalog.create_namespace("py")
    theirs = pyiceberg_catalog.create_table(
        NAME, Schema(NestedField(1, "id", LongType()), NestedField(2, "v", StringType()))
    )
    theirs.append(pa.Table.from_pylist([{"id": i, "v": f"a{i}"} for i in range(5)], ARROW))
    theirs.append(pa.Table.from_pylist([{"id": 9, "v": "b"}], ARROW))
    first, second = (s.snapshot_id for s in theirs.metadata.snapshots)
    expected = {s: _rows(theirs.scan(snapshot_id=s).to_arrow()) for s in (first, second)}
    first_files = [
        Path(t.file.file_path.removeprefix("file://"))
        for t in theirs.scan(snapshot_id=first).plan_files()
    ]
    theirs.overwrite(pa.Table.from_pylist([{"id": 100, "v": "new"}], ARROW))
    current = _rows(theirs.scan().to_arrow())
    location = Path(theirs.location().removeprefix("file://"))
    orphan = location / "data" / "stray-writer.parquet"
    orphan.write_bytes(b"bytes a slow writer left" * 100)
    then = time.time() - 5 * 86_400
    os.utime(orphan, (then, then))

    expired = expire(
        spark, catalog, ExpireSnapshotsOptions(NAME, older_than="0s", retain_last=1, min_age="0s")
    )
    # PyIceberg's overwrite is two snapshots: a delete, then an append; all but the last go.
    assert {first, second} < set(expired.expired_snapshot_ids)
    assert expired.trashed_files_count == expired.trash_files_count > 0
    assert expired.trash_retention == "3d" and expired.purged_files_count == 0
    assert first_files and not any(p.exists() for p in first_files)
    removed = remove_orphans(spark, catalog, RemoveOrphanFilesOptions(NAME))
    assert removed.orphan_file_location == [f"file://{orphan}"] and not orphan.exists()

    listed = _icefloe(warehouse, "trash", NAME)
    assert listed.returncode == 0, listed.stderr
    assert f"file://{orphan}" in listed.stdout and "remove_orphan_files" in listed.stdout
    assert f"{expired.trash_files_count + 1} files" in listed.stdout.splitlines()[-1]
    records = [
        json.loads(line)
        for line in _icefloe(warehouse, "trash", NAME, "--json").stdout.splitlines()
    ]
    assert {r["run"] for r in records} == {expired.trash_run, removed.trash_run}
    assert all(r["purge_due_ms"] - r["removed_ms"] == 3 * 86_400_000 for r in records)

    done = _icefloe(warehouse, "restore", NAME, "--snapshot", str(first))
    assert done.returncode == 0, done.stderr
    assert f"as tag restored-{first}" in done.stdout
    again = _icefloe(warehouse, "restore", NAME, "--snapshot", str(first))
    assert (again.returncode, again.stdout.strip()) == (
        0,
        f"snapshot {first}: already restored, as tag restored-{first}",
    )
    theirs = pyiceberg_catalog.load_table(NAME)
    assert _rows(theirs.scan(snapshot_id=first).to_arrow()) == expected[first]
    tagged = theirs.snapshot_by_name(f"restored-{first}")
    assert tagged is not None and tagged.snapshot_id == first
    assert _rows(theirs.scan(snapshot_id=tagged.snapshot_id).to_arrow()) == expected[first]
    assert _duck_rows(duck, theirs.metadata_location, first) == Counter(expected[first])
    assert _rows(theirs.scan().to_arrow()) == current  # the current state is untouched
    assert (
        theirs.metadata.current_snapshot_id == catalog.load_table(NAME).metadata.current_snapshot_id
    )

    back = _icefloe(warehouse, "restore", NAME, "--orphans", "--json")
    assert back.returncode == 0, back.stderr
    assert json.loads(back.stdout)["restored_files"] == [f"file://{orphan}"]
    assert orphan.read_bytes() == b"bytes a slow writer left" * 100
    assert _rows(pyiceberg_catalog.load_table(NAME).scan().to_arrow()) == current

    # Retention 0s: the next run deletes what it takes out at once, and purges the trash.
    theirs.transaction().set_properties({"icefloe.trash.retention": "0s"}).commit_transaction()
    theirs = pyiceberg_catalog.load_table(NAME)
    theirs.manage_snapshots().remove_tag(f"restored-{first}").commit()
    trash = Trash.of(catalog.load_table(NAME))
    left = {f.path for f in trash.contents()}  # the second snapshot's files
    assert left and all(not Path(p.removeprefix("file://")).exists() for p in left)
    purged = expire(spark, catalog, ExpireSnapshotsOptions(NAME, snapshot_ids=[first], force=True))
    assert purged.expired_snapshot_ids == [first] and purged.trashed_files_count == 0
    assert purged.purged_files_count == len(left) and purged.trash_files_count == 0
    assert trash.contents() == []
    assert first_files and not any(p.exists() for p in first_files)  # expired again: gone
    log = PurgeRecord.from_bytes(
        trash.io.read_bytes(trash.layout.purge_log(str(purged.trash_run))), "the deletion log"
    )
    assert log.retention_ms == 0 and {f.path for f in log.files} >= left
    assert {f.run for f in log.files if f.path in left} == {expired.trash_run}
    assert _rows(pyiceberg_catalog.load_table(NAME).scan().to_arrow()) == current
