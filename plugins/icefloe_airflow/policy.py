"""What a table needs, decided from its health report: Amoro's self-optimizing triggers, inside
Airflow.

Apache Amoro runs a separate service that watches each table and starts "minor" optimizing
(small and delete files) or "major" optimizing (rewriting data files that carry many deletes)
when thresholds are crossed. We take the same decisions from `icecore.health.HealthReport`,
which reads metadata only, so deciding costs no Spark job. The jobs run in `JOB_ORDER`:
equality deletes are converted first (so later steps see position deletes), delete files are
compacted, data files rewritten, and only then are snapshots expired and orphans removed (so
the files the compaction replaced can go).

Defaults and where they come from:

- `minor_file_count = 12`: Amoro's `self-optimizing.minor.trigger.file-count` (12). A partition
  holding that many delete files triggers delete-file compaction (rewrite_position_deletes);
  that many small data files triggers bin-packing (rewrite_data_files).
- `min_target_size_ratio = 0.75`: Amoro's `self-optimizing.min-target-size-ratio` (0.75): a
  data file below 0.75 x target size is small (the health report's own default too).
- `target_file_size_bytes = None`: the table's `write.target-file-size-bytes` (Iceberg's
  default 512 MiB); set it to override the table property.
- `major_delete_ratio = 0.1`: Amoro's `self-optimizing.major.trigger.duplicate-ratio` (0.1):
  when live delete records exceed 10% of a partition's data records, rewriting the data files
  (applying the deletes) beats making every reader apply them.
- Any live equality delete makes `convert_equality_deletes` due: readers must join every
  equality delete against the data, which position deletes avoid (Amoro converts them in
  minor optimizing for the same reason).
- Any dangling delete file (one that applies to no live data file) makes delete compaction
  due: readers still open it, to no effect, and only a rewrite removes it.
- Deletion vectors (format v3) are position deletes for these decisions, except the file
  count: their positions count in the delete ratio, a dangling DV makes delete compaction due,
  but a data file has at most one DV, which delete compaction cannot merge with anything (only
  rewriting the data file removes it), so counting DVs towards `minor_file_count` would make it
  due on every run and do nothing. On a v3 table, any live position delete file is legacy and
  makes delete compaction due: it turns them into DVs.
- `expire_interval = 1 day`, `orphan_interval = 7 days`: Amoro's periodic table expiring and
  orphan cleaning run about daily and weekly; here they are cadences measured from the last
  successful run of each job.
- `retain_last = 1`, `max_snapshot_age = 5 days`: Iceberg's
  `history.expire.min-snapshots-to-keep` (1) and `history.expire.max-snapshot-age-ms` (5 d).
- `orphan_older_than = 3 days`: Iceberg's `remove_orphan_files` default `older_than`, which
  keeps files of commits still in flight safe.

Health score (0..100, 100 = nothing to do) = 100 minus these penalties, each capped:

- up to 30 for excess data files: 30 x (files beyond the ideal count) / files, where a
  partition's ideal count is ceil(bytes / target file size), at least 1;
- up to 30 for deletes that readers apply: 30 x min(1, live delete ratio / major_delete_ratio),
  using the worst partition's ratio;
- up to 15 for delete-file count: 15 x min(1, most delete files in one partition /
  minor_file_count);
- 10 when any equality delete is live;
- 5 when any delete file dangles;
- 10 when snapshots older than `max_snapshot_age` exist beyond `retain_last`.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from spark_jobs.specs.grammar import (
    DURATION_EXAMPLE,
    format_duration_ms,
    parse_duration_ms,
    parse_ratio,
    parse_size,
)

if TYPE_CHECKING:
    from icecore.health import FileHealth, HealthReport
    from icecore.table import Table

JOB_ORDER = (
    "convert_equality_deletes",
    "rewrite_position_deletes",
    "rewrite_data_files",
    "expire_snapshots",
    "remove_orphan_files",
)


def parse_duration(value: Any, key: str = "duration") -> timedelta:
    """A duration in the jobs' grammar (`7d`, `36h`, `1d12h`, `90m`; see
    `spark_jobs.specs.grammar`) or a timedelta; ValueError naming `key` otherwise. A bare
    number is refused, as everywhere: seconds or milliseconds would be a guess."""
    if isinstance(value, timedelta):
        if value < timedelta(0):
            raise ValueError(f"{key}: duration must not be negative, got {value!r}")
        return value
    if not isinstance(value, str):
        raise ValueError(f"{key}: expected a duration such as {DURATION_EXAMPLE}, got {value!r}")
    try:
        return timedelta(milliseconds=parse_duration_ms(value))
    except ValueError as exc:
        raise ValueError(f"{key}: {exc}") from None


def format_duration(value: timedelta) -> str:
    """A timedelta in the jobs' grammar, as short as it is exact (`5d`, `1d12h`, `250ms`)."""
    return format_duration_ms(round(value.total_seconds() * 1000))


