"""Every DAG of dags/ run with `dag.test()`: real tasks, a real SQLite catalog per test. The
DAGs' jobs run as clients of the session's warm Spark Connect server (the deployment's
`[icefloe] spark_connect_conn_id`), the same operators, checks, records and results as a
spark-submit's (the ingest job's spark-submit: tests/spark/test_ingest_submit.py; a job DAG's
spark-submit on a real scheduler, its result read back: test_trigger_forms.py). Tables are
small (a few CDC batches) so each job takes seconds; the maintenance job DAGs share one
(the equality-delete conversion's DAG: test_rest_api.py, on the deployment).

The self-optimizing DAG gets a table with small files, equality deletes and position deletes
behind a REST catalog and must leave it healthy (no deletes, compacted files, nothing due)
with the same rows; the fleet DAG does the same on a SQL catalog (test_fleet_heals.py).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import pytest
from icefloe_airflow.assets import fleet_asset, table_asset
from icefloe_airflow.self_optimizing import optimize_dag_id

from icecore.catalog import Catalog, catalog_from_settings, load_catalog
from tests.airflow.tables import (
    CdcLog,
    ingest_cdc,
    load_dag,
    table_rows,
    task_result,
    task_states,
    write_cdc_parquet,
)
from tests.support.rest_catalog import RestCatalogServer

DAGS = Path(__file__).resolve().parents[2] / "dags"
TABLE = "db.events"

pytestmark = pytest.mark.usefixtures("airflow_db")


@pytest.fixture
def catalog(iceberg_connection: Path) -> Catalog:
    """The catalog `iceberg_default` points at (SQLite in this test's warehouse)."""
    return catalog_from_settings(warehouse=str(iceberg_connection))


def _live(catalog: Catalog, table: str) -> dict[str, int]:
    report = catalog.load_table(table).health()
    totals = report.totals
    return {
        "data": totals.data.files,
        "position": totals.position_deletes.files,
        "equality": totals.equality_deletes.files,
        "snapshots": report.snapshot_count,
    }


@pytest.mark.usefixtures("jobs_on_connect")
def test_ingest_dag_commits_the_batch_and_publishes_the_table_asset(
    catalog: Catalog, tmp_path: Path
) -> None:
    from airflow.models.asset import AssetEvent  # noqa: PLC0415 (after conftest's env)
    from airflow.utils.session import create_session  # noqa: PLC0415

    log = CdcLog(seed=3)
    rows = log.batch(40) + log.batch(40)
    source = write_cdc_parquet(tmp_path / "batch.parquet", rows)
    dag = load_dag(DAGS / "icefloe_jobs.py", "icefloe_ingest")
    conf = {
        "table": "db.ingested",
        "source": str(source),
        "mode": "cdc",
        "key": "id",
        "create": True,
        "partition_by": "day(ts)",
    }
    run = dag.test(run_conf=conf)

    assert task_states(run) == {"ingest": "success"}
    result = task_result(run, "ingest")
    assert result["status"] == "committed"
    assert table_rows(catalog.load_table("db.ingested")) == log.model.counter()
    asset = table_asset("db.ingested")
    with create_session() as session:
        events = session.query(AssetEvent).filter(AssetEvent.source_run_id == run.run_id).all()
        published = {(e.asset.uri, e.source_dag_id) for e in events}
    fleet = fleet_asset("iceberg_default")  # a fleet with `schedule: asset` runs on it too
    assert published == {(asset.uri, "icefloe_ingest"), (fleet.uri, "icefloe_ingest")}


def test_ingest_dag_refuses_a_conf_without_source(
    catalog: Catalog, capfd: pytest.CaptureFixture[str]
) -> None:
    dag = load_dag(DAGS / "icefloe_jobs.py", "icefloe_ingest")
    run = dag.test(run_conf={"table": "db.ingested", "source": "", "create": True})
    assert task_states(run) == {"ingest": "failed"}
    assert 'refused: "Source": required' in capfd.readouterr().out
    ti = next(iter(run.get_task_instances()))
    assert ti.try_number == 1  # a refusal is final: no retries
    assert not catalog.table_exists("db.ingested")


@pytest.mark.usefixtures("jobs_on_connect")
def test_job_dags_rewrite_deletes_compact_expire_and_remove_orphans(
    catalog: Catalog,
) -> None:
    """The job DAGs one after another on one table with equality and position deletes, each
    job's options from its run's conf as the form sends them: the position-delete rewrite, a
    sort compaction, snapshot expiry, orphan-file removal; the rows stay the same throughout.
    (The equality-delete conversion's DAG runs on the deployment, triggered through the REST
    API with a conf, and is checked there the same way: test_rest_api.py.)"""
    ingest_cdc(catalog, TABLE, 4, size=30, seed=11)
    table = catalog.load_table(TABLE)
    rows = table_rows(table)
    before = _live(catalog, TABLE)
    assert before["position"] >= 2 and before["equality"] >= 1, before

    position = load_dag(DAGS / "icefloe_jobs.py", "icefloe_rewrite_position_deletes")
    run = position.test(run_conf={"table": TABLE, "rewrite_all": True, "min_input_files": 2})
    assert task_states(run) == {"rewrite_position_deletes": "success"}
    assert task_result(run, "rewrite_position_deletes")["status"] == "committed"
    after = _live(catalog, TABLE)
    assert after["position"] < before["position"], (before, after)
    assert table_rows(catalog.load_table(TABLE)) == rows

    before = after
    compact = load_dag(DAGS / "icefloe_jobs.py", "icefloe_rewrite_data_files")
    conf = {"table": TABLE, "rewrite_all": True, "strategy": "sort", "sort_order": "id"}
    run = compact.test(run_conf=conf)
    assert task_states(run) == {"rewrite_data_files": "success"}
    result = task_result(run, "rewrite_data_files")
    assert result["rewritten_data_files"] == before["data"], result
    after = _live(catalog, TABLE)
    assert after["data"] < before["data"]
    assert after["equality"] == after["position"] == 0
    assert table_rows(catalog.load_table(TABLE)) == rows

    assert after["snapshots"] > 1, after
    orphan = Path(table.metadata.location.removeprefix("file:")) / "data" / "orphan.parquet"
    orphan.parent.mkdir(parents=True, exist_ok=True)
    orphan.write_bytes(b"left behind by a crashed writer")
    week_ago = time.time() - 7 * 86400
    os.utime(orphan, (week_ago, week_ago))
    expire = load_dag(DAGS / "icefloe_jobs.py", "icefloe_expire_snapshots")
    run = expire.test(
        run_conf={"table": TABLE, "older_than": "0s", "min_age": "0s", "retain_last": 1}
    )
    assert task_states(run) == {"expire_snapshots": "success"}
    assert _live(catalog, TABLE)["snapshots"] == 1
    assert orphan.exists()  # expiry deletes only what expired snapshots referenced

    orphans = load_dag(DAGS / "icefloe_jobs.py", "icefloe_remove_orphan_files")
    # An age under a day needs its explicit override (min_age), as the form says.
    run = orphans.test(run_conf={"table": TABLE, "older_than": "0s", "min_age": "0s"})
    assert task_states(run) == {"remove_orphan_files": "success"}
    assert not orphan.exists()
    assert table_rows(catalog.load_table(TABLE)) == rows


@pytest.mark.usefixtures("jobs_on_connect")
def test_self_optimizing_dag_heals_a_table_behind_a_rest_catalog(
    rest_catalog_server: RestCatalogServer,
    iceberg_connection: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The self-optimizing DAG heals a table with small files, equality and position deletes
    (the catalog's commits all through Iceberg's REST handlers, with the connection a user of
    the official Iceberg provider already has: type `iceberg`, host, client id and secret):
    nothing is due after, the score rose, the rows are the same. The table's owner lowered
    the manifest limit in a table property, which the health task reads like the page does:
    its manifests are due at the first check, and the manifest rewrite, decided after the
    data rewrite, is skipped, that rewrite having replaced them."""
    server = rest_catalog_server
    extra = {"warehouse": server.warehouse_location, "oauth2-server-uri": server.token_uri,
             "scope": "catalog"}  # fmt: skip
    connection = {"conn_type": "iceberg", "host": server.uri, "login": server.client_id,
                  "password": server.client_secret, "extra": extra}  # fmt: skip
    monkeypatch.setenv("AIRFLOW_CONN_ICEBERG_DEFAULT", json.dumps(connection))
    catalog = load_catalog("iceberg_default", server.properties())
    namespace = f"dag_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(namespace)
    name = f"{namespace}.events"
    ingest_cdc(catalog, name, 4, size=30, seed=5)
    table = catalog.load_table(name)
    manifests = table.health().manifests.data_manifests
    assert manifests >= 3
    limit = str(manifests - 1)
    table.update_properties().set("icefloe.manifests.max-data-count", limit).commit()
    health = catalog.load_table(name).health().totals
    before = health.data.files
    assert health.equality_deletes.files >= 3 and health.position_deletes.files >= 1
    assert before >= 4
    rows = table_rows(catalog.load_table(name))
    config = tmp_path / "tables.yaml"
    config.write_text(
        f"tables:\n  - table: {name}\n    schedule: asset\n"
        "    thresholds: {minor_file_count: 3}\n    catalog_name: iceberg_default\n"
    )
    monkeypatch.setenv("ICEFLOE_TABLES_CONFIG", str(config))
    server.reset()
    dag = load_dag(DAGS / "icefloe_self_optimizing.py", optimize_dag_id(name))
    assert dag.max_active_runs == 1
    expected = table_asset(name, "iceberg_default")
    [scheduled] = dag.schedule  # the table's Asset, watched for any engine's commits
    assert (scheduled.name, scheduled.uri) == (expected.name, expected.uri)
    assert [w.name for w in scheduled.watchers] == [f"icefloe-watch-{name}"]

    run = dag.test()

    states = task_states(run)
    group = "self_optimizing."
    ran = ["convert_equality_deletes", "rewrite_position_deletes", "rewrite_data_files"]
    for job in [*ran, "remove_orphan_files"]:
        assert states[group + job] == "success", states
    # Fresh snapshots: expiry is not due (max_snapshot_age 5d); the manifests were due at the
    # first check, not after the data rewrite: both skipped.
    assert states[group + "rewrite_manifests"] == "skipped", states
    assert states[group + "expire_snapshots"] == "skipped", states
    first = task_result(run, group + "health")
    due_before = [d["job"] for d in first["due"]]
    assert due_before == [*ran, "rewrite_manifests", "remove_orphan_files"]
    assert first["policy"]["max_data_manifests"] == int(limit)
    after = task_result(run, group + "health_after")
    assert after["due"] == [] and after["health"]["equality_delete_files"] == 0
    assert after["health"]["position_delete_files"] == 0
    assert after["health"]["data_files"] < before
    assert after["score"] > task_result(run, group + "health")["score"]
    assert table_rows(catalog.load_table(name)) == rows
    # Every commit went through the REST API, none behind its back.
    path = f"/v1/{server.prefix}/namespaces/{namespace}/tables/events"
    commits = [r for r in server.requests() if r == f"POST {path}"]
    assert len(commits) >= 3
