"""Self-optimizing maintenance for one table, as a task group any DAG can hold.

    health -> convert_equality_deletes_due -> convert_equality_deletes
           -> rewrite_position_deletes_due -> rewrite_position_deletes
           -> rewrite_data_files_due      -> rewrite_data_files
           -> expire_snapshots_due        -> expire_snapshots
           -> remove_orphan_files_due     -> remove_orphan_files
           -> health_after

`health` measures the table (metadata only, no Spark), lists the due jobs with their reasons
and the points its score lost (`icefloe_airflow.health_model`), and records the check in the
health history the Iceberg page charts. Each `<job>_due` gate lets its job run only when
the job is due; a gate that says no skips its job alone, and the next gate still runs (trigger
rule `none_failed`), so the jobs that are due run one after the other in `JOB_ORDER` while a
failure stops the chain. `health_after` records what the maintenance achieved.

Why a chain and not parallel branches: each job commits to the same table and the next one
should see its result (compaction after conversion finds position deletes, expiry after
compaction can drop the replaced files); the operators also hold the table's maintenance lock
while they run, so a hand-triggered job or another DAG on the same table waits instead of
conflicting. Ingestion takes no lock and keeps committing meanwhile.

    with DAG("optimize_events", schedule="@hourly", max_active_runs=1):
        self_optimizing_group("db.events", policy={"minor_file_count": 20})
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from airflow.sdk import Asset, AssetOrTimeSchedule, CronTriggerTimetable, TaskGroup, task
from airflow.sdk import TriggerRule as Rule

from icefloe_airflow.assets import table_asset
from icefloe_airflow.operators import OPERATORS, TableHealthOperator
from icefloe_airflow.policy import JOB_ORDER, MaintenancePolicy
from icefloe_airflow.tables_config import TableConfig

log = logging.getLogger(__name__)


def optimize_dag_id(table: str) -> str:
    """`icefloe_optimize__<namespace>__<name>` (nested namespace levels joined by `__`)."""
    return "icefloe_optimize__" + "__".join(table.split("."))


def schedule_for(config: TableConfig) -> str | list[Asset] | AssetOrTimeSchedule | None:
    """The DAG schedule of a tables.yaml entry: its cron or preset, the table's ingest Asset
    (`asset`: run after each ingested batch), both, or None (manual)."""
    if not config.on_assets:
        return config.clock
    assets = [table_asset(config.table, config.catalog_name)]
    if config.clock is None:
        return assets
    return AssetOrTimeSchedule(
        timetable=CronTriggerTimetable(config.clock, timezone="UTC"), assets=assets
    )


def _gate(job: str) -> Any:
    """A short-circuit task that lets `job` run only when the health check listed it as due."""

    @task.short_circuit(
        task_id=f"{job}_due",
        trigger_rule=Rule.NONE_FAILED,
        # Skip only the job itself: the next gate decides for the next job.
        ignore_downstream_trigger_rules=False,
    )
    def gate(health: dict[str, Any]) -> bool:
        reasons = {d["job"]: d["reason"] for d in health.get("due", ())}
        if job in reasons:
            log.info("%s is due on %s: %s", job, health.get("table"), reasons[job])
            return True
        why = {d["job"]: d["reason"] for d in health.get("skipped", ())}.get(job, "")
        log.info("%s is not due on %s, skipped: %s", job, health.get("table"), why)
        return False

    return gate


def self_optimizing_group(
    table: str,
    *,
    policy: MaintenancePolicy | Mapping[str, Any] | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    iceberg_conn_id: str = "iceberg_default",
    conn_id: str = "spark_default",
    group_id: str = "self_optimizing",
    operator_kwargs: Mapping[str, Any] | None = None,
) -> TaskGroup:
    """Add the health check and the due-only job chain for `table` to the current DAG.

    `policy` overrides the Amoro-like defaults (a `MaintenancePolicy` or its mapping form, as in
    tables.yaml); its retention and file size settings become the jobs' options. `options`
    maps a job name to extra operator options that win over the policy's (for example
    `{"rewrite_data_files": {"strategy": "sort"}}`). `operator_kwargs` go to every job operator
    (`lock_wait`, `executor_memory`, `pool`, ...). Returns the group, for dependencies.
    """
    if not isinstance(policy, MaintenancePolicy):
        policy = MaintenancePolicy.from_mapping(policy)
    options = dict(options or {})
    # tables.yaml may also hold the table's ingest options; they are not for maintenance.
    unknown = sorted(set(options) - {*JOB_ORDER, "ingest"})
    if unknown:
        raise ValueError(f"options for unknown jobs {unknown}; known: {list(JOB_ORDER)}")
    with TaskGroup(group_id=group_id, tooltip=f"self-optimizing {table}") as group:
        health = TableHealthOperator(
            task_id="health",
            table=table,
            policy=policy.to_dict(),
            iceberg_conn_id=iceberg_conn_id,
        )
        previous: Any = health
        for job in JOB_ORDER:
            gate = _gate(job)(health.output)
            operator = OPERATORS[job](
                task_id=job,
                table=table,
                options={**policy.job_options(job), **(options.get(job) or {})},
                iceberg_conn_id=iceberg_conn_id,
                conn_id=conn_id,
                **dict(operator_kwargs or {}),
            )
            previous >> gate >> operator
            previous = operator
        after = TableHealthOperator(
            task_id="health_after",
            table=table,
            policy=policy.to_dict(),
            iceberg_conn_id=iceberg_conn_id,
            trigger_rule=Rule.NONE_FAILED,
        )
        previous >> after
    return group
