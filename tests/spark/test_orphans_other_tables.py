"""File deletion never reaches another table's files when table locations nest.

icecore's default location of table `archive` in namespace `db.events` is
`<wh>/db/events/archive`: inside table `db.events`. Orphan removal on `db.events` lists that
tree, and none of the archive's files is referenced by `db.events`. Each test plants a real
orphan (a data file a killed job wrote, never committed) in every table, makes every file old,
runs the job without an age floor, and checks that exactly the cleaned table's orphan went and
that every table still reads completely in PyIceberg and DuckDB.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog as PyIcebergSqlCatalog
from pyiceberg.schema import Schema as PySchema
from pyiceberg.table import StaticTable
from pyiceberg.types import LongType as PyLong
from pyiceberg.types import NestedField as PyField

from icecore.catalog import SqlCatalog
from icecore.jobs.errors import JobError
from icecore.jobs.jobs import ExpireSnapshotsOptions, RemoveOrphanFilesOptions
from icecore.spec.manifest import DataFile, FileFormat
from icecore.spec.schema import Schema
from icecore.spec.types import LongType, NestedField
from icecore.table import Table
from icecore.trash import Trash
from icecore.trash.records import ORPHAN
from spark_jobs.expire_snapshots import run as expire
from spark_jobs.remove_orphan_files import run as remove_orphans
from tests.support.catalogs import append_rows
from tests.support.duckdb import duck_connection  # noqa: F401 - provides the `duck` fixture
from tests.support.parquet import to_arrow, write_parquet
from tests.support.spark_connect import SparkConnectServer

SCHEMA = Schema((NestedField(1, "id", LongType(), required=True),))
PY_SCHEMA = PySchema(PyField(1, "id", PyLong(), required=True))
DAY_S = 24 * 60 * 60
EVERYTHING = "2100-01-01T00:00:00"


def age_everything(root: Path) -> None:
    then = time.time() - 4 * DAY_S
    for p in root.rglob("*"):
        if p.is_file():
            os.utime(p, (then, then))


def plant_orphan(location: str) -> Path:
    """A data file a killed job wrote and never committed."""
    path = Path(location, "data", f"killed-{uuid.uuid4()}.parquet")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_parquet(str(path), to_arrow(SCHEMA.fields, [{"id": -1}]), SCHEMA.fields)
    return path


def ids_everywhere(metadata_location: str, duck: duckdb.DuckDBPyConnection) -> list[int]:
    """The table's ids as PyIceberg and DuckDB read them (they must agree)."""
    theirs = sorted(
        StaticTable.from_metadata(metadata_location).scan().to_arrow()["id"].to_pylist()
    )
    duck_ids = sorted(
        r[0] for r in duck.execute(f"SELECT id FROM iceberg_scan('{metadata_location}')").fetchall()
    )
    assert theirs == duck_ids
    return theirs


def nested_tables(catalog: SqlCatalog, depth: int) -> list[Table]:
    """db.events, db.events.archive, db.events.archive.old, ... each with its own rows, all at
    icecore's default locations (each inside the one before)."""
    tables = []
    namespace = "db"
    name = "events"
    for level in range(depth):
        catalog.create_namespace(namespace)
        table = catalog.create_table(f"{namespace}.{name}", SCHEMA)
        append_rows(table, [{"id": level * 100 + i} for i in range(level + 2)])
        tables.append(catalog.load_table(f"{namespace}.{name}"))
        namespace, name = f"{namespace}.{name}", ["archive", "old", "older"][level]
    return tables


