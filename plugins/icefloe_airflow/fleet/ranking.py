"""Which due tables a fleet run maintains, in which order: by what the work saves readers,
within the run's budget, with waiting tables climbing.

Benefit estimates what the due jobs take off every full scan of the table, in file opens
(the unit a reader pays most for on object storage):

    benefit = excess data files                       if rewrite_data_files is due
            + delete files (position, DVs) + their bytes / 8 MiB
                                                      if a delete or data rewrite is due
            + 4 x equality delete files + equality keys / 1,000
                                                      if convert_equality_deletes is due
            + live delete records / 10,000            if rewrite_data_files is due
            + excess manifests                        if rewrite_manifests is due
            + 1 per due housekeeping job (expire_snapshots, remove_orphan_files)

Excess data files are those beyond a partition's ideal count, ceil(bytes / target size). An
equality delete file counts four opens (every reader joins it against the data); 10,000
delete records, or 8 MiB of delete files, are read for about the cost of one open. Excess
manifests are the manifest opens a manifest rewrite saves every scan's planning: those of
each spec and content (data, deletes) beyond ceil(their bytes / the target manifest size)
(`commit.manifest.target-size-bytes`), what the rewrite leaves; 300 one-commit manifests
save 299. Housekeeping saves readers nothing, but must run too: it ranks after compaction.

No starvation: `priority = benefit x (1 + waited days)`, waited capped at 30 days, where
waited is the time since the table's last successful maintenance job (state store), else
since the fleet first checked it (health history). A table passed over climbs each run.

Budget, greedily in priority order: at most `max_tables` tables; a table whose estimated
rewrite would take the run past `max_bytes` is passed over (smaller ones after it may still
fit), so the top table always fits unless it alone exceeds the whole budget, which is
reported. Estimated rewrite bytes: the data of the partitions `rewrite_data_files` is due
for (all of a partition over the delete ratio, the small files otherwise), plus the delete
files the delete jobs rewrite, plus the manifests a manifest rewrite merges. Concurrent Spark
applications are the fleet DAG's pool.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from icecore.health import HealthReport
from icecore.jobs.grammar import describe_size
from icefloe_airflow.fleet.checking import TableCheck
from icefloe_airflow.fleet.config import Budget
from icefloe_airflow.health_model import JobDecision, data_rewrite_reason, live_delete_ratio
from icefloe_airflow.policy import MaintenancePolicy

MAX_WAIT = timedelta(days=30)
HOUSEKEEPING = ("expire_snapshots", "remove_orphan_files")
_OPEN_BYTES = 8 * 1024 * 1024
_EQUALITY_FILE_OPENS = 4
_RECORDS_PER_OPEN = 10_000
_EQUALITY_KEYS_PER_OPEN = 1_000


@dataclass(frozen=True)
class Candidate:
    """A due table with its ranking inputs."""

    check: TableCheck
    jobs: list[JobDecision]
    benefit: float
    rewrite_bytes: int
    waited: timedelta

    @property
    def table(self) -> str:
        return self.check.table

    @property
    def priority(self) -> float:
        days = min(self.waited, MAX_WAIT) / timedelta(days=1)
        return self.benefit * (1 + days)

    @property
    def manifests(self) -> int:
        """The manifests every scan's planning opens (data and delete)."""
        stats = self.check.report.manifests if self.check.report is not None else None
        return 0 if stats is None else stats.data_manifests + stats.delete_manifests

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "jobs": [{"job": d.job, "reason": d.reason} for d in self.jobs],
            "score": self.check.score,
            "benefit": round(self.benefit, 3),
            "priority": round(self.priority, 3),
            "rewrite_bytes": self.rewrite_bytes,
            "manifests": self.manifests,
            "waited_s": int(self.waited.total_seconds()),
        }


@dataclass(frozen=True)
class RunPlan:
    """What a fleet run does: `chosen` in rank order, `deferred` with why."""

    chosen: list[Candidate]
    deferred: list[tuple[Candidate, str]]


def _excess_files(report: HealthReport, target: int) -> int:
    ideal = sum(max(1, math.ceil(p.data.bytes / target)) for p in report.partitions if p.data.files)
    return max(0, report.totals.data.files - ideal)


