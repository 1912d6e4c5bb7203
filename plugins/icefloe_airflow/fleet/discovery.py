"""Every table of a catalog, listed afresh at each run, filtered by namespace globs.

The listing is `Catalog.table_pointers()`: a SQL catalog answers with one query holding every
table and its current metadata location, a REST catalog with one call per namespace and one
per table (its load). Either way the metadata location comes with the table, which is all the
health cache needs to know whether anything changed, so an unchanged table costs no more than
being listed.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from icecore.catalog import Catalog


@dataclass(frozen=True, order=True)
class DiscoveredTable:
    """A table as the catalog lists it: `namespace.name`, and its current metadata file."""

    name: str
    metadata_location: str

    @property
    def namespace(self) -> str:
        return self.name.rpartition(".")[0]


def namespace_matches(
    namespace: str, include: Sequence[str] = ("*",), exclude: Sequence[str] = ()
) -> bool:
    """Whether a namespace (`db`, or `a.b` nested) is in: it matches an include glob and no
    exclude glob (fnmatch, case-sensitive, as catalogs compare names)."""
    included = any(fnmatch.fnmatchcase(namespace, p) for p in include)
    return included and not any(fnmatch.fnmatchcase(namespace, p) for p in exclude)


def discover(
    catalog: Catalog, include: Sequence[str] = ("*",), exclude: Sequence[str] = ()
) -> list[DiscoveredTable]:
    """The catalog's tables whose namespace is in, sorted by name."""
    found = (
        DiscoveredTable(".".join(p.identifier), p.metadata_location)
        for p in catalog.table_pointers()
    )
    return sorted(t for t in found if namespace_matches(t.namespace, include, exclude))


def select_tables(tables: Iterable[DiscoveredTable], names: Iterable[str]) -> list[DiscoveredTable]:
    """The listed tables named in `names` (KeyError naming the first that is not listed)."""
    by_name = {t.name: t for t in tables}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise KeyError(f"no table {missing[0]} in the catalog (or its namespace is excluded)")
    return [by_name[n] for n in names]
