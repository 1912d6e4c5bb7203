"""The connections users run, read by IcebergHook as Airflow gives them (env var JSON): an
`icefloe` connection to a REST catalog, and Airflow's own Iceberg provider's `iceberg`
connection (that provider installed beside ours), mapped to catalog settings as that
provider maps them; the jobs' command line never holds a secret, their environment does.

No REST server runs here: these tests stop at settings, flags, environment and the state
store, which needs no catalog. An `iceberg` connection to a SQL catalog is opened for real,
by our hook and by the official provider's, and both see the same tables.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from icefloe_airflow.hook import CatalogSettings, IcebergHook
from icefloe_airflow.ui.status import collect_overview

from icecore.jobs.argv import (
    CATALOG_CREDENTIAL_ENV,
    CATALOG_PROPERTIES_ENV,
    CATALOG_TOKEN_ENV,
    CATALOG_URI_ENV,
    parse_job_args,
)
from icecore.jobs.jobs import JOBS
from icecore.spec.schema import Schema
from icecore.spec.types import LongType, NestedField

SCHEMA = Schema((NestedField(1, "id", LongType(), required=True),))
POLARIS = "https://polaris.example.com/api/catalog"
CLIENT_SECRET = "sEcReT-client-42"


def define(monkeypatch: pytest.MonkeyPatch, conn_id: str, connection: dict[str, Any]) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(connection))


def job_catalog_args(hook: IcebergHook) -> Any:
    """The catalog options a job parses from the operator's command line."""
    argv = [*hook.job_args(include_uri=False), "--table", "db.events"]
    return parse_job_args(JOBS["rewrite_data_files"], argv).catalog


def assert_no_secret_on_argv(hook: IcebergHook, *secrets: str) -> None:
    args = " ".join(hook.job_args(include_uri=False))
    for secret in secrets:
        assert secret not in args
    assert "credential=" not in args and "token=" not in args
    assert all(secret not in repr(hook.settings()) for secret in secrets)


def test_icefloe_connection_to_a_rest_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    """Catalog type rest, the client id and secret in login and password: the credential,
    the secret headers and storage keys reach the job through its environment only."""
    properties = {
        "scope": "PRINCIPAL_ROLE:ALL",
        "oauth2-server-uri": "https://idp.example.com/oauth/token",
        "header.X-Iceberg-Access-Delegation": "vended-credentials",
        "header.X-Api-Key": "kEy-9",
        "s3.secret-access-key": "s3-SeCrEt",
    }
    define(
        monkeypatch,
        "iceberg_rest",
        {
            "conn_type": "icefloe",
            "login": "client-7",
            "password": CLIENT_SECRET,
            "extra": {
                "catalog_type": "rest",
                "uri": POLARIS,
                "warehouse": "analytics",
                "catalog_name": "polaris",
                "properties": json.dumps(properties),  # as the connection form stores it
            },
        },
    )
    hook = IcebergHook("iceberg_rest")
    settings = hook.settings()
    assert settings == CatalogSettings(
        uri=POLARIS,
        name="polaris",
        warehouse="analytics",
        properties={**properties, "credential": f"client-7:{CLIENT_SECRET}"},
        catalog_type="rest",
    )
    assert settings.kind == "rest"
    assert hook.job_args(include_uri=False) == [
        "--catalog-name", "polaris", "--catalog-type", "rest", "--warehouse", "analytics",
        "--catalog-property", "scope=PRINCIPAL_ROLE:ALL",
        "--catalog-property", "oauth2-server-uri=https://idp.example.com/oauth/token",
        "--catalog-property", "header.X-Iceberg-Access-Delegation=vended-credentials",
    ]  # fmt: skip
    assert_no_secret_on_argv(hook, CLIENT_SECRET, "kEy-9", "s3-SeCrEt")
    env = hook.job_env()
    assert env == {
        CATALOG_URI_ENV: POLARIS,
        CATALOG_CREDENTIAL_ENV: f"client-7:{CLIENT_SECRET}",
        CATALOG_PROPERTIES_ENV: env[CATALOG_PROPERTIES_ENV],
    }
    assert json.loads(env[CATALOG_PROPERTIES_ENV]) == {
        "header.X-Api-Key": "kEy-9",
        "s3.secret-access-key": "s3-SeCrEt",
    }
    parsed = job_catalog_args(hook)
    assert (parsed.type, parsed.uri, parsed.name) == ("rest", None, "polaris")
    assert "credential" not in parsed.properties


