"""Snapshots, their summaries, and the snapshot and metadata logs (spec: "Snapshots").

Summary property names and arithmetic follow Java's `SnapshotSummary` and
`SnapshotProducer.summary` exactly: engines and dashboards read `total-records` and friends, and
a total that drifted from Java's rules (for instance one carried on after a snapshot without
totals) would be believed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from icecore.errors import ValidationError
from icecore.spec.jsonfields import (
    get_int,
    get_str,
    get_string_map,
    require_list,
    require_object,
)

ADDED_DATA_FILES = "added-data-files"
DELETED_DATA_FILES = "deleted-data-files"
TOTAL_DATA_FILES = "total-data-files"
ADDED_DELETE_FILES = "added-delete-files"
REMOVED_DELETE_FILES = "removed-delete-files"
TOTAL_DELETE_FILES = "total-delete-files"
ADDED_EQUALITY_DELETE_FILES = "added-equality-delete-files"
REMOVED_EQUALITY_DELETE_FILES = "removed-equality-delete-files"
ADDED_POSITION_DELETE_FILES = "added-position-delete-files"
REMOVED_POSITION_DELETE_FILES = "removed-position-delete-files"
ADDED_RECORDS = "added-records"
DELETED_RECORDS = "deleted-records"
TOTAL_RECORDS = "total-records"
ADDED_FILES_SIZE = "added-files-size"
REMOVED_FILES_SIZE = "removed-files-size"
TOTAL_FILES_SIZE = "total-files-size"
ADDED_POSITION_DELETES = "added-position-deletes"
REMOVED_POSITION_DELETES = "removed-position-deletes"
TOTAL_POSITION_DELETES = "total-position-deletes"
ADDED_EQUALITY_DELETES = "added-equality-deletes"
REMOVED_EQUALITY_DELETES = "removed-equality-deletes"
TOTAL_EQUALITY_DELETES = "total-equality-deletes"
CHANGED_PARTITION_COUNT = "changed-partition-count"
# Deletion vectors (v3): Java counts them in added-delete-files, not in
# added-position-delete-files (its SnapshotSummary's ADDED_DVS_PROP).
ADDED_DVS = "added-dvs"
# Who committed, as Iceberg Java's engines write it (Spark: `engine-name` spark and
# its application id as `app-id`); PyIceberg (0.12) writes none of them.
ENGINE_NAME = "engine-name"
APP_ID = "app-id"
# icefloe's own: the job that committed the snapshot (absent from other engines' commits).
ICEFLOE_JOB = "icefloe.job"
# ... and, for an ingestion, the batch it committed (`icecore.actions.batch_ids`) and how.
BATCH_ID = "icefloe.batch-id"
INGEST_MODE = "icefloe.ingest-mode"

# (total, added, removed), in the order Java's SnapshotProducer appends them.
_TOTALS = (
    (TOTAL_RECORDS, ADDED_RECORDS, DELETED_RECORDS),
    (TOTAL_FILES_SIZE, ADDED_FILES_SIZE, REMOVED_FILES_SIZE),
    (TOTAL_DATA_FILES, ADDED_DATA_FILES, DELETED_DATA_FILES),
    (TOTAL_DELETE_FILES, ADDED_DELETE_FILES, REMOVED_DELETE_FILES),
    (TOTAL_POSITION_DELETES, ADDED_POSITION_DELETES, REMOVED_POSITION_DELETES),
    (TOTAL_EQUALITY_DELETES, ADDED_EQUALITY_DELETES, REMOVED_EQUALITY_DELETES),
)

_DATA, _POSITION_DELETES, _EQUALITY_DELETES = 0, 1, 2
_LONG = re.compile(r"[+-]?[0-9]+")


class Operation(Enum):
    """What a snapshot did; readers use it to skip work (e.g. `replace` changes no data)."""

    APPEND = "append"
    REPLACE = "replace"
    OVERWRITE = "overwrite"
    DELETE = "delete"


@dataclass(frozen=True)
class Summary:
    """A snapshot summary: the operation plus string properties (never holding "operation")."""

    operation: Operation
    properties: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if "operation" in self.properties:
            raise ValidationError("summary properties must not repeat 'operation'")

    def get(self, name: str) -> str | None:
        return self.properties.get(name)

    def to_json(self) -> dict[str, str]:
        return {"operation": self.operation.value, **self.properties}

    @classmethod
    def from_json(cls, obj: Any) -> Summary:
        """Java's reading: a summary without an operation is taken as an overwrite, the
        operation that promises the least, rather than making the table unreadable."""
        properties = get_string_map({"summary": obj}, "summary")
        name = properties.pop("operation", Operation.OVERWRITE.value)
        try:
            operation = Operation(name)
        except ValueError:
            raise ValidationError(f"unknown snapshot operation {name!r}") from None
        return cls(operation, properties)


@dataclass
class SummaryCounts:
    """What one commit added and removed; Java's `SnapshotSummary.UpdateMetrics`.

    `content` is the spec's content code: 0 data, 1 position deletes, 2 equality deletes.
    """

    added_data_files: int = 0
    deleted_data_files: int = 0
    added_delete_files: int = 0
    removed_delete_files: int = 0
    added_equality_delete_files: int = 0
    removed_equality_delete_files: int = 0
    added_position_delete_files: int = 0
    removed_position_delete_files: int = 0
    added_records: int = 0
    deleted_records: int = 0
    added_files_size: int = 0
    removed_files_size: int = 0
    added_position_deletes: int = 0
    removed_position_deletes: int = 0
    added_equality_deletes: int = 0
    removed_equality_deletes: int = 0

    def added_file(self, content: int, record_count: int, file_size_in_bytes: int) -> None:
        self.added_files_size += file_size_in_bytes
        if content == _DATA:
            self.added_data_files += 1
            self.added_records += record_count
        elif content == _POSITION_DELETES:
            self.added_delete_files += 1
            self.added_position_delete_files += 1
            self.added_position_deletes += record_count
        elif content == _EQUALITY_DELETES:
            self.added_delete_files += 1
            self.added_equality_delete_files += 1
            self.added_equality_deletes += record_count
        else:
            raise ValidationError(f"unknown file content {content}")

    def removed_file(self, content: int, record_count: int, file_size_in_bytes: int) -> None:
        self.removed_files_size += file_size_in_bytes
        if content == _DATA:
            self.deleted_data_files += 1
            self.deleted_records += record_count
        elif content == _POSITION_DELETES:
            self.removed_delete_files += 1
            self.removed_position_delete_files += 1
            self.removed_position_deletes += record_count
        elif content == _EQUALITY_DELETES:
            self.removed_delete_files += 1
            self.removed_equality_delete_files += 1
            self.removed_equality_deletes += record_count
        else:
            raise ValidationError(f"unknown file content {content}")

    def to_properties(self) -> dict[str, str]:
        """The non-zero counters under Java's names, in Java's order."""
        pairs = (
            (ADDED_DATA_FILES, self.added_data_files),
            (DELETED_DATA_FILES, self.deleted_data_files),
            (ADDED_EQUALITY_DELETE_FILES, self.added_equality_delete_files),
            (REMOVED_EQUALITY_DELETE_FILES, self.removed_equality_delete_files),
            (ADDED_POSITION_DELETE_FILES, self.added_position_delete_files),
            (REMOVED_POSITION_DELETE_FILES, self.removed_position_delete_files),
            (ADDED_DELETE_FILES, self.added_delete_files),
            (REMOVED_DELETE_FILES, self.removed_delete_files),
            (ADDED_RECORDS, self.added_records),
            (DELETED_RECORDS, self.deleted_records),
            (ADDED_FILES_SIZE, self.added_files_size),
            (REMOVED_FILES_SIZE, self.removed_files_size),
            (ADDED_POSITION_DELETES, self.added_position_deletes),
            (REMOVED_POSITION_DELETES, self.removed_position_deletes),
            (ADDED_EQUALITY_DELETES, self.added_equality_deletes),
            (REMOVED_EQUALITY_DELETES, self.removed_equality_deletes),
        )
        return {name: str(value) for name, value in pairs if value > 0}


def build_summary(
    operation: Operation,
    counts: SummaryCounts,
    previous: Snapshot | None,
    *,
    changed_partition_count: int | None = None,
    properties: Mapping[str, str] | None = None,
) -> Summary:
    """The summary of a new snapshot, with totals carried on from the branch's previous head.

    `previous` is None when the branch has no snapshot yet: totals then start at zero. A
    previous snapshot that lacks a total (written by an engine that kept none, or with no
    summary at all) leaves that total out for good, as Java does; a guessed total would be
    believed. A total that would drop below zero, or a previous total that is not a number,
    is likewise left out.
    """
    own = dict(properties or {})
    computed = counts.to_properties()
    if changed_partition_count is not None:
        computed[CHANGED_PARTITION_COUNT] = str(changed_partition_count)
    clash = own.keys() & (computed.keys() | {total for total, _, _ in _TOTALS} | {"operation"})
    if clash:
        raise ValidationError(f"summary properties collide with computed ones: {sorted(clash)}")
    current = own | computed
    if previous is None:
        before: Mapping[str, str] = {total: "0" for total, _, _ in _TOTALS}
    else:
        before = previous.summary.properties if previous.summary else {}
    for total, added, removed in _TOTALS:
        value = _updated_total(before.get(total), current.get(added), current.get(removed))
        if value is not None:
            current[total] = str(value)
    return Summary(operation, current)


def _updated_total(previous: str | None, added: str | None, removed: str | None) -> int | None:
    before, plus, minus = (_java_long(v) for v in (previous, added or "0", removed or "0"))
    if before is None or plus is None or minus is None or before < 0:
        return None
    total = before + plus - minus
    return total if total >= 0 else None


def _java_long(text: str | None) -> int | None:
    """`Long.parseLong`, which unlike `int()` refuses spaces and underscores."""
    return int(text) if text is not None and _LONG.fullmatch(text) else None


@dataclass(frozen=True)
class Snapshot:
    """One table state. v1 snapshots may list `manifests` inline instead of a `manifest_list`
    file; those are kept (and written back) as they are, as Java does."""

    snapshot_id: int
    timestamp_ms: int
    manifest_list: str | None = None
    parent_snapshot_id: int | None = None
    sequence_number: int = 0
    summary: Summary | None = None
    schema_id: int | None = None
    manifests: tuple[str, ...] | None = None
    # v3 row lineage: the first row id assigned to this snapshot's new rows, and how many.
    first_row_id: int | None = None
    added_rows: int | None = None

    def __post_init__(self) -> None:
        if (self.manifest_list is None) == (self.manifests is None):
            raise ValidationError(
                f"snapshot {self.snapshot_id} must have exactly one of manifest-list and manifests"
            )
        if self.sequence_number < 0:
            raise ValidationError(
                f"snapshot {self.snapshot_id} has negative sequence number {self.sequence_number}"
            )

    @property
    def operation(self) -> Operation | None:
        return self.summary.operation if self.summary else None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "sequence-number": self.sequence_number,
            "snapshot-id": self.snapshot_id,
        }
        if self.parent_snapshot_id is not None:
            out["parent-snapshot-id"] = self.parent_snapshot_id
        out["timestamp-ms"] = self.timestamp_ms
        if self.summary is not None:
            out["summary"] = self.summary.to_json()
        if self.manifest_list is not None:
            out["manifest-list"] = self.manifest_list
        else:
            out["manifests"] = list(self.manifests or ())
        if self.schema_id is not None:
            out["schema-id"] = self.schema_id
        if self.first_row_id is not None:
            out["first-row-id"] = self.first_row_id
        if self.added_rows is not None:
            out["added-rows"] = self.added_rows
        return out

    @classmethod
    def from_json(cls, obj: Any) -> Snapshot:
        obj = require_object(obj, "a snapshot")
        snapshot_id = get_int(obj, "snapshot-id")
        try:
            return cls._from_json(obj, snapshot_id)
        except ValidationError as exc:
            raise ValidationError(f"snapshot {snapshot_id}: {exc}") from None

    @classmethod
    def _from_json(cls, obj: dict[str, Any], snapshot_id: int) -> Snapshot:
        # An empty summary object is no summary (Java reads it as null).
        summary = Summary.from_json(obj["summary"]) if obj.get("summary") else None
        manifest_list = get_str(obj, "manifest-list", None)
        manifests = None
        if manifest_list is None:
            if "manifests" not in obj:
                raise ValidationError("has neither 'manifest-list' nor 'manifests'")
            entries = require_list(obj["manifests"], "'manifests'")
            if not all(isinstance(m, str) for m in entries):
                raise ValidationError("'manifests' must list strings")
            manifests = tuple(entries)
        return cls(
            snapshot_id=snapshot_id,
            timestamp_ms=get_int(obj, "timestamp-ms"),
            manifest_list=manifest_list,
            parent_snapshot_id=get_int(obj, "parent-snapshot-id", None),
            sequence_number=get_int(obj, "sequence-number", 0),
            summary=summary,
            schema_id=get_int(obj, "schema-id", None),
            manifests=manifests,
            first_row_id=get_int(obj, "first-row-id", None),
            added_rows=get_int(obj, "added-rows", None),
        )


@dataclass(frozen=True)
class SnapshotLogEntry:
    """When a snapshot became current; the history behind time travel."""

    timestamp_ms: int
    snapshot_id: int

    def to_json(self) -> dict[str, int]:
        return {"timestamp-ms": self.timestamp_ms, "snapshot-id": self.snapshot_id}

    @classmethod
    def from_json(cls, obj: Any) -> SnapshotLogEntry:
        obj = require_object(obj, "a snapshot-log entry")
        return cls(get_int(obj, "timestamp-ms"), get_int(obj, "snapshot-id"))


@dataclass(frozen=True)
class MetadataLogEntry:
    """A previous metadata file of the table and when it was replaced."""

    timestamp_ms: int
    metadata_file: str

    def to_json(self) -> dict[str, Any]:
        return {"timestamp-ms": self.timestamp_ms, "metadata-file": self.metadata_file}

    @classmethod
    def from_json(cls, obj: Any) -> MetadataLogEntry:
        obj = require_object(obj, "a metadata-log entry")
        return cls(get_int(obj, "timestamp-ms"), get_str(obj, "metadata-file"))
