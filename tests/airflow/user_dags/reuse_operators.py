"""A user's own DAGs (outside icefloe's dags/), built from icefloe's operators and task group.

`shop_orders_load`: land a batch with the ingest operator, measure the table's health, and
hand both results to the user's own task through XCom. `shop_orders_maintained`: the
self-optimizing task group placed after a user's task, with its own policy and job options.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import DAG, Param, task
from icefloe_airflow.operators import IngestOperator, TableHealthOperator
from icefloe_airflow.self_optimizing import self_optimizing_group

with DAG(
    dag_id="shop_orders_load",
    schedule=None,
    params={"source": Param("", type="string", minLength=1)},
    tags=["shop"],
) as load_dag:
    load = IngestOperator(
        task_id="load_orders",
        table="shop.orders",
        source="{{ params.source }}",
        mode="upsert",
        key=["order_id"],
        create=True,
        partition_by="bucket(4, order_id)",
        properties={"write.target-file-size-bytes": "1048576"},
    )
    health = TableHealthOperator(
        task_id="orders_health", table="shop.orders", policy={"minor_file_count": 4}
    )

    @task
    def summarize(ingested: dict[str, Any], checked: dict[str, Any]) -> dict[str, Any]:
        """What a user's downstream task does with the two results."""
        return {
            "committed": ingested["status"] == "committed",
            "rows_written": ingested["data_records"],
            "table_rows": checked["health"]["data_records"],
            "score": checked["score"],
            "due": [d["job"] for d in checked["due"]],
        }

    load >> health
    summarize(load.output, health.output)

with DAG(dag_id="shop_orders_maintained", schedule="@daily", max_active_runs=1) as maintained:

    @task
    def export_orders() -> None:
        """The user's own work, before maintenance."""

    maintenance = self_optimizing_group(
        "shop.orders",
        policy={"minor_file_count": 4, "max_snapshot_age": "1d"},
        options={"rewrite_data_files": {"strategy": "sort", "sort-order": "order_id"}},
        group_id="maintain_orders",
        operator_kwargs={"lock_wait": 600.0},
    )
    export_orders() >> maintenance
