"""One operator per job in `spark_jobs/`: ingest and the six maintenance jobs.

The maintenance operators only name their job (its flags go in `options`); they take the
table's maintenance lock. The ingest operator spells out the ingest arguments, does not take
the lock (ingestion keeps running during maintenance; commits are optimistic and retried), and
publishes an Asset event for the table after each run, so maintenance can be scheduled on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import Context

from icecore.jobs import JobOptions
from icecore.jobs.jobs import IngestOptions
from icefloe_airflow.assets import INGEST_ALIAS, fleet_asset, table_asset
from icefloe_airflow.hook import IcebergHook
from icefloe_airflow.operators.base import IcefloeJobOperator, Refused

DEFAULT_BATCH_ID = "{{ dag.dag_id }}/{{ run_id }}/{{ task.task_id }}"


class IngestOperator(IcefloeJobOperator):
    """Ingest a batch (Parquet, CSV or JSON files) into `table` in one atomic commit.

    :param source: file or directory to read (templated).
    :param mode: append, overwrite, upsert, delete or cdc (templated).
    :param key: equality columns for upsert/delete/cdc, a list or `a,b` (templated).
    :param op_column: cdc: the column holding I, U or D (templated).
    :param batch_id: the batch is committed at most once; the default is unique per DAG run
        and task, so an Airflow retry of a run that did commit does not commit twice.
    :param create: create the table when it does not exist, with `partition_by`, `sort_by`,
        `properties` (table properties).
    :param merge_schema: add the source's new columns to the table.
    :param source_format: parquet, csv or json (default: from the file names).
    :param source_options: Spark reader options, e.g. {"header": "true"}.
    """

    job = "ingest"
    template_fields = (
        *IcefloeJobOperator.template_fields,
        "source",
        "mode",
        "key",
        "op_column",
        "batch_id",
        "partition_by",
        "sort_by",
        "properties",
        "source_options",
    )

    def __init__(
        self,
        *,
        table: str | None = None,
        source: str | None = None,
        mode: str | None = None,
        key: str | Sequence[str] | None = None,
        op_column: str | None = None,
        batch_id: str | None = DEFAULT_BATCH_ID,
        create: bool | None = None,
        partition_by: str | None = None,
        sort_by: str | None = None,
        merge_schema: bool | None = None,
        properties: Mapping[str, Any] | None = None,
        source_format: str | None = None,
        source_options: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        outlets = list(kwargs.pop("outlets", None) or [])
        super().__init__(table=table, outlets=[*outlets, INGEST_ALIAS], **kwargs)
        self.source = source
        self.mode = mode
        self.key = key
        self.op_column = op_column
        self.batch_id = batch_id
        self.create = create
        self.partition_by = partition_by
        self.sort_by = sort_by
        self.merge_schema = merge_schema
        self.properties = properties
        self.source_format = source_format
        self.source_options = source_options

    def job_options(self, context: Context) -> dict[str, Any]:
        own: dict[str, Any] = {
            "source": self.source,
            "source_format": self.source_format,
            "source_options": self.source_options or None,
            "mode": self.mode,
            "key": self.key or None,
            "op_column": self.op_column,
            "batch_id": self.batch_id or None,
            "create": self.create,
            "partition_by": self.partition_by,
            "sort_by": self.sort_by,
            "merge_schema": self.merge_schema,
            "properties": self.properties or None,
        }
        given = {k: v for k, v in own.items() if v is not None}
        return {**given, **super().job_options(context)}

    def preflight(self, hook: IcebergHook, options: JobOptions) -> None:
        """The table must exist unless the batch creates it; the source must exist (checked
        through the catalog's FileIO when it can answer: a path Spark reads with settings
        of its own, such as `s3a://` with Hadoop credentials, is left to Spark)."""
        assert isinstance(options, IngestOptions)
        if not options.create:
            super().preflight(hook, options)
        source = str(options.source)
        try:
            exists = hook.get_catalog(create=options.create).io.exists(source)
        except Exception as exc:  # cannot tell: Spark may well read it with its own settings
            self.log.warning("cannot check that the source %s exists: %s", source, exc)
            return
        if not exists:
            raise Refused(f'"Source": {source} does not exist')

    def on_result(self, result: dict[str, Any], context: Context) -> None:
        """Publish the table's asset event, and its fleet's, through the ingest alias."""
        extra = {"table": self.table, **{k: v for k, v in result.items() if _is_json(v)}}
        assets = (table_asset(self.table, self.catalog_name), fleet_asset(self.iceberg_conn_id))
        for asset in assets:
            context["outlet_events"][INGEST_ALIAS].add(asset, extra=extra)
            self.log.info("asset event for %s (%s)", asset.name, asset.uri)


def _is_json(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


class RewritePositionDeletesOperator(IcefloeJobOperator):
    """Minor compaction: merge a partition's small position delete files, drop dangling ones."""

    job = "rewrite_position_deletes"


class ConvertEqualityDeletesOperator(IcefloeJobOperator):
    """Replace equality deletes with position deletes (cheaper for every reader)."""

    job = "convert_equality_deletes"


class RewriteDataFilesOperator(IcefloeJobOperator):
    """Major compaction: bin-pack or sort data files, applying their deletes."""

    job = "rewrite_data_files"


class ExpireSnapshotsOperator(IcefloeJobOperator):
    """Expire old snapshots and delete the files only they referenced."""

    job = "expire_snapshots"


class RemoveOrphanFilesOperator(IcefloeJobOperator):
    """Delete files under the table location that no metadata references."""

    job = "remove_orphan_files"


class RewriteManifestsOperator(IcefloeJobOperator):
    """Regroup a table's manifests by partition at the target manifest size (fewer, better
    clustered manifests for every planner to open)."""

    job = "rewrite_manifests"
