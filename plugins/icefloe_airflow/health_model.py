"""One health model: which maintenance jobs a table needs and how healthy it is, from the same
rules, so that a score below 100 always says what would raise it.

Each rule measures one thing in the table's health report (`icecore.health`, metadata only),
compares it with the policy's trigger (`icefloe_airflow.policy`) and answers twice: whether
its job is due, and how many of its points the table loses. A rule at or past its trigger
makes its job due and takes all its points; below it, the table loses the share of the
points it has come towards the trigger, so the score falls as work builds up and every
point lost names the job and the trigger that would take it back:

    rule (job)                                  points  measure, and when the job is due
    equality deletes (convert_equality_deletes)     10  any live equality delete file
    delete files (rewrite_position_deletes)         15  most mergeable delete files in one
                                                        partition / minor_file_count (12);
                                                        or a legacy position delete file
                                                        of a v3 table
    dangling deletes (rewrite_position_deletes)      5  any dangling delete file
    deleted rows (rewrite_data_files)               30  the worst partition's live deleted
                                                        rows / rows, over major_delete_ratio
    small files (rewrite_data_files)                25  the worst partition's small files:
                                                        (files - 1) / (minor_file_count - 1),
                                                        or their bytes / the target file
                                                        size once there are two
    manifests (rewrite_manifests)                   10  data manifests / max_data_manifests
                                                        (due over it), or the small manifests
                                                        of one spec and content / the target
                                                        manifest size (due at 1)
    old snapshots (expire_snapshots)                 5  snapshots older than max_snapshot_age
                                                        beyond retain_last; due once
                                                        expire_interval has passed since the
                                                        last expiry; or a trash kept past its
                                                        window (icefloe.trash.retention): due
                                                        at once
    orphan files (remove_orphan_files)               0  due every orphan_interval (orphans
                                                        cannot be seen in metadata)

The weights add up to 100. Deleted rows and small files cost every read, row by row and file
by file, and weigh most; delete files and equality deletes cost every read too, in opens and
joins. Manifests cost every scan's planning, before a row is read: the planner opens each one
(PyIceberg plans a table of 300 one-commit manifests 11.7 times slower than after their
rewrite, DuckDB 13.9 times: bench/README.md), so they weigh like equality deletes, more than
dangling deletes, and more than old snapshots, which slow no read (a reader reads one
snapshot) but keep files and metadata growing. Their 10 points came from small files (30 ->
25: a manifest is a small file of metadata, this rule its share) and old snapshots (10 -> 5).

score = 100 - the points lost, each rule's rounded to a whole number, so the explanation adds
up to the score exactly. One small file in a partition costs nothing (there is nothing to
merge it with). A table with nothing due can still lose points, to work approaching its
trigger or to old snapshots waiting for the expiry cadence: `Assessment.penalties` says so in
words next to the score (the Iceberg page, `icefloe health`, the health task's log).

A trash past its window is work for the next expiry: what expiry and orphan removal took out
of the table is kept `icefloe.trash.retention` (3d) and purged by their next run
(`icecore.trash`), so files kept longer cost storage the table's owner said to give back (and
keep data someone deleted on purpose). It makes `expire_snapshots` due without waiting for
its cadence, and costs the old-snapshot rule's points. The trash is known from its summary as
the last run left it (the health report carries it, cached with it): a run of either job
since a trash run's window ended has purged that run, so only runs whose window ended after
the last success of both jobs count.

Deletion vectors (format v3) count in the deleted rows and as dangling, but not as delete
files: a data file has at most one DV, which delete compaction cannot merge with anything (only
rewriting the data file removes it), so counting them would make it due on every run and do
nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from icecore.jobs.grammar import describe_size
from icefloe_airflow.policy import JOB_ORDER, MaintenancePolicy, format_duration

if TYPE_CHECKING:
    from icecore.health import FileHealth, HealthReport, PartitionHealth
    from icecore.table import Table

WEIGHTS = {
    "equality_deletes": 10,
    "delete_files": 15,
    "dangling_deletes": 5,
    "deleted_rows": 30,
    "small_files": 25,
    "manifests": 10,
    "old_snapshots": 5,
}


@dataclass(frozen=True)
class JobDecision:
    """Whether a job is due on a table, and why (or why not)."""

    job: str
    due: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job, "due": self.due, "reason": self.reason}


@dataclass(frozen=True)
class Penalty:
    """Points a table loses to one rule: what was measured, and what the job does about it
    (`-15: 14 delete files in ts_day=2024-01-01; rewrite_position_deletes is due (at 12 in one
    partition)`)."""

    rule: str
    job: str
    points: int
    measured: str
    outlook: str
    due: bool

    @property
    def text(self) -> str:
        return f"-{self.points}: {self.measured}; {self.outlook}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "job": self.job,
            "points": self.points,
            "due": self.due,
            "text": self.text,
        }


@dataclass(frozen=True)
class Assessment:
    """Every job's decision, the score, and the points lost, largest first."""

    decisions: list[JobDecision]
    penalties: list[Penalty]

    @property
    def score(self) -> int:
        return max(0, 100 - sum(p.points for p in self.penalties))

    @property
    def due(self) -> list[JobDecision]:
        return [d for d in self.decisions if d.due]

    @property
    def skipped(self) -> list[JobDecision]:
        return [d for d in self.decisions if not d.due]

    def explanation(self) -> list[str]:
        """Each point lost, in words; empty at 100."""
        return [p.text for p in self.penalties]

    def to_dict(self) -> dict[str, Any]:
        return {
            "score": self.score,
            "due": [{"job": d.job, "reason": d.reason} for d in self.due],
            "skipped": [{"job": d.job, "reason": d.reason} for d in self.skipped],
            "penalties": [p.to_dict() for p in self.penalties],
        }


