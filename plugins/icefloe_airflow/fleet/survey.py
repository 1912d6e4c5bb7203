"""One pass over a catalog, as the `icefloe` command and the fleet DAG both make it:
discover, check (cache), rank; optionally record the checks in the health history.

    with open_survey_store(state_uri, catalog.name) as store:
        result = survey(catalog, layers, store=store, include=["db*"])
        plan = plan_run(result.ranked, budget)
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from icecore.catalog import Catalog
from icefloe_airflow.fleet import history
from icefloe_airflow.fleet.cache import HealthCache
from icefloe_airflow.fleet.checking import DEFAULT_THREADS, TableCheck, check_tables
from icefloe_airflow.fleet.config import PolicyLayers
from icefloe_airflow.fleet.discovery import DiscoveredTable, discover, select_tables
from icefloe_airflow.fleet.ranking import Candidate, benefit, candidates, rewrite_bytes
from icefloe_airflow.fleet.runs import last_maintained, last_successes
from icefloe_airflow.health_history import FLEET_SOURCE, HealthCheck, record_checks, report_inputs
from icefloe_airflow.health_model import Assessment
from icefloe_airflow.state import MaintenanceStore


@dataclass(frozen=True)
class Survey:
    """The checked tables (listing order) and the due ones ranked."""

    catalog: str
    checked_at: datetime
    checks: list[TableCheck]
    ranked: list[Candidate]


def survey(
    catalog: Catalog,
    layers: PolicyLayers,
    *,
    store: MaintenanceStore | None = None,
    include: Sequence[str] = ("*",),
    exclude: Sequence[str] = (),
    names: Sequence[str] | None = None,
    changed: Collection[str] | None = None,
    cache: HealthCache | None = None,
    threads: int = DEFAULT_THREADS,
    record: bool = False,
    now: datetime | None = None,
) -> Survey:
    """Check the catalog's tables (those in `names` only, when given; of those listed, the
    ones in `changed` only, when given: the tables a fleet run's events name, some perhaps
    dropped or excluded since). Without a `store`,
    cadence jobs count as never run and nobody has waited; `record` adds the checks to the
    store's health history."""
    now = now or datetime.now(UTC)
    listed: list[DiscoveredTable] = discover(catalog, include, exclude)
    tables = listed if names is None else select_tables(listed, names)
    if changed is not None:
        tables = [t for t in tables if t.name in changed]
    successes = last_successes(store) if store is not None else {}
    checks = check_tables(
        catalog,
        tables,
        layers,
        last_runs=successes,
        now=now,
        cache=cache,
        threads=threads,
        complete_listing=names is None
        and changed is None
        and tuple(include) == ("*",)
        and not exclude,
    )
    first = history.first_checked(store.engine, store.catalog_name) if store is not None else {}
    ranked = candidates(checks, last_maintained(successes), first, now)
    if store is not None and record:
        record_checks(store.engine, store.catalog_name, health_checks(checks, now))
    return Survey(catalog.name, now, checks, ranked)


def check_inputs(check: TableCheck) -> dict[str, Any]:
    """What the score and decisions came from, JSON-friendly (history `inputs`, `--json`)."""
    inputs: dict[str, Any] = {
        "enabled": check.enabled,
        "cached": check.cached,
        "error": check.error,
        "policy_properties": list(check.policy_properties),
        "decisions": [d.to_dict() for d in check.decisions],
        "source": FLEET_SOURCE,
    }
    if check.report is not None and check.policy is not None:
        jobs = [d.job for d in check.due]
        assessment = Assessment(check.decisions, check.penalties)
        inputs.update(report_inputs(check.report, check.policy, assessment))
        inputs["benefit"] = round(benefit(check.report, check.policy, jobs), 3)
        inputs["rewrite_bytes"] = rewrite_bytes(check.report, check.policy, jobs)
    return inputs


def health_checks(checks: Sequence[TableCheck], now: datetime) -> list[HealthCheck]:
    """The history rows of a survey; a table that could not be checked has score 0."""
    return [
        HealthCheck(
            table=c.table,
            checked_at_ms=int(now.timestamp() * 1000),
            metadata_location=c.metadata_location,
            score=float(c.score if c.score is not None else 0),
            due=[d.job for d in c.due],
            inputs=check_inputs(c),
        )
        for c in checks
    ]
