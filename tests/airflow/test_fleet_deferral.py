"""A fleet run on a real scheduler and triggerer (the session's deployment, `spark_apps: 1`,
its jobs on the warm Spark Connect server): the job of a table whose lease another job holds
defers to the triggerer, and while it waits the run's one slot runs the other table's jobs;
the lease released, the deferred job comes back and the run ends with both tables maintained.
Before the fleet's bound was the DAG's `max_active_tasks` (which Airflow does not count a
deferred task against), a deferred job held its slot and the run stood still."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from icefloe_airflow.state import MaintenanceStore

from icecore.catalog import catalog_from_settings
from tests.airflow.conftest import spark_connect_connection_json
from tests.airflow.deployment import (
    FLEET_SPARK_CONNECT_CONN_ID,
    Deployment,
    icefloe_connection,
    state_store_uri,
)
from tests.airflow.server import AirflowServer
from tests.airflow.test_lease_wait import leased
from tests.airflow.test_spark_connect_dags import readers_rows, small_files_table
from tests.support.spark_connect import SparkConnectServer

pytestmark = pytest.mark.servers
DAG_ID = "icefloe_fleet__iceberg_default"
LEASED, FREE = "db.leased", "db.free"
DONE = ("success", "skipped")


def job_tasks(server: AirflowServer, run_id: str) -> list[dict[str, dict[str, Any]]]:
    """The job task instances of the tables mapped at 0 and 1, each by job; one look."""
    tables: list[dict[str, dict[str, Any]]] = [{}, {}]
    for t in server.mapped_tasks(DAG_ID, run_id, "table"):
        if t["map_index"] in (0, 1):  # not -1, a group not yet mapped
            tables[t["map_index"]][t["task_id"].removeprefix("table.")] = t
    return tables


def planned_tables(server: AirflowServer, run_id: str) -> list[str]:
    """The tables the run's plan mapped, in map-index order (its XCom)."""
    path = f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/plan/xcomEntries/return_value"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        response = server.get(path)
        if response.status_code == 200:
            return [entry["table"] for entry in response.json()["value"]]
        time.sleep(0.5)
    raise AssertionError(f"no plan for {run_id}: {response.status_code} {response.text}")


@contextmanager
def fleet_jobs_on(server: AirflowServer, spark_connect: SparkConnectServer) -> Iterator[None]:
    """The fleet's Spark Connect connection, to the session's server, while the block runs
    (created through the REST API, as a user creates it in the UI)."""
    fields = json.loads(spark_connect_connection_json(spark_connect.url))
    body = {"connection_id": FLEET_SPARK_CONNECT_CONN_ID, **fields}
    created = server.post("/api/v2/connections", json=body)
    assert created.status_code == 201, created.text
    try:
        yield
    finally:
        server.delete(f"/api/v2/connections/{FLEET_SPARK_CONNECT_CONN_ID}")


def test_a_leased_tables_job_waits_in_the_triggerer_while_the_other_table_runs(
    deployment: Deployment, spark_connect: SparkConnectServer, tmp_path: Path
) -> None:
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    # Both need compacting (12 small files or more); the leased one more, so it ranks first,
    # is mapped first, and its compaction is the first to ask for the run's one slot.
    rows = {LEASED: small_files_table(warehouse, LEASED, files=16)}
    rows[FREE] = small_files_table(warehouse, FREE, files=13, first=100)
    connection = icefloe_connection(warehouse, state_uri=state_store_uri(tmp_path))
    seen: dict[str, Any] = {}

    def other_table_done_while_deferred() -> bool:
        """Release the lease once the leased table's compaction has deferred and then the
        other table's jobs have all run (the run's one slot was free for them)."""
        if "run" not in seen:
            return False
        leased_jobs, free_jobs = job_tasks(server, seen["run"])
        compaction = leased_jobs.get("rewrite_data_files", {})
        if compaction.get("state") == "deferred":
            seen.setdefault("deferred", compaction)
        every_job = len(free_jobs) == len(leased_jobs) > 0
        if "deferred" in seen and every_job and all(t["state"] in DONE for t in free_jobs.values()):
            seen["free"] = free_jobs
        return "free" in seen

    with (
        deployment.configured([], connection) as server,
        fleet_jobs_on(server, spark_connect),
        server.running("triggerer"),
    ):
        server.wait_for_dag(DAG_ID)
        assert server.patch(f"/api/v2/dags/{DAG_ID}", json={"is_paused": False}).is_success
        with leased(warehouse, LEASED, until=other_table_done_while_deferred, at_most=240) as freed:
            response = server.post(
                f"/api/v2/dags/{DAG_ID}/dagRuns",
                json={"logical_date": None, "conf": {"namespace": "db"}},
            )
            assert response.status_code == 200, response.text
            run_id = response.json()["dag_run_id"]
            assert planned_tables(server, run_id) == [LEASED, FREE]
            seen["run"] = run_id
        run = server.wait_for_dag_run(DAG_ID, run_id, timeout=600)
        final = dict(zip((LEASED, FREE), job_tasks(server, run_id), strict=True))
    states = {t: {job: ti["state"] for job, ti in jobs.items()} for t, jobs in final.items()}

    assert "deferred" in seen, f"{LEASED}'s compaction never deferred: {states}"
    assert "free" in seen, f"{FREE}'s jobs did not run while {LEASED}'s waited: {states}"
    free_compaction = seen["free"]["rewrite_data_files"]
    assert free_compaction["state"] == "success", seen["free"]
    # It started after the leased table's compaction had deferred: not before, in its turn.
    deferred_start = datetime.fromisoformat(seen["deferred"]["start_date"])
    assert datetime.fromisoformat(free_compaction["start_date"]) > deferred_start, (seen, states)
    assert run["state"] == "success", states
    assert states[LEASED]["rewrite_data_files"] == "success", states
    store = MaintenanceStore.open(state_store_uri(tmp_path))
    try:
        [compaction] = [r for r in store.recent_runs(LEASED) if r.job == "rewrite_data_files"]
        assert compaction.started_at.timestamp() >= freed[0]  # only once the lease was free
        assert store.lock_holder(LEASED) is None
    finally:
        store.close()
    catalog = catalog_from_settings(warehouse=str(warehouse))
    for table in (LEASED, FREE):
        assert catalog.load_table(table).health().totals.data.files == 1, table
        assert readers_rows(catalog, table) == [rows[table]] * 3, table
    catalog.close()
