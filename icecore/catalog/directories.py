"""Where tables keep their files, and whose a file is when table locations nest.

Iceberg's default layout (Java's JDBC and Hadoop catalogs, PyIceberg's SQL catalog, icecore)
puts table `db.events` at `<wh>/db/events` and table `archive` of namespace `db.events` at
`<wh>/db/events/archive`: inside the first. Anything that deletes files because its table
does not reference them (orphan removal), or because only its own expired snapshots did
(expiry of a snapshot that shares files with another table), must know every table's
directories, or it deletes another table's files. Iceberg Java's procedures do not check;
icecore does:

- `TableDirectories` are the trees a table writes into: its location, its data directory
  and its metadata directory, as `icecore.location_provider` places them (`write.data.path`
  and `write.metadata.path`, else `<location>/data` and `<location>/metadata`).
- `catalog_directories` lists a catalog once (every table, and with a SQL catalog the tables
  of the other catalog names in the same database) and reads the tables' metadata in
  parallel: one metadata read per table, whatever the number of files checked later.
- `DirectoryIndex.owners` answers, for one file, which tables' trees hold it most deeply: a
  file under `<wh>/db/events/archive` belongs to `db.events.archive`, not to `db.events`.
- `placement_conflict` refuses a new table that would share another's location or live in
  another's data or metadata directory (nesting under a table's root stays allowed).

Locations compare by `icecore.io.locations.location_key`: every spelling other engines write
for the same object (`s3a://` for `s3://`, `file:` for a bare path, ...) is one.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from icecore.errors import IcecoreError
from icecore.io.locations import Key, key_within, location_key
from icecore.location_provider import data_location, metadata_directory, strip_trailing_slash

if TYPE_CHECKING:
    from icecore.catalog.base import Catalog
    from icecore.io import FileIO

DEFAULT_THREADS = 16


def _ancestors(key: Key) -> Iterator[Key]:
    """`key` itself, then each parent directory up to the root, deepest first."""
    scheme, authority, path = key
    while True:
        yield scheme, authority, path
        if path in ("", "/"):
            return
        parent = path.rsplit("/", 1)[0]
        path = parent or "/"


class Tree(NamedTuple):
    """One directory a table writes into; `key` compares it (see `location_key`)."""

    kind: str  # "location", "data" or "metadata"
    location: str
    key: Key


def _tree(kind: str, location: str) -> Tree:
    return Tree(kind, location, location_key(location))


@dataclass(frozen=True)
class TableDirectories:
    """The trees of one table, named for messages (`db.events`, or `other:db.events` for a
    table of another catalog name in the same database)."""

    name: str
    location: str
    data: str
    metadata: str
    metadata_location: str | None = None
    # Derived once: catalogs of thousands of tables compare these keys many times.
    root: Tree = field(init=False, repr=False, compare=False)
    write_trees: tuple[Tree, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", _tree("location", self.location))
        trees = (_tree("data", self.data), _tree("metadata", self.metadata))
        object.__setattr__(self, "write_trees", trees)

    @classmethod
    def of(
        cls,
        name: str,
        location: str,
        properties: Mapping[str, Any],
        metadata_location: str | None = None,
    ) -> TableDirectories:
        """The trees of a table at `location` with table `properties`."""
        location = strip_trailing_slash(location)
        data = data_location(location, properties)
        metadata = metadata_directory(location, properties)
        return cls(name, location, data, metadata, metadata_location)

    @classmethod
    def from_metadata_json(
        cls, name: str, document: Mapping[str, Any], metadata_location: str | None = None
    ) -> TableDirectories:
        location = document.get("location")
        if not isinstance(location, str) or not location:
            raise ValueError("the metadata has no location")
        return cls.of(name, location, document.get("properties") or {}, metadata_location)

    @property
    def trees(self) -> tuple[Tree, ...]:
        return (self.root, *self.write_trees)


def protected_directories(locations: Iterable[str]) -> list[TableDirectories]:
    """User-named locations to keep clear of, as pseudo-tables (catalogs we cannot list)."""
    return [TableDirectories(f"--protected-location {loc}", loc, loc, loc) for loc in locations]


@dataclass(frozen=True)
class Owner:
    table: TableDirectories
    tree: Tree


class DirectoryIndex:
    """The trees of many tables, to find which tables a file lies in most deeply."""

    def __init__(self, tables: Iterable[TableDirectories]) -> None:
        self._by_key: dict[Key, list[Owner]] = {}
        for table in tables:
            for tree in table.trees:
                owners = self._by_key.setdefault(tree.key, [])
                if not any(o.table.name == table.name for o in owners):
                    owners.append(Owner(table, tree))

    def owners(self, location: str) -> list[Owner]:
        """The tables whose trees hold `location` most deeply (several when they share that
        directory); empty when no tree holds it."""
        for key in _ancestors(location_key(location)):
            found = self._by_key.get(key)
            if found:
                return found
        return []


def placement_conflict(new: TableDirectories, others: Iterable[TableDirectories]) -> str | None:
    """Why `new` may not be placed where it is, given the catalog's `others`, or None.

    Refused: the same location as another table, a location or write directory inside
    another table's data or metadata directory (or the other way round), and write
    directories shared or nested. Allowed: a location under another table's location, which
    is the default layout of nested namespaces."""
    for other in others:
        if new.root.key == other.root.key:
            return f"table {other.name} already uses location {other.location}"
        for theirs in other.write_trees:
            if key_within(new.root.key, theirs.key):
                return (
                    f"its location {new.location} lies inside the {theirs.kind} directory of "
                    f"table {other.name} ({theirs.location})"
                )
        for mine in new.write_trees:
            if key_within(other.root.key, mine.key):
                return (
                    f"table {other.name} ({other.location}) would lie inside its {mine.kind} "
                    f"directory {mine.location}"
                )
        for mine in new.write_trees:
            for theirs in other.write_trees:
                if key_within(mine.key, theirs.key) or key_within(theirs.key, mine.key):
                    return (
                        f"its {mine.kind} directory {mine.location} overlaps the {theirs.kind} "
                        f"directory {theirs.location} of table {other.name}"
                    )
    return None


@dataclass(frozen=True)
class Overlap:
    """How one table's trees meet another's, from `table`'s side, for the UI."""

    table: str
    other: str
    problem: bool  # files mix (a placement conflict), not just nesting
    detail: str


