"""What the fleet DAG's tasks do at run time (the DAG file only wires them, `dag`): plan the
run (discover, check, rank, budget, record, measure), and the job operators that report their
outcome to the metrics.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from airflow.sdk.exceptions import AirflowSkipException

from icecore.jobs.grammar import describe_size
from icefloe_airflow.fleet.cache import HealthCache
from icefloe_airflow.fleet.config import Budget, FleetConfig, load_fleet_settings
from icefloe_airflow.fleet.ranking import Candidate, plan_run
from icefloe_airflow.fleet.survey import survey
from icefloe_airflow.fleet_dag import metrics
from icefloe_airflow.hook import IcebergHook
from icefloe_airflow.operators import OPERATORS, IcefloeJobOperator
from icefloe_airflow.policy import DECIDED_AFTER_REWRITES, JOB_ORDER
from icefloe_airflow.self_optimizing import job_due_now

log = logging.getLogger(__name__)


def run_budget(fleet: FleetConfig, params: Mapping[str, Any]) -> Budget:
    """The configured budget, overridden by a hand trigger's form."""
    try:
        return fleet.budget.limited(params.get("max_tables"), params.get("max_bytes"))
    except ValueError as exc:  # named as the trigger form shows the field
        raise ValueError(f'"Bytes rewritten per run": {exc}') from None


def _globs(value: Any, default: tuple[str, ...]) -> tuple[str, ...]:
    if value in (None, "", []):
        return default
    items = value.split(",") if isinstance(value, str) else list(value)
    return tuple(s.strip() for s in items if s.strip()) or default


def tables_set_off(context: Mapping[str, Any]) -> list[str] | None:
    """The tables named by the asset events that set the run off (a watcher's or an
    ingest's), or None for a run they did not (by hand, on the clock): that one looks at
    every table."""
    from icefloe_airflow.catalog_watch.assets import changed_tables, commit_words  # noqa: PLC0415

    by_asset = context.get("triggering_asset_events") or {}
    events = [event for asset in by_asset for event in by_asset[asset]]
    tables = changed_tables(events)
    for event in events:
        payload = (event.extra or {}).get("payload") or {}
        snapshots = payload.get("snapshots") or []
        log.info(
            "set off by %s: %s",
            payload.get("table") or (event.extra or {}).get("table"),
            "; ".join(commit_words(s) for s in snapshots) or "an ingested batch",
        )
    return tables or None


def plan_fleet(
    fleet: FleetConfig, params: Mapping[str, Any], changed: list[str] | None = None
) -> list[dict[str, Any]]:
    """Check every table of the fleet's catalog (those in `changed` only, when the run's
    events named them) and return the chosen tables' task-group arguments, in rank order;
    none on a dry run (the plan is in the log)."""
    layers = load_fleet_settings().layers  # read at run time: policy edits apply at once
    budget = run_budget(fleet, params)
    hook = IcebergHook(fleet.iceberg_conn_id)
    cache = HealthCache()
    try:
        catalog = hook.get_catalog()
        result = survey(
            catalog,
            layers,
            store=hook.state_store(),
            include=_globs(params.get("namespace"), fleet.include),
            exclude=fleet.exclude,
            changed=None if changed is None else set(changed),
            cache=cache,
            record=True,
        )
    finally:
        cache.close()
        hook.close()
    metrics.table_gauges(result.catalog, result.checks)
    plan = plan_run(result.ranked, budget)
    cached = sum(c.cached for c in result.checks)
    broken = [c for c in result.checks if c.error is not None]
    log.info(
        "%d tables checked (%d from the cache, %d not checkable), %d due, %d chosen within %s",
        len(result.checks),
        cached,
        len(broken),
        len(result.ranked),
        len(plan.chosen),
        budget.to_dict(),
    )
    for check in broken:
        log.warning("%s not checked: %s", check.table, check.error)
    for rank, c in enumerate(plan.chosen, start=1):
        jobs = "; ".join(f"{d.job}: {d.reason}" for d in c.jobs)
        log.info(
            "#%d %s (benefit %.1f, rewrites ~%s): %s",
            rank,
            c.table,
            c.benefit,
            describe_size(c.rewrite_bytes),
            jobs,
        )
    for c, why in plan.deferred:
        log.info("deferred %s: %s", c.table, why)
    dry_run = bool(params.get("dry_run"))
    if dry_run:
        log.info("dry run: the chosen tables are mapped, every job gate says no")
    return [
        group_arguments(c, layers.options.get(c.table, {}), dry_run=dry_run) for c in plan.chosen
    ]


