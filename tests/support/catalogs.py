"""Real catalogs for tests: SQLite in a temporary warehouse, or the PostgreSQL server at
127.0.0.1:5432 (database `test`), each under a catalog name of its own so runs never see
each other's rows; and `append_rows`, a minimal fast append through a catalog commit.

The append is written out by hand (Parquet file, manifest, manifest list, snapshot,
`MetadataBuilder`) so that catalog tests do not depend on the snapshot producers they
serve, and so that the tables they commit hold real, readable data.
"""

from __future__ import annotations

import functools
import os
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog as PyIcebergCatalog
from sqlalchemy import create_engine, delete, text
from sqlalchemy.pool import NullPool

from icecore.catalog.sql import NAMESPACE_PROPERTIES, TABLES, SqlCatalog
from icecore.scan import snapshot_manifests
from icecore.spec.manifest import DataFile, FileFormat, ManifestWriter, read_manifest
from icecore.spec.manifest_list import ManifestListWriter
from icecore.spec.metadata import TableMetadata
from icecore.spec.metadata_builder import MetadataBuilder
from icecore.spec.refs import MAIN_BRANCH
from icecore.spec.snapshots import Operation, Snapshot, SummaryCounts, build_summary
from icecore.table import Table

from .parquet import to_arrow, write_parquet

POSTGRES_URI = os.environ.get(
    "ICECORE_TEST_POSTGRES_URI", "postgresql+psycopg2://postgres@127.0.0.1:5432/test"
)
BACKENDS = ("sqlite", "postgresql")


@functools.cache
def postgres_unavailable() -> str | None:
    """Why PostgreSQL cannot be used here, or None when a server answers."""
    try:
        engine = create_engine(POSTGRES_URI, connect_args={"connect_timeout": 3})
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        engine.dispose()
    except Exception as exc:
        first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"PostgreSQL case skipped: no server answers at {POSTGRES_URI} ({first_line})"
    return None


def catalog_uri(backend: str, warehouse: Path) -> str:
    """The database URI of `backend`; skips the test when PostgreSQL does not answer."""
    if backend == "sqlite":
        return f"sqlite:///{warehouse}/catalog.db"
    reason = postgres_unavailable()
    if reason:
        pytest.skip(reason)
    return POSTGRES_URI


def tagged_uri(uri: str, tag: str) -> str:
    """`uri` whose PostgreSQL connections carry `tag` as their application name (SQLite's
    unchanged), so that `await_killed_client` can tell when the server is done with them."""
    if not uri.startswith("postgresql"):
        return uri
    return f"{uri}{'&' if '?' in uri else '?'}application_name={tag}"


def await_killed_client(uri: str, tag: str, timeout: float = 30) -> None:
    """Wait until PostgreSQL has no backend of a killed client's `tagged_uri` connections.

    A process killed right after sending its COMMIT leaves the server to apply it moments
    later: read before then, a table would lack a commit that is about to appear."""
    if not uri.startswith("postgresql"):
        return
    engine = create_engine(uri, poolclass=NullPool)
    query = text("select count(*) from pg_stat_activity where application_name = :tag")
    deadline = time.monotonic() + timeout
    try:
        with engine.connect() as connection:
            while connection.execute(query, {"tag": tag}).scalar_one():
                if time.monotonic() > deadline:
                    raise AssertionError(f"PostgreSQL still serves killed client {tag}")
                connection.rollback()  # a fresh snapshot of pg_stat_activity each time
                time.sleep(0.02)
    finally:
        engine.dispose()


def unique_catalog_name() -> str:
    return f"test_{uuid.uuid4().hex[:16]}"


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def catalog(backend: str, tmp_path: Path) -> Iterator[SqlCatalog]:
    """A fresh, empty catalog on `backend`, its warehouse under tmp_path."""
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    cat = SqlCatalog(unique_catalog_name(), catalog_uri(backend, warehouse), warehouse)
    yield cat
    forget_catalog(cat)


