"""What every catalog does, whatever database or service keeps its pointers.

A catalog maps a table identifier to the location of the table's current metadata file and
swaps that pointer atomically on commit. Everything else a commit needs, writing the new
metadata file under its conventional name and deleting the ones that fell off the metadata
log, is the same for every catalog and lives here; `SqlCatalog` only supplies the database
statements.
"""

from __future__ import annotations

import logging
import re
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace

from icecore.catalog.locations import TableDirectories, catalog_directories, placement_conflict
from icecore.errors import (
    AlreadyExistsError,
    CatalogError,
    CommitStateUnknownError,
    FileError,
    MetadataError,
    NoSuchNamespaceError,
    ValidationError,
)
from icecore.io import FileIO
from icecore.scan import snapshot_manifests
from icecore.spec.manifest import read_manifest
from icecore.spec.manifest_list import ManifestFile
from icecore.spec.metadata import TableMetadata, read_table_metadata, write_table_metadata
from icecore.spec.metadata_builder import new_table_metadata
from icecore.spec.partitioning import UNPARTITIONED, PartitionSpec
from icecore.spec.schema import Schema
from icecore.spec.snapshots import Snapshot
from icecore.spec.sorting import UNSORTED, SortOrder
from icecore.table import Table

LOG = logging.getLogger(__name__)

WAREHOUSE = "warehouse"
LOCATION = "location"  # namespace property: where its tables go by default
METADATA_PATH = "write.metadata.path"
METADATA_COMPRESSION = "write.metadata.compression-codec"
DELETE_AFTER_COMMIT = "write.metadata.delete-after-commit.enabled"
GC_ENABLED = "gc.enabled"

Identifier = tuple[str, ...]


@dataclass(frozen=True)
class TablePointer:
    """A table of a catalog and its current metadata file, as a catalog listing gives it."""

    catalog_name: str
    identifier: Identifier
    metadata_location: str

    def display_name(self, own_catalog: str) -> str:
        """`db.events`, or `other:db.events` for a table of another catalog name."""
        name = ".".join(self.identifier)
        return name if self.catalog_name == own_catalog else f"{self.catalog_name}:{name}"


# `00042-<uuid>.metadata.json` as Java and PyIceberg write them, and `v42.metadata.json` as
# Hadoop tables do, so that a registered Hadoop table goes on counting from its version.
_VERSIONED_NAME = re.compile(r"^(?:(\d+)-|v(\d+)\.)")


def to_identifier(identifier: str | Iterable[str]) -> Identifier:
    """`"db.events"` or `("db", "events")` as a tuple; empty levels are refused."""
    parts = tuple(identifier.split(".")) if isinstance(identifier, str) else tuple(identifier)
    # Catalogs store namespaces joined by '.', so a level holding one could not be told apart.
    if not parts or any(not p or "." in p for p in parts):
        raise CatalogError(f"invalid identifier {identifier!r}: empty level or '.' in a level")
    return parts


def table_identifier(identifier: str | Iterable[str]) -> Identifier:
    """A table identifier: at least one namespace level, then the table name."""
    parts = to_identifier(identifier)
    if len(parts) < 2:
        raise CatalogError(f"table identifier {identifier!r} needs a namespace: 'db.table'")
    return parts


def metadata_version(location: str | None) -> int:
    """The version encoded in a metadata file name, or -1 when it has none (Java's rule)."""
    if location is None:
        return -1
    match = _VERSIONED_NAME.match(location.rsplit("/", 1)[-1])
    if match is None:
        return -1
    return int(match.group(1) or match.group(2))


def new_metadata_location(metadata: TableMetadata, version: int) -> str:
    """`<location>/metadata/NNNNN-<uuid>.metadata.json`, honouring `write.metadata.path` and
    gzip compression as Java's `BaseMetastoreTableOperations` names them."""
    directory = metadata.properties.get(METADATA_PATH, f"{metadata.location}/metadata")
    codec = metadata.properties.get(METADATA_COMPRESSION, "none").lower()
    if codec not in ("none", "gzip"):
        raise CatalogError(f"{METADATA_COMPRESSION} must be 'none' or 'gzip', got {codec!r}")
    suffix = ".gz.metadata.json" if codec == "gzip" else ".metadata.json"
    return f"{directory.rstrip('/')}/{version:05d}-{uuid.uuid4()}{suffix}"


