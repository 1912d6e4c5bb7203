"""Minor compaction by hand: merge a table's small position delete files and drop dangling ones.

Trigger it from the Airflow UI (the form below) or the REST API with a conf such as
`{"table": "db.events", "min_input_files": 2}`. The self-optimizing DAGs run the same operator
when a table's health says it is due.
"""

from __future__ import annotations

from airflow.sdk import DAG
from icefloe_airflow.operators import RewritePositionDeletesOperator
from icefloe_airflow.params import flag, from_params, optional_int, optional_string, table_param

with DAG(
    dag_id="icefloe_rewrite_position_deletes",
    description="Minor compaction: rewrite a table's position delete files",
    schedule=None,
    max_active_runs=4,
    catchup=False,
    render_template_as_native_obj=True,
    tags=["icefloe", "iceberg", "maintenance"],
    doc_md=__doc__,
    params={
        "table": table_param(),
        "target_file_size_bytes": optional_int("size of the delete files written (bytes)"),
        "min_input_files": optional_int(
            "rewrite a partition's delete files only from this many on"
        ),
        "rewrite_all": flag("rewrite every delete file of the selected partitions"),
        "where": optional_string("only partitions this filter may match, e.g. ts >= '2024-01-01'"),
        "max_attempts": optional_int("plan and commit again after a conflict, at most N times"),
    },
) as dag:
    RewritePositionDeletesOperator(
        task_id="rewrite_position_deletes",
        table="{{ params.table }}",
        options=from_params(
            "target_file_size_bytes", "min_input_files", "rewrite_all", "where", "max_attempts"
        ),
    )
