"""icecore's REST catalog against Apache Iceberg's own REST handlers (tests/support/rest_server),
behind OAuth2 with a `prefix`, as production catalogs serve them.

Commits go as requirements + updates; conflicts (409) are refreshed, re-validated and retried;
a commit answered 503 is checked before anything is resent; bad settings fail in one line that
names the catalog; PyIceberg reads what we commit and we maintain what PyIceberg wrote.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog as pyiceberg_catalog

from icecore.catalog import load_catalog
from icecore.catalog.rest import RestCatalog
from icecore.errors import (
    AlreadyExistsError,
    CatalogError,
    CommitConflictError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
)
from icecore.table import Table
from tests.support.committing import BY_CAT, SCHEMA, CatalogTable, rows
from tests.support.rest_catalog import (  # noqa: F401 - provide the `server` and `catalog` fixtures
    RestCatalogServer,
    reset_server_fixture,
    rest_catalog_fixture,
)


@pytest.fixture
def ns(catalog: RestCatalog) -> str:
    name = f"ns_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(name)
    return name


def _table(catalog: RestCatalog, ns: str, name: str = "t") -> CatalogTable:
    if not catalog.namespace_exists("db"):
        catalog.create_namespace("db")
    t = CatalogTable.create(catalog, f"{ns}_{name}")  # type: ignore[arg-type]
    t.data([{"id": 1, "cat": "a", "v": 1}, {"id": 2, "cat": "a", "v": 2}], name="a1")
    t.table.new_fast_append().append_file(t["a1"]).commit()
    return t


def _commits(server: RestCatalogServer) -> list[str]:
    return [r for r in server.requests() if r.startswith("POST") and "/tables/" in r]


def test_namespaces_and_tables(catalog: RestCatalog, ns: str) -> None:
    catalog.create_namespace((ns, "child"), {"owner": "data-eng"})
    paged = load_catalog("paged", {**catalog.properties, "rest.page-size": "1",
                                   "credential": _credential(catalog)})  # fmt: skip
    assert (ns,) in paged.list_namespaces()
    assert paged.list_namespaces(ns) == [(ns, "child")]
    assert catalog.namespace_exists((ns, "child"))
    assert not catalog.namespace_exists((ns, "nope"))
    catalog.update_namespace_properties((ns, "child"), removals=["owner"], updates={"k": "v"})
    properties = catalog.load_namespace_properties((ns, "child"))
    assert properties["k"] == "v" and "owner" not in properties

    table = catalog.create_table((ns, "child", "t"), SCHEMA, spec=BY_CAT)
    assert table.metadata.metadata_location and table.metadata.spec() == BY_CAT
    for name in ("t2", "t3"):
        catalog.create_table((ns, "child", name), SCHEMA)
    assert sorted(paged.list_tables((ns, "child"))) == [(ns, "child", n) for n in ("t", "t2", "t3")]
    assert catalog.table_exists((ns, "child", "t"))
    with pytest.raises(AlreadyExistsError, match=r"catalog 'lake'.*already exists"):
        catalog.create_table((ns, "child", "t"), SCHEMA)
    with pytest.raises(NamespaceNotEmptyError):
        catalog.drop_namespace((ns, "child"))

    renamed = catalog.rename_table((ns, "child", "t"), (ns, "moved"))
    assert renamed.identifier == (ns, "moved") and not catalog.table_exists((ns, "child", "t"))
    location = renamed.metadata_location
    assert location is not None
    catalog.drop_table((ns, "moved"))
    with pytest.raises(NoSuchTableError, match=r"catalog 'lake'.*moved"):
        catalog.load_table((ns, "moved"))
    again = catalog.register_table((ns, "again"), location)
    assert again.metadata.table_uuid == renamed.metadata.table_uuid
    assert {p.identifier for p in catalog.table_pointers()} >= {(ns, "again")}
    paged.close()


def _credential(catalog: RestCatalog) -> str:
    """The test server's credential (the catalog keeps it out of `properties` for FileIO)."""
    return catalog.properties["credential"]