def _excess_manifests(report: HealthReport) -> list[tuple[int, int]]:
    """(manifests saved, their bytes) of each spec and content a manifest rewrite merges."""
    target = report.manifests.target_size_bytes
    found = []
    for _, _, counts in report.manifests.groups():
        excess = counts.manifests - max(1, math.ceil(counts.bytes / target))
        if excess > 0:
            found.append((excess, counts.bytes))
    return found


def rewrite_bytes(report: HealthReport, policy: MaintenancePolicy, jobs: Sequence[str]) -> int:
    """Bytes the due jobs are expected to rewrite (the budget's unit), from metadata."""
    target = policy.target_file_size_bytes or report.target_file_size_bytes
    total = 0
    if "rewrite_data_files" in jobs:
        for p in report.partitions:
            if live_delete_ratio(p) > policy.major_delete_ratio:
                total += p.data.bytes
            elif data_rewrite_reason(p, policy, target) is not None:
                total += p.small_data.bytes
    totals = report.totals
    if "rewrite_position_deletes" in jobs or "rewrite_data_files" in jobs:
        total += totals.position_deletes.bytes + totals.deletion_vectors.bytes
    if "convert_equality_deletes" in jobs:
        total += totals.equality_deletes.bytes
    if "rewrite_manifests" in jobs:
        total += sum(size for _, size in _excess_manifests(report))
    return total


def benefit(report: HealthReport, policy: MaintenancePolicy, jobs: Sequence[str]) -> float:
    """The module docstring's benefit of running `jobs` on the table."""
    totals = report.totals
    target = policy.target_file_size_bytes or report.target_file_size_bytes
    value = 0.0
    if "rewrite_data_files" in jobs:
        value += _excess_files(report, target)
        value += totals.delete_records / _RECORDS_PER_OPEN
    if "rewrite_position_deletes" in jobs or "rewrite_data_files" in jobs:
        deletes = totals.position_deletes
        vectors = totals.deletion_vectors
        value += deletes.files + vectors.files + (deletes.bytes + vectors.bytes) / _OPEN_BYTES
    if "convert_equality_deletes" in jobs:
        eq = totals.equality_deletes
        value += _EQUALITY_FILE_OPENS * eq.files + eq.records / _EQUALITY_KEYS_PER_OPEN
    if "rewrite_manifests" in jobs:
        value += sum(saved for saved, _ in _excess_manifests(report))
    value += sum(1 for job in jobs if job in HOUSEKEEPING)
    return value


def candidates(
    checks: Sequence[TableCheck],
    last_maintained: Mapping[str, datetime],
    first_seen: Mapping[str, datetime],
    now: datetime,
) -> list[Candidate]:
    """The due tables, highest priority first (ties by name, so a plan is reproducible)."""
    found = []
    for check in checks:
        jobs = check.due
        if not jobs or check.report is None or check.policy is None:
            continue
        names = [d.job for d in jobs]
        since = last_maintained.get(check.table) or first_seen.get(check.table) or now
        found.append(
            Candidate(
                check=check,
                jobs=jobs,
                benefit=benefit(check.report, check.policy, names),
                rewrite_bytes=rewrite_bytes(check.report, check.policy, names),
                waited=max(timedelta(0), now - since),
            )
        )
    return sorted(found, key=lambda c: (-c.priority, c.table))


def plan_run(ranked: Sequence[Candidate], budget: Budget) -> RunPlan:
    """The budget applied to `ranked` (highest priority first)."""
    chosen: list[Candidate] = []
    deferred: list[tuple[Candidate, str]] = []
    used = 0
    for c in ranked:
        if len(chosen) >= budget.max_tables:
            deferred.append((c, f"over the budget of {budget.max_tables} tables per run"))
        elif budget.max_bytes is not None and c.rewrite_bytes > budget.max_bytes:
            why = (
                f"rewrites ~{describe_size(c.rewrite_bytes)}, more than the whole budget of "
                f"{describe_size(budget.max_bytes)} per run; raise max_bytes"
            )
            deferred.append((c, why))
        elif budget.max_bytes is not None and used + c.rewrite_bytes > budget.max_bytes:
            left = budget.max_bytes - used
            deferred.append(
                (
                    c,
                    f"rewrites ~{describe_size(c.rewrite_bytes)}; {describe_size(left)} of the "
                    "run's max_bytes left",
                )
            )
        else:
            chosen.append(c)
            used += c.rewrite_bytes
    return RunPlan(chosen, deferred)
