"""Ingest a batch of files into an Iceberg table, and publish the table's Asset event.

Each run commits one batch atomically (append, overwrite, upsert, delete or CDC). The run's
batch id is derived from the DAG run, so a retried task never commits the same batch twice.
After the commit the ingest operator attaches an event for the table's Asset
(`iceberg://<catalog>/<namespace>/<name>`) to the `icefloe-ingest` alias: the self-optimizing
DAG of a table configured with `schedule: asset` runs after each ingested batch.

Conf example: `{"table": "db.events", "source": "/data/in/2024-01-01/", "mode": "cdc",
"key": "id", "create": true, "partition_by": "day(ts)"}`.
"""

from __future__ import annotations

from airflow.sdk import DAG, Param
from icefloe_airflow.operators import IngestOperator
from icefloe_airflow.params import flag, optional_string, table_param

MODES = ["append", "overwrite", "upsert", "delete", "cdc"]

with DAG(
    dag_id="icefloe_ingest",
    description="Ingest a batch of files into an Iceberg table in one commit",
    schedule=None,
    max_active_runs=8,
    catchup=False,
    render_template_as_native_obj=True,
    tags=["icefloe", "iceberg", "ingest"],
    doc_md=__doc__,
    params={
        "table": table_param(),
        "source": Param(
            "",
            type="string",
            minLength=1,
            title="Source",
            description="file or directory Spark can read (local path, s3a://, hdfs://)",
        ),
        "source_format": Param(
            None,
            type=["null", "string"],
            enum=[None, "parquet", "csv", "json"],
            description="empty: from the file names",
        ),
        "mode": Param(
            "append",
            type="string",
            enum=MODES,
            description="append; overwrite (replace the table's rows); upsert, delete or cdc "
            "by key",
        ),
        "key": optional_string(
            "upsert/delete/cdc: key columns, comma-separated (default: the table's identifier "
            "fields)"
        ),
        "op_column": Param(
            "op", type="string", minLength=1, description="cdc: the column holding I, U or D"
        ),
        "create": flag("create the table when it does not exist"),
        "partition_by": optional_string(
            "when creating: partition spec, e.g. day(ts), bucket(16, id)"
        ),
        "sort_by": optional_string("when creating: sort order, e.g. ts, id desc nulls last"),
        "properties": Param(
            {},
            type="object",
            additionalProperties={"type": "string"},
            description="when creating: table properties, e.g. "
            '{"write.target-file-size-bytes": "134217728"}',
        ),
        "merge_schema": flag("add the source's new columns to the table"),
    },
) as dag:
    IngestOperator(
        task_id="ingest",
        table="{{ params.table }}",
        source="{{ params.source }}",
        mode="{{ params.mode }}",
        key="{{ params.key }}",
        op_column="{{ params.op_column }}",
        partition_by="{{ params.partition_by }}",
        sort_by="{{ params.sort_by }}",
        properties="{{ params.properties }}",
        options={
            "source-format": "{{ params.source_format }}",
            "create": "{{ params.create }}",
            "merge-schema": "{{ params.merge_schema }}",
        },
    )