def test_the_reproduction_through_the_command_line(
    tmp_path: Path, duck: duckdb.DuckDBPyConnection, spark_connect: SparkConnectServer
) -> None:
    """Issue 11: PyIceberg wrote db.events (100 rows) and db.events.archive (1,000 rows) at
    <wh>/db/events and <wh>/db/events/archive; orphan removal on db.events with no age floor
    deletes its real orphan and nothing of the archive."""
    wh = tmp_path / "wh"
    wh.mkdir()
    theirs = PyIcebergSqlCatalog(
        "default", uri=f"sqlite:///{wh}/catalog.db", warehouse=f"file://{wh}"
    )
    theirs.create_namespace("db")
    theirs.create_namespace("db.events")
    events = theirs.create_table("db.events", PY_SCHEMA, location=f"file://{wh}/db/events")
    archive = theirs.create_table(
        "db.events.archive", PY_SCHEMA, location=f"file://{wh}/db/events/archive"
    )
    events.append(pa.table({"id": pa.array(range(100), pa.int64(), mask=None)}, schema=_arrow()))
    archive.append(pa.table({"id": pa.array(range(1000), pa.int64())}, schema=_arrow()))
    orphan = plant_orphan(f"{wh}/db/events")
    # The archive's own trash lies inside db.events too: hidden, and another table's.
    ours = SqlCatalog("default", uri=f"sqlite:///{wh}/catalog.db", warehouse=wh)
    archived = ours.load_table("db.events.archive")
    trash = Trash.of(archived)
    kept = plant_orphan(archived.metadata.location.removeprefix("file:"))
    record = trash.new_record("remove_orphan_files", [(str(kept), ORPHAN, None)], now_ms=0)
    assert archived.io.move_many(trash.begin(record)) == {}
    ours.close()
    age_everything(wh)
    archive_files = {p for p in (wh / "db/events/archive").rglob("*") if p.is_file()}
    assert any(".icefloe-trash" in str(p) for p in archive_files)

    done = spark_connect.run_job(
        "remove_orphan_files",
        ["--warehouse", str(wh), "--table", "db.events", "--catalog-uri",
         f"sqlite:///{wh}/catalog.db", "--older-than", EVERYTHING, "--force"],
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["deleted_files_count"] == 1
    assert [Path(p.removeprefix("file:")) for p in result["orphan_file_location"]] == [orphan]
    assert result["excluded_locations"] == [
        {
            "location": f"file://{wh}/db/events/archive",
            "table": "db.events.archive",
            "reason": "location of table db.events.archive",
        }
    ]
    assert not orphan.exists()
    assert {p for p in (wh / "db/events/archive").rglob("*") if p.is_file()} == archive_files
    assert ids_everywhere(theirs.load_table("db.events").metadata_location, duck) == list(
        range(100)
    )
    assert ids_everywhere(theirs.load_table("db.events.archive").metadata_location, duck) == list(
        range(1000)
    )


def _arrow() -> pa.Schema:
    return pa.schema([pa.field("id", pa.int64(), nullable=False)])


def test_three_levels_of_nesting(tmp_path: Path, duck: duckdb.DuckDBPyConnection) -> None:
    catalog = SqlCatalog("default", warehouse=tmp_path / "wh")
    tables = nested_tables(catalog, 3)
    orphans = [plant_orphan(t.metadata.location) for t in tables]
    age_everything(tmp_path / "wh")
    before = {t.name: ids_everywhere(str(t.metadata_location), duck) for t in tables}

    # The middle table: its child is excluded, its parent's referenced files are read and kept.
    dry = remove_orphans(
        None,
        catalog,
        RemoveOrphanFilesOptions("db.events.archive", older_than=EVERYTHING, dry_run=True),
    )
    assert dry.orphan_file_location == [str(orphans[1])]
    assert [e["table"] for e in dry.excluded_locations] == ["db.events.archive.old"]
    assert any("db.events" in note for note in dry.other_tables_notes)
    assert all(o.exists() for o in orphans)

    for table, orphan in zip(tables, orphans, strict=True):
        result = remove_orphans(
            None, catalog, RemoveOrphanFilesOptions(table.name, older_than=EVERYTHING, force=True)
        )
        assert result.orphan_file_location == [str(orphan)], table.name
        assert result.deleted_files_count == 1
        assert not orphan.exists()
    for table in tables:
        assert (
            ids_everywhere(str(catalog.load_table(table.name).metadata_location), duck)
            == (before[table.name])
        )
    catalog.close()


def test_a_table_registered_at_the_same_location_is_refused(
    tmp_path: Path, duck: duckdb.DuckDBPyConnection
) -> None:
    """Another engine registered a second table on db.events's metadata (icecore refuses
    that itself): nobody can tell the two tables' orphans apart."""
    wh = tmp_path / "wh"
    catalog = SqlCatalog("default", warehouse=wh)
    (events,) = nested_tables(catalog, 1)
    theirs = PyIcebergSqlCatalog("default", uri=f"sqlite:///{wh}/catalog.db", warehouse=str(wh))
    twin = theirs.register_table("db.twin", str(events.metadata_location))
    append_rows(catalog.load_table("db.events"), [{"id": 7}])
    orphan = plant_orphan(events.metadata.location)
    age_everything(wh)
    files = {p for p in wh.rglob("*") if p.is_file()}

    with pytest.raises(JobError, match=r"db\.twin is registered at the same location"):
        remove_orphans(
            None, catalog, RemoveOrphanFilesOptions("db.events", older_than=EVERYTHING, force=True)
        )
    dry = remove_orphans(None, catalog, RemoveOrphanFilesOptions("db.events", dry_run=True))
    assert any("db.twin" in note for note in dry.other_tables_notes)
    assert {p for p in wh.rglob("*") if p.is_file()} == files
    assert orphan.exists()
    assert ids_everywhere(str(twin.metadata_location), duck) == [0, 1]
    catalog.close()


def test_catalogs_sharing_a_warehouse(tmp_path: Path, duck: duckdb.DuckDBPyConnection) -> None:
    """A second catalog name in the same database is listed too; a catalog in another database
    cannot be seen (the documented limit), and --protected-location keeps its tables."""
    wh = tmp_path / "wh"
    catalog = SqlCatalog("default", warehouse=wh)
    (events,) = nested_tables(catalog, 1)
    same_db = SqlCatalog("sales", warehouse=wh)
    other_db = SqlCatalog("default", uri=f"sqlite:///{tmp_path}/other.db", warehouse=wh)
    inside = f"{events.metadata.location}/shared"
    for other in (same_db, other_db):
        other.create_namespace("db")
    near = same_db.create_table("db.near", SCHEMA, location=f"{inside}/near")
    far = other_db.create_table("db.far", SCHEMA, location=f"{inside}/far")
    append_rows(near, [{"id": 1}])
    append_rows(far, [{"id": 2}])
    orphan = plant_orphan(events.metadata.location)
    age_everything(wh)

    dry = remove_orphans(None, catalog, RemoveOrphanFilesOptions("db.events", dry_run=True))
    assert [e["table"] for e in dry.excluded_locations] == ["sales:db.near"]
    assert any("/shared/far/" in p for p in dry.orphan_file_location)  # cannot be seen

    result = remove_orphans(
        None,
        catalog,
        RemoveOrphanFilesOptions(
            "db.events",
            older_than=EVERYTHING,
            force=True,
            protected_locations=(f"{inside}/far",),
        ),
    )
    assert result.orphan_file_location == [str(orphan)]
    for table in (same_db.load_table("db.near"), other_db.load_table("db.far")):
        assert len(ids_everywhere(str(table.metadata_location), duck)) == 1
    for c in (catalog, same_db, other_db):
        c.close()


def test_expiry_keeps_files_of_another_table(
    tmp_path: Path, duck: duckdb.DuckDBPyConnection
) -> None:
    """db.copy was made from db.src's files (as a table registered from another engine's
    metadata, or Spark's `snapshot` procedure, references them): expiring db.copy's snapshot
    that added them deletes db.copy's own unreachable files and none of db.src's."""
    wh = tmp_path / "wh"
    catalog = SqlCatalog("default", warehouse=wh)
    catalog.create_namespace("db")
    src = catalog.create_table("db.src", SCHEMA)
    append_rows(src, [{"id": 1}, {"id": 2}])
    src = catalog.load_table("db.src")
    (shared,) = [t.file for t in src.scan().plan_files()]
    copy = catalog.create_table("db.copy", SCHEMA)
    copy.new_fast_append().append_file(
        DataFile(
            file_path=shared.file_path,
            file_format=FileFormat.PARQUET,
            partition=(),
            record_count=shared.record_count,
            file_size_in_bytes=shared.file_size_in_bytes,
        )
    ).commit()
    copy = catalog.load_table("db.copy")
    append_rows(copy, [{"id": 3}])
    copy = catalog.load_table("db.copy")
    own = [
        t.file.file_path for t in copy.scan().plan_files() if t.file.file_path != shared.file_path
    ]
    append_rows(copy, [{"id": 4}], replace_all=True)  # both earlier files now unreachable

    result = expire(
        None,
        catalog,
        ExpireSnapshotsOptions("db.copy", older_than=EVERYTHING, retain_last=1, force=True),
    )
    assert result.expired_snapshots_count == 2
    assert result.kept_files_of_other_tables == {shared.file_path: "db.src"}
    assert result.deleted_data_files_count == 1
    assert Path(shared.file_path).exists()
    assert not Path(own[0]).exists()
    assert ids_everywhere(str(catalog.load_table("db.src").metadata_location), duck) == [1, 2]
    assert ids_everywhere(str(catalog.load_table("db.copy").metadata_location), duck) == [4]
    catalog.close()
