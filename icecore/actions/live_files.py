"""What a maintenance action plans from: one snapshot's live data files (as scan tasks, each
with the delete files that apply to it) and its live delete files with their data sequence
numbers.

"Which delete file applies to which data file" is taken from icecore's planner, the same
answer every reader gets (sequence numbers, partition scope, global equality deletes,
`file_path` bounds). The actions then only ever keep a delete row for a (delete file, data
file) pair the planner produced, so they cannot change which rows are live.

What the actions' readers cannot read is refused here, before any work starts, naming the
file: files other than Parquet, and equality keys that are not top-level columns.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from icecore.errors import ValidationError
from icecore.scan import FileScanTask
from icecore.spec.manifest import DataFile, FileContent, FileFormat, content_key
from icecore.spec.schema import Schema
from icecore.spec.snapshots import Snapshot
from icecore.spec.types import NestedField
from icecore.table import Table

PartitionKey = tuple[int, tuple[Any, ...]]  # (spec id, partition tuple)


@dataclass(frozen=True)
class LiveDelete:
    file: DataFile
    sequence_number: int

    @property
    def partition_key(self) -> PartitionKey:
        return self.file.spec_id, tuple(self.file.partition)

    @property
    def key(self) -> str:
        """What tells it apart: its location, and for a deletion vector its offset too (one
        Puffin file holds the DVs of many data files)."""
        return content_key(self.file)


@dataclass
class LiveState:
    """A snapshot's live files and which deletes apply to which data files; `deletes` and
    `applies` are keyed by `LiveDelete.key`."""

    table: Table
    snapshot: Snapshot
    tasks: list[FileScanTask]
    deletes: dict[str, LiveDelete]
    applies: dict[str, list[FileScanTask]] = field(default_factory=dict)

    @cached_property
    def data_by_path(self) -> dict[str, FileScanTask]:
        return {t.file.file_path: t for t in self.tasks}

    def of_content(self, content: FileContent) -> list[LiveDelete]:
        return [d for d in self.deletes.values() if d.file.content == content]

    def applies_to(self, delete: LiveDelete) -> list[FileScanTask]:
        """The live data files (scan tasks) the planner paired `delete` with."""
        return self.applies.get(delete.key, [])


def live_state(table: Table, snapshot_id: int | None = None) -> LiveState | None:
    """The live state of `snapshot_id` (default: current); None for a table without one."""
    metadata = table.metadata
    snapshot = (
        metadata.snapshot_by_id(snapshot_id)
        if snapshot_id is not None
        else metadata.current_snapshot()
    )
    if snapshot is None:
        return None
    # One read of the delete manifests: the plan's own index lists every live delete file.
    scan = table.scan(snapshot_id=snapshot.snapshot_id)
    tasks = list(scan.plan_files())
    deletes: dict[str, LiveDelete] = {}
    for delete_file, sequence_number in scan.planned_deletes():
        live = LiveDelete(delete_file, sequence_number)
        deletes[live.key] = live
    applies: dict[str, list[FileScanTask]] = defaultdict(list)
    for task in tasks:
        for d in task.deletes:
            applies[content_key(d)].append(task)
    return LiveState(table, snapshot, tasks, deletes, dict(applies))


def require_parquet(files: list[DataFile]) -> None:
    """Refuse files the maintenance readers cannot read (they read Parquet only)."""
    other = [f.file_path for f in files if f.file_format != FileFormat.PARQUET]
    if other:
        raise ValidationError(
            "the maintenance jobs read Parquet files only; not Parquet: " + ", ".join(other[:5])
        )


def equality_fields(schema: Schema, delete_file: DataFile) -> list[NestedField]:
    """The key columns of an equality delete file: the top-level columns of its equality
    field ids. The readers of equality keys (Spark's and `icecore.data.live_batches`) match
    key columns at the top level only, so a file without equality ids, or with a nested or
    dropped key column (which would silently read as null), is refused naming the file."""
    ids = delete_file.equality_ids or ()
    if not ids:
        raise ValidationError(f"equality delete file {delete_file.file_path} has no equality ids")
    by_id = {f.field_id: f for f in schema.fields}
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise ValidationError(
            f"{delete_file.file_path}: equality field ids {missing} are not top-level columns "
            "of the current schema (nested or dropped); the maintenance jobs cannot read them"
        )
    return [by_id[i] for i in ids]
