"""Self-optimizing maintenance for one table, as a task group any DAG can hold.

    health -> convert_equality_deletes_due -> convert_equality_deletes
           -> rewrite_position_deletes_due -> rewrite_position_deletes
           -> rewrite_data_files_due      -> rewrite_data_files
           -> rewrite_manifests_due       -> rewrite_manifests
           -> expire_snapshots_due        -> expire_snapshots
           -> remove_orphan_files_due     -> remove_orphan_files
           -> health_after

`health` measures the table (metadata only, no Spark), lists the due jobs with their reasons
and the points its score lost (`icefloe_airflow.health_model`), and records the check in the
health history the Iceberg page charts. Each `<job>_due` gate lets its job run only when
the job is due; a gate that says no skips its job alone, and the next gate still runs (trigger
rule `none_failed`), so the jobs that are due run one after the other in `JOB_ORDER` while a
failure stops the chain. `health_after` records what the maintenance achieved.

Most gates read `health`'s verdict. The gates of `DECIDED_AFTER_REWRITES` (the manifest
rewrite) measure the table again as the jobs before them left it: a data rewrite replaces the
manifests of every file it rewrites, so a table whose manifests were many at the first check
often needs no manifest rewrite after it, and one whose data needed nothing keeps its
manifests to rewrite.

Every check uses the policy the Iceberg page, `icefloe health` and the fleet use for the
table (`table_health.table_policy_of`): the tables config's layers (defaults, matching
namespaces, the table's entry), then the group's own `policy`, then the table's `icefloe.*`
properties. The jobs take what that policy implies (retention, target sizes) from the health
task at run time, beneath the group's explicit `options`.

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

from airflow.sdk import Asset, AssetOrTimeSchedule, Context, CronTriggerTimetable, TaskGroup, task
from airflow.sdk import TriggerRule as Rule

from icefloe_airflow.catalog_watch.assets import watched_table_asset
from icefloe_airflow.health_model import JobDecision
from icefloe_airflow.hook import IcebergHook
from icefloe_airflow.operators import OPERATORS, IcefloeJobOperator, TableHealthOperator
from icefloe_airflow.policy import DECIDED_AFTER_REWRITES, JOB_ORDER, MaintenancePolicy
from icefloe_airflow.table_health import decide_now
from icefloe_airflow.tables_config import TableConfig

log = logging.getLogger(__name__)


def optimize_dag_id(table: str) -> str:
    """`icefloe_optimize__<namespace>__<name>` (nested namespace levels joined by `__`)."""
    return "icefloe_optimize__" + "__".join(table.split("."))


def schedule_for(config: TableConfig) -> str | list[Asset] | AssetOrTimeSchedule | None:
    """The DAG schedule of a tables.yaml entry: its cron or preset, the table's Asset
    (`asset`: run after each ingested batch, and when other engines' commits may make
    maintenance due, seen by the Asset's watcher), both, or None (manual)."""
    if not config.on_assets:
        return config.clock
    assets = [watched_table_asset(config)]
    if config.clock is None:
        return assets
    return AssetOrTimeSchedule(
        timetable=CronTriggerTimetable(config.clock, timezone="UTC"), assets=assets
    )


def _reasons(health: Mapping[str, Any], key: str) -> dict[str, str]:
    return {d["job"]: d["reason"] for d in health.get(key, ())}


def _gate(job: str) -> Any:
    """A short-circuit task that lets `job` run only when the health check listed it as due."""

    @task.short_circuit(
        task_id=f"{job}_due",
        trigger_rule=Rule.NONE_FAILED,
        # Skip only the job itself: the next gate decides for the next job.
        ignore_downstream_trigger_rules=False,
    )
    def gate(health: dict[str, Any]) -> bool:
        due = _reasons(health, "due")
        if job in due:
            log.info("%s is due on %s: %s", job, health.get("table"), due[job])
            return True
        why = _reasons(health, "skipped").get(job, "")
        log.info("%s is not due on %s, skipped: %s", job, health.get("table"), why)
        return False

    return gate


def job_due_now(
    iceberg_conn_id: str, table: str, job: str, overrides: Mapping[str, Any] | None = None
) -> JobDecision:
    """Whether `job` is due on the table as it is now (`DECIDED_AFTER_REWRITES`: after the
    jobs before it), with the policy every checker uses."""
    hook = IcebergHook(iceberg_conn_id)
    try:
        return decide_now(hook.load_table(table), table, hook.state_store(), job, overrides)
    finally:
        hook.close()


def _gate_now(
    job: str, table: str, iceberg_conn_id: str, overrides: Mapping[str, Any] | None
) -> Any:
    """A short-circuit task that measures the table as the jobs before it left it and lets
    `job` run only if it is due now (`DECIDED_AFTER_REWRITES`)."""

    @task.short_circuit(
        task_id=f"{job}_due",
        trigger_rule=Rule.NONE_FAILED,
        ignore_downstream_trigger_rules=False,
    )
    def gate(health: dict[str, Any]) -> bool:
        decision = job_due_now(iceberg_conn_id, table, job, overrides)
        first = "due" if job in _reasons(health, "due") else "not due"
        verdict = "due" if decision.due else "not due, skipped"
        log.info(
            "%s is %s on %s as the jobs before it left it: %s (at the first check it was %s)",
            job,
            verdict,
            table,
            decision.reason,
            first,
        )
        return decision.due

    return gate


def _chain_operator(job: str) -> type[IcefloeJobOperator]:
    """The job's operator in a chain: the options its policy implies (retention, target
    sizes) come at run time from the health task's policy (the layered one, table properties
    included), beneath the options the group was given."""
    base = OPERATORS[job]

    class ChainJobOperator(base):  # type: ignore[valid-type, misc]
        # Templated: the health task's XCom, resolved when the task runs.
        template_fields = (*base.template_fields, "health")

        def __init__(self, *, health: Any, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.health = health

        def job_options(self, context: Context) -> dict[str, Any]:
            policy = MaintenancePolicy.from_mapping(self.health["policy"])
            return {**policy.job_options(self.job), **super().job_options(context)}

    ChainJobOperator.__name__ = ChainJobOperator.__qualname__ = base.__name__
    return ChainJobOperator


CHAIN_OPERATORS = {job: _chain_operator(job) for job in JOB_ORDER}


def self_optimizing_group(
    table: str,
    *,
    policy: MaintenancePolicy | Mapping[str, Any] | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    iceberg_conn_id: str = "iceberg_default",
    conn_id: str = "spark_default",
    spark_connect_conn_id: str | None = None,
    group_id: str = "self_optimizing",
    operator_kwargs: Mapping[str, Any] | None = None,
) -> TaskGroup:
    """Add the health check and the due-only job chain for `table` to the current DAG.

    `policy` (a mapping of `MaintenancePolicy` keys, as in tables.yaml, or a whole policy)
    overrides the tables config's policy for the table (see the module docstring); its
    retention and file size settings become the jobs' options. `options` maps a job name to
    extra operator options that win over the policy's (for example `{"rewrite_data_files":
    {"strategy": "sort"}}`). With `spark_connect_conn_id` (a Spark Connect connection) every
    job runs as a client of that server instead of being spark-submitted to `conn_id`.
    `operator_kwargs` go to every job operator (`lock_wait`,
    `executor_memory`, `pool`, ...). Returns the group, for dependencies.
    """
    if isinstance(policy, MaintenancePolicy):
        overrides: dict[str, Any] | None = policy.to_dict()
    else:
        MaintenancePolicy.from_mapping(policy)  # a mistake fails the DAG's import, by name
        overrides = dict(policy) if policy else None
    options = dict(options or {})
    # tables.yaml may also hold the table's ingest options; they are not for maintenance.
    unknown = sorted(set(options) - {*JOB_ORDER, "ingest"})
    if unknown:
        raise ValueError(f"options for unknown jobs {unknown}; known: {list(JOB_ORDER)}")
    with TaskGroup(group_id=group_id, tooltip=f"self-optimizing {table}") as group:
        health = TableHealthOperator(
            task_id="health", table=table, policy=overrides, iceberg_conn_id=iceberg_conn_id
        )
        previous: Any = health
        for job in JOB_ORDER:
            if job in DECIDED_AFTER_REWRITES:
                gate = _gate_now(job, table, iceberg_conn_id, overrides)(health.output)
            else:
                gate = _gate(job)(health.output)
            operator = CHAIN_OPERATORS[job](
                task_id=job,
                table=table,
                health=health.output,
                options=dict(options.get(job) or {}),
                iceberg_conn_id=iceberg_conn_id,
                conn_id=conn_id,
                spark_connect_conn_id=spark_connect_conn_id,
                **dict(operator_kwargs or {}),
            )
            previous >> gate >> operator
            previous = operator
        after = TableHealthOperator(
            task_id="health_after",
            table=table,
            policy=overrides,
            iceberg_conn_id=iceberg_conn_id,
            trigger_rule=Rule.NONE_FAILED,
        )
        previous >> after
    return group
