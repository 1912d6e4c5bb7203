"""Scan planning: the live data files of a snapshot and, for each, the delete files that apply.

Planning reads the delete manifests first (deletes must all be known before any data file can
be paired with them), then streams the data manifests one at a time and yields a task per live
data file. Memory therefore holds the delete index plus one manifest's entries, never the
whole table: a table with half a million data files plans in constant memory per manifest.

Pruning happens at three levels, each only ever skipping files that cannot match:
manifests by their partition field summaries, entries by partition value, data files by
column metrics. Delete files are pruned by partition only: their metrics describe deleted
rows or positions, not the rows a filter asks for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import TypeVar

from icecore.errors import ValidationError
from icecore.expressions import AlwaysTrue, BooleanExpression
from icecore.expressions.projection import inclusive_projection
from icecore.expressions.pruning import ManifestEvaluator, MetricsEvaluator, PartitionEvaluator
from icecore.io import FileIO
from icecore.scan.delete_index import DeleteFileIndex
from icecore.spec.manifest import (
    DataFile,
    FileContent,
    ManifestEntry,
    manifest_file_from_path,
    read_manifest,
)
from icecore.spec.manifest_list import ManifestContent, ManifestFile, read_manifest_list
from icecore.spec.metadata import TableMetadata
from icecore.spec.snapshots import Snapshot

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class FileScanTask:
    """A live data file, its data sequence number, and the delete files a reader must apply."""

    file: DataFile
    data_sequence_number: int
    deletes: tuple[DataFile, ...]

    @property
    def position_deletes(self) -> tuple[DataFile, ...]:
        return tuple(d for d in self.deletes if d.content == FileContent.POSITION_DELETES)

    @property
    def equality_deletes(self) -> tuple[DataFile, ...]:
        return tuple(d for d in self.deletes if d.content == FileContent.EQUALITY_DELETES)


def snapshot_manifests(io: FileIO, snapshot: Snapshot) -> list[ManifestFile]:
    """The manifests of a snapshot, from its manifest list (or v1's inline manifest paths)."""
    if snapshot.manifest_list is not None:
        return read_manifest_list(io, snapshot.manifest_list)
    return [manifest_file_from_path(io, p, snapshot.snapshot_id) for p in snapshot.manifests or ()]


class TableScan:
    """Plans one snapshot of a table: `TableScan(io, metadata, ref="main").plan_files()`.

    `snapshot_id` or `ref` (a branch or tag) choose the snapshot; by default the current one.
    `row_filter` is bound to the table's current schema, like Iceberg Java's default scans.
    """

    def __init__(
        self,
        io: FileIO,
        metadata: TableMetadata,
        *,
        snapshot_id: int | None = None,
        ref: str | None = None,
        row_filter: BooleanExpression | None = None,
        case_sensitive: bool = True,
        include_metrics: bool = False,
    ) -> None:
        if snapshot_id is not None and ref is not None:
            raise ValidationError("choose a snapshot by id or by ref, not both")
        self.io = io
        self.metadata = metadata
        self.row_filter = AlwaysTrue() if row_filter is None else row_filter
        self.case_sensitive = case_sensitive
        # Data files' column metrics are read only to evaluate a row filter, unless asked for
        # (a caller filtering the tasks itself, with `matches`, without planning twice).
        self.include_metrics = include_metrics
        self._delete_index: DeleteFileIndex | None = None
        if snapshot_id is not None:
            self.snapshot: Snapshot | None = metadata.snapshot_by_id(snapshot_id)
        elif ref is not None:
            self.snapshot = metadata.snapshot_for_ref(ref)
        else:
            self.snapshot = metadata.current_snapshot()

    @cached_property
    def _filtered(self) -> bool:
        return self.row_filter is not AlwaysTrue()

    def _projection(self, spec_id: int) -> BooleanExpression:
        spec = self.metadata.spec_by_id(spec_id)
        return inclusive_projection(
            spec, self.metadata.schema(), self.row_filter, case_sensitive=self.case_sensitive
        )

    @cached_property
    def _manifest_evaluators(self) -> _PerSpec[Callable[[ManifestFile], bool]]:
        def build(spec_id: int) -> Callable[[ManifestFile], bool]:
            partition_type = self.metadata.spec_by_id(spec_id).partition_type(
                self.metadata.schema()
            )
            return ManifestEvaluator(partition_type, self._projection(spec_id)).eval

        return _PerSpec(build)

    @cached_property
    def _partition_evaluators(self) -> _PerSpec[Callable[[tuple], bool]]:
        def build(spec_id: int) -> Callable[[tuple], bool]:
            partition_type = self.metadata.spec_by_id(spec_id).partition_type(
                self.metadata.schema()
            )
            return PartitionEvaluator(partition_type, self._projection(spec_id)).eval

        return _PerSpec(build)

    @cached_property
    def _metrics_evaluator(self) -> Callable[[DataFile], bool]:
        return MetricsEvaluator(
            self.metadata.schema(), self.row_filter, case_sensitive=self.case_sensitive
        ).eval

    def _live_entries(
        self, manifest: ManifestFile, include_metrics: bool
    ) -> Iterator[ManifestEntry]:
        keep_partition = self._partition_evaluators[manifest.partition_spec_id]
        for entry in read_manifest(
            self.io,
            manifest,
            spec=self.metadata.spec_by_id(manifest.partition_spec_id),
            include_metrics=include_metrics,
            live_only=True,
        ):
            if not self._filtered or keep_partition(entry.data_file.partition):
                yield entry

    def _manifests(self) -> tuple[list[ManifestFile], list[ManifestFile]]:
        if self.snapshot is None:
            return [], []
        data, deletes = [], []
        for manifest in snapshot_manifests(self.io, self.snapshot):
            if not (manifest.has_added_files or manifest.has_existing_files):
                continue
            if self._filtered and not self._manifest_evaluators[manifest.partition_spec_id](
                manifest
            ):
                continue
            (deletes if manifest.content == ManifestContent.DELETES else data).append(manifest)
        return data, deletes

    def delete_index(self, delete_manifests: list[ManifestFile]) -> DeleteFileIndex:
        unpartitioned = [
            s for s, spec in self.metadata.specs_by_id().items() if spec.is_unpartitioned
        ]
        index = DeleteFileIndex(unpartitioned)
        for manifest in delete_manifests:
            # Metrics are kept: position deletes' file_path bounds narrow what they apply to.
            for entry in self._live_entries(manifest, include_metrics=True):
                index.add(entry.data_file, _data_sequence_number(entry))
        return index.freeze()

    def planned_deletes(self) -> list[tuple[DataFile, int]]:
        """The live delete files `plan_files` paired from, with their data sequence numbers
        (read once, by the plan); call after planning."""
        if self._delete_index is None:
            raise ValidationError("planned_deletes() needs plan_files() to have run")
        return self._delete_index.entries()

    def matches(self, data_file: DataFile) -> bool:
        """Whether this scan's row filter may select `data_file` (partition, then metrics):
        to narrow another scan's tasks without reading the manifests again."""
        if not self._filtered:
            return True
        keep_partition = self._partition_evaluators[data_file.spec_id]
        return keep_partition(data_file.partition) and self._metrics_evaluator(data_file)

    def plan_files(self) -> Iterator[FileScanTask]:
        data_manifests, delete_manifests = self._manifests()
        index = self._delete_index = self.delete_index(delete_manifests)
        keep_file = self._metrics_evaluator if self._filtered else None
        metrics = keep_file is not None or self.include_metrics
        for manifest in data_manifests:
            for entry in self._live_entries(manifest, include_metrics=metrics):
                data_file = entry.data_file
                if keep_file is not None and not keep_file(data_file):
                    continue
                seq = _data_sequence_number(entry)
                yield FileScanTask(data_file, seq, index.for_data_file(data_file, seq))


def _data_sequence_number(entry: ManifestEntry) -> int:
    if entry.sequence_number is None:
        raise ValidationError(
            f"{entry.data_file.file_path} has no data sequence number after inheritance"
        )
    return entry.sequence_number


class _PerSpec(dict[int, T]):
    """Builds a per-partition-spec evaluator once, on first use."""

    def __init__(self, build: Callable[[int], T]) -> None:
        super().__init__()
        self._build = build

    def __missing__(self, spec_id: int) -> T:
        value = self[spec_id] = self._build(spec_id)
        return value
