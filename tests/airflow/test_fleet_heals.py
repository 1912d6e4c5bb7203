"""The fleet DAG heals real tables: two small tables written by the ingestion job (small
files, equality and position deletes), the fleet DAG run by `dag.test()`, its due jobs run as
clients of the session's warm Spark Connect server (the deployment's default, as
docker-compose sets it); afterwards nothing is due and the rows are the same, read by
icecore, PyIceberg and DuckDB. The manifest rewrite the plan found due is decided again after
the data rewrite, and skipped."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from icecore.catalog import Catalog, catalog_from_settings
from tests.airflow.conftest import state_store_uri
from tests.airflow.tables import ingest_cdc, table_rows
from tests.support.batches import pyiceberg_rows
from tests.support.duckdb import connect
from tests.support.fleet_catalog import record_orphan_runs

pytestmark = pytest.mark.usefixtures("airflow_db", "jobs_on_connect")
TABLES = ("db.alpha", "db.beta")


def test_the_fleet_dag_heals_two_tables(
    iceberg_connection: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    run_dag: Any,
) -> None:
    catalog: Catalog = catalog_from_settings(warehouse=str(iceberg_connection))
    for seed, table in enumerate(TABLES, start=3):
        ingest_cdc(catalog, table, 3, size=30, seed=seed)
    rows = {t: table_rows(catalog.load_table(t)) for t in TABLES}
    # Orphans were removed an hour ago (two jobs fewer): compaction is what is due.
    hour_ago = int(time.time() * 1000) - 3_600_000
    record_orphan_runs(state_store_uri(iceberg_connection.parent), list(TABLES), hour_ago)
    config = tmp_path / "tables.yaml"
    # A manifest limit of 2: three batches' manifests make a manifest rewrite due at the plan.
    config.write_text(
        "defaults: {thresholds: {minor_file_count: 2, max_data_manifests: 2}}\n"
        "fleets:\n  - iceberg_conn_id: iceberg_default\n    max_tables: 5\n"
    )
    monkeypatch.setenv("ICEFLOE_TABLES_CONFIG", str(config))
    monkeypatch.setenv("ICEFLOE_CACHE_DIR", str(tmp_path / "cache"))
    from icefloe_airflow.fleet.cache import HealthCache  # noqa: PLC0415
    from icefloe_airflow.fleet.config import load_fleet_settings  # noqa: PLC0415
    from icefloe_airflow.fleet.survey import survey  # noqa: PLC0415
    from icefloe_airflow.fleet_dag.dag import fleet_dag  # noqa: PLC0415

    settings = load_fleet_settings()
    before = survey(catalog, settings.layers, cache=HealthCache(tmp_path / "cache"))
    assert {c.table for c in before.ranked} == set(TABLES)
    assert all("rewrite_manifests" in [d.job for d in c.jobs] for c in before.ranked)

    run = run_dag(fleet_dag(settings.fleets[0]))

    states = {(ti.task_id, ti.map_index): str(ti.state) for ti in run.get_task_instances()}
    assert "failed" not in states.values(), states
    ran = {(task, index) for (task, index), state in states.items() if state == "success"}
    assert ("table.rewrite_data_files", 0) in ran and ("table.rewrite_data_files", 1) in ran
    assert states[("table.remove_orphan_files", 0)] == "skipped"  # ran an hour ago
    # Due at the plan, the manifest rewrite is decided again after the data rewrite, which
    # replaced the manifests of every file it rewrote: not due any more, no Spark started.
    assert states[("table.rewrite_manifests", 0)] == "skipped"
    assert states[("table.rewrite_manifests", 1)] == "skipped"
    catalog.close()
    catalog = catalog_from_settings(warehouse=str(iceberg_connection))
    after = survey(catalog, settings.layers, cache=HealthCache(tmp_path / "cache"))
    compaction = {"convert_equality_deletes", "rewrite_position_deletes", "rewrite_data_files"}
    for check in after.checks:
        assert not {d.job for d in check.due} & compaction, check.due
        assert check.report is not None and check.report.totals.equality_deletes.files == 0
    duck = connect()
    for table in TABLES:
        healed = catalog.load_table(table)
        assert table_rows(healed) == rows[table]
        # Readers nobody here wrote: PyIceberg (no equality delete is left for it to refuse)
        # and DuckDB's iceberg extension.
        assert pyiceberg_rows(healed, {}) == rows[table]
        sql = f"SELECT id, v, epoch_us(ts) FROM iceberg_scan('{healed.metadata_location}')"
        assert Counter(duck.execute(sql).fetchall()) == rows[table]
    duck.close()
    catalog.close()
