"""SqlCatalog on real SQLite and real PostgreSQL: namespaces, tables, commits, purge.

Every test runs on both databases (PostgreSQL skips, saying why, only when no server
answers) under a catalog name of its own. Tables hold real Parquet data committed through
the catalog, so "dropped with purge" means files really gone and "kept" files really there.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import create_engine, make_url, text

from icecore.catalog import SqlCatalog, catalog_from_settings
from icecore.catalog.metastore import metadata_version
from icecore.errors import (
    AlreadyExistsError,
    CatalogError,
    CommitFailedError,
    CommitStateUnknownError,
    FileError,
    MetadataError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    ValidationError,
)
from icecore.spec.metadata import read_table_metadata
from icecore.spec.metadata_builder import MetadataBuilder
from icecore.spec.schema import Schema
from icecore.spec.types import LongType, NestedField, StringType
from icecore.table import Table
from tests.support.catalogs import (
    append_rows,
    await_killed_client,
    catalog_uri,
    forget_catalog,
    tagged_uri,
    unique_catalog_name,
)
from tests.support.reader import scan_rows
from tests.support.tables import LocalTable

SCHEMA = Schema(
    (
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "data", StringType()),
    )
)


def rows_of(table: Table) -> list[dict]:
    return sorted(scan_rows(table.io, table.metadata), key=lambda r: r["id"])


def files_under(path: str | Path) -> set[str]:
    return {str(p) for p in Path(path).rglob("*") if p.is_file()}


def set_property(table: Table, key: str, value: str) -> Table:
    base = table.metadata
    table.commit_metadata(base, MetadataBuilder(base).set_properties({key: value}).build())
    return table


# Namespaces -------------------------------------------------------------------------------


def test_namespace_lifecycle(catalog: SqlCatalog) -> None:
    assert catalog.list_namespaces() == []
    catalog.create_namespace("db", {"owner": "etl", "comment": "raw events"})
    catalog.create_namespace(("db", "staging"))
    catalog.create_namespace("other")

    assert catalog.namespace_exists("db")
    assert catalog.namespace_exists(("db", "staging"))
    assert not catalog.namespace_exists("nope")
    assert catalog.list_namespaces() == [("db",), ("other",)]
    assert catalog.list_namespaces("db") == [("db", "staging")]
    assert catalog.list_namespaces("db.staging") == []
    assert catalog.load_namespace_properties("db") == {"owner": "etl", "comment": "raw events"}

    catalog.update_namespace_properties("db", removals={"comment"}, updates={"owner": "bi"})
    assert catalog.load_namespace_properties("db") == {"owner": "bi"}
    catalog.update_namespace_properties("db", removals={"owner"})
    assert catalog.load_namespace_properties("db") == {}
    assert catalog.namespace_exists("db"), "removing every property must not drop it"

    with pytest.raises(AlreadyExistsError, match="db already exists"):
        catalog.create_namespace("db")
    with pytest.raises(CatalogError, match="reserved"):
        catalog.update_namespace_properties("db", removals={"exists"})

    with pytest.raises(NamespaceNotEmptyError, match=r"db\.staging"):
        catalog.drop_namespace("db")
    catalog.drop_namespace("db.staging")
    catalog.drop_namespace("db")
    assert catalog.list_namespaces() == [("other",)]
    with pytest.raises(NoSuchNamespaceError, match="db does not exist"):
        catalog.drop_namespace("db")
    with pytest.raises(NoSuchNamespaceError):
        catalog.load_namespace_properties("db")


def test_namespace_names_are_matched_literally(catalog: SqlCatalog) -> None:
    """'_' and '%' are LIKE wildcards; a namespace named with them must not match others."""
    catalog.create_namespace("a_b.c")
    catalog.create_namespace("axb.c")
    catalog.create_namespace("p%")
    assert not catalog.namespace_exists("a%")
    assert catalog.list_namespaces("a_b") == [("a_b", "c")]
    assert catalog.list_namespaces("axb") == [("axb", "c")]
    assert catalog.namespace_exists("a_b")
    assert not catalog.namespace_exists("p")


def test_drop_namespace_with_a_table_is_refused(catalog: SqlCatalog) -> None:
    catalog.create_namespace("db")
    catalog.create_table("db.events", SCHEMA)
    with pytest.raises(NamespaceNotEmptyError, match=r"db is not empty.*db\.events"):
        catalog.drop_namespace("db")
    assert catalog.table_exists("db.events")


def test_catalog_names_share_a_database_without_seeing_each_other(
    catalog: SqlCatalog, backend: str, tmp_path: Path
) -> None:
    catalog.create_namespace("db")
    catalog.create_table("db.t", SCHEMA)
    other = SqlCatalog(unique_catalog_name(), catalog.uri, tmp_path / "other")
    try:
        assert other.list_namespaces() == []
        assert not other.table_exists("db.t")
        other.create_namespace("db")
        other.create_table("db.t", SCHEMA)  # same identifier, other catalog: no clash
        assert catalog.list_tables("db") == [("db", "t")]
    finally:
        forget_catalog(other)


# Tables -----------------------------------------------------------------------------------


def test_create_load_list_and_commit(catalog: SqlCatalog) -> None:
    catalog.create_namespace("db")
    table = catalog.create_table("db.events", SCHEMA, properties={"owner": "etl"})
    assert table.identifier == ("db", "events")
    assert table.metadata.location == f"{catalog.properties['warehouse']}/db/events"
    assert metadata_version(table.metadata_location) == 0
    assert table.metadata_location.startswith(f"{table.metadata.location}/metadata/00000-")

    append_rows(table, [{"id": 1, "data": "a"}, {"id": 2, "data": "b"}])
    append_rows(table, [{"id": 3, "data": "c"}])
    loaded = catalog.load_table(("db", "events"))
    assert loaded.metadata_location == table.metadata_location
    assert metadata_version(loaded.metadata_location) == 2
    assert [r["id"] for r in rows_of(loaded)] == [1, 2, 3]
    assert [e.metadata_file for e in loaded.metadata.metadata_log][-1].split("/")[-1][:5] == "00001"
    assert loaded.metadata.properties == {"owner": "etl"}

    assert catalog.list_tables("db") == [("db", "events")]
    assert catalog.table_exists("db.events")
    assert not catalog.table_exists("db.nope")
    with pytest.raises(AlreadyExistsError, match=r"db\.events already exists"):
        catalog.create_table("db.events", SCHEMA)
    with pytest.raises(NoSuchNamespaceError, match="nope does not exist"):
        catalog.create_table("nope.events", SCHEMA)
    with pytest.raises(NoSuchNamespaceError):
        catalog.list_tables("nope")


def test_unknown_table_is_a_clear_error(catalog: SqlCatalog) -> None:
    catalog.create_namespace("db")
    expected = rf"db\.ghost does not exist in catalog '{catalog.name}'"
    with pytest.raises(NoSuchTableError, match=expected):
        catalog.load_table("db.ghost")
    with pytest.raises(NoSuchTableError):
        catalog.drop_table("db.ghost")
    with pytest.raises(CatalogError, match="needs a namespace"):
        catalog.load_table("ghost")


def test_missing_metadata_file_names_the_file_and_table(catalog: SqlCatalog) -> None:
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", SCHEMA)
    Path(table.metadata_location).unlink()
    with pytest.raises(MetadataError) as raised:
        catalog.load_table("db.t")
    message = str(raised.value)
    assert table.metadata_location in message
    assert "db.t" in message and "file not found" in message
    assert raised.value.path == table.metadata_location
    catalog.drop_table("db.t", purge=True)  # still droppable, as in Java, without the purge
    assert not catalog.table_exists("db.t")


def test_rename_across_namespaces(catalog: SqlCatalog) -> None:
    catalog.create_namespace("raw")
    catalog.create_namespace("curated")
    table = catalog.create_table("raw.events", SCHEMA)
    append_rows(table, [{"id": 7, "data": "x"}])

    renamed = catalog.rename_table("raw.events", "curated.events_v2")
    assert renamed.identifier == ("curated", "events_v2")
    assert [r["id"] for r in rows_of(renamed)] == [7]
    assert catalog.list_tables("raw") == []
    assert catalog.list_tables("curated") == [("curated", "events_v2")]
    with pytest.raises(NoSuchTableError):
        catalog.load_table("raw.events")
    append_rows(renamed, [{"id": 8, "data": "y"}])  # commits follow the new name
    assert [r["id"] for r in rows_of(catalog.load_table("curated.events_v2"))] == [7, 8]

    catalog.create_table("raw.other", SCHEMA)
    with pytest.raises(AlreadyExistsError, match="events_v2"):
        catalog.rename_table("raw.other", "curated.events_v2")
    with pytest.raises(NoSuchTableError, match=r"raw\.events does not exist"):
        catalog.rename_table("raw.events", "curated.x")
    with pytest.raises(NoSuchNamespaceError, match="nope"):
        catalog.rename_table("raw.other", "nope.x")
    assert catalog.table_exists("raw.other")


def test_drop_without_purge_keeps_every_file(catalog: SqlCatalog) -> None:
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", SCHEMA)
    append_rows(table, [{"id": 1, "data": "a"}])
    append_rows(table, [{"id": 2, "data": "b"}])
    before = files_under(table.metadata.location)
    assert len(before) == 3 + 2 + 2 + 2  # metadata versions, manifests, lists, data

    catalog.drop_table("db.t")
    assert not catalog.table_exists("db.t")
    assert files_under(table.metadata.location) == before
    # The files are a complete table still: it can be registered back.
    back = catalog.register_table("db.t", table.metadata_location)
    assert [r["id"] for r in rows_of(back)] == [1, 2]


def test_drop_with_purge_deletes_every_reachable_file(catalog: SqlCatalog, tmp_path: Path) -> None:
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", SCHEMA)
    for i in range(3):
        append_rows(table, [{"id": i, "data": str(i)}])
    append_rows(table, [{"id": 9, "data": "all new"}], replace_all=True)
    # Files only older metadata versions still reach: expire every snapshot but the last,
    # and give the table a statistics file.
    base = table.metadata
    current = base.current_snapshot_id
    stats = Path(base.location, "metadata", "stats.puffin")
    stats.write_bytes(b"PFA1")
    statistics = [
        {
            "snapshot-id": current,
            "statistics-path": str(stats),
            "file-size-in-bytes": 4,
            "file-footer-size-in-bytes": 0,
            "blob-metadata": [],
        }
    ]
    expired = MetadataBuilder(base).remove_snapshots(
        [s.snapshot_id for s in base.snapshots if s.snapshot_id != current]
    )
    updated = replace(expired.build(), extra={"statistics": statistics})
    table.commit_metadata(base, updated)
    assert [r["id"] for r in rows_of(table)] == [9]
    unrelated = Path(table.metadata.location, "data", "not-ours.txt")
    unrelated.write_text("an orphan nobody references")
    keep_elsewhere = tmp_path / "elsewhere.txt"
    keep_elsewhere.write_text("x")

    catalog.drop_table("db.t", purge=True)
    assert not catalog.table_exists("db.t")
    assert files_under(table.metadata.location) == {str(unrelated)}
    assert keep_elsewhere.exists()


def test_purge_keeps_data_files_when_gc_is_disabled(catalog: SqlCatalog) -> None:
    """gc.enabled=false marks tables that may share data files (Java's rule)."""
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", SCHEMA, properties={"gc.enabled": "false"})
    append_rows(table, [{"id": 1, "data": "a"}])
    catalog.drop_table("db.t", purge=True)
    left = files_under(table.metadata.location)
    assert len(left) == 1 and left.pop().endswith(".parquet")


def test_register_a_table_written_elsewhere(catalog: SqlCatalog, tmp_path: Path) -> None:
    local = LocalTable.create(tmp_path / "spark" / "t", SCHEMA)
    local.commit(add=[local.write_data([{"id": 1, "data": "a"}, {"id": 2, "data": None}])])
    catalog.create_namespace("db")

    table = catalog.register_table("db.t", local.metadata_location)
    assert table.metadata_location == local.metadata_location
    assert rows_of(table) == [{"id": 1, "data": "a"}, {"id": 2, "data": None}]
    append_rows(table, [{"id": 3, "data": "c"}])  # and it is ours to commit to
    assert metadata_version(table.metadata_location) == 2
    assert [r["id"] for r in rows_of(catalog.load_table("db.t"))] == [1, 2, 3]

    with pytest.raises(AlreadyExistsError):
        catalog.register_table("db.t", local.metadata_location)
    missing = str(tmp_path / "nowhere" / "v1.metadata.json")
    with pytest.raises(FileError, match="nowhere"):
        catalog.register_table("db.u", missing)
    assert not catalog.table_exists("db.u")
    with pytest.raises(NoSuchNamespaceError):
        catalog.register_table("nope.t", local.metadata_location)


# Commits ----------------------------------------------------------------------------------


def test_stale_base_fails_and_leaves_no_orphan_metadata(catalog: SqlCatalog) -> None:
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", SCHEMA)
    stale = table.metadata
    set_property(table, "a", "1")
    metadata_dir = Path(table.metadata.location, "metadata")
    before = files_under(metadata_dir)

    updated = MetadataBuilder(stale).set_properties({"b": "2"}).build()
    with pytest.raises(CommitFailedError, match=r"db\.t.*moved") as raised:
        catalog.commit_table("db.t", stale, updated)
    assert table.metadata_location in str(raised.value)
    assert files_under(metadata_dir) == before
    assert catalog.load_table("db.t").metadata.properties == {"a": "1"}


def test_commit_to_a_dropped_table_fails(catalog: SqlCatalog) -> None:
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", SCHEMA)
    catalog.drop_table("db.t")
    with pytest.raises(CommitFailedError, match="does not exist"):
        set_property(table, "a", "1")
    assert files_under(Path(table.metadata.location, "metadata")) == {table.metadata_location}


def test_previous_versions_max_and_delete_after_commit(catalog: SqlCatalog) -> None:
    catalog.create_namespace("db")
    props = {
        "write.metadata.previous-versions-max": "2",
        "write.metadata.delete-after-commit.enabled": "true",
    }
    table = catalog.create_table("db.t", SCHEMA, properties=props)
    written = [table.metadata_location]
    for i in range(5):
        set_property(table, "i", str(i))
        written.append(table.metadata_location)

    log = [e.metadata_file for e in table.metadata.metadata_log]
    assert log == written[-3:-1]
    assert catalog.load_table("db.t").metadata.metadata_log == table.metadata.metadata_log
    assert files_under(Path(table.metadata.location, "metadata")) == set(written[-3:])


def test_previous_versions_max_without_delete_keeps_files(catalog: SqlCatalog) -> None:
    catalog.create_namespace("db")
    props = {"write.metadata.previous-versions-max": "1"}
    table = catalog.create_table("db.t", SCHEMA, properties=props)
    written = [table.metadata_location]
    for i in range(3):
        set_property(table, "i", str(i))
        written.append(table.metadata_location)
    assert [e.metadata_file for e in table.metadata.metadata_log] == written[-2:-1]
    assert files_under(Path(table.metadata.location, "metadata")) == set(written)


def test_gzip_metadata_and_metadata_path(catalog: SqlCatalog, tmp_path: Path) -> None:
    catalog.create_namespace("db")
    elsewhere = tmp_path / "meta"
    props = {
        "write.metadata.compression-codec": "gzip",
        "write.metadata.path": str(elsewhere),
    }
    table = catalog.create_table("db.t", SCHEMA, properties=props)
    set_property(table, "a", "1")
    location = table.metadata_location
    assert location.startswith(f"{elsewhere}/00001-")
    assert location.endswith(".gz.metadata.json")
    assert Path(location).read_bytes()[:2] == b"\x1f\x8b"
    assert catalog.load_table("db.t").metadata.properties["a"] == "1"


def test_commit_without_catalog_base_is_refused(catalog: SqlCatalog) -> None:
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", SCHEMA)
    detached = replace(table.metadata, metadata_location=None)
    with pytest.raises(CatalogError, match="not loaded from the catalog"):
        catalog.commit_table("db.t", detached, replace(detached, properties={"a": "1"}))


def test_sqlite_lock_held_by_another_process_is_a_lost_race(tmp_path: Path) -> None:
    """A 'database is locked' that outlasts the busy timeout fails the commit, and the
    metadata file written for it is removed; the table is unchanged."""
    catalog = SqlCatalog("locks", None, tmp_path, properties={"sqlite.busy-timeout-ms": "200"})
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", SCHEMA)
    before = files_under(tmp_path / "db" / "t" / "metadata")
    blocker = sqlite3.connect(tmp_path / "catalog.db", isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # holds the write lock, as a slow writer would
    try:
        with pytest.raises(CommitFailedError, match="database is locked"):
            set_property(table, "a", "1")
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert files_under(tmp_path / "db" / "t" / "metadata") == before
    assert catalog.load_table("db.t").metadata.properties == {}
    set_property(catalog.load_table("db.t"), "a", "1")  # and works once the lock is gone
    catalog.close()


# Construction -----------------------------------------------------------------------------


def test_default_catalog_is_sqlite_in_the_warehouse(tmp_path: Path) -> None:
    catalog = catalog_from_settings(warehouse=tmp_path / "wh", name="")
    assert isinstance(catalog, SqlCatalog)
    assert catalog.name == "default"
    assert catalog.uri == f"sqlite:///{tmp_path}/wh/catalog.db"
    catalog.create_namespace("db")
    catalog.create_table("db.t", SCHEMA)
    catalog.close()
    again = catalog_from_settings(uri="", warehouse=str(tmp_path / "wh"))
    assert again.list_tables("db") == [("db", "t")]
    again.close()
    with pytest.raises(CatalogError, match="not local"):
        SqlCatalog(warehouse="s3://bucket/wh")
    with pytest.raises(CatalogError, match="needs a database uri"):
        SqlCatalog()


def test_jdbc_urls_name_the_same_catalog(catalog: SqlCatalog, backend: str) -> None:
    """Spark's JdbcCatalog settings (`uri=jdbc:...`, `jdbc.user`) open our catalog too."""
    catalog.create_namespace("db")
    catalog.create_table("db.t", SCHEMA)
    if backend == "sqlite":
        uri, props = "jdbc:sqlite:" + catalog.uri.removeprefix("sqlite:///"), {}
    else:
        url = make_url(catalog.uri)
        uri = f"jdbc:postgresql://{url.host}:{url.port or 5432}/{url.database}"
        props = {"jdbc.user": url.username or "", "jdbc.password": url.password or ""}
    same = catalog_from_settings(uri, catalog.name, properties=props)
    try:
        assert same.list_tables("db") == [("db", "t")]
    finally:
        same.close()


def test_opens_a_java_v0_schema_database(tmp_path: Path) -> None:
    """Databases created by JdbcCatalog before views (no iceberg_type) are used as they are."""
    engine = create_engine(f"sqlite:///{tmp_path}/catalog.db")
    with engine.begin() as conn:
        conn.execute(text(
            "CREATE TABLE iceberg_tables (catalog_name VARCHAR(255) NOT NULL, "
            "table_namespace VARCHAR(255) NOT NULL, table_name VARCHAR(255) NOT NULL, "
            "metadata_location VARCHAR(1000), previous_metadata_location VARCHAR(1000), "
            "PRIMARY KEY (catalog_name, table_namespace, table_name))"
        ))  # fmt: skip
        conn.execute(text(
            "CREATE TABLE iceberg_namespace_properties (catalog_name VARCHAR(255) NOT NULL, "
            "namespace VARCHAR(255) NOT NULL, property_key VARCHAR(255), "
            "property_value VARCHAR(1000), PRIMARY KEY (catalog_name, namespace, property_key))"
        ))  # fmt: skip
    engine.dispose()
    catalog = SqlCatalog("java", None, tmp_path)
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", SCHEMA)
    append_rows(table, [{"id": 1, "data": "a"}])
    catalog.rename_table("db.t", "db.u")
    assert [r["id"] for r in rows_of(catalog.load_table("db.u"))] == [1]
    catalog.close()


def test_views_in_the_same_database_are_not_tables(catalog: SqlCatalog) -> None:
    """Java's V1 schema keeps views in iceberg_tables with iceberg_type 'VIEW'."""
    catalog.create_namespace("db")
    with catalog.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO iceberg_tables VALUES (:c, 'db', 'v', '/x/v.metadata.json', "
                "NULL, 'VIEW')"
            ),
            {"c": catalog.name},
        )
    assert catalog.list_tables("db") == []
    assert not catalog.table_exists("db.v")
    with pytest.raises(NoSuchTableError):
        catalog.load_table("db.v")
    with pytest.raises(NamespaceNotEmptyError, match=r"view\(s\): db\.v"):
        catalog.drop_namespace("db")


def test_metadata_version_parsing() -> None:
    assert metadata_version("/t/metadata/00042-0a1b.metadata.json") == 42
    assert metadata_version("s3://b/t/metadata/00003-x.gz.metadata.json") == 3
    assert metadata_version("/t/metadata/v12.metadata.json") == 12
    assert metadata_version("/t/metadata/v12.gz.metadata.json") == 12
    assert metadata_version("/t/metadata/custom.json") == -1
    assert metadata_version("/t/metadata/v2-old-style.metadata.json") == -1
    assert metadata_version(None) == -1


def test_static_table_refuses_commit(tmp_path: Path) -> None:
    from icecore.catalog import load_static_table  # noqa: PLC0415

    local = LocalTable.create(tmp_path / "t", SCHEMA)
    table = load_static_table(local.metadata_location)
    with pytest.raises(ValidationError, match="read-only"):
        set_property(table, "a", "1")


def test_metadata_written_by_the_catalog_reads_back(catalog: SqlCatalog) -> None:
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", SCHEMA)
    append_rows(table, [{"id": 1, "data": "a"}])
    again = read_table_metadata(table.io, table.metadata_location)
    assert again == table.metadata


# Processes: concurrent commits, and commits killed half way ---------------------------------

_WORKER = """
import sys
from icecore.catalog import SqlCatalog
from icecore.commit.update import TableUpdate
from icecore.spec.metadata_builder import MetadataBuilder

name, uri, warehouse, worker, commits = sys.argv[1:6]

class SetProperty(TableUpdate):
    def __init__(self, table, key):
        super().__init__(table)
        self.key = key

    def _apply(self, base):
        return MetadataBuilder(base).set_properties({self.key: "done"}).build()

catalog = SqlCatalog(name, uri, warehouse)
table = catalog.load_table("db.t")
for i in range(int(commits)):
    SetProperty(table, f"w{worker}-{i}").commit()
    print(i, flush=True)
"""


def run_python(code: str, *args: object) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    command = [sys.executable, "-c", code, *map(str, args)]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)