@dataclass(frozen=True)
class MaintenancePolicy:
    """Thresholds and cadences for one table (see the module docstring for each default)."""

    minor_file_count: int = 12
    min_target_size_ratio: float = 0.75
    target_file_size_bytes: int | None = None
    major_delete_ratio: float = 0.1
    expire_interval: timedelta = timedelta(days=1)
    orphan_interval: timedelta = timedelta(days=7)
    retain_last: int = 1
    max_snapshot_age: timedelta = timedelta(days=5)
    orphan_older_than: timedelta = timedelta(days=3)

    def __post_init__(self) -> None:
        checks = {
            "minor_file_count": self.minor_file_count >= 1,
            "min_target_size_ratio": 0 < self.min_target_size_ratio <= 1,
            "target_file_size_bytes": self.target_file_size_bytes is None
            or self.target_file_size_bytes > 0,
            "major_delete_ratio": self.major_delete_ratio > 0,
            "retain_last": self.retain_last >= 1,
        }
        bad = [key for key, ok in checks.items() if not ok]
        if bad:
            values = ", ".join(f"{k}={getattr(self, k)!r}" for k in bad)
            raise ValueError(
                f"invalid maintenance policy: {values} (counts >= 1, ratios > 0, "
                "min_target_size_ratio in (0, 1])"
            )

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None) -> MaintenancePolicy:
        """A policy from a config mapping (tables.yaml, a DAG Param); keys may use dashes;
        durations as `7d`/`12h`, sizes as `512MB`, ratios as `0.1` or `10%`. Unknown keys are
        refused by name."""
        if not values:
            return cls()
        fields = {f.name: f for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {}
        unknown = []
        for raw_key, value in values.items():
            key = str(raw_key).replace("-", "_")
            if key not in fields:
                unknown.append(str(raw_key))
                continue
            kwargs[key] = _convert(key, value, cls.__dataclass_fields__[key].default)
        if unknown:
            raise ValueError(
                f"unknown maintenance policy keys {sorted(unknown)}; known: {sorted(fields)}"
            )
        return cls(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (durations in the jobs' syntax), inverse of `from_mapping`."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = format_duration(value) if isinstance(value, timedelta) else value
        return out

    def job_options(self, job: str) -> dict[str, Any]:
        """Operator options that make a job do what this policy means (retention, sizes)."""
        if job == "rewrite_data_files" and self.target_file_size_bytes:
            return {"target-file-size-bytes": self.target_file_size_bytes}
        if job == "expire_snapshots":
            options: dict[str, Any] = {
                "older-than": format_duration(self.max_snapshot_age),
                "retain-last": self.retain_last,
            }
            if self.max_snapshot_age < timedelta(hours=1):  # the job's default safety floor
                options["min-age"] = format_duration(self.max_snapshot_age)
            return options
        if job == "remove_orphan_files":
            orphans: dict[str, Any] = {"older-than": format_duration(self.orphan_older_than)}
            if self.orphan_older_than < timedelta(days=1):  # the job's default safety floor
                orphans["min-age"] = format_duration(self.orphan_older_than)
            return orphans
        if job not in JOB_ORDER:
            raise ValueError(f"unknown maintenance job {job!r}; known: {list(JOB_ORDER)}")
        return {}


def _convert(key: str, value: Any, default: Any) -> Any:
    """One config value as the field's type, in the jobs' grammar; ValueError naming the
    key."""
    if isinstance(default, timedelta):
        return parse_duration(value, key)
    if key == "target_file_size_bytes":
        if value is None:
            return None
        try:
            return parse_size(value)
        except ValueError as exc:
            raise ValueError(f"{key}: {exc}") from None
    if isinstance(default, float) and isinstance(value, str):
        try:
            return parse_ratio(value, maximum=float("inf"))
        except ValueError as exc:
            raise ValueError(f"{key}: {exc}") from None
    expected: type = float if isinstance(default, float) else int
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key}: expected a number, got {value!r}")
    if expected is int and value != int(value):
        raise ValueError(f"{key}: expected a whole number, got {value!r}")
    return expected(value)


@dataclass(frozen=True)
class JobDecision:
    """Whether a job is due on a table, and why (or why not)."""

    job: str
    due: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job, "due": self.due, "reason": self.reason}


@dataclass(frozen=True)
class DueJob:
    """A job the policy wants run, and why (shown in logs, XCom and the UI)."""

    job: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"job": self.job, "reason": self.reason}