def group_arguments(
    candidate: Candidate, config_options: Mapping[str, Mapping[str, Any]], *, dry_run: bool
) -> dict[str, Any]:
    """One mapped task group's arguments: the table, its due jobs and the others with the
    reasons (`health`, as the health operator returns them), and each job's options (the policy's,
    under the config's per-job options). A dry run lists every job as skipped, the due
    ones with their reason: the run shows what would run, table by table, and runs nothing."""
    policy = candidate.check.policy
    assert policy is not None
    due = [] if dry_run else [d.to_dict() for d in candidate.jobs]
    skipped = [
        {"job": d.job, "reason": f"dry run; due: {d.reason}" if d.due else d.reason}
        for d in candidate.check.decisions
        if dry_run or not d.due
    ]
    arguments: dict[str, Any] = {
        "table": candidate.table,
        "health": {"table": candidate.table, "due": due, "skipped": skipped},
    }
    for job in JOB_ORDER:
        arguments[job] = {**policy.job_options(job), **(config_options.get(job) or {})}
    return arguments


def _due_now(iceberg_conn_id: str, table: str, job: str) -> dict[str, str]:
    """`{job: reason}` if `job` is due on the table as the jobs before it left it, else {}
    (the plan's check came before them; see `policy.DECIDED_AFTER_REWRITES`)."""
    decision = job_due_now(iceberg_conn_id, table, job)
    log.info("%s on %s, measured again after the jobs before it: %s", job, table, decision.reason)
    return {job: decision.reason} if decision.due else {}


def _fleet_operator(job: str) -> type[IcefloeJobOperator]:
    """The job's operator for one mapped table: it runs only if the plan listed the job as
    due (`health`, the plan's entry), else skips itself with the reason, and it reports its
    outcome to the metrics. The per-table DAGs' short-circuit gates cannot be used here:
    inside a mapped task group, a gate's skip does not reach its mapped downstream job."""
    base = OPERATORS[job]

    class FleetJobOperator(base):  # type: ignore[valid-type, misc]
        # Templated, so that the mapped group's argument is resolved for each table.
        template_fields = (*base.template_fields, "health")

        def __init__(self, *, health: Any, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.health = health

        def execute(self, context: Any) -> dict[str, Any]:
            reasons = {d["job"]: d["reason"] for d in self.health.get("due", ())}
            if self.job in reasons and self.job in DECIDED_AFTER_REWRITES:
                reasons = _due_now(self.iceberg_conn_id, str(self.table), self.job)
            if self.job not in reasons:
                why = {d["job"]: d["reason"] for d in self.health.get("skipped", ())}
                self.log.info("%s is not due on %s: %s", self.job, self.table, why.get(self.job))
                raise AirflowSkipException(f"{self.job} is not due")
            self.log.info("%s is due on %s: %s", self.job, self.table, reasons[self.job])
            return super().execute(context)

        def on_result(self, result: dict[str, Any], context: Any) -> None:
            super().on_result(result, context)
            metrics.job_counters(self.catalog_name, str(self.table), self.job, result)

    FleetJobOperator.__name__ = FleetJobOperator.__qualname__ = f"Fleet{base.__name__}"
    return FleetJobOperator


FLEET_OPERATORS = {job: _fleet_operator(job) for job in JOB_ORDER}


def count_failure(context: Mapping[str, Any]) -> None:
    """on_failure_callback of the fleet's job tasks."""
    task = context["task"]
    metrics.job_failed(getattr(task, "catalog_name", "default"), str(task.table), task.job)
