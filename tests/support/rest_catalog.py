"""A real Iceberg REST catalog server on 127.0.0.1 for tests, behind OAuth2 as production
catalogs are.

The server is Apache Iceberg's own REST request handlers over its `JdbcCatalog` (SQLite in the
test's directory by default, or the PostgreSQL server of `tests.support.catalogs`), with a
warehouse in a local directory; `tests/support/rest_server/` builds and starts it.

    from tests.support.rest_catalog import rest_catalog_server_fixture  # noqa: F401

    def test_x(rest_catalog_server: RestCatalogServer) -> None:
        rest_catalog_server.reset()  # session-scoped: start from an empty request log
        catalog = load_catalog("rest", **rest_catalog_server.properties())
        ...
        rest_catalog_server.fault(commit_then=503)  # the next commit lands, then answers 503
        assert "POST /v1/icefloe/namespaces/ns/tables/t" in rest_catalog_server.requests()

For a server of its own (PostgreSQL, a short token lifetime, other catalog properties), a test
uses `start_rest_catalog_server(...)` as a context manager.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from icecore.catalog import load_catalog
from icecore.catalog.rest import RestCatalog

from .catalogs import POSTGRES_URI, postgres_unavailable
from .rest_server import ServerProcess, server_classpath, start_server

DEFAULT_PREFIX = "icefloe"
DEFAULT_SCOPE = "catalog"
# Names of JdbcCatalog's tables (Iceberg's JdbcUtil); icecore's SqlCatalog uses the same ones.
JDBC_TABLES = ("iceberg_tables", "iceberg_namespace_properties")


@dataclass
class RestCatalogServer:
    """A running server. `uri` is the catalog's base URI (the REST routes are under `/v1/`)."""

    uri: str
    prefix: str
    client_id: str
    client_secret: str
    warehouse: Path  # the local directory made for it (the default warehouse)
    warehouse_location: str  # the catalog's `warehouse` property: `warehouse`, unless overridden
    catalog_name: str  # JdbcCatalog's name: its rows in the JDBC database carry it
    jdbc_uri: str
    backend: str
    process: ServerProcess = field(repr=False)

    @property
    def startup_seconds(self) -> float:
        return self.process.startup_seconds

    @property
    def token_uri(self) -> str:
        return f"{self.uri}/v1/oauth/tokens"

    def properties(self, **overrides: str) -> dict[str, str]:
        """PyIceberg catalog properties reaching this server with client credentials."""
        return {
            "type": "rest",
            "uri": self.uri,
            "credential": f"{self.client_id}:{self.client_secret}",
            "oauth2-server-uri": self.token_uri,
            "scope": DEFAULT_SCOPE,
            "warehouse": self.warehouse_location,
            **overrides,
        }

    # Test hooks (IcefloeRestServer.java, /__test/...)

    def requests(self) -> list[str]:
        """'METHOD /raw/path' of each request since the last `reset()` (token ones included)."""
        return list(self._hook("GET", "requests"))

    def answers(self) -> list[str]:
        """'METHOD /raw/path -> status' of each request since the last `reset()`."""
        return list(self._hook("GET", "answers"))

    def reset(self) -> None:
        """Clear the request log and every pending fault; stop issuing ETags."""
        self._hook("POST", "reset")

    def issue_etags(self) -> None:
        """Have loadTable answer with an ETag, and 304 to a matching If-None-Match (REST
        spec), until the next `reset()`: Iceberg's own handlers (1.10) issue none."""
        self._hook("POST", "settings", {"etags": True})

    def fault(
        self,
        *,
        commit_then: int | None = None,
        before_commit: int | None = None,
        delay_ms: int | None = None,
        any_request: int | None = None,
        count: int = 1,
        error_type: str | None = None,
        message: str | None = None,
    ) -> None:
        """Queue a fault for the next `count` (-1: every, until `reset()`) matching requests.

        commit_then: commits (POST to a table, or to transactions/commit) are applied, then
            answered with this status and an error body (503: ServiceUnavailableException).
        before_commit: commits are answered with this status, not applied.
        any_request: the next requests of any kind are answered with this status (e.g. 429).
        delay_ms: alone, any catalog request waits this long first; with one of the above,
            the commit does.
        """
        spec: dict[str, Any] = {"count": count}
        for key, value in (
            ("commit_then", commit_then),
            ("before_commit", before_commit),
            ("delay_ms", delay_ms),
            ("any_request", any_request),
            ("type", error_type),
            ("message", message),
        ):
            if value is not None:
                spec[key] = value
        self._hook("POST", "faults", spec)

    def faults(self) -> list[dict[str, int]]:
        """The faults still pending."""
        return list(self._hook("GET", "faults"))

    def set_token_lifetime(self, seconds: int) -> None:
        """The `expires_in` of tokens issued from now on (existing ones keep theirs)."""
        self._hook("POST", "settings", {"token_lifetime_s": seconds})

    def vend(self, config: Mapping[str, str]) -> None:
        """Make load- and create-table responses carry `config` (vended settings); {} stops."""
        self._hook("POST", "settings", {"table_config": dict(config)})

    def expire_tokens(self) -> None:
        """Every token issued so far stops being valid (clients must fetch a new one)."""
        self._hook("POST", "expire-tokens")

    def log_tail(self, lines: int = 40) -> str:
        return self.process.log_tail(lines)

    def stop(self) -> None:
        self.process.stop()

    def _hook(self, method: str, name: str, body: object = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.uri}/__test/{name}", data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"{method} /__test/{name}: {exc.code} {exc.read()!r}") from exc


