"""The fleet DAG: one per fleet of `tables.yaml` (one catalog each), `icefloe_fleet__<conn>`.

    plan -> table[0]: convert_equality_deletes -> rewrite_position_deletes -> ...
            table[1]: ...                               -> remove_orphan_files
            ...

`plan` checks every table of the catalog (metadata only, cached; `tasks.plan_fleet`), records
the checks, sends the metrics and returns the chosen tables in rank order; the `table` task
group is mapped over them (dynamic task mapping), each running its due jobs in `JOB_ORDER`
(a job not due skips itself, with the reason), with the per-table DAGs' operators, so each
job holds the table's maintenance lease and is recorded in the run history. At most
`spark_apps` of a run's tasks run at once, whichever jobs and tables they are: the DAG's
`max_active_tasks`, which Airflow 3 counts per run (a per-task limit would let one table's
compaction run beside another's conversion); with a `pool`, its slots bound the Spark
applications across every DAG using it. With the fleet's
`spark_connect_conn_id` every job is a client of that one warm Spark Connect server (no
spark-submit), still at most `spark_apps` at once. A job whose table another job holds waits
for the lease in the triggerer (deferred, counted in neither limit), not in its slot
(`icefloe_airflow.lease_wait`).

Hand triggers take a form: a namespace filter, a dry run (the chosen tables are mapped and
every gate says no, with what it would have run), and the budget. With `schedule: asset` the
fleet runs on its Asset (`icefloe_airflow.catalog_watch`): other engines' commits to its
tables (seen by the triggerer's one poll loop for the catalog) and icefloe's ingest set it
off, and a run so set off checks only the tables its events name.
Nothing here calls the catalog: the file parses in milliseconds whatever the catalog holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.sdk import (
    DAG,
    Asset,
    AssetOrTimeSchedule,
    CronTriggerTimetable,
    Param,
    get_current_context,
    task,
    task_group,
)
from airflow.sdk import TriggerRule as Rule

from icefloe_airflow.fleet.config import FleetConfig, load_fleet_settings
from icefloe_airflow.policy import JOB_ORDER


def fleet_schedule(
    fleet: FleetConfig, defaults: Mapping[str, Any]
) -> str | list[Asset] | AssetOrTimeSchedule | None:
    """The fleet's cron or preset, its watched Asset (`asset`), both, or None (by hand)."""
    if not fleet.on_assets:
        return fleet.clock
    from icefloe_airflow.catalog_watch.assets import watched_fleet_asset  # noqa: PLC0415

    assets = [watched_fleet_asset(fleet, defaults)]
    if fleet.clock is None:
        return assets
    return AssetOrTimeSchedule(
        timetable=CronTriggerTimetable(fleet.clock, timezone="UTC"), assets=assets
    )


def fleet_dag(fleet: FleetConfig, defaults: Mapping[str, Any] | None = None) -> DAG:
    """The DAG of one fleet; `defaults`: the tables config's default policy keys."""
    from icefloe_airflow.fleet_dag import tasks  # noqa: PLC0415 - operators load with the DAG

    budget = fleet.budget
    with DAG(
        dag_id=fleet.dag_id,
        description=f"Maintain every table of the {fleet.iceberg_conn_id} catalog, worst first",
        schedule=fleet_schedule(fleet, defaults or {}),
        max_active_runs=1,
        max_active_tasks=budget.spark_apps,
        catchup=False,
        tags=["icefloe", "iceberg", "fleet"],
        doc_md=__doc__,
        params={
            "namespace": Param(
                ",".join(fleet.include),
                type="string",
                title="Namespaces",
                description="Namespace globs, comma-separated (a nested namespace is a.b)",
            ),
            "dry_run": Param(
                False, type="boolean", title="Dry run", description="Plan and log only"
            ),
            "max_tables": Param(
                budget.max_tables, type="integer", minimum=0, title="Tables per run"
            ),
            "max_bytes": Param(  # optional: empty is no limit
                None if budget.max_bytes is None else str(budget.max_bytes),
                type=["null", "string"],
                title="Bytes rewritten per run",
                description="e.g. 2TB; empty: no limit",
            ),
        },
    ) as dag:

        @task(task_id="plan")
        def plan() -> list[dict[str, Any]]:
            context = get_current_context()
            return tasks.plan_fleet(fleet, context["params"], tasks.tables_set_off(context))

        @task_group(group_id="table")
        def maintain(  # one argument per job's options: a mapped argument takes no subscript
            *,
            table: str,
            health: dict[str, Any],
            convert_equality_deletes: dict[str, Any],
            rewrite_position_deletes: dict[str, Any],
            rewrite_data_files: dict[str, Any],
            rewrite_manifests: dict[str, Any],
            expire_snapshots: dict[str, Any],
            remove_orphan_files: dict[str, Any],
        ) -> None:
            options = {
                "convert_equality_deletes": convert_equality_deletes,
                "rewrite_position_deletes": rewrite_position_deletes,
                "rewrite_data_files": rewrite_data_files,
                "rewrite_manifests": rewrite_manifests,
                "expire_snapshots": expire_snapshots,
                "remove_orphan_files": remove_orphan_files,
            }
            previous: Any = None
            for job in JOB_ORDER:
                operator = tasks.FLEET_OPERATORS[job](
                    task_id=job,
                    table=table,
                    health=health,
                    options=options[job],
                    iceberg_conn_id=fleet.iceberg_conn_id,
                    conn_id=fleet.conn_id,
                    spark_connect_conn_id=fleet.spark_connect_conn_id,
                    # A leased table waits in the triggerer, its slot running other tables.
                    deferrable=True,
                    pool=fleet.pool,
                    # A job that is not due skips itself; the next still runs, a failure
                    # stops the table's chain.
                    trigger_rule=Rule.NONE_FAILED,
                    on_failure_callback=tasks.count_failure,
                )
                if previous is not None:
                    previous >> operator
                previous = operator

        maintain.expand_kwargs(plan())
    return dag


def fleet_dags() -> list[DAG]:
    """One DAG per fleet of the tables config."""
    settings = load_fleet_settings()
    return [fleet_dag(fleet, settings.layers.defaults) for fleet in settings.fleets]