class Catalog(ABC):
    """A named catalog of namespaces and tables.

    `properties` are catalog properties with Iceberg's names: `warehouse` (where new tables
    go) and the FileIO ones (`s3.endpoint`, ...). Subclasses provide the pointer store; the
    commit protocol (`commit_table`) is shared.
    """

    def __init__(
        self, name: str, properties: Mapping[str, str] | None = None, io: FileIO | None = None
    ) -> None:
        if not name:
            raise CatalogError("a catalog needs a name")
        self.name = name
        self.properties = dict(properties or {})
        self.io = io or FileIO(self.properties)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    # Namespaces ---------------------------------------------------------------------------

    @abstractmethod
    def create_namespace(
        self, namespace: str | Iterable[str], properties: Mapping[str, str] | None = None
    ) -> None: ...

    @abstractmethod
    def namespace_exists(self, namespace: str | Iterable[str]) -> bool: ...

    @abstractmethod
    def list_namespaces(self, parent: str | Iterable[str] = ()) -> list[Identifier]:
        """The namespaces one level below `parent` (top-level ones by default)."""

    @abstractmethod
    def load_namespace_properties(self, namespace: str | Iterable[str]) -> dict[str, str]: ...

    @abstractmethod
    def update_namespace_properties(
        self,
        namespace: str | Iterable[str],
        removals: Iterable[str] = (),
        updates: Mapping[str, str] | None = None,
    ) -> None: ...

    @abstractmethod
    def drop_namespace(self, namespace: str | Iterable[str]) -> None:
        """Drop an empty namespace; NamespaceNotEmptyError if tables or children remain."""

    # Tables -------------------------------------------------------------------------------

    @abstractmethod
    def list_tables(self, namespace: str | Iterable[str]) -> list[Identifier]: ...

    @abstractmethod
    def table_exists(self, identifier: str | Iterable[str]) -> bool: ...

    def table_pointers(self, *, all_catalogs: bool = False) -> Iterator[TablePointer]:
        """Every table of the catalog, in every namespace, with its metadata location.

        `all_catalogs` also asks for the tables of other catalogs kept in the same store
        (a SQL database holds any number of catalog names); a catalog that cannot see others
        gives its own. This walk costs one call per namespace and per table; catalogs that
        can list everything at once override it."""
        pending: list[Identifier] = list(self.list_namespaces())
        while pending:
            namespace = pending.pop()
            pending.extend(self.list_namespaces(namespace))
            for identifier in self.list_tables(namespace):
                yield TablePointer(
                    self.name, identifier, self.current_metadata_location(identifier)
                )

    @abstractmethod
    def current_metadata_location(self, identifier: str | Iterable[str]) -> str:
        """Where the table's current metadata is; NoSuchTableError if the table is unknown."""

    @abstractmethod
    def register_table(self, identifier: str | Iterable[str], metadata_location: str) -> Table:
        """Add a table whose metadata file exists already (e.g. written by Spark)."""

    @abstractmethod
    def rename_table(
        self, from_identifier: str | Iterable[str], to_identifier: str | Iterable[str]
    ) -> Table: ...

    @abstractmethod
    def _drop_table_row(self, identifier: Identifier) -> None:
        """Forget the table; NoSuchTableError if there was nothing to forget."""

    @abstractmethod
    def _swap(self, identifier: Identifier, expected: str | None, new: str) -> None:
        """Point the table at `new` if it points at `expected` (None: create the table).

        Raises CommitFailedError when the table moved (nothing changed; the caller deletes
        `new`), AlreadyExistsError when creating a table that exists, and
        CommitStateUnknownError when the database cannot say whether the swap happened.
        """

    def load_metadata(self, identifier: str | Iterable[str]) -> TableMetadata:
        ident = table_identifier(identifier)
        location = self.current_metadata_location(ident)
        try:
            return read_table_metadata(self.io, location)
        except FileError as exc:
            raise MetadataError(
                location,
                f"current metadata of table {'.'.join(ident)} in catalog {self.name!r} "
                f"cannot be read: {exc.problem}",
            ) from exc

    def load_table(self, identifier: str | Iterable[str]) -> Table:
        ident = table_identifier(identifier)
        return Table(ident, self.load_metadata(ident), self.io, self)

    def create_table(
        self,
        identifier: str | Iterable[str],
        schema: Schema,
        *,
        spec: PartitionSpec = UNPARTITIONED,
        sort_order: SortOrder = UNSORTED,
        properties: Mapping[str, str] | None = None,
        location: str | None = None,
    ) -> Table:
        """Create an empty table; its location defaults to `default_table_location`."""
        ident = table_identifier(identifier)
        if not self.namespace_exists(ident[:-1]):
            raise NoSuchNamespaceError(f"namespace {'.'.join(ident[:-1])} does not exist")
        if self.table_exists(ident):
            raise AlreadyExistsError(f"table {'.'.join(ident)} already exists")
        metadata = new_table_metadata(
            schema,
            location or self.default_table_location(ident),
            spec=spec,
            sort_order=sort_order,
            properties=properties,
        )
        self.check_placement(ident, metadata)
        return Table(ident, self.commit_table(ident, None, metadata), self.io, self)

    def check_placement(self, identifier: Identifier, metadata: TableMetadata) -> None:
        """Refuse a new table whose files would mix with another table's: the same location,
        or a location or write directory inside another's data or metadata directory (see
        `icecore.catalog.locations.placement_conflict`). Nesting under another table's
        location, the default layout of nested namespaces, stays allowed."""
        name = ".".join(identifier)
        new = TableDirectories.of(name, metadata.location, metadata.properties)
        others = catalog_directories(self).excluding(name)
        conflict = placement_conflict(new, others)
        if conflict is not None:
            raise AlreadyExistsError(
                f"cannot place table {name} at {metadata.location}: {conflict}; its files "
                "would mix with that table's, and cleaning one would delete the other's. "
                "Choose another location"
            )

    def default_table_location(self, identifier: Identifier) -> str:
        """The namespace's `location` property, else `<warehouse>/<ns1>/<ns2>/<table>` as
        Java's JdbcCatalog lays tables out."""
        namespace_location = self.load_namespace_properties(identifier[:-1]).get(LOCATION)
        if namespace_location:
            return f"{namespace_location.rstrip('/')}/{identifier[-1]}"
        warehouse = self.properties.get(WAREHOUSE)
        if not warehouse:
            raise CatalogError(
                f"cannot place table {'.'.join(identifier)}: catalog {self.name!r} has no "
                f"warehouse and its namespace no location; pass location="
            )
        return "/".join((warehouse.rstrip("/"), *identifier))

    # Commits ------------------------------------------------------------------------------

    def commit_table(
        self, identifier: str | Iterable[str], base: TableMetadata | None, updated: TableMetadata
    ) -> TableMetadata:
        """Make `updated` the table's current metadata, if `base` still is (None: create).

        The new metadata file is written first, under a fresh name, then the pointer is
        swapped in one compare-and-swap. A lost swap deletes the file, which nothing can
        reference, and raises CommitFailedError; an unknown outcome leaves it in place.
        """
        ident = table_identifier(identifier)
        if base is not None and base.metadata_location is None:
            raise CatalogError(
                f"cannot commit to {'.'.join(ident)}: the base metadata was not loaded from "
                "the catalog, so there is nothing to compare the table's pointer with"
            )
        version = metadata_version(base.metadata_location) + 1 if base is not None else 0
        location = new_metadata_location(updated, version)
        try:
            write_table_metadata(self.io, location, updated)
        except FileError:
            self._discard(location)  # a partly written file, if any
            raise
        try:
            self._swap(ident, None if base is None else base.metadata_location, location)
        except CommitStateUnknownError:
            raise
        except Exception:
            # Nothing points at the new file: the swap was refused or never ran.
            self._discard(location)
            raise
        committed = replace(updated, metadata_location=location)
        if base is not None:
            self._delete_dropped_metadata(base, committed)
        return committed

    def _discard(self, location: str) -> None:
        """Delete a metadata file nothing references; failing to only leaves an orphan,
        which must not hide the error that made it one."""
        try:
            self.io.delete(location, missing_ok=True)
        except FileError as exc:
            LOG.warning("could not delete unreferenced metadata file: %s", exc)

    def _delete_dropped_metadata(self, base: TableMetadata, committed: TableMetadata) -> None:
        """With `write.metadata.delete-after-commit.enabled`, delete the metadata files that
        fell off the log. The commit has happened: nothing here may raise, failures only
        cost storage."""
        try:
            enabled = committed.property_as_bool(DELETE_AFTER_COMMIT, False)
        except ValidationError as exc:
            LOG.warning("%s; old metadata files are kept", exc)
            return
        if not enabled:
            return
        kept = {e.metadata_file for e in committed.metadata_log}
        previous = [e.metadata_file for e in base.metadata_log]
        previous.append(base.metadata_location or "")
        for location in previous:
            if location and location not in kept and location != committed.metadata_location:
                self._discard(location)

    # Dropping -----------------------------------------------------------------------------

    def drop_table(self, identifier: str | Iterable[str], purge: bool = False) -> None:
        """Forget the table; with `purge`, also delete its files (see `reachable_files`), if
        its metadata can still be read.

        The catalog row goes first: a purge interrupted half way then leaves unreferenced
        files behind, never a table whose files are partly gone.
        """
        ident = table_identifier(identifier)
        metadata = None
        if purge:
            try:
                metadata = self.load_metadata(ident)
            except FileError as exc:
                # Java's rule: a table whose metadata is gone can still be dropped.
                LOG.warning("dropping %s without purge: %s", ".".join(ident), exc)
        with_data = metadata is not None and metadata.property_as_bool(GC_ENABLED, True)
        self._drop_table_row(ident)
        if metadata is None:
            return
        for location in reachable_files(self.io, metadata, include_data=with_data):
            try:
                self.io.delete(location, missing_ok=True)
            except FileError as exc:
                LOG.warning("purge of %s: %s", ".".join(ident), exc)

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections; the catalog must not be used afterwards."""


def _log_unreadable(exc: FileError) -> None:
    LOG.warning("skipping unreadable file: %s", exc)


def reachable_files(
    io: FileIO,
    metadata: TableMetadata,
    include_data: bool = True,
    on_unreadable: Callable[[FileError], None] = _log_unreadable,
) -> Iterator[str]:
    """Every file the table's metadata versions reference, each once: for the current
    metadata and every version still in its metadata log, the manifest lists, manifests
    and (with `include_data`) data and delete files of their snapshots, the statistics
    files, and the metadata files themselves. Each file is yielded after it was read, so
    a caller may delete as it goes.

    Purging leaves data out when `gc.enabled` is false: such a table may share its data
    files with another one (Java's `CatalogUtil.dropTableData` rule). Metadata versions that
    can no longer be read are skipped and reported to `on_unreadable` (default: a warning);
    purging must get as far as it can, while orphan removal must not trust a walk that
    skipped a file a current snapshot needs (it passes a collector and checks).
    """
    versions = [metadata]
    for entry in metadata.metadata_log:
        try:
            versions.append(read_table_metadata(io, entry.metadata_file))
        except FileError as exc:
            on_unreadable(exc)
    # Snapshots are immutable: read each one's manifest list once, however many versions
    # list it, and keep the version that knows its partition specs.
    snapshots: dict[int, tuple[Snapshot, TableMetadata]] = {}
    for version in versions:
        for snapshot in version.snapshots:
            snapshots.setdefault(snapshot.snapshot_id, (snapshot, version))

    seen: set[str] = set()

    def new(location: str) -> bool:
        if location in seen:
            return False
        seen.add(location)
        return True

    manifests: dict[str, tuple[ManifestFile, TableMetadata]] = {}
    for snapshot, version in snapshots.values():
        try:
            for manifest in snapshot_manifests(io, snapshot):
                manifests.setdefault(manifest.manifest_path, (manifest, version))
        except FileError as exc:
            on_unreadable(exc)
        if snapshot.manifest_list and new(snapshot.manifest_list):
            yield snapshot.manifest_list
    for path, (manifest, version) in manifests.items():
        if include_data:
            try:
                spec = version.spec_by_id(manifest.partition_spec_id)
                for entry in read_manifest(io, manifest, spec=spec, include_metrics=False):
                    if new(entry.data_file.file_path):
                        yield entry.data_file.file_path
            except FileError as exc:
                on_unreadable(exc)
        if new(path):
            yield path
    for version in versions:
        for key in ("statistics", "partition-statistics"):
            for stats in version.extra.get(key) or ():
                path = stats.get("statistics-path") if isinstance(stats, dict) else None
                if path and new(path):
                    yield path
    for version in versions:
        if version.metadata_location and new(version.metadata_location):
            yield version.metadata_location
