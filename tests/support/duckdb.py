"""A DuckDB connection with the iceberg and avro extensions loaded from their pip packages.

Autoinstall and autoload are switched off first, so a test can never pass by fetching an
extension over the network: what runs is exactly the pinned `duckdb-extension-*` wheel.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import pytest

if TYPE_CHECKING:
    from tests.support.rest_catalog import RestCatalogServer


def extension_path(name: str) -> Path:
    """`<site-packages>/duckdb_extension_<name>/extensions/v<duckdb>/<name>.duckdb_extension`."""
    spec = importlib.util.find_spec(f"duckdb_extension_{name}")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"duckdb-extension-{name} is not installed")
    package = Path(next(iter(spec.submodule_search_locations)))
    path = package / "extensions" / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
    if not path.is_file():
        raise RuntimeError(f"{path} is missing: duckdb-extension-{name} does not match DuckDB")
    return path


def connect() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(
        config={
            "allow_unsigned_extensions": "true",
            "autoinstall_known_extensions": "false",
            "autoload_known_extensions": "false",
        }
    )
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    for name in ("avro", "iceberg"):
        con.execute(f"LOAD '{extension_path(name)}'")
    return con


@pytest.fixture(name="duck")
def duck_connection() -> Iterator[duckdb.DuckDBPyConnection]:
    """The `duck` fixture; import this function into a test module to make it available."""
    con = connect()
    try:
        yield con
    finally:
        con.close()


def attach_rest(con: duckdb.DuckDBPyConnection, server: RestCatalogServer) -> None:
    """Attach the tests' REST catalog as `lake`, with DuckDB's own REST client and OAuth2."""
    con.execute(f"LOAD '{extension_path('httpfs')}'")
    con.execute(
        "CREATE OR REPLACE SECRET rest (TYPE iceberg, CLIENT_ID ?, CLIENT_SECRET ?, "
        "OAUTH2_SERVER_URI ?, OAUTH2_SCOPE 'catalog')",
        [server.client_id, server.client_secret, server.token_uri],
    )
    con.execute(
        f"ATTACH '{server.warehouse_location}' AS lake "
        f"(TYPE iceberg, SECRET rest, ENDPOINT '{server.uri}')"
    )