def test_one_file_append_costs_two_round_trips(
    catalog: RestCatalog, server: RestCatalogServer, ns: str
) -> None:
    t = _table(catalog, ns)
    b1 = t.data([{"id": 10, "cat": "b", "v": 10}], name="b1")
    server.reset()
    table = catalog.load_table(t.table.identifier)
    table.new_fast_append().append_file(b1).commit()
    path = f"/v1/{server.prefix}/namespaces/db/tables/{ns}_t"
    assert server.requests() == [f"GET {path}", f"POST {path}"]
    assert [r["id"] for r in rows(table)] == [1, 2, 10]


def test_concurrent_commits_through_409_lose_nothing(
    catalog: RestCatalog, server: RestCatalogServer, ns: str
) -> None:
    t = _table(catalog, ns)
    first, second = t.load(), t.load()
    first.new_fast_append().append_file(t.data([{"id": 3, "cat": "a", "v": 3}])).commit()
    server.reset()
    late = second.new_fast_append().append_file(t.data([{"id": 4, "cat": "b", "v": 4}]))
    late.commit()
    assert late.attempts == 2  # a 409, a refresh, a second commit
    assert len(_commits(server)) == 2
    assert [r["id"] for r in rows(t.load())] == [1, 2, 3, 4]

    # A conflict the rules forbid is not retried into the table: a rewrite of a file that a
    # concurrent delete removed.
    a1 = t["a1"]
    stale = t.load().new_rewrite().rewrite_files([a1], [t.data([{"id": 1, "cat": "a", "v": 1}])])
    t.load().new_delete().delete_file(a1).commit()
    with pytest.raises(CommitConflictError):
        stale.commit()
    assert [r["id"] for r in rows(t.load())] == [3, 4]


def test_commit_answered_503_after_landing_is_not_sent_twice(
    catalog: RestCatalog, server: RestCatalogServer, ns: str
) -> None:
    t = _table(catalog, ns)
    before = len(t.table.metadata.snapshots)
    server.reset()
    server.fault(commit_then=503)
    append = t.table.new_fast_append().append_file(t.data([{"id": 5, "cat": "a", "v": 5}]))
    committed = append.commit()
    assert append.attempts == 1 and len(_commits(server)) == 1
    table = t.load()
    assert len(table.metadata.snapshots) == before + 1
    assert committed.current_snapshot_id == table.metadata.current_snapshot_id
    assert [r["id"] for r in rows(table)] == [1, 2, 5]


def test_commit_answered_503_before_landing_is_checked_then_retried(
    catalog: RestCatalog, server: RestCatalogServer, ns: str
) -> None:
    t = _table(catalog, ns)
    server.reset()
    server.fault(before_commit=503)
    append = t.table.new_fast_append().append_file(t.data([{"id": 6, "cat": "a", "v": 6}]))
    append.commit()
    assert append.attempts == 2 and len(_commits(server)) == 2
    assert [r["id"] for r in rows(t.load())] == [1, 2, 6]


def test_pyiceberg_reads_our_commits_and_we_maintain_its_tables(
    catalog: RestCatalog, server: RestCatalogServer, ns: str
) -> None:
    theirs = pyiceberg_catalog("theirs", **server.properties())
    arrow = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": pa.array(["a", "b", "c"])})
    created = theirs.create_table((ns, "py"), schema=arrow.schema)
    created.append(arrow)
    created.append(arrow.slice(0, 1))

    table = catalog.load_table((ns, "py"))
    assert sorted(r["id"] for r in rows(table)) == [1, 1, 2, 3]
    table.update_properties().set("icefloe.note", "maintained").commit()
    expired = table.expire_snapshots().expire_snapshot_id(table.metadata.snapshots[0].snapshot_id)
    expired.commit()

    reread = theirs.load_table((ns, "py"))
    assert reread.properties["icefloe.note"] == "maintained"
    assert len(reread.metadata.snapshots) == 1
    assert sorted(reread.scan().to_arrow().column("id").to_pylist()) == [1, 1, 2, 3]


