"""Every job's options, declared once (see `icecore.jobs.options`), and the registry.

Option names follow Iceberg's Spark procedures (`rewrite_data_files`,
`rewrite_position_delete_files`, `expire_snapshots`, `remove_orphan_files`) with dashes; each
option records its procedure spelling, so the README can show both.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from icecore.jobs import grammar
from icecore.jobs.options import (
    BOOLEAN,
    COLUMNS,
    DURATION,
    FILTER,
    IDS,
    INSTANT,
    LOCATIONS,
    PAIRS,
    PARTITION_SPEC,
    POSITIVE_SIZE,
    SIZE,
    SORT_ORDER,
    TEXT,
    Guard,
    JobOptions,
    JobSpec,
    Kind,
    OptionError,
    choice,
    integer,
    option,
    ratio,
    required,
)

MIB = 1024**2
GIB = 1024**3


def _table_name(value: object) -> str:
    text = str(value).strip()
    parts = text.split(".")
    if len(parts) < 2 or not all(p.strip() for p in parts):
        raise ValueError(f"expected NAMESPACE.NAME such as db.events, got {value!r}")
    return text


def _equivalences(value: object) -> dict[str, str]:
    """`FROM[,FROM...]=TO` items, as Iceberg's `equal_schemes` map (`'s3a,s3n' => 's3'`)."""
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    mapping: dict[str, str] = {}
    for text in [value] if isinstance(value, str) else list(value or ()):  # type: ignore[call-overload]
        for item in str(text).split(";"):
            if not item.strip():
                continue
            sources, sep, target = item.partition("=")
            if not sep or not target.strip() or not sources.strip():
                raise ValueError(f"expected FROM[,FROM...]=TO, got {item!r}")
            for source in sources.split(","):
                if source.strip():
                    mapping[source.strip()] = target.strip()
    return mapping


TABLE = Kind("table", "NAMESPACE.NAME such as db.events", _table_name)
EQUIVALENCES = Kind(
    "equivalences",
    "FROM[,FROM...]=TO such as s3a,s3n=s3 (repeatable)",
    _equivalences,
    repeated=True,
)

_TINY_FILES = Guard(
    lambda size: size < MIB,
    "files under 1MB multiply the table's file count and slow every reader",
)
_TABLE_HELP = "the Iceberg table, as NAMESPACE.NAME such as db.events"


# Options both compactions take, worded for the files each rewrites ("data" or "delete").


def _target_size(default: int | None, help: str) -> object:
    return option(
        default,
        POSITIVE_SIZE,
        help,
        title="Target file size",
        procedure="target-file-size-bytes",
        guards=(_TINY_FILES,),
    )


def _min_size(files: str) -> object:
    return option(
        None,
        SIZE,
        f"{files} files below this size are rewritten (default: 75% of the target)",
        title="Small file size",
        procedure="min-file-size-bytes",
    )


def _max_size(files: str) -> object:
    return option(
        None,
        SIZE,
        f"{files} files above this size are split (default: 180% of the target)",
        title="Large file size",
        procedure="max-file-size-bytes",
    )


def _min_input_files(files: str) -> object:
    return option(
        5,
        integer(1),
        f"rewrite a partition's {files} files only from this many on",
        procedure="min-input-files",
    )


def _rewrite_all(files: str) -> object:
    return option(False, BOOLEAN, f"rewrite every {files} file", procedure="rewrite-all")


def _max_group_size() -> object:
    return option(
        100 * GIB,
        POSITIVE_SIZE,
        "the most one file group rewrites",
        title="Largest file group",
        procedure="max-file-group-size-bytes",
    )


def _force() -> object:
    return option(False, BOOLEAN, "accept values that would harm the table")


def _max_attempts(default: int = 3) -> object:
    return option(
        default,
        integer(1),
        "plans and commits again after a commit conflict, at most this many times",
    )


def _partial_progress_enabled() -> object:
    return option(
        False,
        BOOLEAN,
        "commit the rewritten groups in several commits as they finish, not in one",
        aliases=("--partial-progress.enabled",),
        procedure="partial-progress.enabled",
        title="Partial progress",
    )


def _partial_progress_max_commits() -> object:
    return option(
        10,
        integer(1),
        "at most this many commits with partial progress",
        aliases=("--partial-progress.max-commits",),
        procedure="partial-progress.max-commits",
        title="Partial progress: most commits",
    )


