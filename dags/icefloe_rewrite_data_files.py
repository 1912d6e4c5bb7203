"""Major compaction by hand: bin-pack or sort a table's data files, applying their deletes.

Trigger it with a conf such as `{"table": "db.events", "strategy": "sort",
"sort_order": "ts, id"}`; empty fields keep the job's defaults (the table's
`write.target-file-size-bytes`, the table's sort order, ...).
"""

from __future__ import annotations

from airflow.sdk import DAG, Param
from icefloe_airflow.operators import RewriteDataFilesOperator
from icefloe_airflow.params import flag, from_params, optional_int, optional_string, table_param

with DAG(
    dag_id="icefloe_rewrite_data_files",
    description="Major compaction: rewrite a table's data files",
    schedule=None,
    max_active_runs=4,
    catchup=False,
    render_template_as_native_obj=True,
    tags=["icefloe", "iceberg", "maintenance"],
    doc_md=__doc__,
    params={
        "table": table_param(),
        "strategy": Param(
            "binpack",
            type="string",
            enum=["binpack", "sort"],
            description="binpack: combine files as they are; sort: also sort their rows",
        ),
        "sort_order": optional_string(
            "with strategy sort: e.g. 'id desc nulls last, day(ts)' (default: the table's)"
        ),
        "target_file_size_bytes": optional_int("size of the files written (bytes)"),
        "min_input_files": optional_int("rewrite a group only from this many files on"),
        "rewrite_all": flag("rewrite every data file, whatever its size"),
        "delete_file_threshold": optional_int(
            "rewrite a data file once this many delete files apply to it"
        ),
        "delete_ratio_threshold": Param(
            None,
            type=["null", "number"],
            minimum=0,
            maximum=1,
            description="rewrite a data file once this fraction of its rows is deleted",
        ),
        "where": optional_string("only files that may hold matching rows"),
        "partial_progress_enabled": flag("commit file groups as they finish"),
        "partial_progress_max_commits": optional_int("at most this many partial commits"),
        "max_concurrent_file_group_rewrites": optional_int(
            "Spark jobs writing file groups at once, each up to 64 groups"
        ),
    },
) as dag:
    RewriteDataFilesOperator(
        task_id="rewrite_data_files",
        table="{{ params.table }}",
        options=from_params(
            "strategy",
            "sort_order",
            "target_file_size_bytes",
            "min_input_files",
            "rewrite_all",
            "delete_file_threshold",
            "delete_ratio_threshold",
            "where",
            "partial_progress_enabled",
            "partial_progress_max_commits",
            "max_concurrent_file_group_rewrites",
        ),
    )
