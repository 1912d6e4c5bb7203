"""icefloe's jobs, one Airflow DAG each, triggered by hand with a form: `icefloe_ingest`,
`icefloe_convert_equality_deletes`, `icefloe_rewrite_position_deletes`,
`icefloe_rewrite_data_files`, `icefloe_expire_snapshots`, `icefloe_remove_orphan_files`.

Each DAG's form and task are derived from the job's option declaration
(`icefloe_airflow.job_dags`); the ingest DAG publishes the table's Asset event after each
batch, which the self-optimizing DAGs can be scheduled on.
"""

from __future__ import annotations

from icefloe_airflow.job_dags import job_dags

for dag in job_dags():
    globals()[dag.dag_id] = dag