def measure_health(table: Table, policy: MaintenancePolicy) -> HealthReport:
    """The table's health report measured with the policy's small-file definition."""
    return table.health(
        small_file_fraction=policy.min_target_size_ratio,
        target_file_size_bytes=policy.target_file_size_bytes,
    )


def _live_delete_files(health: FileHealth) -> int:
    """Delete files a delete compaction can merge: not DVs (see the module docstring)."""
    return health.position_deletes.files + health.equality_deletes.files


def _live_delete_ratio(health: FileHealth) -> float:
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


def _expirable(report: HealthReport, policy: MaintenancePolicy) -> bool:
    age_ms = report.oldest_snapshot_age_ms
    return (
        report.snapshot_count > policy.retain_last
        and age_ms is not None
        and age_ms >= policy.max_snapshot_age.total_seconds() * 1000
    )


def _ago(delta: timedelta) -> str:
    """`3d4h`, `12m`: the two largest units of a past interval, for reasons."""
    text = format_duration(timedelta(seconds=max(0, round(delta.total_seconds()))))
    parts = re.findall(r"\d+[a-z]+", text)
    return "".join(parts[:2])


def _cadence(last: datetime | None, interval: timedelta, now: datetime) -> tuple[bool, str]:
    if last is None:
        return True, "never ran successfully"
    if now - last >= interval:
        return True, f"last success {_ago(now - last)} ago, every {format_duration(interval)}"
    return False, f"last success {_ago(now - last)} ago, every {format_duration(interval)}"


