"""Tables in a real `SqlCatalog` (SQLite in the test's tmp_path) for the commit tests.

`CatalogTable` pairs a catalog `Table` with a `LocalTable` used only as a writer of real
Parquet data and delete files under the table's location; every commit goes through the
snapshot producers under test. Helpers read back what a test asserts on: live files with
their sequence numbers, rows after deletes, and the files under the metadata directory.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pytest
from pyiceberg.table import StaticTable

from icecore.catalog.sql import SqlCatalog
from icecore.scan import snapshot_manifests
from icecore.spec.deletion_vectors import write_dvs
from icecore.spec.manifest import (
    DataFile,
    EntryStatus,
    ManifestEntry,
    read_manifest,
)
from icecore.spec.manifest_list import ManifestFile
from icecore.spec.metadata import TableMetadata
from icecore.spec.metadata_builder import MetadataBuilder
from icecore.spec.partitioning import PartitionField, PartitionSpec
from icecore.spec.refs import SnapshotRef, SnapshotRefType
from icecore.spec.schema import Schema
from icecore.spec.snapshots import Snapshot
from icecore.spec.transforms import parse_transform
from icecore.spec.types import LongType, NestedField, StringType
from icecore.table import Table

from .catalogs import BACKENDS, catalog_uri, forget_catalog, unique_catalog_name
from .reader import scan_rows
from .tables import LocalTable

SCHEMA = Schema(
    fields=(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "cat", StringType()),
        NestedField(3, "v", LongType()),
    )
)
BY_CAT = PartitionSpec(0, (PartitionField(2, 1000, parse_transform("identity"), "cat"),))
UNPARTITIONED = PartitionSpec(0, ())
# Fast retries: tests race on purpose and should not sleep for Java's 100 ms.
FAST_RETRIES = {"commit.retry.min-wait-ms": "1", "commit.retry.max-wait-ms": "5"}

Row = dict[str, Any]


def sqlite_catalog(tmp_path: Path) -> SqlCatalog:
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir(exist_ok=True)
    catalog = SqlCatalog("commits", None, warehouse)
    if not catalog.namespace_exists("db"):
        catalog.create_namespace("db")
    return catalog


@pytest.fixture(name="any_catalog", params=BACKENDS)
def any_catalog_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlCatalog]:
    """`any_catalog`: a catalog on SQLite and on PostgreSQL (skipped, saying so, when no
    server answers); import this function into a test module to make it available."""
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    uri = catalog_uri(str(request.param), warehouse)
    catalog = SqlCatalog(unique_catalog_name(), uri, warehouse)
    catalog.create_namespace("db")
    yield catalog
    forget_catalog(catalog)


@dataclass
class CatalogTable:
    """A catalog table and a writer of files for it; `t["a1"]` is the file named "a1"."""

    table: Table
    writer: LocalTable
    files: dict[str, DataFile] = field(default_factory=dict)

    def __getitem__(self, name: str) -> DataFile:
        return self.files[name]

    @classmethod
    def create(
        cls,
        catalog: SqlCatalog,
        name: str,
        spec: PartitionSpec = BY_CAT,
        properties: Mapping[str, str] | None = None,
    ) -> CatalogTable:
        props = {**FAST_RETRIES, **(properties or {})}
        table = catalog.create_table(f"db.{name}", SCHEMA, spec=spec, properties=props)
        return cls(table, LocalTable(table.io, table.metadata))

    def load(self) -> Table:
        """Another `Table` object on the same catalog row (a second writer)."""
        assert self.table.catalog is not None
        return self.table.catalog.load_table(self.table.identifier)

    def data(self, rows: Sequence[Row], **options: Any) -> DataFile:
        self.writer.metadata = self.table.metadata  # specs added since creation
        return self._named(self.writer.write_data(rows, **options), options)

    def position_deletes(self, deletes: Iterable[tuple[str, int]], **options: Any) -> DataFile:
        return self._named(self.writer.write_position_deletes(deletes, **options), options)

    def _named(self, content_file: DataFile, options: Mapping[str, Any]) -> DataFile:
        if options.get("name"):
            self.files[options["name"]] = content_file
        return content_file

    def equality_deletes(self, rows: Sequence[Row], columns: Sequence[str]) -> DataFile:
        return self.writer.write_equality_deletes(rows, columns)

    def deletion_vectors(
        self, name: str, *positions: tuple[DataFile, Iterable[int]]
    ) -> list[DataFile]:
        """One Puffin file `<data>/<name>.puffin` with a DV per (data file, positions), as
        delete-file entries in that order (format v3)."""
        location = f"{self.table.metadata.location}/data/{name}.puffin"
        by_path = {f.file_path: f for f, _ in positions}
        written = write_dvs(self.table.io, location, {f.file_path: p for f, p in positions})
        return [w.entry(by_path[w.referenced_data_file]) for w in written]


def rows(table: Table, **scan_options: Any) -> list[Row]:
    """The table's rows with deletes applied, by icecore's planner and a naive reader."""
    return sorted(scan_rows(table.io, table.metadata, **scan_options), key=lambda r: r["id"])


def ids(table: Table, **scan_options: Any) -> list[int]:
    return [r["id"] for r in rows(table, **scan_options)]


def manifests(table: Table, snapshot: Snapshot | None = None) -> list[ManifestFile]:
    snapshot = snapshot or table.metadata.current_snapshot()
    assert snapshot is not None
    return snapshot_manifests(table.io, snapshot)


def entries(table: Table, manifest: ManifestFile) -> list[ManifestEntry]:
    spec = table.metadata.spec_by_id(manifest.partition_spec_id)
    return list(read_manifest(table.io, manifest, spec=spec))


def live(table: Table, snapshot: Snapshot | None = None) -> dict[str, ManifestEntry]:
    """Live entries (data and deletes) of a snapshot by file name (the path's last part)."""
    return {
        Path(e.data_file.file_path).name: e
        for m in manifests(table, snapshot)
        for e in entries(table, m)
        if e.status is not EntryStatus.DELETED
    }


def metadata_files(table: Table) -> set[str]:
    """Every manifest and manifest list on disk under the metadata directory."""
    directory = Path(table.metadata.location, "metadata")
    return {str(p) for p in directory.glob("*.avro")}


def referenced_files(table: Table) -> set[str]:
    """Manifest lists and manifests of every snapshot the table's metadata holds."""
    found: set[str] = set()
    for snapshot in table.metadata.snapshots:
        assert snapshot.manifest_list is not None
        found.add(snapshot.manifest_list)
        found.update(m.manifest_path for m in snapshot_manifests(table.io, snapshot))
    return found


def commit_builder(table: Table, builder: MetadataBuilder) -> TableMetadata:
    """Commit a metadata-only change through the catalog (refs, specs) without a retry."""
    return table.commit_metadata(table.metadata, builder.build())


def tag(table: Table, name: str, snapshot_id: int) -> None:
    builder = MetadataBuilder(table.metadata)
    commit_builder(table, builder.set_ref(name, SnapshotRef(snapshot_id, SnapshotRefType.TAG)))


def add_spec(table: Table, spec: PartitionSpec) -> int:
    builder = MetadataBuilder(table.metadata)
    spec_id = builder.add_partition_spec(spec)
    commit_builder(table, builder)
    return spec_id


def agreed_rows(table: Table, duck: duckdb.DuckDBPyConnection) -> Counter[tuple[Any, ...]]:
    """The (id, cat, v) rows of a `CatalogTable` as icecore, DuckDB and PyIceberg read them
    (they must agree; the tables have no equality deletes, which PyIceberg cannot read)."""
    ours = Counter((r["id"], r["cat"], r["v"]) for r in scan_rows(table.io, table.metadata))
    location = table.metadata_location
    assert location is not None
    sql = f"SELECT id, cat, v FROM iceberg_scan('{location}')"
    assert Counter(duck.execute(sql).fetchall()) == ours, "DuckDB disagrees"
    arrow = StaticTable.from_metadata(location).scan().to_arrow()
    theirs = zip(*(arrow.column(c).to_pylist() for c in ("id", "cat", "v")), strict=True)
    assert Counter(theirs) == ours, "PyIceberg disagrees"
    return ours


def head_id(table: Table) -> int:
    snapshot_id = table.refresh().metadata.current_snapshot_id
    assert snapshot_id is not None
    return snapshot_id


def assert_clean(table: Table) -> None:
    """Nothing under metadata/ that no snapshot references (no leftovers of a failed commit)."""
    table.refresh()
    assert metadata_files(table) == referenced_files(table)


def v3_files(catalog: SqlCatalog) -> CatalogTable:
    """`three_files` on a format-v3 table (deletes are deletion vectors)."""
    t = CatalogTable.create(catalog, "dv_conflicts", properties={"format-version": "3"})
    t.data([{"id": 1, "cat": "a"}, {"id": 2, "cat": "a"}], name="a1")
    t.data([{"id": 3, "cat": "a"}], name="a2")
    t.data([{"id": 10, "cat": "b"}, {"id": 11, "cat": "b"}], name="b1")
    t.table.new_fast_append().append_file(t["a1"]).append_file(t["a2"]).append_file(
        t["b1"]
    ).commit()
    return t