def test_bad_settings_fail_in_one_line_naming_the_catalog(
    server: RestCatalogServer, catalog: RestCatalog
) -> None:
    wrong = server.properties(credential=f"{server.client_id}:nope")
    with pytest.raises(CatalogError) as raised:
        load_catalog("lake", wrong)
    assert "catalog 'lake'" in str(raised.value)
    assert "refused the client credentials" in str(raised.value)
    assert "nope" not in str(raised.value) and "\n" not in str(raised.value)

    unreachable = (
        r"^catalog 'lake' at http://127\.0\.0\.1:9: cannot read its configuration: "
        r"cannot connect: \[Errno 111\] Connection refused$"
    )
    with pytest.raises(CatalogError, match=unreachable):
        load_catalog("lake", {"uri": "http://127.0.0.1:9/", "rest.read-retries": "0"})

    with pytest.raises(NoSuchNamespaceError, match=r"catalog 'lake'.*no_such_ns"):
        catalog.create_table(("no_such_ns", "t"), SCHEMA)
    assert ("no_such_ns",) not in catalog.list_namespaces()


def test_token_is_refreshed_before_it_expires(
    catalog: RestCatalog, server: RestCatalogServer, ns: str
) -> None:
    server.set_token_lifetime(2)
    try:
        fresh = load_catalog("short", server.properties())
        server.reset()
        fresh.list_tables(ns)
        time.sleep(1.7)  # past 80% of the lifetime, before expiry
        fresh.list_tables(ns)
        log = server.requests()
        assert sum(r.startswith("POST /v1/oauth/tokens") for r in log) == 1
        assert not any(" 401" in r for r in log)
        fresh.close()
    finally:
        server.set_token_lifetime(3600)


def test_table_objects_of_rest_tables_keep_their_catalog(catalog: RestCatalog, ns: str) -> None:
    t = _table(catalog, ns)
    table: Table = catalog.load_table(t.table.identifier)
    assert table.catalog is catalog
    assert table.refresh().metadata.current_snapshot_id == t.table.metadata.current_snapshot_id


def test_reads_back_off_on_429_and_503_and_writes_are_not_resent(
    catalog: RestCatalog, server: RestCatalogServer, ns: str
) -> None:
    t = _table(catalog, ns)
    server.reset()
    server.fault(any_request=429, count=2)
    assert catalog.load_table(t.table.identifier).metadata == t.table.metadata
    assert len(server.requests()) == 3  # two throttled GETs, then the answer
    server.reset()
    server.fault(any_request=503)
    with pytest.raises(CatalogError, match=r"catalog 'lake'.*create namespace.*HTTP 503"):
        catalog.create_namespace(f"{ns}_x")  # a write is never resent blindly
    assert len(server.requests()) == 1
    slow = load_catalog("slow", {**server.properties(), "rest.read-retries": "1"})
    server.reset()
    server.fault(any_request=503, count=-1)
    with pytest.raises(CatalogError, match=r"load table .*HTTP 503"):
        slow.load_table(t.table.identifier)
    server.reset()


def test_static_token_and_purge(server: RestCatalogServer, catalog: RestCatalog, ns: str) -> None:
    import requests  # noqa: PLC0415

    form = {"grant_type": "client_credentials", "client_id": server.client_id,
            "client_secret": server.client_secret, "scope": "catalog"}  # fmt: skip
    token = requests.post(server.token_uri, data=form, timeout=10).json()["access_token"]
    by_token = load_catalog("lake", {"uri": server.uri, "token": token})
    server.reset()
    table = by_token.create_table((ns, "purged"), SCHEMA)
    assert not any(r.startswith("POST /v1/oauth/tokens") for r in server.requests())
    location = table.metadata_location
    assert location is not None and Path(location).exists()
    by_token.drop_table((ns, "purged"), purge=True)
    assert not by_token.table_exists((ns, "purged"))
    assert not Path(location).exists()  # the server deleted the table's files
    by_token.close()
    with pytest.raises(CatalogError, match=r"catalog 'lake'.*not authorized.*HTTP 401"):
        load_catalog("lake", {"uri": server.uri, "token": "forged"})
