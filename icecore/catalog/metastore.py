"""Catalogs that keep a pointer per table to its current metadata file (the SQL catalog).

Such a catalog commits by writing the next metadata file itself, under the conventional
`NNNNN-<uuid>.metadata.json` name, and swapping the table's pointer to it in one
compare-and-swap; it also places new tables, refuses placements that would mix two tables'
files, and deletes what falls off the metadata log. A subclass supplies only the pointer
store: `_swap`, `_drop_table_row` and `current_metadata_location`.
"""

from __future__ import annotations

import logging
import re
import uuid
from abc import abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import replace

from icecore.catalog.base import (
    LOCATION,
    WAREHOUSE,
    Catalog,
    Identifier,
    table_identifier,
)
from icecore.catalog.directories import TableDirectories, catalog_directories, placement_conflict
from icecore.catalog.reachable import reachable_files
from icecore.commit.changes import TableCommit, apply_updates
from icecore.errors import (
    AlreadyExistsError,
    CatalogError,
    CommitStateUnknownError,
    FileError,
    MetadataError,
    NoSuchNamespaceError,
    ValidationError,
)
from icecore.location_provider import metadata_file_location
from icecore.spec.metadata import TableMetadata, read_table_metadata, write_table_metadata
from icecore.spec.metadata_builder import new_table_metadata
from icecore.spec.partitioning import UNPARTITIONED, PartitionSpec
from icecore.spec.properties import (
    GC_ENABLED,
    METADATA_COMPRESSION,
    METADATA_DELETE_AFTER_COMMIT_ENABLED,
)
from icecore.spec.schema import Schema
from icecore.spec.sorting import UNSORTED, SortOrder
from icecore.table import Table

LOG = logging.getLogger(__name__)

# `00042-<uuid>.metadata.json` as Java and PyIceberg write them, and `v42.metadata.json` as
# Hadoop tables do, so that a registered Hadoop table goes on counting from its version.
_VERSIONED_NAME = re.compile(r"^(?:(\d+)-|v(\d+)\.)")


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
    codec = str(METADATA_COMPRESSION.read(metadata.properties)).lower()
    if codec not in ("none", "gzip"):
        raise CatalogError(f"{METADATA_COMPRESSION.name} must be 'none' or 'gzip', got {codec!r}")
    suffix = ".gz.metadata.json" if codec == "gzip" else ".metadata.json"
    return metadata_file_location(metadata, f"{version:05d}-{uuid.uuid4()}{suffix}")


class MetastoreCatalog(Catalog):
    """A catalog whose commits are a metadata file written here plus a pointer swap."""

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
        return Table(ident, self._write_and_swap(ident, None, metadata), self.io, self)

    def check_placement(self, identifier: Identifier, metadata: TableMetadata) -> None:
        """Refuse a new table whose files would mix with another table's: the same location,
        or a location or write directory inside another's data or metadata directory (see
        `icecore.catalog.directories.placement_conflict`). Nesting under another table's
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

    def _commit(
        self, identifier: Identifier, base: TableMetadata, commit: TableCommit, timestamp_ms: int
    ) -> TableMetadata:
        """Apply `commit` to `base`, write the result as the next metadata file, and swap the
        pointer from `base`'s file to it in one compare-and-swap: the pointer still being
        `base`'s file implies every requirement holds. A lost swap deletes the file, which
        nothing can reference, and raises CommitFailedError; an unknown outcome leaves it.
        """
        if base.metadata_location is None:
            raise CatalogError(
                f"cannot commit to {'.'.join(identifier)}: the base metadata was not loaded "
                "from the catalog, so there is nothing to compare the table's pointer with"
            )
        for requirement in commit.requirements:
            requirement.check(base)
        updated = apply_updates(base, commit.updates, timestamp_ms)
        committed = self._write_and_swap(identifier, base, updated)
        self._delete_dropped_metadata(base, committed)
        return committed

    def _write_and_swap(
        self, identifier: Identifier, base: TableMetadata | None, updated: TableMetadata
    ) -> TableMetadata:
        version = metadata_version(base.metadata_location) + 1 if base is not None else 0
        location = new_metadata_location(updated, version)
        try:
            write_table_metadata(self.io, location, updated)
        except FileError:
            self._discard(location)  # a partly written file, if any
            raise
        try:
            self._swap(identifier, None if base is None else base.metadata_location, location)
        except CommitStateUnknownError:
            raise
        except Exception:
            # Nothing points at the new file: the swap was refused or never ran.
            self._discard(location)
            raise
        return replace(updated, metadata_location=location)

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
            enabled = METADATA_DELETE_AFTER_COMMIT_ENABLED.read(committed.properties)
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
        with_data = metadata is not None and GC_ENABLED.read(metadata.properties)
        self._drop_table_row(ident)
        if metadata is None:
            return
        for location in reachable_files(self.io, metadata, include_data=with_data):
            try:
                self.io.delete(location, missing_ok=True)
            except FileError as exc:
                LOG.warning("purge of %s: %s", ".".join(ident), exc)