def measure_health(table: Table, policy: MaintenancePolicy) -> HealthReport:
    """The table's health report measured with the policy's small-file definition."""
    return table.health(
        small_file_fraction=policy.min_target_size_ratio,
        target_file_size_bytes=policy.target_file_size_bytes,
    )


def mergeable_delete_files(health: FileHealth) -> int:
    """Delete files a delete compaction can merge: not DVs (see the module docstring)."""
    return health.position_deletes.files + health.equality_deletes.files


def live_delete_ratio(health: FileHealth) -> float:
    """Delete records that still apply, per data record (0 without data)."""
    if health.data.records == 0:
        return 0.0
    live = (
        health.delete_records
        - health.dangling_position_deletes.records
        - health.dangling_equality_deletes.records
        - health.dangling_deletion_vectors.records
    )
    return max(0, live) / health.data.records


def small_file_progress(partition: FileHealth, policy: MaintenancePolicy, target: int) -> float:
    """How far a partition's small files have come towards making a data rewrite due (>= 1:
    due): by count, the files beyond the first (one small file has nothing to merge with);
    by size, once there are two, what they add up to against one target file."""
    small = partition.small_data
    if small.files >= policy.minor_file_count:
        return max(1.0, small.bytes / target if small.files >= 2 else 0.0)
    if small.files < 2:
        return 0.0
    return max((small.files - 1) / (policy.minor_file_count - 1), small.bytes / target)


def data_rewrite_reason(
    partition: FileHealth, policy: MaintenancePolicy, target: int
) -> str | None:
    """Why rewrite_data_files is due for one partition, or None (the fleet's estimate of the
    bytes a rewrite reads asks the same question per partition)."""
    ratio = live_delete_ratio(partition)
    if ratio > policy.major_delete_ratio:
        return f"deletes are {ratio:.0%} of rows > {policy.major_delete_ratio:.0%}"
    small = partition.small_data
    if small.files >= policy.minor_file_count:
        return f"{small.files} small files >= {policy.minor_file_count}"
    if small_file_progress(partition, policy, target) >= 1:
        return (
            f"{small.files} small files add up to {describe_size(small.bytes)} >= the "
            f"{describe_size(target)} target"
        )
    return None


def _lost(
    rule: str, job: str, due: bool, progress: float, *, measured: str, outlook: str
) -> list[Penalty]:
    """The points a rule takes: all of its weight once its job is due, else its share of the
    way towards the trigger (none when that rounds to 0)."""
    weight = WEIGHTS[rule]
    points = weight if due else round(weight * min(1.0, max(0.0, progress)))
    return [Penalty(rule, job, points, measured, outlook, due)] if points else []


def _name(partition: PartitionHealth) -> str:
    return partition.path or "unpartitioned"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


@dataclass(frozen=True)
class _Inputs:
    report: HealthReport
    policy: MaintenancePolicy
    last_runs: Mapping[str, datetime | None]
    now: datetime

    @property
    def target(self) -> int:
        return self.policy.target_file_size_bytes or self.report.target_file_size_bytes

    def worst(self, measure: Callable[[PartitionHealth], float]) -> tuple[float, PartitionHealth]:
        """The partition with the highest `measure`, and its value (the report has one)."""
        return max(((measure(p), p) for p in self.report.partitions), key=lambda m: m[0])


_Verdict = tuple[JobDecision, list[Penalty]]


