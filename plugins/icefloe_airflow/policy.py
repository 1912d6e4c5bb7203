"""The maintenance policy of a table: Amoro's self-optimizing triggers, inside Airflow.

Apache Amoro runs a separate service that watches each table and starts "minor" optimizing
(small and delete files) or "major" optimizing (rewriting data files that carry many deletes)
when thresholds are crossed. We take the same decisions from `icecore.health.HealthReport`,
which reads metadata only, so deciding costs no Spark job (`icefloe_airflow.health_model`).
The jobs run in `JOB_ORDER`: equality deletes are converted first (so later steps see
position deletes), delete files are compacted, data files rewritten, then manifests (a data
rewrite already replaces the manifests of the files it rewrites, so the manifest rewrite is
decided on the table as the data rewrite left it: `DECIDED_AFTER_REWRITES`), and only then
are snapshots expired and orphans removed (so the files and manifests the rewrites replaced
can go).

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
- `max_data_manifests = 100`: a manifest rewrite is due beyond 100 data manifests in the
  current snapshot (Iceberg Java merges manifests on commit from
  `commit.manifest.min-count-to-merge`, 100, for the same reason: every planner opens every
  manifest), or when small manifests (below 0.75 x `commit.manifest.target-size-bytes`) of one
  spec and content add up to a target manifest (`icecore.manifest_stats`).
- `expire_interval = 1 day`, `orphan_interval = 7 days`: Amoro's periodic table expiring and
  orphan cleaning run about daily and weekly; here they are cadences measured from the last
  successful run of each job.
- `retain_last = 1`, `max_snapshot_age = 5 days`: Iceberg's
  `history.expire.min-snapshots-to-keep` (1) and `history.expire.max-snapshot-age-ms` (5 d).
- `orphan_older_than = 3 days`: Iceberg's `remove_orphan_files` default `older_than`, which
  keeps files of commits still in flight safe.

Which jobs are due and the health score come from these thresholds by one set of rules:
`icefloe_airflow.health_model`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from icecore.jobs.grammar import (
    DURATION_EXAMPLE,
    format_duration_ms,
    parse_duration_ms,
    parse_ratio,
    parse_size,
)
from icecore.manifest_stats import MAX_DATA_MANIFESTS

JOB_ORDER = (
    "convert_equality_deletes",
    "rewrite_position_deletes",
    "rewrite_data_files",
    "rewrite_manifests",
    "expire_snapshots",
    "remove_orphan_files",
)
# Jobs a chain decides on the table as the jobs before them left it, not from the chain's
# first health check: the rewrites before them change what they measure (a data rewrite
# replaces the manifests of the files it rewrites, often leaving a manifest rewrite not due).
DECIDED_AFTER_REWRITES = frozenset({"rewrite_manifests"})


def parse_duration(value: Any, key: str = "duration") -> timedelta:
    """A duration in the jobs' grammar (`7d`, `36h`, `1d12h`, `90m`; see
    `icecore.jobs.grammar`) or a timedelta; ValueError naming `key` otherwise. A bare
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
    max_data_manifests: int = MAX_DATA_MANIFESTS
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
            "max_data_manifests": self.max_data_manifests >= 1,
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