def _postgres_jdbc() -> tuple[str, dict[str, str]]:
    """The JDBC URI and connection properties of `tests.support.catalogs.POSTGRES_URI`."""
    url = make_url(POSTGRES_URI)
    jdbc = f"jdbc:postgresql://{url.host or '127.0.0.1'}:{url.port or 5432}/{url.database}"
    properties = {"jdbc.user": url.username or "postgres"}
    if url.password:
        properties["jdbc.password"] = url.password
    return jdbc, properties


def _forget_postgres_catalog(catalog_name: str) -> None:
    engine = create_engine(POSTGRES_URI)
    try:
        with engine.begin() as conn:
            for table in JDBC_TABLES:
                conn.execute(
                    text(f"DELETE FROM {table} WHERE catalog_name = :name"), {"name": catalog_name}
                )
    finally:
        engine.dispose()


@contextlib.contextmanager
def start_rest_catalog_server(
    workdir: Path,
    *,
    backend: str = "sqlite",
    prefix: str = DEFAULT_PREFIX,
    client_id: str = "icefloe-test-client",
    client_secret: str | None = None,
    token_lifetime_s: int = 3600,
    catalog_properties: Mapping[str, str] | None = None,
    config_defaults: Mapping[str, str] | None = None,
    extra_classpath: Sequence[Path] = (),
) -> Iterator[RestCatalogServer]:
    """Start a server whose files live under `workdir`; stop it (and, on PostgreSQL, delete
    its catalog's rows) on exit.

    backend: "sqlite" (a file in workdir) or "postgresql" (skips the test when no server
        answers at tests.support.catalogs.POSTGRES_URI).
    catalog_properties: added to (or overriding) JdbcCatalog's, e.g. `warehouse` and
        `io-impl` for object storage; jars that needs go in `extra_classpath`.
    config_defaults: the `defaults` of GET /v1/config.
    """
    warehouse = workdir / "warehouse"
    warehouse.mkdir(parents=True, exist_ok=True)
    catalog_name = "rest"
    properties = {
        "warehouse": str(warehouse),
        "io-impl": "org.apache.iceberg.hadoop.HadoopFileIO",
        "jdbc.schema-version": "V1",  # V0 has no views
        # A table in a namespace that does not exist is refused, as production catalogs do.
        "jdbc.strict-mode": "true",
    }
    if backend == "sqlite":
        jdbc_uri = f"jdbc:sqlite:{workdir / 'catalog.db'}"
        properties["clients"] = "1"  # one connection: SQLite serializes writers anyway
    elif backend == "postgresql":
        reason = postgres_unavailable()
        if reason:
            pytest.skip(reason)
        jdbc_uri, connection = _postgres_jdbc()
        properties.update(connection)
        catalog_name = f"rest_{uuid.uuid4().hex[:16]}"  # the database is shared
    else:
        raise ValueError(f"unknown backend {backend!r}")
    properties["uri"] = jdbc_uri
    properties.update(catalog_properties or {})
    secret = client_secret if client_secret is not None else secrets.token_urlsafe(16)
    process = start_server(
        {
            "prefix": prefix,
            "client_id": client_id,
            "client_secret": secret,
            "token_lifetime_s": token_lifetime_s,
            "catalog_name": catalog_name,
            "catalog_properties": properties,
            "config_defaults": dict(config_defaults or {}),
        },
        workdir,
        server_classpath(extra_classpath),
    )
    server = RestCatalogServer(
        uri=f"http://127.0.0.1:{process.port}",
        prefix=prefix,
        client_id=client_id,
        client_secret=secret,
        warehouse=warehouse,
        warehouse_location=properties["warehouse"],
        catalog_name=catalog_name,
        jdbc_uri=jdbc_uri,
        backend=backend,
        process=process,
    )
    try:
        yield server
    finally:
        server.stop()
        if backend == "postgresql":
            _forget_postgres_catalog(catalog_name)


@pytest.fixture(scope="session", name="rest_catalog_server")
def rest_catalog_server_fixture(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RestCatalogServer]:
    """`rest_catalog_server`: one server (SQLite, local warehouse) for the session; tests
    `reset()` it first. (Named apart from the fixture so that test arguments do not shadow
    an import.)"""
    with start_rest_catalog_server(tmp_path_factory.mktemp("rest_catalog")) as server:
        yield server


@pytest.fixture(name="server")
def reset_server_fixture(rest_catalog_server: RestCatalogServer) -> Iterator[RestCatalogServer]:
    """The session's REST server, reset before and after the test (which also clears a fault
    a failed test left armed)."""
    rest_catalog_server.reset()
    yield rest_catalog_server
    rest_catalog_server.reset()


@pytest.fixture(name="catalog")
def rest_catalog_fixture(server: RestCatalogServer) -> Iterator[RestCatalog]:
    """icecore's REST catalog `lake` on the reset server."""
    catalog = load_catalog("lake", server.properties())
    assert isinstance(catalog, RestCatalog)
    yield catalog
    catalog.close()