def _equality_deletes(x: _Inputs) -> _Verdict:
    job = "convert_equality_deletes"
    eq = x.report.totals.equality_deletes
    if not eq.files:
        return JobDecision(job, False, "no live equality delete files"), []
    keys = _plural(eq.records, "key")
    measured = f"{_plural(eq.files, 'live equality delete file')} ({keys} every reader joins)"
    lost = _lost(
        "equality_deletes",
        job,
        True,
        1,
        measured=measured,
        outlook=f"{job} is due (whenever one is live)",
    )
    reason = f"{eq.files} live equality delete file(s) ({eq.records} keys)"
    return JobDecision(job, True, reason), lost


def _delete_files(x: _Inputs) -> _Verdict:
    job = "rewrite_position_deletes"
    report, minor = x.report, x.policy.minor_file_count
    totals = report.totals
    reasons: list[str] = []
    lost: list[Penalty] = []
    count = 0
    if report.partitions:
        most, partition = x.worst(mergeable_delete_files)
        count, where = int(most), _name(partition)
        legacy = totals.position_deletes.files if report.format_version >= 3 else 0
        if count >= minor:
            over = sum(1 for p in report.partitions if mergeable_delete_files(p) >= minor)
            reasons.append(
                f"{over} partition(s) hold >= {minor} delete files (most: {where} with {count})"
            )
            measured = f"{count} delete files in {where}"
            lost += _lost(
                "delete_files",
                job,
                True,
                1,
                measured=measured,
                outlook=f"{job} is due (at {minor})",
            )
        elif legacy:
            reasons.append(
                f"{legacy} position delete file(s) of a v3 table to turn into deletion vectors"
            )
            measured = f"{_plural(legacy, 'position delete file')} in a v3 table"
            outlook = f"{job} is due (turns them into deletion vectors)"
            lost += _lost("delete_files", job, True, 1, measured=measured, outlook=outlook)
        else:
            total = _plural(mergeable_delete_files(totals), "delete file")
            measured = f"{total}, at most {count} in one partition ({where})"
            outlook = f"{job} becomes due at {minor} in one partition"
            lost += _lost(
                "delete_files", job, False, count / minor, measured=measured, outlook=outlook
            )
    dangling = totals.dangling_delete_files
    if dangling:
        reasons.append(f"{dangling} dangling delete file(s) apply to no live data")
        measured = f"{_plural(dangling, 'dangling delete file')} (apply to no live data)"
        lost += _lost(
            "dangling_deletes",
            job,
            True,
            1,
            measured=measured,
            outlook=f"{job} is due (drops them)",
        )
    if reasons:
        return JobDecision(job, True, "; ".join(reasons)), lost
    reason = f"no partition holds {minor} delete files (most: {count}), none dangling"
    return JobDecision(job, False, reason), lost


def _data_files(x: _Inputs) -> _Verdict:
    job = "rewrite_data_files"
    report, policy, target = x.report, x.policy, x.target
    lost: list[Penalty] = []
    if report.partitions:
        ratio, partition = x.worst(live_delete_ratio)
        over = ratio > policy.major_delete_ratio
        limit = f"over {policy.major_delete_ratio:.0%}"
        measured = f"deletes are {ratio:.1%} of the rows of {_name(partition)}"
        outlook = f"{job} is due ({limit})" if over else f"{job} becomes due {limit}"
        progress = ratio / policy.major_delete_ratio
        lost += _lost("deleted_rows", job, over, progress, measured=measured, outlook=outlook)

        progress, partition = x.worst(lambda p: small_file_progress(p, policy, target))
        small = partition.small_data
        threshold = describe_size(report.small_file_threshold_bytes)
        measured = (
            f"{small.files} small files in {_name(partition)} ({describe_size(small.bytes)}, "
            f"each below {threshold})"
        )
        trigger = (
            f"at {policy.minor_file_count} in one partition, or when they add up to "
            f"{describe_size(target)}"
        )
        full = progress >= 1
        outlook = f"{job} is due ({trigger})" if full else f"{job} becomes due {trigger}"
        lost += _lost("small_files", job, full, progress, measured=measured, outlook=outlook)
    due = [(p, why) for p in report.partitions if (why := data_rewrite_reason(p, policy, target))]
    if due:
        more = f" (+{len(due) - 3} more partitions)" if len(due) > 3 else ""
        reason = "; ".join(f"{_name(p)}: {why}" for p, why in due[:3]) + more
        return JobDecision(job, True, reason), lost
    reason = (
        f"no partition has deletes over {policy.major_delete_ratio:.0%} of its rows, "
        f"{policy.minor_file_count} small files, or small files adding up to a target file"
    )
    return JobDecision(job, False, reason), lost


