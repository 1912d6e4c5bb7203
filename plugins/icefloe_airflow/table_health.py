"""One table's health, measured where the platform looks at it (a health task, the end of a
job, the Iceberg page) and recorded in the health history, as the fleet records its tables.

    policy = table_policy_of("db.events", table.metadata.properties, layers)
    report, assessment = check_table(table, "db.events", store, policy, source="job")

The policy is the one the fleet and `icefloe health` use for the table (`fleet.layering`):
the tables config's layers (defaults, matching namespaces, the table's own entry), then the
table's `icefloe.*` properties; so the page, the command, the fleet and the self-optimizing
DAGs score a table alike. A DAG's own policy (`self_optimizing_group(policy=...)`, a health
operator's `policy`) is one more layer, over the config's and under the table's properties.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from icefloe_airflow.fleet.config import PolicyLayers, load_fleet_settings
from icefloe_airflow.fleet.layering import table_policy
from icefloe_airflow.health_history import assessed_check, latest_check, record_checks
from icefloe_airflow.health_model import Assessment, JobDecision, assess, measure_health
from icefloe_airflow.policy import MaintenancePolicy

if TYPE_CHECKING:
    from icecore.health import HealthReport
    from icecore.table import Table
    from icefloe_airflow.state import MaintenanceStore

log = logging.getLogger(__name__)


def policy_layers() -> PolicyLayers:
    """The tables config's policy layers; none (the defaults) when there is no config."""
    try:
        return load_fleet_settings().layers
    except Exception as exc:  # a missing or broken config is reported where it is read
        log.info("no tables config, default maintenance policy: %s", exc)
        return PolicyLayers()


def table_policy_of(
    name: str,
    properties: Mapping[str, str],
    layers: PolicyLayers | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> MaintenancePolicy:
    """The policy the fleet uses for table `name` with these table properties, a DAG's
    `overrides` (policy keys) over the config's layers; ValueError (`layering.PolicyError`)
    naming a key or property that does not parse."""
    values = {**(layers or policy_layers()).values_for(name), **(overrides or {})}
    return table_policy(values, properties).policy


def check_table(
    table: Table,
    name: str,
    store: MaintenanceStore,
    policy: MaintenancePolicy,
    *,
    source: str,
    only_if_changed: bool = False,
    now: datetime | None = None,
) -> tuple[HealthReport, Assessment]:
    """Measure and assess `table` (the cadence jobs from the store's last successes) and record
    the check; with `only_if_changed`, only when the table's metadata, score or due jobs differ
    from its latest recorded check (a page refreshed every few seconds adds nothing)."""
    now = now or datetime.now(UTC)
    report = measure_health(table, policy)
    successes = store.last_runs(name, state="success")
    last = {job: run.finished_at for job, run in successes.items()}
    assessment = assess(report, policy, last, now)
    location = table.metadata.metadata_location
    check = assessed_check(
        name, report, policy, assessment, source=source, metadata_location=location
    )
    if only_if_changed:
        latest = latest_check(store.engine, store.catalog_name, name)
        if latest is not None and (latest.metadata_location, latest.score, latest.due) == (
            check.metadata_location,
            check.score,
            check.due,
        ):
            return report, assessment
    record_checks(store.engine, store.catalog_name, [check])
    return report, assessment


def decide_now(
    table: Table,
    name: str,
    store: MaintenanceStore,
    job: str,
    overrides: Mapping[str, Any] | None = None,
) -> JobDecision:
    """Whether `job` is due on `table` as it is now, with the policy every checker uses (a
    chain's `DECIDED_AFTER_REWRITES` jobs, after the rewrites before them); the check is
    recorded when it differs from the latest one (a job that ran just before recorded its
    own)."""
    policy = table_policy_of(name, table.metadata.properties, overrides=overrides)
    _, assessment = check_table(
        table, name, store, policy, source="health task", only_if_changed=True
    )
    return next(d for d in assessment.decisions if d.job == job)
