"""Every table's health, policy and due jobs, cheaply: metadata only, a bounded thread pool,
and the health cache (`cache`), so a table whose metadata location did not change since the
last run costs nothing beyond its line in the catalog listing.

A table that cannot be checked (unreadable metadata, a policy property that does not parse)
is reported with its error and never maintained: one broken table must not stop the fleet.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime

from icecore.catalog import Catalog
from icecore.health import HealthReport
from icefloe_airflow.fleet.cache import CachedHealth, HealthCache, catalog_key
from icefloe_airflow.fleet.config import PolicyLayers
from icefloe_airflow.fleet.discovery import DiscoveredTable
from icefloe_airflow.fleet.layering import PolicyError, TablePolicy, table_policy
from icefloe_airflow.health_model import JobDecision, Penalty, assess, measure_health
from icefloe_airflow.policy import MaintenancePolicy

log = logging.getLogger(__name__)
DEFAULT_THREADS = 8


@dataclass
class TableCheck:
    """One table's check: its policy, report, each job's decision, the score and the points
    it lost (`health_model`); or why it could not be checked (`error`)."""

    table: str
    metadata_location: str
    enabled: bool = True
    policy: MaintenancePolicy | None = None
    report: HealthReport | None = None
    decisions: list[JobDecision] = field(default_factory=list)
    score: int | None = None
    penalties: list[Penalty] = field(default_factory=list)
    error: str | None = None
    cached: bool = False
    policy_properties: tuple[str, ...] = ()

    @property
    def due(self) -> list[JobDecision]:
        """The due jobs, in `JOB_ORDER`; none for a disabled or broken table."""
        if not self.enabled or self.error is not None:
            return []
        return [d for d in self.decisions if d.due]


def _params(policy: MaintenancePolicy) -> str:
    """What a report depends on besides the metadata: the small-file definition."""
    return json.dumps([policy.min_target_size_ratio, policy.target_file_size_bytes])


def _policy_properties(properties: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in properties.items() if k.startswith("icefloe.")}


def check_tables(
    catalog: Catalog,
    tables: Sequence[DiscoveredTable],
    layers: PolicyLayers,
    *,
    last_runs: Mapping[str, Mapping[str, datetime]],
    now: datetime,
    cache: HealthCache | None = None,
    threads: int = DEFAULT_THREADS,
    complete_listing: bool = False,
) -> list[TableCheck]:
    """Check `tables` (in their order). `last_runs` maps a table to its jobs' last successes
    (the cadence jobs' decisions). Only the tables missing from the cache, or cached for
    another metadata location or small-file definition, are loaded, `threads` at a time.
    `complete_listing`: `tables` is the whole catalog, so cached tables not in it are gone."""
    key = catalog_key(catalog.name, catalog.properties)
    cached = cache.load(key) if cache is not None else {}
    now_ms = int(now.timestamp() * 1000)
    checks: dict[str, TableCheck] = {}
    misses: list[DiscoveredTable] = []
    for t in tables:
        entry = cached.get(t.name)
        if entry is None or entry.metadata_location != t.metadata_location:
            misses.append(t)
            continue
        check = TableCheck(t.name, t.metadata_location, cached=True)
        try:
            resolved = table_policy(layers.values_for(t.name), entry.properties)
        except (PolicyError, ValueError) as exc:
            check.error = f"policy: {exc}"
            checks[t.name] = check
            continue
        if _params(resolved.policy) != entry.params:
            misses.append(t)  # the config changed the small-file definition
            continue
        _decide(check, resolved, HealthReport.from_dict(entry.report, now_ms), last_runs, now)
        checks[t.name] = check

    def measure(t: DiscoveredTable) -> tuple[TableCheck, CachedHealth | None]:
        check = TableCheck(t.name, t.metadata_location)
        try:
            table = catalog.load_table(t.name)
            properties = _policy_properties(table.metadata.properties)
            resolved = table_policy(layers.values_for(t.name), properties)
            report = measure_health(table, resolved.policy)
        except PolicyError as exc:
            check.error = f"policy: {exc}"
            return check, None
        except Exception as exc:  # one unreadable table must not stop the fleet
            log.warning("cannot check %s: %s: %s", t.name, type(exc).__name__, exc)
            check.error = f"{type(exc).__name__}: {exc}"
            return check, None
        # The catalog may have moved on since the listing: cache what was measured.
        location = table.metadata.metadata_location or t.metadata_location
        check.metadata_location = location
        _decide(check, resolved, report, last_runs, now)
        entry = CachedHealth(location, _params(resolved.policy), properties, report.to_dict())
        return check, entry

    fresh: list[tuple[str, CachedHealth]] = []
    if misses:
        with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
            for check, entry in pool.map(measure, misses):
                checks[check.table] = check
                if entry is not None:
                    fresh.append((check.table, entry))
    if cache is not None:
        cache.store(key, fresh)
        if complete_listing:
            cache.forget_others(key, (t.name for t in tables))
    return [checks[t.name] for t in tables]


def _decide(
    check: TableCheck,
    resolved: TablePolicy,
    report: HealthReport,
    last_runs: Mapping[str, Mapping[str, datetime]],
    now: datetime,
) -> None:
    check.enabled = resolved.enabled
    check.policy = resolved.policy
    check.policy_properties = resolved.from_properties
    check.report = report
    assessment = assess(report, resolved.policy, last_runs.get(check.table, {}), now)
    check.decisions = assessment.decisions
    check.score = assessment.score
    check.penalties = assessment.penalties