def test_four_processes_commit_without_losing_any(catalog: SqlCatalog) -> None:
    """Every commit of 4 racing processes lands once; every lost swap removed its file."""
    workers, commits = 4, 25
    catalog.create_namespace("db")
    retry = {
        "commit.retry.num-retries": "200",
        "commit.retry.min-wait-ms": "1",
        "commit.retry.max-wait-ms": "20",
    }
    table = catalog.create_table("db.t", SCHEMA, properties=retry)
    warehouse = catalog.properties["warehouse"]
    processes = [
        run_python(_WORKER, catalog.name, catalog.uri, warehouse, w, commits)
        for w in range(workers)
    ]
    for process in processes:
        process.communicate(timeout=300)
        assert process.returncode == 0

    final = catalog.load_table("db.t").metadata
    done = {k for k, v in final.properties.items() if v == "done"}
    assert done == {f"w{w}-{i}" for w in range(workers) for i in range(commits)}
    assert metadata_version(final.metadata_location) == workers * commits
    log = [e.metadata_file for e in final.metadata_log]
    assert [metadata_version(f) for f in log] == list(range(workers * commits))
    metadata_files = files_under(Path(table.metadata.location, "metadata"))
    assert metadata_files == {*log, final.metadata_location}, "orphaned metadata files"


