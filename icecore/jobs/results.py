"""Every job's result, declared once: one frozen dataclass per job, and the registry.

A job's `run()` returns its result class; the command line prints `to_dict()` as the JSON
line (and writes it to `$ICEFLOE_RESULT_FILE`), Airflow keeps that JSON in XCom and the state
store, and the plugin reads it back with `result_of(job, json)` into the same class, by field.
Field names are the JSON keys. A field left None was not reported by that run (an ingest
without `--batch-id`, the upsert counters of an append) and is left out of the JSON, so a
result prints what the job reported and nothing else.

`from_dict` takes JSON from a worker of another version: keys it does not know are ignored,
keys it misses take their defaults. A result is read by attribute; its JSON is `to_dict()`.

`figures()` are what the UI charts (bytes rewritten, files removed): each class names the
fields they add up, and the state store keeps them in columns of its own.

Standard library only, like the rest of `icecore.jobs`: the Airflow side imports it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Self


@dataclass(frozen=True)
class Figures:
    """What the UI charts of one run: bytes it rewrote, files it took out of the table (or,
    for expiry and orphan removal, deleted from storage)."""

    rewritten_bytes: int = 0
    removed_files: int = 0


def _number(value: Any) -> int:
    """A counter as an int; a missing or malformed one (another version's JSON) counts 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return int(value)


@dataclass(frozen=True, kw_only=True)
class JobResult:
    """What every result has: the table, and how to print and read it back."""

    job: ClassVar[str] = ""
    # The fields `figures()` adds up (see `Figures`).
    rewritten_bytes_fields: ClassVar[tuple[str, ...]] = ()
    removed_files_fields: ClassVar[tuple[str, ...]] = ()

    table: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The JSON object: every field but those left None."""
        values = ((f.name, getattr(self, f.name)) for f in fields(self))
        return {name: value for name, value in values if value is not None}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, default=str)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """The result a JSON object describes; unknown keys are ignored (another version's)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known and v is not None})

    def figures(self) -> Figures:
        return Figures(
            rewritten_bytes=sum(_number(getattr(self, n)) for n in self.rewritten_bytes_fields),
            removed_files=sum(_number(getattr(self, n)) for n in self.removed_files_fields),
        )


@dataclass(frozen=True, kw_only=True)
class IngestResult(JobResult):
    """One batch ingested; `status` committed, or already-committed for a batch id seen."""

    job: ClassVar[str] = "ingest"

    mode: str = "append"
    batch_id: str | None = None
    status: str | None = None
    snapshot_id: int | None = None
    sequence_number: int | None = None
    operation: str | None = None
    table_created: bool | None = None
    columns_added: list[str] | None = None
    rows: int | None = None
    # upsert, delete and cdc
    inserts: int | None = None
    updates: int | None = None
    deletes: int | None = None
    superseded_in_batch: int | None = None
    # the files committed
    data_files: int | None = None
    data_records: int | None = None
    position_delete_files: int | None = None
    position_deletes: int | None = None
    equality_delete_files: int | None = None
    equality_deletes: int | None = None
    deletion_vectors: int | None = None
    deletion_vector_positions: int | None = None
    bytes_written: int | None = None
    seconds: float | None = None


@dataclass(frozen=True, kw_only=True)
class ConvertEqualityDeletesResult(JobResult):
    """Equality deletes replaced by position deletes (deletion vectors on v3)."""

    job: ClassVar[str] = "convert_equality_deletes"
    removed_files_fields: ClassVar[tuple[str, ...]] = ("removed_equality_delete_files",)

    status: str | None = None
    snapshot_id: int | None = None
    sequence_number: int | None = None
    starting_snapshot_id: int | None = None
    matched_in: str | None = None  # driver, spark-tasks or spark-join
    removed_equality_delete_files: int = 0
    removed_equality_deletes: int = 0
    unused_equality_delete_files: int = 0
    added_position_delete_files: int = 0
    added_position_deletes: int = 0
    added_deletion_vectors: int = 0
    deletion_vector_positions: int = 0
    replaced_deletion_vectors: int = 0
    replaced_position_delete_files: int = 0
    # DVs other writers added meanwhile for the same data files, merged into the new ones.
    rebased_commits: int = 0
    rebased_rows: int = 0
    data_files_scanned: int = 0
    data_bytes_scanned: int = 0
    added_bytes: int = 0
    attempts: int | None = None
    conflicts: list[str] = field(default_factory=list)
    seconds: float | None = None


@dataclass(frozen=True, kw_only=True)
class RewritePositionDeletesResult(JobResult):
    """Minor compaction: delete files merged, dangling ones dropped, over `commits`."""

    job: ClassVar[str] = "rewrite_position_deletes"
    rewritten_bytes_fields: ClassVar[tuple[str, ...]] = ("rewritten_bytes",)
    removed_files_fields: ClassVar[tuple[str, ...]] = (
        "rewritten_delete_files",
        "removed_dangling_delete_files",
    )

    status: str = "nothing-to-rewrite"
    snapshot_id: int | None = None
    sequence_number: int | None = None
    starting_snapshot_id: int | None = None
    rewritten_delete_files: int = 0
    added_delete_files: int = 0
    rewritten_bytes: int = 0
    added_bytes: int = 0
    removed_dangling_delete_files: int = 0
    rewritten_position_deletes: int = 0
    added_position_deletes: int = 0
    dropped_position_deletes: int = 0
    merged_equality_delete_files: int = 0
    added_equality_delete_files: int = 0
    added_deletion_vectors: int = 0
    # DVs other writers added meanwhile for the same data files, merged into the new ones.
    rebased_commits: int = 0
    rebased_rows: int = 0
    rewritten_groups: int = 0
    planned_groups: int = 0
    commits: list[int] = field(default_factory=list)
    failed_groups: list[str] = field(default_factory=list)
    attempts: int | None = None
    conflicts: list[str] = field(default_factory=list)
    seconds: float | None = None


@dataclass(frozen=True, kw_only=True)
class RewriteDataFilesResult(JobResult):
    """Major compaction: data files rewritten into fewer, over `commits`."""

    job: ClassVar[str] = "rewrite_data_files"
    rewritten_bytes_fields: ClassVar[tuple[str, ...]] = ("rewritten_bytes",)
    removed_files_fields: ClassVar[tuple[str, ...]] = ("rewritten_data_files",)

    snapshot_id: int | None = None  # the planning snapshot
    planned_groups: int | None = None
    rewritten_data_files: int = 0
    added_data_files: int = 0
    rewritten_bytes: int = 0
    removed_delete_files: int = 0
    commits: list[int] = field(default_factory=list)
    # Deletes other writers committed meanwhile, moved onto the new files (issue 36).
    rebased_commits: int = 0
    rebased_rows: int = 0
    failed_groups: list[str] = field(default_factory=list)
    attempts: int | None = None
    conflicts: list[str] = field(default_factory=list)
    seconds: float | None = None


# Expiry's file kinds, as Iceberg's procedure names its counters.
EXPIRED_KINDS = (
    "data_files",
    "position_delete_files",
    "equality_delete_files",
    "manifest_files",
    "manifest_lists",
    "statistics_files",
)


@dataclass(frozen=True, kw_only=True)
class TrashingResult(JobResult):
    """What the jobs that take files out of a table (expiry, orphan removal) report of the
    table's trash (`icecore.trash`); None in a dry run, which touches no trash."""

    trash_retention: str | None = None  # icefloe.trash.retention, as `3d` (`0s`: at once)
    trash_run: str | None = None  # the run's directory in the trash, when it trashed files
    trashed_files_count: int | None = None
    trashed_bytes: int | None = None
    purged_runs: list[str] | None = None  # runs past the window whose files were purged
    purged_files_count: int | None = None
    purged_bytes: int | None = None
    failed_purges_count: int | None = None
    failed_purges: dict[str, str] | None = None  # the first 20: trash file -> why it stays
    trash_files_count: int | None = None  # in the trash after the run
    trash_bytes: int | None = None


@dataclass(frozen=True, kw_only=True)
class ExpireSnapshotsResult(TrashingResult):
    """Snapshots expired; `deleted_*_count` files taken out of the table's storage (into
    its trash, or deleted with a retention of 0s), `unreachable_*_count` files only they
    reached (what a dry run would take out)."""

    job: ClassVar[str] = "expire_snapshots"
    removed_files_fields: ClassVar[tuple[str, ...]] = (
        "deleted_metadata_files_count",
        *(f"deleted_{kind}_count" for kind in EXPIRED_KINDS),
    )

    dry_run: bool = False
    committed: bool = False
    expired_snapshots_count: int = 0
    expired_snapshot_ids: list[int] = field(default_factory=list)
    removed_refs: list[str] = field(default_factory=list)
    deleted_metadata_files_count: int = 0
    deleted_data_files_count: int = 0
    unreachable_data_files_count: int = 0
    deleted_position_delete_files_count: int = 0
    unreachable_position_delete_files_count: int = 0
    deleted_equality_delete_files_count: int = 0
    unreachable_equality_delete_files_count: int = 0
    deleted_manifest_files_count: int = 0
    unreachable_manifest_files_count: int = 0
    deleted_manifest_lists_count: int = 0
    unreachable_manifest_lists_count: int = 0
    deleted_statistics_files_count: int = 0
    unreachable_statistics_files_count: int = 0
    failed_deletes_count: int = 0
    # the first 20 files: path -> why it could not be deleted
    failed_deletes: dict[str, str] = field(default_factory=dict)
    deleted_on_executors: bool = False
    kept_files_of_other_tables_count: int = 0
    # the first 20 files: path -> the table whose directories hold it
    kept_files_of_other_tables: dict[str, str] = field(default_factory=dict)

    def unreachable_files(self) -> int:
        """The files the expired snapshots alone reached: what a dry run would delete."""
        return sum(_number(getattr(self, f"unreachable_{kind}_count")) for kind in EXPIRED_KINDS)


@dataclass(frozen=True, kw_only=True)
class RemoveOrphanFilesResult(TrashingResult):
    """Orphan files found (and unless a dry run, deleted), and unfinished uploads aborted."""

    job: ClassVar[str] = "remove_orphan_files"
    removed_files_fields: ClassVar[tuple[str, ...]] = ("deleted_files_count",)

    location: str = ""
    dry_run: bool = False
    older_than: str = ""
    orphan_file_location: list[str] = field(default_factory=list)  # the first --max-reported
    orphan_files_count: int = 0
    deleted_files_count: int = 0
    failed_deletes_count: int = 0
    failed_deletes: dict[str, str] = field(default_factory=dict)
    listed_files_count: int = 0
    directories_listed_on_executors: int = 0
    referenced_files_count: int = 0
    hidden_files_count: int = 0
    too_young_count: int = 0
    no_mtime_count: int = 0
    prefix_mismatch_count: int = 0
    deleted_on_executors: bool = False
    other_tables_files_kept_count: int = 0
    # unfinished multipart uploads; `uploads_unchecked` says why they could not be listed
    abandoned_upload_location: list[str] | None = None
    abandoned_uploads_count: int | None = None
    aborted_uploads_count: int | None = None
    failed_aborts: dict[str, str] | None = None
    young_uploads_count: int | None = None
    uploads_unchecked: str | None = None
    # other tables' directories (`icecore.actions.other_tables`)
    excluded_locations: list[dict[str, Any]] = field(default_factory=list)
    other_tables_checked: int = 0
    other_tables_referenced_files_kept: int = 0
    other_tables_notes: list[str] = field(default_factory=list)
    other_tables_unreadable_elsewhere: int = 0
    other_tables_check_ms: int = 0


@dataclass(frozen=True, kw_only=True)
class RewriteManifestsResult(JobResult):
    """Manifests regrouped: how many the snapshot lists before and after."""

    job: ClassVar[str] = "rewrite_manifests"
    rewritten_bytes_fields: ClassVar[tuple[str, ...]] = ("rewritten_bytes",)

    status: str | None = None
    snapshot_id: int | None = None
    sequence_number: int | None = None
    starting_snapshot_id: int | None = None
    rewritten_in: str | None = None  # driver or spark-tasks
    data_manifests_before: int = 0
    delete_manifests_before: int = 0
    data_manifests_after: int = 0
    delete_manifests_after: int = 0
    rewritten_manifests: int = 0
    added_manifests: int = 0
    kept_manifests: int = 0
    entries: int = 0
    rewritten_bytes: int = 0
    added_bytes: int = 0
    attempts: int | None = None
    conflicts: list[str] = field(default_factory=list)
    seconds: float | None = None


RESULTS: dict[str, type[JobResult]] = {
    cls.job: cls
    for cls in (
        IngestResult,
        ConvertEqualityDeletesResult,
        RewritePositionDeletesResult,
        RewriteDataFilesResult,
        ExpireSnapshotsResult,
        RemoveOrphanFilesResult,
        RewriteManifestsResult,
    )
}


def result_of(job: str, data: Mapping[str, Any] | JobResult) -> JobResult | None:
    """`data` (a job's JSON result) read as `job`'s result class (a result is itself); None
    for a job this version does not know."""
    if isinstance(data, JobResult):
        return data
    cls = RESULTS.get(job)
    return None if cls is None else cls.from_dict(data)
