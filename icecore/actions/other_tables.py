"""Keeping file deletion off other tables' files.

A table's location may hold other tables: with the default layout, `db.events.archive` lives
at `<wh>/db/events/archive`, inside `db.events`. Orphan removal on `db.events` lists that tree
too, and every file of the archive table is unreferenced by `db.events`: Iceberg Java's
procedure deletes them. Before deleting anything, the jobs here list the catalog once
(`icecore.catalog.directories.catalog_directories`) and keep whatever belongs to another table:

- another table's trees (location, data and metadata directories) under the cleaned location
  are excluded whole: a file belongs to the table whose tree holds it most deeply;
- a table whose trees contain the cleaned location (a parent table, or one that writes data
  or metadata above it) may have files among ours: its referenced files are read and kept;
- a table registered at the same location, a table whose metadata cannot be read where its
  files could be among ours, or a user-protected location around the cleaned one: nobody can
  tell the files apart, so a deleting run refuses (a dry run reports why).

Catalogs the job cannot see (another database on the same warehouse) are the limit: their
locations are named with `--protected-location`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from icecore.actions.referenced_files import referenced_files
from icecore.catalog.directories import (
    CatalogDirectories,
    DirectoryIndex,
    TableDirectories,
    protected_directories,
)
from icecore.io import FileIO
from icecore.io.locations import is_within, location_key
from icecore.jobs.errors import JobError
from icecore.spec.metadata import read_table_metadata


@dataclass(frozen=True)
class Exclusion:
    """A subtree of the cleaned location that another table owns."""

    location: str
    table: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"location": self.location, "table": self.table, "reason": self.reason}


@dataclass
class OtherTables:
    """What of a location belongs to tables other than `ours`."""

    ours: TableDirectories
    index: DirectoryIndex
    exclusions: list[Exclusion] = field(default_factory=list)
    kept_referenced: set[str] = field(default_factory=set)
    kept_reasons: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    tables_checked: int = 0
    unreadable_elsewhere: int = 0
    check_ms: int = 0

    def owner_elsewhere(self, location: str) -> str | None:
        """The other table a file belongs to, or None when it is ours (or nobody's)."""
        if location in self.kept_referenced:
            return "referenced by another table"
        owners = self.index.owners(location)
        others = [o.table.name for o in owners if o.table.name != self.ours.name]
        return others[0] if others else None

    def report(self) -> dict[str, object]:
        return {
            "excluded_locations": [e.to_dict() for e in self.exclusions],
            "other_tables_checked": self.tables_checked,
            "other_tables_referenced_files_kept": len(self.kept_referenced),
            "other_tables_notes": self.kept_reasons + self.conflicts,
            "other_tables_unreadable_elsewhere": self.unreadable_elsewhere,
            "other_tables_check_ms": self.check_ms,
        }


def ownership(
    ours: TableDirectories, listing: CatalogDirectories, *, protected: Iterable[str] = ()
) -> OtherTables:
    """Only the index of every table's trees: for expiry, which deletes files its own
    snapshots referenced and must still keep those lying in another table's tree (a table
    registered from another engine's metadata may reference them)."""
    others = [*listing.excluding(ours.name), *protected_directories(protected)]
    found = OtherTables(ours=ours, index=DirectoryIndex([ours, *others]))
    found.tables_checked = len(listing.excluding(ours.name))
    return found


def _guessed_location(metadata_location: str) -> str:
    """`<location>/metadata/<file>` -> `<location>`: where an unreadable table most likely
    lives."""
    directory = metadata_location.rsplit("/", 1)[0]
    parent, _, name = directory.rpartition("/")
    return parent if name == "metadata" and parent else directory


def other_tables(
    io: FileIO,
    ours: TableDirectories,
    cleaned: str,
    listing: CatalogDirectories,
    *,
    protected: Iterable[str] = (),
) -> OtherTables:
    """Sort every other table of `listing` (and the `protected` locations) by how it meets
    the `cleaned` location; see the module doc."""
    started = time.monotonic()
    others = [*listing.excluding(ours.name), *protected_directories(protected)]
    found = OtherTables(ours=ours, index=DirectoryIndex([ours, *others]))
    found.tables_checked = len(listing.excluding(ours.name))
    cleaned_key = location_key(cleaned)
    for other in others:
        if location_key(other.location) == location_key(ours.location):
            found.conflicts.append(
                f"table {other.name} is registered at the same location {other.location}: its "
                "files cannot be told apart from this table's orphans"
            )
            continue
        inside = [t for t in other.trees if is_within(t.location, cleaned)]
        for tree in inside:
            if tree.key == cleaned_key:
                continue
            if not any(is_within(tree.location, e.location) for e in found.exclusions):
                found.exclusions = [
                    e for e in found.exclusions if not is_within(e.location, tree.location)
                ]
                found.exclusions.append(
                    Exclusion(tree.location, other.name, f"{tree.kind} of table {other.name}")
                )
        around = [t for t in other.trees if is_within(cleaned, t.location)]
        if not around:
            continue
        if other.metadata_location is None:  # a --protected-location around the cleaned one
            found.conflicts.append(f"{other.name} contains {cleaned}: nothing under it may go")
            continue
        try:
            metadata = read_table_metadata(io, other.metadata_location)
            files = referenced_files(io, metadata, other.name)
        except Exception as exc:
            found.conflicts.append(
                f"table {other.name} ({around[0].kind} {around[0].location}) contains "
                f"{cleaned} and its files cannot be read ({exc})"
            )
            continue
        mine = {f for f in files if is_within(f, cleaned)}
        found.kept_referenced |= mine
        found.kept_reasons.append(
            f"table {other.name} ({around[0].kind} {around[0].location}) contains {cleaned}: "
            f"its {len(mine)} referenced file(s) there are kept"
        )
    for table in listing.unreadable:
        if table.name == ours.name:
            continue
        guess = _guessed_location(table.metadata_location)
        if (
            is_within(table.metadata_location, cleaned)
            or is_within(guess, cleaned)
            or is_within(cleaned, guess)
        ):
            found.conflicts.append(
                f"the metadata of table {table.name} ({table.metadata_location}) cannot be "
                f"read ({table.problem}), and its files may lie under {cleaned}"
            )
        else:
            found.unreadable_elsewhere += 1
    found.check_ms = int((time.monotonic() - started) * 1000)
    return found


def refuse_conflicts(found: OtherTables, table: str, action: str) -> None:
    """JobError naming every reason the files cannot be told apart; nothing was deleted."""
    if found.conflicts:
        raise JobError(
            f"cannot {action} of {table}: {'; '.join(found.conflicts)}. Nothing was deleted; "
            "a dry run lists what would be excluded"
        )
