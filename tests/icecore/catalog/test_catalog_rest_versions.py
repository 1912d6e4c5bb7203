"""`RestCatalog.table_versions` and `CatalogWatch` against the real REST server
(tests/support/rest_server): PyIceberg's REST client commits, our watch reports them.

Iceberg's own handlers (1.10) issue no ETag, so every table is loaded in full at every poll;
with the server issuing ETags as the REST spec allows (`issue_etags`), an unchanged table
costs a body-less 304 and only the changed one is sent again.
"""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog as PyIcebergCatalog
from pyiceberg.catalog import load_catalog as pyiceberg_catalog

from icecore.catalog.rest import RestCatalog
from icecore.changes import CatalogWatch
from tests.support.rest_catalog import (  # noqa: F401 - provide the `server` and `catalog` fixtures
    RestCatalogServer,
    reset_server_fixture,
    rest_catalog_fixture,
)

ARROW = pa.schema([("id", pa.int64())])


@pytest.fixture
def theirs(server: RestCatalogServer) -> PyIcebergCatalog:
    return pyiceberg_catalog("theirs", **server.properties())


@pytest.fixture
def ns(theirs: PyIcebergCatalog) -> str:
    name = f"watch_{uuid.uuid4().hex[:8]}"
    theirs.create_namespace(name)
    theirs.create_namespace((name, "sub"))
    return name


class Loads:
    """The server's answers to loadTable of `ns`' tables, '<table> -> <status>', sorted,
    since the last look."""

    def __init__(self, server: RestCatalogServer, ns: str) -> None:
        self.server, self.marker, self.seen = server, f"/namespaces/{ns}/tables/", 0

    def __call__(self) -> list[str]:
        answers = self.server.answers()
        new, self.seen = answers[self.seen :], len(answers)
        return sorted(
            a.split(self.marker, 1)[1] for a in new if a.startswith("GET") and self.marker in a
        )


def commit(table: object, *ids: int) -> int:
    table.append(pa.Table.from_pylist([{"id": i} for i in ids], ARROW))  # type: ignore[attr-defined]
    return table.current_snapshot().snapshot_id  # type: ignore[attr-defined]


def test_without_etags_every_table_is_loaded_in_full_at_every_poll(
    catalog: RestCatalog, server: RestCatalogServer, theirs: PyIcebergCatalog, ns: str
) -> None:
    a = theirs.create_table((ns, "a"), schema=ARROW)
    theirs.create_table((ns, "b"), schema=ARROW)
    loads = Loads(server, ns)
    watch = CatalogWatch(catalog, namespace=ns)
    watch.poll()
    first = commit(a, 1)
    loads()

    (change,) = watch.poll()

    assert change.name == f"{ns}.a" and [c.snapshot_id for c in change.commits] == [first]
    assert loads() == ["a -> 200", "b -> 200"]


def test_with_etags_an_unchanged_table_costs_a_304(
    catalog: RestCatalog, server: RestCatalogServer, theirs: PyIcebergCatalog, ns: str
) -> None:
    server.issue_etags()
    a = theirs.create_table((ns, "a"), schema=ARROW)
    theirs.create_table((ns, "b"), schema=ARROW)
    theirs.create_table((ns, "sub", "c"), schema=ARROW)
    loads = Loads(server, ns)
    watch = CatalogWatch(catalog, namespace=ns)
    assert watch.poll() == []
    assert loads() == ["a -> 200", "b -> 200"]
    assert watch.poll() == []
    assert loads() == ["a -> 304", "b -> 304"]

    first, second = commit(a, 1), commit(a, 2)
    loads()
    (change,) = watch.poll()

    assert change.name == f"{ns}.a"
    assert [c.snapshot_id for c in change.commits] == [first, second]
    assert change.foreign_commits == change.commits
    assert loads() == ["a -> 200", "b -> 304"]
    assert watch.poll() == []
    assert loads() == ["a -> 304", "b -> 304"]
    assert set(catalog.table_versions(ns)) == {(ns, "a"), (ns, "b"), (ns, "sub", "c")}


def test_a_table_dropped_or_created_between_polls_over_rest(
    catalog: RestCatalog, server: RestCatalogServer, theirs: PyIcebergCatalog, ns: str
) -> None:
    server.issue_etags()
    theirs.create_table((ns, "doomed"), schema=ARROW)
    watch = CatalogWatch(catalog, namespace=ns)
    watch.poll()
    theirs.drop_table((ns, "doomed"))
    fresh = theirs.create_table((ns, "fresh"), schema=ARROW)
    created = commit(fresh, 1)

    changes = {c.name: c for c in watch.poll()}

    assert changes[f"{ns}.doomed"].dropped
    assert changes[f"{ns}.fresh"].created
    assert [c.snapshot_id for c in changes[f"{ns}.fresh"].commits] == [created]