def _ago(delta: timedelta) -> str:
    """`3d4h`, `12m`: the two largest units of a past interval."""
    text = format_duration(timedelta(seconds=max(0, round(delta.total_seconds()))))
    return "".join(re.findall(r"\d+[a-z]+", text)[:2])


def _cadence(last: datetime | None, interval: timedelta, now: datetime) -> tuple[bool, str]:
    if last is None:
        return True, "never ran successfully"
    why = f"last success {_ago(now - last)} ago, every {format_duration(interval)}"
    return now - last >= interval, why


def expirable(report: HealthReport, policy: MaintenancePolicy) -> bool:
    """Snapshots older than `max_snapshot_age` beyond the `retain_last` kept."""
    age_ms = report.oldest_snapshot_age_ms
    return (
        report.snapshot_count > policy.retain_last
        and age_ms is not None
        and age_ms >= policy.max_snapshot_age.total_seconds() * 1000
    )


PURGING_JOBS = ("expire_snapshots", "remove_orphan_files")


def trash_past_window(x: _Inputs) -> tuple[int, int, int] | None:
    """(files, bytes, when the oldest's window ended, epoch ms) of the trash runs kept past
    their window and not purged since (see the module doc); None when there are none."""
    trash, retention = x.report.trash, x.report.trash_retention_ms
    if trash is None:
        return None
    now_ms = int(x.now.timestamp() * 1000)
    purged = [x.last_runs.get(j) for j in PURGING_JOBS]
    last_ms = max((int(t.timestamp() * 1000) for t in purged if t is not None), default=None)
    runs = [
        r
        for r in trash.past_window(retention, now_ms)
        if last_ms is None or (r.removed_ms or 0) + retention > last_ms
    ]
    if not runs:
        return None
    ended = min((r.removed_ms or 0) + retention for r in runs)
    return sum(r.files for r in runs), sum(r.bytes for r in runs), ended


def _snapshots(x: _Inputs) -> _Verdict:
    """Old snapshots, and a trash past its window: one rule, one job (see the module doc)."""
    decision, lost = _old_snapshots(x)
    found = trash_past_window(x)
    if found is None:
        return decision, lost
    files, size, ended = found
    window = format_duration(timedelta(milliseconds=x.report.trash_retention_ms))
    since = _ago(x.now - datetime.fromtimestamp(ended / 1000, tz=x.now.tzinfo))
    measured = (
        f"{_plural(files, 'file')} ({describe_size(size)}) in the trash past its {window} "
        f"window for {since}"
    )
    if lost:
        measured = f"{lost[0].measured}; {measured}"
    reason = f"{decision.reason}; {measured}" if decision.due else measured
    outlook = f"{decision.job} is due (its next run purges the trash)"
    return JobDecision(decision.job, True, reason), _lost(
        "old_snapshots", decision.job, True, 1, measured=measured, outlook=outlook
    )


def _old_snapshots(x: _Inputs) -> _Verdict:
    job = "expire_snapshots"
    report, policy = x.report, x.policy
    age = format_duration(policy.max_snapshot_age)
    if report.snapshot_id is None:
        return JobDecision(job, False, "the table has no snapshot"), []
    if not expirable(report, policy):
        reason = (
            f"{report.snapshot_count} snapshot(s), none older than {age} beyond the last "
            f"{policy.retain_last} kept"
        )
        return JobDecision(job, False, reason), []
    due, why = _cadence(x.last_runs.get(job), policy.expire_interval, x.now)
    measured = (
        f"{report.snapshot_count} snapshots, the oldest older than {age}, beyond the last "
        f"{policy.retain_last} kept"
    )
    outlook = f"{job} is due ({why})" if due else f"{job} waits for its cadence ({why})"
    reason = f"{report.snapshot_count} snapshots, the oldest older than {age}; {why}"
    return JobDecision(job, due, reason), _lost(
        "old_snapshots", job, due, 1, measured=measured, outlook=outlook
    )


def _orphans(x: _Inputs) -> _Verdict:
    job = "remove_orphan_files"
    if x.report.snapshot_id is None:
        return JobDecision(job, False, "the table has no snapshot"), []
    due, why = _cadence(x.last_runs.get(job), x.policy.orphan_interval, x.now)
    return JobDecision(job, due, why), []