_WRITE_THEN_HANG = """
import sys, time
from icecore.catalog import SqlCatalog
from icecore.catalog.metastore import metadata_version, new_metadata_location
from icecore.spec.metadata import write_table_metadata
from icecore.spec.metadata_builder import MetadataBuilder

name, uri, warehouse = sys.argv[1:4]
catalog = SqlCatalog(name, uri, warehouse)
base = catalog.load_metadata("db.t")
updated = MetadataBuilder(base).set_properties({"crashed": "true"}).build()
location = new_metadata_location(updated, metadata_version(base.metadata_location) + 1)
write_table_metadata(catalog.io, location, updated)
print(location, flush=True)
time.sleep(600)  # killed here, before the catalog's swap
"""


def test_killed_after_writing_metadata_leaves_the_table_as_it_was(catalog: SqlCatalog) -> None:
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", SCHEMA)
    append_rows(table, [{"id": 1, "data": "a"}])
    before = table.metadata_location

    process = run_python(
        _WRITE_THEN_HANG, catalog.name, catalog.uri, catalog.properties["warehouse"]
    )
    assert process.stdout is not None
    written = process.stdout.readline().strip()
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    assert Path(written).exists()  # the orphan: complete, but nothing points at it

    loaded = catalog.load_table("db.t")
    assert loaded.metadata_location == before
    assert "crashed" not in loaded.metadata.properties
    assert [r["id"] for r in rows_of(loaded)] == [1]
    append_rows(loaded, [{"id": 2, "data": "b"}])  # same version number, another name
    assert metadata_version(loaded.metadata_location) == metadata_version(written)
    assert [r["id"] for r in rows_of(catalog.load_table("db.t"))] == [1, 2]


