"""A DAG file outside dags/ reuses icefloe's operators and task group, as a user's would."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from icefloe_airflow.policy import JOB_ORDER

from icecore.catalog import catalog_from_settings
from tests.airflow.tables import load_dag, task_result, task_states
from tests.support.reader import scan_rows

LOCAL_BUNDLE = "airflow.dag_processing.bundles.local.LocalDagBundle"
USER_DAGS = Path(__file__).resolve().parent / "user_dags" / "reuse_operators.py"
# The user's DAG folder is a DAG bundle of its own next to icefloe's dags/ (dag.test() runs
# the DAG as the bundle's parse serialized it, like a deployment does).
BUNDLES = [
    {"name": "dags-folder", "classpath": LOCAL_BUNDLE, "kwargs": {}},
    {"name": "user-dags", "classpath": LOCAL_BUNDLE, "kwargs": {"path": str(USER_DAGS.parent)}},
]

pytestmark = pytest.mark.usefixtures("airflow_db")


@pytest.mark.usefixtures("jobs_on_connect")  # its jobs on the warm server, as a deployment's
def test_user_dag_ingests_and_reads_health_through_xcom(
    iceberg_connection: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST", json.dumps(BUNDLES))
    orders = [{"order_id": i, "amount": float(i) * 1.5} for i in range(1, 11)]
    source = tmp_path / "orders.parquet"
    pq.write_table(pa.Table.from_pylist(orders), source)
    dag = load_dag(USER_DAGS, "shop_orders_load")

    run = dag.test(run_conf={"source": str(source)})

    assert task_states(run) == {
        "load_orders": "success",
        "orders_health": "success",
        "summarize": "success",
    }
    assert task_result(run, "summarize") == {
        "committed": True,
        "rows_written": 10,
        "table_rows": 10,
        "score": task_result(run, "orders_health")["score"],
        "due": [d["job"] for d in task_result(run, "orders_health")["due"]],
    }
    table = catalog_from_settings(warehouse=str(iceberg_connection)).load_table("shop.orders")
    assert sorted((r["order_id"], r["amount"]) for r in scan_rows(table.io, table.metadata)) == [
        (o["order_id"], o["amount"]) for o in orders
    ]
    assert table.metadata.properties["write.target-file-size-bytes"] == "1048576"
    assert len(table.metadata.spec().fields) == 1  # bucket(4, order_id)


def test_user_dag_holds_the_self_optimizing_group() -> None:
    dag = load_dag(USER_DAGS, "shop_orders_maintained")
    group = "maintain_orders."

    health = dag.get_task(group + "health")
    assert health.upstream_task_ids == {"export_orders"}
    assert health.policy["minor_file_count"] == 4
    for job in JOB_ORDER:
        assert dag.get_task(group + job).lock_wait == 600.0
    rewrite = dag.get_task(group + "rewrite_data_files")
    assert rewrite.options == {"strategy": "sort", "sort-order": "order_id"}
    # The policy's retention reaches expiry when it runs, from the health task's policy (the
    # table's properties included): the operator holds the group's own options only.
    expire = dag.get_task(group + "expire_snapshots")
    assert expire.options == {}
    assert expire.health.operator is health