def _manifests(x: _Inputs) -> _Verdict:
    """The manifest rewrite's trigger (`icecore.manifest_stats`) at the policy's
    `max_data_manifests`, measured by whichever of its two halves is nearer: the data
    manifests against the limit, or the fullest spec's small manifests against a target
    manifest."""
    job = "rewrite_manifests"
    if x.report.snapshot_id is None:
        return JobDecision(job, False, "the table has no snapshot"), []
    stats, limit = x.report.manifests, x.policy.max_data_manifests
    target = describe_size(stats.target_size_bytes)
    trigger = f"over {limit} data manifests, or when small ones of one spec add up to {target}"
    count = stats.data_manifests
    full = stats.full_small()
    fullest = full or next(iter(stats.mergeable_small()), None)
    by_small = fullest.counts.small_bytes / stats.target_size_bytes if fullest else 0.0
    due = stats.rewrite_due(limit)
    if count <= limit and fullest is not None and (full is not None or by_small > count / limit):
        small = fullest.counts
        group = f"{small.small_manifests} small {fullest.kind} manifests of spec {fullest.spec_id}"
        below = describe_size(stats.small_threshold_bytes)
        measured = f"{group} ({describe_size(small.small_bytes)}, each below {below})"
        why = f"{group} add up to {describe_size(small.small_bytes)} >= the {target} target"
        progress = by_small
    else:
        data_bytes = sum(c.bytes for _, kind, c in stats.groups() if kind == "data")
        manifests = _plural(count, "data manifest")
        measured = f"{manifests} ({describe_size(data_bytes)}) opened to plan every scan"
        why = f"{count} data manifests > {limit}"
        progress = count / limit
    outlook = f"{job} is due ({trigger})" if due else f"{job} becomes due {trigger}"
    lost = _lost("manifests", job, due, progress, measured=measured, outlook=outlook)
    if due:
        return JobDecision(job, True, why), lost
    reason = (
        f"{_plural(count, 'data manifest')} (due over {limit}), and no spec's small manifests "
        f"add up to the {target} target"
    )
    return JobDecision(job, False, reason), lost


_RULES: tuple[Callable[[_Inputs], _Verdict], ...] = (
    _equality_deletes,
    _delete_files,
    _data_files,
    _manifests,
    _snapshots,
    _orphans,
)


def assess(
    report: HealthReport,
    policy: MaintenancePolicy,
    last_runs: Mapping[str, datetime | None],
    now: datetime,
) -> Assessment:
    """Every maintenance job in `JOB_ORDER`, due or not and why, and the score with every point
    lost. `last_runs` maps a job to when it last succeeded on this table (missing or None:
    never); only the cadence jobs (expiry, orphan removal) look at it."""
    inputs = _Inputs(report, policy, last_runs, now)
    decisions: list[JobDecision] = []
    penalties: list[Penalty] = []
    for rule in _RULES:
        decision, lost = rule(inputs)
        decisions.append(decision)
        penalties.extend(lost)
    order = {job: i for i, job in enumerate(JOB_ORDER)}
    penalties.sort(key=lambda p: (-p.points, order[p.job]))
    return Assessment(decisions, penalties)


def health_summary(report: HealthReport) -> dict[str, Any]:
    """The numbers the DAGs log and the UI shows, JSON-friendly (no per-partition detail)."""
    totals = report.totals
    return {
        "table": report.table,
        "snapshot_id": report.snapshot_id,
        "snapshot_count": report.snapshot_count,
        "oldest_snapshot_age_ms": report.oldest_snapshot_age_ms,
        "partitions": len(report.partitions),
        "data_files": totals.data.files,
        "data_bytes": totals.data.bytes,
        "data_records": totals.data.records,
        "small_files": totals.small_data.files,
        "small_bytes": totals.small_data.bytes,
        "data_manifests": report.manifests.data_manifests,
        "delete_manifests": report.manifests.delete_manifests,
        "small_manifests": report.manifests.small_manifests,
        "manifest_bytes": report.manifests.bytes,
        "manifest_target_size_bytes": report.manifests.target_size_bytes,
        "position_delete_files": totals.position_deletes.files,
        "position_delete_records": totals.position_deletes.records,
        "equality_delete_files": totals.equality_deletes.files,
        "equality_delete_records": totals.equality_deletes.records,
        "deletion_vectors": totals.deletion_vectors.files,
        "deletion_vector_records": totals.deletion_vectors.records,
        "dangling_delete_files": totals.dangling_delete_files,
        "delete_ratio": totals.delete_ratio,
        "target_file_size_bytes": report.target_file_size_bytes,
        "small_file_threshold_bytes": report.small_file_threshold_bytes,
        "trash_files": 0 if report.trash is None else report.trash.files,
        "trash_bytes": 0 if report.trash is None else report.trash.bytes,
        "trash_oldest_removed_ms": None if report.trash is None else report.trash.oldest_removed_ms,
        "trash_retention_ms": report.trash_retention_ms,
    }