def test_killed_at_random_moments_in_a_commit_loop(catalog: SqlCatalog) -> None:
    """SIGKILL wherever it lands: the pointer is always at a complete, readable file holding
    every commit the process reported, and at most the one it was in the middle of."""
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", SCHEMA)
    warehouse = catalog.properties["warehouse"]
    rng = random.Random(1234)
    reported: set[str] = set()
    for round_ in range(6):
        tag = f"killed-{uuid.uuid4().hex[:12]}"
        uri = tagged_uri(catalog.uri, tag)
        process = run_python(_WORKER, catalog.name, uri, warehouse, round_, 10_000)
        assert process.stdout is not None
        out = process.stdout.readline()  # running: at least one commit done
        time.sleep(rng.uniform(0.0, 0.3))
        process.send_signal(signal.SIGKILL)
        out += process.stdout.read()
        process.wait(timeout=30)
        await_killed_client(catalog.uri, tag)
        reported.update(f"w{round_}-{line}" for line in out.split())

        current = catalog.load_table("db.t").metadata  # reads and parses the file
        done = {k for k, v in current.properties.items() if v == "done"}
        assert reported <= done
        assert len(done - reported) <= 1, sorted(done - reported)
        reported = done  # the commit it died in, if it landed, is history for the next round
        for entry in current.metadata_log:
            assert Path(entry.metadata_file).exists()
        versions = [metadata_version(e.metadata_file) for e in current.metadata_log]
        newest = metadata_version(current.metadata_location)
        assert versions == list(range(newest - len(versions), newest))
    assert newest > metadata_version(table.metadata_location)


