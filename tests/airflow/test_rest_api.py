"""A user's click, reproduced: a real api-server, scheduler, dag-processor and triggerer (the
session's deployment, tests/airflow/deployment.py); a DAG triggered through the REST API v2
with a conf runs its Spark job to success, and a conf the DAG's form refuses never becomes a
run. The run is triggered while another job holds the table's lease: its task defers to the
triggerer (the deployment's operators are deferrable), which a real triggerer process polls
until the lease is free; then the task comes back and runs the job. The scheduler's task
spark-submits the job, as the deployment does every job (the trigger forms'
tests check that shape; a deployment of its own on Spark Connect costs more than the
spark-submit does)."""

from __future__ import annotations

from pathlib import Path

import pytest
from icefloe_airflow.state import MaintenanceStore

from icecore.catalog import catalog_from_settings
from tests.airflow.deployment import Deployment, icefloe_connection, state_store_uri
from tests.airflow.tables import ingest_cdc, table_rows
from tests.airflow.test_lease_wait import OTHER, leased

DAG_ID = "icefloe_convert_equality_deletes"
TABLE = "db.clicked"

pytestmark = [pytest.mark.servers, pytest.mark.spark_submit]


def test_trigger_with_conf_runs_to_success_and_bad_conf_is_refused(
    deployment: Deployment, warehouse: Path
) -> None:
    catalog = catalog_from_settings(warehouse=str(warehouse))
    ingest_cdc(catalog, TABLE, 2, size=20, seed=21)
    rows = table_rows(catalog.load_table(TABLE))
    assert catalog.load_table(TABLE).health().totals.equality_deletes.files >= 1
    runs = f"/api/v2/dags/{DAG_ID}/dagRuns"

    connection = icefloe_connection(warehouse, state_uri=state_store_uri(warehouse.parent))
    with deployment.configured([], connection) as server:
        server.wait_for_dag(DAG_ID)
        # New DAGs start paused: the user unpauses, then triggers.
        assert server.patch(f"/api/v2/dags/{DAG_ID}", json={"is_paused": False}).is_success
        # Other modules may have run this DAG on the deployment already.
        runs_before = server.get(runs).json()["total_entries"]

        # A value of the wrong JSON type is refused by Airflow itself, before any run exists.
        conf = {"table": TABLE, "max_attempts": [3]}
        refused = server.post(runs, json={"logical_date": None, "conf": conf})
        assert refused.status_code == 400, refused.text
        assert "max_attempts" in refused.text
        assert server.get(runs).json()["total_entries"] == runs_before
        # A value the job cannot take fails the run's task in words naming the form's field,
        # before any Spark starts, and without retries (both runs triggered, then waited on).
        refusals = {}
        for conf, words in (
            ({"table": "clicked"}, '"Table": expected NAMESPACE.NAME'),
            ({"table": TABLE, "max_attempts": 0}, '"Max attempts": '),
        ):
            response = server.post(runs, json={"logical_date": None, "conf": conf})
            assert response.status_code == 200, response.text
            refusals[response.json()["dag_run_id"]] = words
        for run_id, words in refusals.items():
            assert server.wait_for_dag_run(DAG_ID, run_id, timeout=120)["state"] == "failed"
            log = server.task_log(DAG_ID, run_id, "convert_equality_deletes")
            assert f"refused: {words}" in log, log
            assert "full Spark driver log" not in log  # spark-submit never ran

        task = f"{runs}/{{run_id}}/taskInstances/convert_equality_deletes"
        states: list[str] = []

        def deferred() -> bool:
            if run_ids:
                states.append(server.get(task.format(run_id=run_ids[0])).json().get("state"))
            return states[-1:] == ["deferred"]

        run_ids: list[str] = []
        with server.running("triggerer"):
            with leased(warehouse, TABLE, until=deferred, at_most=300) as released:
                response = server.post(
                    runs,
                    json={"logical_date": None, "conf": {"table": TABLE, "max_attempts": 2}},
                )
                assert response.status_code == 200, response.text
                run_ids.append(response.json()["dag_run_id"])
            [run_id] = run_ids  # the lease is released once the task has deferred
            assert states[-1:] == ["deferred"], f"not deferred while the lease was held: {states}"
            final = server.wait_for_dag_run(DAG_ID, run_id, timeout=600)
        assert final["state"] == "success", server.logs()["scheduler"][-5000:]
        assert final["conf"] == {"table": TABLE, "max_attempts": 2}
        log = server.task_log(DAG_ID, run_id, "convert_equality_deletes")
        assert f"maintenance lock held by {OTHER}" in log, log
        assert "waiting for it in the triggerer, this worker slot freed" in log, log
        assert f"the lease on {TABLE} is free: taking it" in log, log
        xcom = server.get(
            f"{runs}/{run_id}/taskInstances/convert_equality_deletes/xcomEntries/return_value"
        )
        assert xcom.status_code == 200, xcom.text
        result = xcom.json()["value"]

    assert result["status"] == "committed"
    store = MaintenanceStore.open(state_store_uri(warehouse.parent))
    try:
        [job] = store.recent_runs(TABLE)  # none for the refused confs, one once the lease was free
        assert (job.job, job.state) == ("convert_equality_deletes", "success")
        assert job.started_at.timestamp() >= released[0]
        assert store.lock_holder(TABLE) is None
    finally:
        store.close()
    table = catalog.load_table(TABLE)
    totals = table.health().totals
    assert totals.equality_deletes.files == 0 and totals.position_deletes.files >= 1
    assert table_rows(table) == rows
