"""Self-optimizing maintenance: one DAG per table listed in `tables.yaml`.

Each run checks the table's health and runs only the maintenance jobs that are due, in order
(equality deletes converted, delete files compacted, data files rewritten, manifests
rewritten, snapshots expired, orphan files removed), then checks the health again.
Schedules come from the config: a cron expression or preset, `asset` (after every ingest of
the table, through the ingest DAG's Asset events), or null (trigger by hand). One run at a
time per table; the job operators also hold the table's maintenance lock, so hand-triggered
jobs on the same table wait their turn.

The config file is `$ICEFLOE_TABLES_CONFIG`, else `tables.yaml` next to this file; see
`icefloe_airflow.tables_config` for its format. The task group is
`icefloe_airflow.self_optimizing.self_optimizing_group`, reusable in your own DAGs.
"""

from __future__ import annotations

from airflow.sdk import DAG
from icefloe_airflow.self_optimizing import optimize_dag_id, schedule_for, self_optimizing_group
from icefloe_airflow.tables_config import load_tables_config

for config in load_tables_config():
    with DAG(
        dag_id=optimize_dag_id(config.table),
        description=f"Self-optimizing maintenance of {config.table}",
        schedule=schedule_for(config),
        max_active_runs=1,
        catchup=False,
        tags=["icefloe", "iceberg", "self-optimizing"],
        doc_md=__doc__,
    ) as dag:
        # No policy here: each check reads the table's policy from the config's layers (its
        # entry, its namespace's, the defaults) and the table's properties when it runs.
        self_optimizing_group(
            config.table,
            options=config.options,
            iceberg_conn_id=config.iceberg_conn_id,
            spark_connect_conn_id=config.spark_connect_conn_id,
        )
    globals()[dag.dag_id] = dag
