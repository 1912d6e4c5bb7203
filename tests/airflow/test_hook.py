"""IcebergHook: Airflow connections (env var JSON form, as deployments set them) to real
SQLite and PostgreSQL catalogs; the flags it gives the jobs open the very same catalog.
REST and Airflow's own `iceberg` connections: test_connections.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from icefloe_airflow.hook import CatalogSettings, IcebergHook

from icecore.errors import CatalogError, NoSuchTableError
from icecore.jobs.argv import parse_job_args
from icecore.jobs.jobs import JOBS
from icecore.spec.schema import Schema
from icecore.spec.types import LongType, NestedField
from spark_jobs.common.cli import open_catalog
from tests.support.catalogs import forget_catalog, postgres_unavailable, unique_catalog_name

SCHEMA = Schema((NestedField(1, "id", LongType(), required=True),))


def test_a_catalog_that_does_not_exist_is_refused_and_not_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection naming a warehouse that is not there (a typo), or one without its
    catalog file, is refused in one line naming the path, and nothing is created: only an
    ingest that creates its table opens a catalog with `create`."""
    missing, empty = tmp_path / "wharehouse", tmp_path / "empty"
    empty.mkdir()
    for warehouse, said in ((missing, "does not exist"), (empty, "catalog.db")):
        extra = {"warehouse": str(warehouse)}
        connection = json.dumps({"conn_type": "icefloe", "extra": extra})
        monkeypatch.setenv("AIRFLOW_CONN_ICEBERG_TYPO", connection)
        hook = IcebergHook("iceberg_typo")
        with pytest.raises(CatalogError, match=said) as refused:
            hook.get_catalog()
        assert str(warehouse) in str(refused.value)
        assert (False, f"CatalogError: {refused.value}") == hook.test_connection()
        hook.close()
    assert not missing.exists() and list(empty.iterdir()) == []
    created = IcebergHook("iceberg_typo")
    assert created.get_catalog(create=True).list_namespaces() == []
    assert (empty / "catalog.db").is_file()
    created.close()


def test_settings_and_job_flags_open_the_same_catalog(iceberg_connection: Path) -> None:
    hook = IcebergHook()
    assert hook.settings() == CatalogSettings(
        uri=None, name="default", warehouse=str(iceberg_connection)
    )
    args = hook.job_args()
    assert args == ["--catalog-name", "default", "--warehouse", str(iceberg_connection)]

    hook.get_catalog(create=True).create_namespace("db")
    hook.get_catalog().create_table("db.events", SCHEMA)
    assert hook.load_table("db.events").metadata.schema() == SCHEMA
    parsed = parse_job_args(JOBS["expire_snapshots"], [*args, "--table", "db.events"])
    job_catalog = open_catalog(parsed.catalog)
    try:
        assert job_catalog.load_table("db.events").metadata_location == (
            hook.load_table("db.events").metadata_location
        )
    finally:
        job_catalog.close()
        hook.close()
    assert (iceberg_connection / "catalog.db").is_file()


def test_missing_table_is_icecores_error(iceberg_connection: Path) -> None:
    hook = IcebergHook()
    try:
        hook.get_catalog(create=True)
        with pytest.raises(NoSuchTableError, match=r"db\.nope"):
            hook.load_table("db.nope")
    finally:
        hook.close()


