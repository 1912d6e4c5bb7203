"""What every catalog does, whether it keeps pointers in a database or is a REST service.

A catalog names namespaces and tables and commits changes to a table. A commit is the same
everywhere: `commit_table` turns the metadata an update built into the REST spec's
requirements and updates (`icecore.commit.changes.TableCommit`), and each catalog applies
them its way: `MetastoreCatalog` (the SQL catalog) writes the next metadata file and swaps a
pointer, `RestCatalog` sends them to the server.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from icecore.commit.changes import TableCommit
from icecore.errors import (
    CatalogError,
    NoSuchNamespaceError,
    NoSuchTableError,
)
from icecore.io import FileIO
from icecore.spec.metadata import TableMetadata, read_table_metadata
from icecore.spec.partitioning import UNPARTITIONED, PartitionSpec
from icecore.spec.schema import Schema
from icecore.spec.sorting import UNSORTED, SortOrder
from icecore.table import Table

LOG = logging.getLogger(__name__)

WAREHOUSE = "warehouse"
LOCATION = "location"  # namespace property: where its tables go by default

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

    def table_versions(self, namespace: str | Iterable[str] | None = None) -> dict[Identifier, str]:
        """Each table's version: its current metadata location, which every commit changes.

        All tables of the catalog, or those of `namespace` and the namespaces below it (a
        namespace that does not exist holds none). This is what a watcher asks at every poll
        (`icecore.changes.CatalogWatch`), so catalogs answer it as cheaply as they can: this
        walk costs a call per namespace and per table; the SQL catalog answers with one query
        and the REST catalog loads tables with `If-None-Match`. A table dropped while it is
        walked is left out.
        """
        if namespace is None:
            return {p.identifier: p.metadata_location for p in self.table_pointers()}
        versions: dict[Identifier, str] = {}
        pending: list[Identifier] = [to_identifier(namespace)]
        while pending:
            current = pending.pop()
            try:
                pending.extend(self.list_namespaces(current))
                tables = self.list_tables(current)
            except NoSuchNamespaceError:
                continue
            for identifier in tables:
                try:
                    versions[identifier] = self.current_metadata_location(identifier)
                except NoSuchTableError:
                    continue
        return versions

    def metadata_at(self, identifier: str | Iterable[str], metadata_location: str) -> TableMetadata:
        """The table's metadata as of `metadata_location`, one of its versions
        (`table_versions`); a catalog that already holds it (a REST load) needs no read."""
        table_identifier(identifier)
        return read_table_metadata(self.io, metadata_location)

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

    def load_table(self, identifier: str | Iterable[str]) -> Table:
        ident = table_identifier(identifier)
        return Table(ident, self.load_metadata(ident), self.io, self)

    @abstractmethod
    def load_metadata(self, identifier: str | Iterable[str]) -> TableMetadata:
        """The table's current metadata; NoSuchTableError if the table is unknown."""

    @abstractmethod
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
        """Create an empty table; its location defaults to the catalog's choice."""

    @abstractmethod
    def drop_table(self, identifier: str | Iterable[str], purge: bool = False) -> None:
        """Forget the table; with `purge`, also delete its files."""

    # Commits ------------------------------------------------------------------------------

    def commit_table(
        self, identifier: str | Iterable[str], base: TableMetadata, updated: TableMetadata
    ) -> TableMetadata:
        """Make `updated` the table's current metadata, if the table is still as `base` was.

        The difference is sent as the REST spec's requirements and updates (`TableCommit`),
        whatever the catalog; nothing to change commits nothing.
        """
        ident = table_identifier(identifier)
        commit = TableCommit.between(base, updated)
        if not commit.updates:
            return base
        return self._commit(ident, base, commit, updated.last_updated_ms)

    @abstractmethod
    def _commit(
        self, identifier: Identifier, base: TableMetadata, commit: TableCommit, timestamp_ms: int
    ) -> TableMetadata:
        """Apply `commit` if its requirements hold; return the committed metadata.

        Raises CommitFailedError when a requirement failed (retryable: refresh, re-validate),
        CommitStateUnknownError when the catalog cannot say whether it applied the commit.
        """

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections; the catalog must not be used afterwards."""
