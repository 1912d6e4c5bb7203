"""The REST catalog server of tests/support/rest_catalog.py, driven by PyIceberg's RestCatalog:
OAuth2 client credentials, a full write and read, the request log and the fault hooks."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import OAuthError, ServiceUnavailableError

from tests.support.rest_catalog import (
    RestCatalogServer,
    rest_catalog_server_fixture,  # noqa: F401 (the `rest_catalog_server` fixture)
    start_rest_catalog_server,
)

ROWS = pa.table(
    {"id": pa.array([1, 2, 3], pa.int64()), "name": pa.array(["a", "b", "c"], pa.string())}
)


def connect(server: RestCatalogServer, **overrides: str) -> RestCatalog:
    catalog = load_catalog("rest", **server.properties(**overrides))
    assert isinstance(catalog, RestCatalog)
    return catalog


def http(
    method: str, url: str, *, token: str | None = None, form: dict[str, str] | None = None
) -> tuple[int, Any]:
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def test_pyiceberg_writes_and_reads_through_oauth2(rest_catalog_server: RestCatalogServer) -> None:
    server = rest_catalog_server
    server.reset()
    catalog = connect(server)
    catalog.create_namespace("roundtrip")
    table = catalog.create_table("roundtrip.events", schema=ROWS.schema)
    table.append(ROWS)

    reread = connect(server).load_table("roundtrip.events")
    assert reread.scan().to_arrow().sort_by("id").to_pylist() == ROWS.to_pylist()
    snapshot = reread.current_snapshot()
    assert snapshot is not None and snapshot.snapshot_id == table.metadata.current_snapshot_id
    assert Path(reread.metadata_location).is_relative_to(server.warehouse)

    api = f"/v1/{server.prefix}"
    requests = server.requests()
    assert requests[:2] == ["POST /v1/oauth/tokens", "GET /v1/config"]
    assert f"POST {api}/namespaces" in requests
    assert f"POST {api}/namespaces/roundtrip/tables" in requests
    assert requests.count(f"POST {api}/namespaces/roundtrip/tables/events") == 1  # the commit
    assert requests.count(f"GET {api}/namespaces/roundtrip/tables/events") == 1  # the reload


def test_pages_of_tables(rest_catalog_server: RestCatalogServer) -> None:
    server = rest_catalog_server
    catalog = connect(server, **{"rest-page-size": "2"})
    catalog.create_namespace("paged")
    for name in ("a", "b", "c"):
        catalog.create_table(f"paged.{name}", schema=ROWS.schema)
    server.reset()
    assert sorted(catalog.list_tables("paged")) == [("paged", "a"), ("paged", "b"), ("paged", "c")]
    assert server.requests() == [f"GET /v1/{server.prefix}/namespaces/paged/tables"] * 2


def test_unauthorized_requests_get_401(rest_catalog_server: RestCatalogServer) -> None:
    server = rest_catalog_server
    with pytest.raises(OAuthError, match="invalid_client"):
        connect(server, credential=f"{server.client_id}:not-the-secret")

    status, body = http("GET", f"{server.uri}/v1/config")
    assert status == 401
    assert body["error"]["type"] == "NotAuthorizedException" and body["error"]["code"] == 401

    credentials = {
        "grant_type": "client_credentials",
        "client_id": server.client_id,
        "client_secret": server.client_secret,
        "scope": "catalog",
    }
    status, token = http("POST", server.token_uri, form=credentials)
    assert status == 200 and token["token_type"] == "bearer" and token["expires_in"] > 0
    assert http("GET", f"{server.uri}/v1/config", token=token["access_token"])[0] == 200

    # An expired token gets 401; PyIceberg then fetches a new one and retries, once.
    catalog = connect(server)
    server.expire_tokens()
    server.reset()
    status, body = http("GET", f"{server.uri}/v1/config", token=token["access_token"])
    assert status == 401 and "expired" in body["error"]["message"]
    catalog.list_namespaces()
    listing = f"GET /v1/{server.prefix}/namespaces"
    assert server.requests()[1:] == [listing, "POST /v1/oauth/tokens", listing]


def test_commit_faults(rest_catalog_server: RestCatalogServer) -> None:
    server = rest_catalog_server
    catalog = connect(server)
    catalog.create_namespace("faults")
    table = catalog.create_table("faults.t", schema=ROWS.schema)
    server.reset()

    # Applied, then answered 503: the client sees a failure, the snapshot is there all the same.
    server.fault(commit_then=503)
    with pytest.raises(ServiceUnavailableError, match="Injected fault"):
        table.append(ROWS)
    assert server.faults() == []
    landed = catalog.load_table("faults.t")
    first = landed.current_snapshot()
    assert first is not None
    assert landed.scan().to_arrow().num_rows == len(ROWS)

    # Answered 503 without applying: nothing changes.
    server.fault(before_commit=503)
    with pytest.raises(ServiceUnavailableError):
        landed.append(ROWS)
    after = catalog.load_table("faults.t").current_snapshot()
    assert after is not None and after.snapshot_id == first.snapshot_id

    commit = f"POST /v1/{server.prefix}/namespaces/faults/tables/t"
    assert server.requests().count(commit) == 2

    server.fault(delay_ms=300)
    started = time.monotonic()
    catalog.list_namespaces()
    assert time.monotonic() - started >= 0.3


def test_postgresql_backend(tmp_path: Path) -> None:
    with start_rest_catalog_server(tmp_path, backend="postgresql") as server:
        catalog = connect(server)
        catalog.create_namespace("pg")
        catalog.create_table("pg.t", schema=ROWS.schema).append(ROWS)
        assert connect(server).load_table("pg.t").scan().to_arrow().num_rows == len(ROWS)