@dataclass(frozen=True)
class RewriteDataFilesOptions(JobOptions):
    """Major compaction: bin-pack or sort data files, applying every delete."""

    force_option = "force"

    table: str = required(TABLE, _TABLE_HELP)
    strategy: str = option(
        "binpack",
        choice("binpack", "sort"),
        "binpack combines files as they are; sort also sorts their rows",
        procedure="strategy",
    )
    sort_order: str | None = option(
        None,
        SORT_ORDER,
        "with strategy sort: the order (default: the table's sort order)",
        procedure="sort_order",
    )
    target_file_size_bytes: int | None = _target_size(  # type: ignore[assignment]
        None, "size of the files written (default: the table's write.target-file-size-bytes, 512MB)"
    )
    min_file_size_bytes: int | None = _min_size("data")  # type: ignore[assignment]
    max_file_size_bytes: int | None = _max_size("data")  # type: ignore[assignment]
    min_input_files: int = _min_input_files("data")  # type: ignore[assignment]
    rewrite_all: bool = _rewrite_all("data")  # type: ignore[assignment]
    delete_file_threshold: int = option(
        2**31 - 1,
        integer(1),
        "rewrite a data file once this many delete files apply to it",
        procedure="delete-file-threshold",
    )
    delete_ratio_threshold: float = option(
        0.3,
        ratio(),
        "rewrite a data file once this fraction of its rows is deleted",
        procedure="delete-ratio-threshold",
    )
    max_file_group_size_bytes: int = _max_group_size()  # type: ignore[assignment]
    partial_progress_enabled: bool = _partial_progress_enabled()  # type: ignore[assignment]
    partial_progress_max_commits: int = _partial_progress_max_commits()  # type: ignore[assignment]
    output_spec_id: int | None = option(
        None,
        integer(0),
        "partition spec of the files written (default: the table's current spec)",
        title="Output spec id",
        procedure="output-spec-id",
    )
    where: str | None = option(
        None, FILTER, "only files that may hold rows matching this filter", procedure="where"
    )
    use_starting_sequence_number: bool = option(
        True,
        BOOLEAN,
        "new files keep the planning snapshot's sequence number, so equality deletes "
        "committed meanwhile still apply to them",
        procedure="use-starting-sequence-number",
        form=False,
    )
    rebase_concurrent_deletes: bool = option(
        True,
        BOOLEAN,
        "rows other writers delete from the files being rewritten meanwhile are deleted in "
        "the new files at commit, instead of planning again",
        form=False,
    )
    max_attempts: int = _max_attempts(4)  # type: ignore[assignment]
    max_concurrent_file_group_rewrites: int = option(
        5,
        integer(1),
        "Spark jobs writing file groups at the same time, each up to 64 groups",
        title="Concurrent group rewrites",
        procedure="max-concurrent-file-group-rewrites",
    )
    force: bool = _force()  # type: ignore[assignment]

    def check(self) -> None:
        if self.sort_order is not None and self.strategy != "sort":
            raise OptionError(self.option_named("sort_order"), "needs strategy sort")


@dataclass(frozen=True)
class RewritePositionDeletesOptions(JobOptions):
    """Minor compaction: merge small delete files, drop dangling ones."""

    force_option = "force"

    table: str = required(TABLE, _TABLE_HELP)
    target_file_size_bytes: int | None = _target_size(  # type: ignore[assignment]
        None,
        "size of the delete files written (default: the table's "
        "write.delete.target-file-size-bytes, 64MB)",
    )
    min_file_size_bytes: int | None = _min_size("delete")  # type: ignore[assignment]
    max_file_size_bytes: int | None = _max_size("delete")  # type: ignore[assignment]
    min_input_files: int = _min_input_files("delete")  # type: ignore[assignment]
    rewrite_all: bool = _rewrite_all("delete")  # type: ignore[assignment]
    where: str | None = option(
        None, FILTER, "only partitions this filter may match", procedure="where"
    )
    max_attempts: int = _max_attempts()  # type: ignore[assignment]
    max_file_group_size_bytes: int = _max_group_size()  # type: ignore[assignment]
    partial_progress_enabled: bool = _partial_progress_enabled()  # type: ignore[assignment]
    partial_progress_max_commits: int = _partial_progress_max_commits()  # type: ignore[assignment]
    force: bool = _force()  # type: ignore[assignment]