def test_postgresql_catalog_and_a_state_store_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catalog on PostgreSQL, runs in the SQLite file the connection's `state_uri` names:
    the store is no longer the catalog's database."""
    reason = postgres_unavailable()
    if reason:
        pytest.skip(reason)
    from tests.support.catalogs import POSTGRES_URI  # noqa: PLC0415

    name = unique_catalog_name()
    state = f"sqlite:///{tmp_path}/state/runs.db"
    extra = {
        "uri": POSTGRES_URI,
        "catalog_name": name,
        "warehouse": str(tmp_path),
        "state_uri": state,
    }
    monkeypatch.setenv(
        "AIRFLOW_CONN_ICEBERG_PG", json.dumps({"conn_type": "icefloe", "extra": extra})
    )
    monkeypatch.setenv("AIRFLOW__ICEFLOE__STATE_URI", "sqlite:////nowhere/overridden.db")
    hook = IcebergHook("iceberg_pg")
    try:
        assert hook.settings() == CatalogSettings(
            POSTGRES_URI, name, str(tmp_path), state_uri=state
        )
        assert hook.job_args() == [
            "--catalog-name", name, "--catalog-uri", POSTGRES_URI, "--warehouse", str(tmp_path)
        ]  # fmt: skip
        catalog = hook.get_catalog()
        assert catalog.engine.dialect.name == "postgresql"  # type: ignore[attr-defined]
        catalog.create_namespace("db")
        catalog.create_table("db.events", SCHEMA)
        assert hook.state_uri() == state
        store = hook.state_store()
        assert (store.catalog_name, store.engine.dialect.name) == (name, "sqlite")
        run = store.start_run(
            "db.events", "ingest", dag_id="d", run_id="r", task_id="t", try_number=1
        )
        store.finish_run(run, state="success", result={"rows": 1})
        assert store.last_runs("db.events")["ingest"].result == {"rows": 1}
        assert (tmp_path / "state" / "runs.db").is_file()
    finally:
        forget_catalog(hook.get_catalog())  # type: ignore[arg-type]
        hook.close()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"warehouse": "/w", "catalog": "x"}, r"unknown extra keys \['catalog'\]"),
        ({"catalog_name": "x"}, "set extra 'warehouse'"),
    ],
)
def test_unusable_connections_are_refused(
    monkeypatch: pytest.MonkeyPatch, extra: dict[str, str], message: str
) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_ICEBERG_BAD", json.dumps({"conn_type": "icefloe", "extra": extra})
    )
    with pytest.raises(ValueError, match=rf"connection 'iceberg_bad': {message}"):
        IcebergHook("iceberg_bad").settings()


def test_undefined_connection_is_named() -> None:
    with pytest.raises(Exception, match="iceberg_undefined"):
        IcebergHook("iceberg_undefined").settings()


def test_password_and_uri_stay_off_the_command_line(monkeypatch: pytest.MonkeyPatch) -> None:
    connection = {
        "conn_type": "icefloe",
        "password": "s3cret",
        "extra": {
            "uri": "postgresql+psycopg2://iceberg@db:5432/catalog",
            "warehouse": "s3://bucket/wh",
            "properties": {"s3.endpoint": "http://minio:9000", "s3.path-style-access": True},
        },
    }
    monkeypatch.setenv("AIRFLOW_CONN_ICEBERG_S3", json.dumps(connection))
    hook = IcebergHook("iceberg_s3")
    uri = "postgresql+psycopg2://iceberg:s3cret@db:5432/catalog"
    assert hook.settings().uri == uri
    assert hook.job_env() == {"ICEFLOE_CATALOG_URI": uri}
    args = hook.job_args(include_uri=False)
    assert not any("s3cret" in a for a in args)
    parsed = parse_job_args(JOBS["expire_snapshots"], [*args, "--table", "db.t"]).catalog
    assert (parsed.uri, parsed.warehouse) == (None, "s3://bucket/wh")
    assert dict(parsed.properties) == {
        "s3.endpoint": "http://minio:9000",
        "s3.path-style-access": "true",
    }
    assert "--catalog-uri" in hook.job_args()  # for a command line of one's own


def test_credentials_reach_the_job_through_its_environment_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection's credential properties never go on the job's command line (process
    listings and task logs show it): they travel in the job's environment, which the job
    merges under its --catalog-property flags."""
    properties = {"s3.endpoint": "http://127.0.0.1:9000", "s3.secret-access-key": "sEcReT-42"}
    extra = {"warehouse": str(tmp_path), "properties": properties}
    monkeypatch.setenv(
        "AIRFLOW_CONN_ICEBERG_DEFAULT", json.dumps({"conn_type": "icefloe", "extra": extra})
    )
    hook = IcebergHook()
    args = hook.job_args(include_uri=False)
    assert "sEcReT-42" not in " ".join(args)
    assert args[-2:] == ["--catalog-property", "s3.endpoint=http://127.0.0.1:9000"]
    env = hook.job_env()
    assert json.loads(env["ICEFLOE_CATALOG_PROPERTIES"]) == {"s3.secret-access-key": "sEcReT-42"}

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    parsed = parse_job_args(JOBS["expire_snapshots"], [*args, "--table", "db.t"])
    job_catalog = open_catalog(parsed.catalog, create=True)  # the warehouse holds none yet
    try:
        assert job_catalog.properties["s3.secret-access-key"] == "sEcReT-42"
        assert job_catalog.properties["s3.endpoint"] == "http://127.0.0.1:9000"
    finally:
        job_catalog.close()