def test_connection_lost_during_commit_is_state_unknown_and_keeps_the_file(
    tmp_path: Path,
) -> None:
    """A PostgreSQL backend that dies while processing COMMIT: the client cannot know the
    outcome, so the error says so and the new metadata file stays (it might be current).
    The fault is real: a deferred trigger, firing at COMMIT, terminates its own backend."""
    catalog = SqlCatalog(unique_catalog_name(), catalog_uri("postgresql", tmp_path), tmp_path)
    trigger = f"{catalog.name}_dies"
    try:
        catalog.create_namespace("db")
        table = catalog.create_table("db.t", SCHEMA)
        with catalog.engine.begin() as conn:
            conn.execute(text(
                f"CREATE FUNCTION {trigger}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "PERFORM pg_terminate_backend(pg_backend_pid()); PERFORM pg_sleep(10); "
                "RETURN NULL; END $$"
            ))  # fmt: skip
            conn.execute(text(
                f"CREATE CONSTRAINT TRIGGER {trigger} AFTER UPDATE ON iceberg_tables "
                "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW "
                f"WHEN (NEW.catalog_name = '{catalog.name}') EXECUTE FUNCTION {trigger}()"
            ))  # fmt: skip
        try:
            with pytest.raises(CommitStateUnknownError, match="may or may not have happened"):
                set_property(table, "a", "1")
        finally:
            with catalog.engine.begin() as conn:
                conn.execute(text(f"DROP TRIGGER {trigger} ON iceberg_tables"))
                conn.execute(text(f"DROP FUNCTION {trigger}()"))
        metadata_files = files_under(Path(table.metadata.location, "metadata"))
        assert len(metadata_files) == 2, "the maybe-current metadata file must be kept"
        loaded = catalog.load_table("db.t")  # here the backend died before committing
        assert loaded.metadata_location == table.metadata_location
        set_property(loaded, "a", "1")
    finally:
        forget_catalog(catalog)