@dataclass(frozen=True)
class ConvertEqualityDeletesOptions(JobOptions):
    """Replace equality deletes with position deletes naming the rows they delete."""

    table: str = required(TABLE, _TABLE_HELP)
    driver_max_bytes: int = option(
        512 * MIB,
        SIZE,
        "data files' key columns up to this size are matched in the driver's own threads, "
        "without starting Spark (0: always in Spark tasks)",
        title="Match in the driver up to",
    )
    task_max_keys: int = option(
        4_000_000,
        integer(0),
        "equality delete keys up to this many are matched inside each task, which holds them "
        "all; more are joined by Spark with a shuffle",
        title="Keys held per task",
    )
    max_attempts: int = _max_attempts()  # type: ignore[assignment]


@dataclass(frozen=True)
class ExpireSnapshotsOptions(JobOptions):
    """Expire old snapshots and delete the files only they referenced."""

    table: str = required(TABLE, _TABLE_HELP)
    older_than: str | None = option(
        None,
        INSTANT,
        "expire snapshots older than this (default: the table's "
        "history.expire.max-snapshot-age-ms, 5 days)",
        procedure="older_than",
    )
    retain_last: int | None = option(
        None,
        integer(1),
        "snapshots to keep in every branch's history, whatever their age",
        title="Snapshots to keep",
        procedure="retain_last",
    )
    snapshot_ids: list[int] = option(
        [],
        IDS,
        "also expire these snapshots, whatever their age",
        procedure="snapshot_ids",
        form=False,
    )
    dry_run: bool = option(False, BOOLEAN, "plan and report; commit and delete nothing")
    min_age: int = option(
        3_600_000,
        DURATION,
        "refuse to expire snapshots younger than this",
        title="Youngest snapshot to expire",
    )
    force: bool = option(False, BOOLEAN, "lift the youngest-snapshot floor")
    max_concurrent_deletes: int = option(
        16, integer(1), "deleting threads per process", procedure="max_concurrent_deletes"
    )
    executor_delete_threshold: int = option(
        1000, integer(0), "delete on the executors from this many files on", form=False
    )
    protected_locations: list[str] = option(
        [],
        LOCATIONS,
        "never delete under these locations: tables of catalogs this job cannot list",
        flag="--protected-location",
    )


@dataclass(frozen=True)
class RemoveOrphanFilesOptions(JobOptions):
    """Delete the files under a table's location that no metadata version references."""

    table: str = required(TABLE, _TABLE_HELP)
    older_than: str = option(
        "3d",
        INSTANT,
        "only files last modified before this: younger ones may belong to a commit in progress",
        procedure="older_than",
    )
    location: str | None = option(
        None, TEXT, "directory to clean (default: the table location)", procedure="location"
    )
    dry_run: bool = option(
        False, BOOLEAN, "report the orphans; delete nothing", procedure="dry_run"
    )
    min_age: int = option(
        86_400_000,
        DURATION,
        "refuse an older-than later than this long ago",
        title="Youngest file to delete",
    )
    force: bool = option(False, BOOLEAN, "lift the youngest-file floor")
    equal_schemes: dict[str, str] = option(
        {},
        EQUIVALENCES,
        "schemes to treat as equal (s3a,s3n=s3 always)",
        procedure="equal_schemes",
        form=False,
    )
    equal_authorities: dict[str, str] = option(
        {},
        EQUIVALENCES,
        "authorities to treat as equal",
        procedure="equal_authorities",
        form=False,
    )
    prefix_mismatch_mode: str = option(
        "error",
        choice("error", "ignore", "delete"),
        "a listed file referenced under another scheme or authority: error, ignore (keep it) "
        "or delete",
        procedure="prefix_mismatch_mode",
    )
    max_concurrent_deletes: int = option(
        16, integer(1), "deleting threads per process", procedure="max_concurrent_deletes"
    )
    executor_delete_threshold: int = option(
        1000, integer(0), "delete on the executors from this many files on", form=False
    )
    listing_depth: int = option(
        2, integer(0), "directory levels the driver lists itself", form=False
    )
    parallel_listing_threshold: int = option(
        8, integer(0), "list on the executors from this many directories on", form=False
    )
    max_reported: int = option(100, integer(0), "orphans named in the result", form=False)
    protected_locations: list[str] = option(
        [],
        LOCATIONS,
        "never delete under these locations: tables of catalogs this job cannot list",
        flag="--protected-location",
    )

    def check(self) -> None:
        if self.force or self.dry_run:
            return
        now = int(time.time() * 1000)
        cutoff = grammar.parse_instant_ms(self.older_than, now_ms=now)
        if cutoff > now - self.min_age:
            raise OptionError(
                self.option_named("older_than"),
                f"{self.older_than} is later than {grammar.format_duration_ms(self.min_age)} "
                "ago: files of commits in progress would be deleted",
                force=self.option_named("force"),
                force_why="if nothing else writes to the table",
            )