def overlaps(tables: Sequence[TableDirectories]) -> dict[str, list[Overlap]]:
    """For each table that meets another, how: conflicts (files mix, see
    `placement_conflict`) and nesting by namespace (allowed; listed so a reader knows orphan
    removal sees it). Each tree's ancestors are looked up in an index of every tree, so a
    catalog of thousands of tables costs thousands of lookups, not millions of comparisons."""
    by_key: dict[Key, list[tuple[TableDirectories, Tree]]] = {}
    for table in tables:
        for tree in table.trees:
            by_key.setdefault(tree.key, []).append((table, tree))
    found: dict[str, dict[str, Overlap]] = {}

    def note(table: TableDirectories, other: TableDirectories, problem: bool, detail: str) -> None:
        known = found.setdefault(table.name, {}).get(other.name)
        if known is None or (problem and not known.problem):
            found[table.name][other.name] = Overlap(table.name, other.name, problem, detail)

    for table in tables:
        for tree in table.trees:
            for key in _ancestors(tree.key):
                for other, holder in by_key.get(key, ()):
                    if other.name == table.name:
                        continue
                    same = key == tree.key
                    if tree.kind == holder.kind == "location":
                        if same:
                            detail = f"same location as {other.name}"
                            note(table, other, True, detail)
                        else:
                            note(table, other, False, f"inside {other.name}")
                            note(other, table, False, f"contains {table.name}")
                    elif holder.kind != "location":
                        note(
                            table,
                            other,
                            True,
                            f"its {tree.kind} {tree.location} is inside the {holder.kind} "
                            f"directory of {other.name}",
                        )
                        note(
                            other,
                            table,
                            True,
                            f"its {holder.kind} directory holds the {tree.kind} of {table.name}",
                        )
    return {name: sorted(o.values(), key=lambda x: x.other) for name, o in found.items()}


def read_metadata_document(io: FileIO, location: str) -> dict[str, Any]:
    """A metadata file's JSON object (plain or gzip), without building the model: listing a
    catalog's directories needs two fields of each table."""
    raw = io.read_bytes(location)
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    document = json.loads(raw)
    if not isinstance(document, dict):
        raise ValueError("not a JSON object")
    return document


@dataclass(frozen=True)
class Unreadable:
    name: str
    metadata_location: str
    problem: str


@dataclass(frozen=True)
class CatalogDirectories:
    """Every table of a catalog with its trees; tables whose metadata could not be read."""

    tables: list[TableDirectories] = field(default_factory=list)
    unreadable: list[Unreadable] = field(default_factory=list)

    def excluding(self, name: str) -> list[TableDirectories]:
        return [t for t in self.tables if t.name != name]


# Metadata files never change once written, so the trees read from one hold for good: a
# process that lists a catalog again (every create_table checks placement) reads only the
# tables that committed since. Bounded, and cleared whole when full.
_CACHE_ENTRIES = 200_000
_TREES_BY_METADATA_FILE: dict[tuple[str, str], TableDirectories] = {}


class CatalogListingError(IcecoreError):
    """The catalog's tables could not be listed, so nobody can say which files are whose."""


def catalog_directories(catalog: Catalog, *, threads: int = DEFAULT_THREADS) -> CatalogDirectories:
    """List `catalog` once and read every table's metadata (in `threads` threads).

    Tables of other catalog names kept in the same database are included (see
    `Catalog.table_pointers`). A table whose metadata cannot be read is reported, not
    skipped silently: the caller decides whether it can go on without knowing its trees."""
    try:
        pointers = list(catalog.table_pointers(all_catalogs=True))
    except Exception as exc:  # whatever the catalog raised, the answer is "cannot know"
        raise CatalogListingError(
            f"cannot list the tables of catalog {catalog.name!r}, so files of other tables "
            f"cannot be told apart: {type(exc).__name__}: {exc}"
        ) from exc

    def read(pointer: tuple[str, str]) -> TableDirectories | Unreadable:
        name, location = pointer
        try:
            document = read_metadata_document(catalog.io, location)
            found = TableDirectories.from_metadata_json(name, document, location)
        except Exception as exc:  # any unreadable table is reported, none stops the listing
            return Unreadable(name, location, f"{type(exc).__name__}: {exc}")
        if len(_TREES_BY_METADATA_FILE) >= _CACHE_ENTRIES:
            _TREES_BY_METADATA_FILE.clear()
        _TREES_BY_METADATA_FILE[(location, name)] = found
        return found

    named = [(p.display_name(catalog.name), p.metadata_location) for p in pointers]
    results: list[TableDirectories | Unreadable] = []
    missing = []
    for name, location in named:
        cached = _TREES_BY_METADATA_FILE.get((location, name))
        if cached is None:
            missing.append((name, location))
        else:
            results.append(cached)
    if missing:
        with ThreadPoolExecutor(max_workers=max(1, min(threads, len(missing)))) as pool:
            results.extend(pool.map(read, missing))
    return CatalogDirectories(
        tables=[r for r in results if isinstance(r, TableDirectories)],
        unreadable=[r for r in results if isinstance(r, Unreadable)],
    )