def test_icefloe_rest_connection_with_a_token_or_a_bare_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A static bearer token (the form's masked field) travels as ICEFLOE_CATALOG_TOKEN; a
    password without a login is Iceberg's bare-secret `credential`. An http(s) URI means
    REST without a catalog type, as icecore decides."""
    extra = {"uri": POLARIS + "/", "token": "tOkEn-1"}
    define(monkeypatch, "iceberg_token", {"conn_type": "icefloe", "extra": extra})
    define(
        monkeypatch,
        "iceberg_bare",
        {"conn_type": "icefloe", "password": CLIENT_SECRET, "extra": {"uri": POLARIS}},
    )
    token = IcebergHook("iceberg_token")
    assert token.settings().kind == "rest" and token.settings().catalog_type is None
    assert token.job_env() == {CATALOG_URI_ENV: POLARIS + "/", CATALOG_TOKEN_ENV: "tOkEn-1"}
    assert token.job_args(include_uri=False) == ["--catalog-name", "default"]
    assert_no_secret_on_argv(token, "tOkEn-1")
    bare = IcebergHook("iceberg_bare")
    assert bare.job_env()[CATALOG_CREDENTIAL_ENV] == CLIENT_SECRET
    assert bare.settings().uri == POLARIS  # not a database URL: no password put in it
    assert_no_secret_on_argv(bare, CLIENT_SECRET)


def test_official_iceberg_connection_is_read_as_its_provider_reads_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`iceberg`: host = the REST URI (trailing slash dropped), login:password = the OAuth2
    credential, extras = catalog properties, type rest by default, the connection id as the
    catalog's name; its runs go to the state store its extra names, with no catalog opened."""
    state = f"sqlite:///{tmp_path / 'icefloe_state.db'}"
    define(
        monkeypatch,
        "iceberg_default",
        {
            "conn_type": "iceberg",
            "host": POLARIS + "/",
            "login": "cid",
            "password": CLIENT_SECRET,
            "extra": {
                "warehouse": "analytics",
                "scope": "PRINCIPAL_ROLE:ALL",
                "s3.region": "us-east-1",
                "rest.sigv4-enabled": False,
                "state_uri": state,
            },
        },
    )
    hook = IcebergHook()
    assert hook.settings() == CatalogSettings(
        uri=POLARIS,
        name="iceberg_default",
        warehouse="analytics",
        properties={
            "scope": "PRINCIPAL_ROLE:ALL",
            "s3.region": "us-east-1",
            "rest.sigv4-enabled": "false",
            "credential": f"cid:{CLIENT_SECRET}",
        },
        catalog_type="rest",
        state_uri=state,
    )
    assert hook.job_args(include_uri=False) == [
        "--catalog-name", "iceberg_default", "--catalog-type", "rest",
        "--warehouse", "analytics",
        "--catalog-property", "scope=PRINCIPAL_ROLE:ALL",
        "--catalog-property", "s3.region=us-east-1",
        "--catalog-property", "rest.sigv4-enabled=false",
    ]  # fmt: skip
    assert hook.job_env() == {
        CATALOG_URI_ENV: POLARIS,
        CATALOG_CREDENTIAL_ENV: f"cid:{CLIENT_SECRET}",
    }
    assert_no_secret_on_argv(hook, CLIENT_SECRET)
    assert job_catalog_args(hook).type == "rest"
    try:
        store = hook.state_store()
        assert store.catalog_name == "iceberg_default"
        ids = {"dag_id": "d", "run_id": "r", "task_id": "t", "try_number": 1}
        run = store.start_run("db.events", "ingest", **ids)
        store.finish_run(run, state="success", result={"rows": 1})
        assert store.last_runs("db.events")["ingest"].state == "success"
        assert hook._catalog is None  # the store needed no catalog (and no server)
    finally:
        hook.close()
    assert (tmp_path / "icefloe_state.db").is_file()


def test_official_connection_with_half_a_credential_has_none(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """As the official hook: a client id without its secret is no credential, and is said."""
    define(
        monkeypatch,
        "iceberg_half",
        {"conn_type": "iceberg", "host": POLARIS, "login": "cid", "extra": {"token": "t-9"}},
    )
    hook = IcebergHook("iceberg_half")
    with caplog.at_level(logging.WARNING):
        settings = hook.settings()
    assert "credential" not in settings.properties
    assert "Client Secret" in caplog.text
    assert hook.job_env() == {CATALOG_URI_ENV: POLARIS, CATALOG_TOKEN_ENV: "t-9"}


@pytest.mark.parametrize(
    ("connection", "message"),
    [
        ({"conn_type": "iceberg", "extra": {"type": "glue"}}, "catalog type 'glue'"),
        ({"conn_type": "iceberg", "extra": {}}, "a REST catalog needs its http"),
        ({"conn_type": "icefloe", "extra": {"catalog_type": "rest"}}, "needs its http"),
        ({"conn_type": "icefloe", "extra": {"catalog_type": "hive", "warehouse": "/w"}}, "hive"),
    ],
)
def test_catalogs_icefloe_cannot_open_are_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, connection: dict[str, Any], message: str
) -> None:
    define(monkeypatch, "iceberg_bad", connection)
    with pytest.raises(ValueError, match=rf"connection 'iceberg_bad': .*{message}"):
        IcebergHook("iceberg_bad").settings()


def test_official_sql_connection_opens_the_catalog_the_official_hook_opens(
    monkeypatch: pytest.MonkeyPatch, iceberg_connection: Path
) -> None:
    """An `iceberg` connection of type sql (PyIceberg's SqlCatalog): our hook commits a table
    and Airflow's Iceberg provider, through PyIceberg, lists and loads the same one."""
    from airflow.providers.apache.iceberg.hooks.iceberg import (  # noqa: PLC0415
        IcebergHook as OfficialHook,
    )

    warehouse = iceberg_connection
    extra = {"type": "sql", "uri": f"sqlite:///{warehouse}/catalog.db", "warehouse": str(warehouse)}
    define(monkeypatch, "iceberg_sql", {"conn_type": "iceberg", "extra": extra})
    hook = IcebergHook("iceberg_sql")
    try:
        assert hook.settings().kind == "sql" and hook.settings().name == "iceberg_sql"
        assert hook.job_args(include_uri=False) == [
            "--catalog-name", "iceberg_sql", "--catalog-type", "sql", "--warehouse", str(warehouse)
        ]  # fmt: skip
        catalog = hook.get_catalog(create=True)
        catalog.create_namespace("db")
        ours = catalog.create_table("db.events", SCHEMA)
        official = OfficialHook("iceberg_sql")
        assert official.list_tables("db") == ["db.events"]
        assert official.load_table("db.events").metadata_location == ours.metadata_location
        assert hook.state_store().tables() == []  # the test's own store, not the catalog's
    finally:
        hook.close()


def test_the_page_names_catalog_names_that_go_wrong(
    monkeypatch: pytest.MonkeyPatch, iceberg_connection: Path, tmp_path: Path
) -> None:
    """Two connections to different catalogs under one name in one state store, and a table
    waiting for ingest events of a catalog name its connection does not have."""
    other = tmp_path / "other"
    other.mkdir()
    define(
        monkeypatch, "iceberg_other", {"conn_type": "icefloe", "extra": {"warehouse": str(other)}}
    )
    # Nothing listens there: the page says the catalog is unreachable and goes on.
    define(monkeypatch, "iceberg_polaris", {"conn_type": "iceberg", "host": "http://127.0.0.1:9"})
    config = tmp_path / "tables.yaml"
    tables = [
        {"table": "db.a", "iceberg_conn_id": "iceberg_other", "schedule": None},
        {"table": "db.b", "iceberg_conn_id": "iceberg_polaris", "schedule": "asset"},
    ]
    config.write_text(json.dumps({"tables": tables}))
    monkeypatch.setenv("ICEFLOE_TABLES_CONFIG", str(config))
    overview = collect_overview()
    notices = overview.notices
    assert any(
        "'iceberg_default' and 'iceberg_other' name different catalogs 'default'" in n
        for n in notices
    ), notices
    assert any(
        "db.b waits for ingest events of catalog 'default'" in n
        and "set catalog_name: iceberg_polaris" in n
        for n in notices
    ), notices
    assert [t.table for t in overview.tables] == ["db.a", "db.b"]  # iceberg_default has none
    assert overview.tables[1].error is not None  # the REST catalog is out of reach
