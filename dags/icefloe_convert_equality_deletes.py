"""Equality-to-position by hand: replace a table's live equality deletes with position deletes.

Readers then no longer join every data file against the equality delete rows. Trigger it with a
conf such as `{"table": "db.events"}`.
"""

from __future__ import annotations

from airflow.sdk import DAG
from icefloe_airflow.operators import ConvertEqualityDeletesOperator
from icefloe_airflow.params import from_params, optional_int, table_param

with DAG(
    dag_id="icefloe_convert_equality_deletes",
    description="Convert a table's equality deletes to position deletes",
    schedule=None,
    max_active_runs=4,
    catchup=False,
    render_template_as_native_obj=True,
    tags=["icefloe", "iceberg", "maintenance"],
    doc_md=__doc__,
    params={
        "table": table_param(),
        "max_attempts": optional_int("plan and commit again after a conflict, at most N times"),
    },
) as dag:
    ConvertEqualityDeletesOperator(
        task_id="convert_equality_deletes",
        table="{{ params.table }}",
        options=from_params("max_attempts"),
    )