@pytest.fixture(name="pyiceberg_catalog")
def pyiceberg_catalog_fixture(warehouse: Path, catalog: SqlCatalog) -> Iterator[PyIcebergCatalog]:
    """PyIceberg's SqlCatalog on the database a module's `catalog` fixture (a SQLite
    `SqlCatalog` in `warehouse`) opens; import this function into a test module to use it."""
    engine = PyIcebergCatalog(
        "default", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}"
    )
    yield engine
    engine.engine.dispose()


def forget_catalog(cat: SqlCatalog) -> None:
    """Delete the catalog's rows (PostgreSQL outlives the test) and close it."""
    with cat.engine.begin() as conn:
        conn.execute(delete(TABLES).where(TABLES.c.catalog_name == cat.name))
        conn.execute(
            delete(NAMESPACE_PROPERTIES).where(NAMESPACE_PROPERTIES.c.catalog_name == cat.name)
        )
    cat.close()


def append_rows(
    table: Table, rows: Sequence[Mapping[str, Any]], *, replace_all: bool = False
) -> TableMetadata:
    """Commit one Parquet file of `rows` (unpartitioned table) to main; one attempt, no retry.

    With `replace_all` the new snapshot holds only the new file (an overwrite): the files
    before it stay reachable from older snapshots only.
    """
    base = table.metadata
    schema = base.schema()
    data_dir = Path(base.location, "data")
    data_dir.mkdir(parents=True, exist_ok=True)
    path = str(data_dir / f"{uuid.uuid4()}.parquet")
    metrics = write_parquet(path, to_arrow(schema.fields, rows), schema.fields)
    data_file = DataFile(
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=(),
        record_count=metrics.record_count,
        file_size_in_bytes=Path(path).stat().st_size,
        column_sizes=metrics.column_sizes,
        value_counts=metrics.value_counts,
        null_value_counts=metrics.null_value_counts,
        lower_bounds=metrics.lower_bounds,
        upper_bounds=metrics.upper_bounds,
    )
    snapshot_id = uuid.uuid4().int & ((1 << 63) - 1)
    parent = base.current_snapshot()
    sequence_number = base.last_sequence_number + 1
    metadata_dir = f"{base.location}/metadata"
    writer = ManifestWriter(
        table.io, f"{metadata_dir}/{uuid.uuid4()}-m0.avro", base.spec(), schema, snapshot_id
    )
    writer.add(data_file)
    manifest_list = f"{metadata_dir}/snap-{snapshot_id}-1-{uuid.uuid4()}.avro"
    with ManifestListWriter(
        table.io,
        manifest_list,
        snapshot_id,
        parent.snapshot_id if parent else None,
        sequence_number,
    ) as writer_list:
        writer_list.add(writer.close())
        if not replace_all:
            writer_list.add_all(snapshot_manifests(table.io, parent) if parent else ())
    counts = SummaryCounts()
    for manifest in snapshot_manifests(table.io, parent) if parent and replace_all else ():
        for entry in read_manifest(table.io, manifest, live_only=True):
            gone = entry.data_file
            counts.removed_file(gone.content, gone.record_count, gone.file_size_in_bytes)
    counts.added_file(data_file.content, data_file.record_count, data_file.file_size_in_bytes)
    snapshot = Snapshot(
        snapshot_id=snapshot_id,
        timestamp_ms=max(base.last_updated_ms + 1, int(time.time() * 1000)),
        manifest_list=manifest_list,
        parent_snapshot_id=parent.snapshot_id if parent else None,
        sequence_number=sequence_number,
        summary=build_summary(
            Operation.OVERWRITE if replace_all else Operation.APPEND,
            counts,
            parent,
            changed_partition_count=1,
        ),
        schema_id=schema.schema_id,
    )
    updated = (
        MetadataBuilder(base)
        .add_snapshot(snapshot)
        .set_branch_snapshot(MAIN_BRANCH, snapshot_id)
        .build(snapshot.timestamp_ms)
    )
    return table.commit_metadata(base, updated)