def job_decisions(
    report: HealthReport,
    policy: MaintenancePolicy,
    last_runs: Mapping[str, datetime | None],
    now: datetime,
) -> list[JobDecision]:
    """Every maintenance job, in `JOB_ORDER`: due or not, and why either way (a skipped job
    says why it was skipped).

    `last_runs` maps a job to when it last succeeded on this table (missing or None: never);
    only the cadence jobs (expiry, orphan removal) look at it, since the health report already
    shows whether compaction is needed.
    """
    totals = report.totals
    target = policy.target_file_size_bytes or report.target_file_size_bytes
    decisions: dict[str, tuple[bool, str]] = {}

    if totals.equality_deletes.files:
        decisions["convert_equality_deletes"] = (
            True,
            f"{totals.equality_deletes.files} live equality delete file(s) "
            f"({totals.equality_deletes.records} keys)",
        )
    else:
        decisions["convert_equality_deletes"] = (False, "no live equality delete files")

    minor = [p for p in report.partitions if _live_delete_files(p) >= policy.minor_file_count]
    most = max(report.partitions, key=_live_delete_files, default=None)
    if minor:
        worst = max(minor, key=_live_delete_files)
        decisions["rewrite_position_deletes"] = (
            True,
            f"{len(minor)} partition(s) hold >= {policy.minor_file_count} delete files "
            f"(most: {worst.path or 'unpartitioned'} with {_live_delete_files(worst)})",
        )
    elif report.format_version >= 3 and totals.position_deletes.files:
        decisions["rewrite_position_deletes"] = (
            True,
            f"{totals.position_deletes.files} position delete file(s) of a v3 table to turn "
            "into deletion vectors",
        )
    elif totals.dangling_delete_files:
        decisions["rewrite_position_deletes"] = (
            True,
            f"{totals.dangling_delete_files} dangling delete file(s) apply to no live data",
        )
    else:
        count = _live_delete_files(most) if most is not None else 0
        decisions["rewrite_position_deletes"] = (
            False,
            f"no partition holds {policy.minor_file_count} delete files (most: {count}), "
            "none dangling",
        )

    major: list[str] = []
    for p in report.partitions:
        name = p.path or "unpartitioned"
        ratio = _live_delete_ratio(p)
        if ratio > policy.major_delete_ratio:
            major.append(
                f"{name}: deletes are {ratio:.0%} of rows > {policy.major_delete_ratio:.0%}"
            )
        elif p.small_data.files >= policy.minor_file_count:
            major.append(f"{name}: {p.small_data.files} small files >= {policy.minor_file_count}")
        elif p.small_data.files >= 2 and p.small_data.bytes >= target:
            major.append(
                f"{name}: {p.small_data.files} small files add up to {p.small_data.bytes} bytes "
                f">= target {target}"
            )
    if major:
        more = f" (+{len(major) - 3} more partitions)" if len(major) > 3 else ""
        decisions["rewrite_data_files"] = (True, "; ".join(major[:3]) + more)
    else:
        decisions["rewrite_data_files"] = (
            False,
            f"no partition has deletes over {policy.major_delete_ratio:.0%} of its rows, "
            f"{policy.minor_file_count} small files, or small files adding up to a target file",
        )

    if report.snapshot_id is None:
        decisions["expire_snapshots"] = (False, "the table has no snapshot")
        decisions["remove_orphan_files"] = (False, "the table has no snapshot")
    else:
        if _expirable(report, policy):
            due, why = _cadence(last_runs.get("expire_snapshots"), policy.expire_interval, now)
            decisions["expire_snapshots"] = (
                due,
                f"{report.snapshot_count} snapshots, the oldest older than "
                f"{format_duration(policy.max_snapshot_age)}; {why}",
            )
        else:
            decisions["expire_snapshots"] = (
                False,
                f"{report.snapshot_count} snapshot(s), none older than "
                f"{format_duration(policy.max_snapshot_age)} beyond the last "
                f"{policy.retain_last} kept",
            )
        due, why = _cadence(last_runs.get("remove_orphan_files"), policy.orphan_interval, now)
        decisions["remove_orphan_files"] = (due, why)

    return [JobDecision(job, *decisions[job]) for job in JOB_ORDER]


def due_jobs(
    report: HealthReport,
    policy: MaintenancePolicy,
    last_runs: Mapping[str, datetime | None],
    now: datetime,
) -> list[DueJob]:
    """The jobs the table needs now, in `JOB_ORDER`, each with the reason."""
    return [DueJob(d.job, d.reason) for d in job_decisions(report, policy, last_runs, now) if d.due]


def health_score(report: HealthReport, policy: MaintenancePolicy) -> int:
    """0..100, 100 = nothing to do; the formula is in the module docstring."""
    target = policy.target_file_size_bytes or report.target_file_size_bytes
    penalty = 0.0

    files = report.totals.data.files
    if files:
        ideal = sum(
            max(1, math.ceil(p.data.bytes / target)) for p in report.partitions if p.data.files
        )
        penalty += 30 * max(0, files - ideal) / files

    worst_ratio = max((_live_delete_ratio(p) for p in report.partitions), default=0.0)
    penalty += 30 * min(1.0, worst_ratio / policy.major_delete_ratio)

    most_deletes = max((_live_delete_files(p) for p in report.partitions), default=0)
    penalty += 15 * min(1.0, most_deletes / policy.minor_file_count)

    if report.totals.equality_deletes.files:
        penalty += 10
    if report.totals.dangling_delete_files:
        penalty += 5
    if _expirable(report, policy):
        penalty += 10
    return max(0, min(100, round(100 - penalty)))


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
    }