@dataclass(frozen=True)
class IngestOptions(JobOptions):
    """A batch of Parquet, CSV or JSON files committed to a table in one atomic commit."""

    table: str = required(TABLE, _TABLE_HELP)
    source: str | None = option(None, TEXT, "file or directory to read", cli_required=True)
    source_format: str | None = option(
        None,
        choice("parquet", "csv", "json"),
        "the source's file format",
        default_words="from the file names",
    )
    source_options: dict[str, str] = option(
        {},
        PAIRS,
        "a Spark reader option, e.g. header=true",
        flag="--source-option",
        title="Reader options",
    )
    mode: str = option(
        "append",
        choice("append", "overwrite", "upsert", "delete", "cdc"),
        "append or overwrite data files; upsert, delete or cdc by key",
    )
    key: list[str] = option(
        [],
        COLUMNS,
        "equality columns of upsert, delete and cdc (default: the table's identifier fields)",
    )
    op_column: str = option("op", TEXT, "cdc: the column holding I, U or D")
    batch_id: str | None = option(
        None,
        TEXT,
        "commit this batch at most once (a retried batch is not committed twice)",
        form=False,
    )
    merge_schema: bool = option(False, BOOLEAN, "add the source's new columns to the table")
    create: bool = option(False, BOOLEAN, "create the table when it does not exist")
    partition_by: str | None = option(
        None, PARTITION_SPEC, "with create: the partition spec", title="Partition by"
    )
    sort_by: str | None = option(None, SORT_ORDER, "with create: the sort order", title="Sort by")
    properties: dict[str, str] = option(
        {}, PAIRS, "with create: a table property", flag="--property", title="Table properties"
    )
    format_version: int = option(
        2, integer(2, 3), "with create: the table's format version", form=False
    )


JOBS: dict[str, JobSpec] = {
    spec.name: spec
    for spec in (
        JobSpec("ingest", "Ingest a batch into a table", IngestOptions, maintenance=False),
        JobSpec(
            "convert_equality_deletes",
            "Replace equality deletes with position deletes",
            ConvertEqualityDeletesOptions,
        ),
        JobSpec(
            "rewrite_position_deletes",
            "Minor compaction of delete files",
            RewritePositionDeletesOptions,
            procedure="rewrite_position_delete_files",
        ),
        JobSpec(
            "rewrite_data_files",
            "Major compaction of data files",
            RewriteDataFilesOptions,
            procedure="rewrite_data_files",
        ),
        JobSpec(
            "expire_snapshots",
            "Expire snapshots; the files only they referenced go to the table's trash",
            ExpireSnapshotsOptions,
            procedure="expire_snapshots",
        ),
        JobSpec(
            "remove_orphan_files",
            "Move files no metadata references to the table's trash",
            RemoveOrphanFilesOptions,
            procedure="remove_orphan_files",
        ),
    )
}


PARTITION_FIELDS = replace(
    COLUMNS, expected="partition field names separated by commas, such as ts_day,id_bucket"
)


@dataclass(frozen=True)
class RewriteManifestsOptions(JobOptions):
    """Regroup a table's manifests by partition, at the target manifest size."""

    table: str = required(TABLE, _TABLE_HELP)
    spec_id: int | None = option(
        None,
        integer(0),
        "rewrite only the manifests of this partition spec (default: of every spec)",
        title="Partition spec id",
        procedure="spec_id",
    )
    sort_by: list[str] = option(
        [],
        PARTITION_FIELDS,
        "partition fields to sort entries by first (default: the spec's fields in order)",
        title="Sort by",
        procedure="sort_by",
    )
    rewrite_all: bool = option(
        False,
        BOOLEAN,
        "rewrite every manifest, also those near the target size and alone in their "
        "partition range",
    )
    driver_max_bytes: int = option(
        32 * MIB,
        SIZE,
        "manifests up to this size in all are rewritten in the driver's own threads, without "
        "starting Spark (0: always in Spark tasks)",
        title="Rewrite in the driver up to",
    )
    max_attempts: int = _max_attempts()  # type: ignore[assignment]


JOBS["rewrite_manifests"] = JobSpec(
    "rewrite_manifests",
    "Regroup manifests by partition at the target manifest size",
    RewriteManifestsOptions,
    procedure="rewrite_manifests",
)
