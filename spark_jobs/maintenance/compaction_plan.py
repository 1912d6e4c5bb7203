"""Which data files a major compaction rewrites, in which groups: planning without Spark.

The plan is made from one snapshot with icecore's planner, after Iceberg's bin-pack planner
(`SizeBasedFileRewritePlanner`), with the option names of its `rewrite_data_files`:

- a file is a candidate when its size is outside [`min-file-size-bytes`,
  `max-file-size-bytes`] (defaults 0.75x and 1.8x the target), when it is in a spec other
  than the output spec, when at least `delete-file-threshold` delete files apply to it, or
  when the rows its deletes remove are at least `delete-ratio-threshold` of its rows --
  counting equality deletes too, unlike Iceberg (their record counts are an upper bound of
  what they remove from the file);
- candidates are grouped per (spec, partition) and bin-packed into groups of at most
  `max-file-group-size-bytes`;
- a group is rewritten when it has at least `min-input-files` files (and more than one),
  more than one file and more than a target file's worth of bytes, more than a max file's
  worth of bytes, or a file that is wrongly partitioned or has too many deletes;
  `rewrite-all` rewrites every file.

Which delete files a commit may drop is decided here too: those whose every data file (in
the whole snapshot, not only the planned part) is replaced by committed groups.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from icecore.expressions import BooleanExpression
from icecore.scan import FileScanTask, TableScan
from icecore.spec.manifest import DataFile, FileContent
from icecore.table import Table

TARGET_FILE_SIZE = ("write.target-file-size-bytes", 512 * 1024 * 1024)
DEFAULT_MIN_INPUT_FILES = 5
DEFAULT_DELETE_RATIO = 0.3
DEFAULT_MAX_GROUP_SIZE = 100 * 1024 * 1024 * 1024
NO_DELETE_FILE_THRESHOLD = 2**31 - 1


class FileSizeBounds:
    """Files below `min_size` or above `max_size` are worth rewriting. Iceberg's defaults:
    75% and 180% of the target, unless given (both compactions share them)."""

    target_file_size_bytes: int
    min_file_size_bytes: int | None
    max_file_size_bytes: int | None

    @property
    def min_size(self) -> int:
        if self.min_file_size_bytes is not None:
            return self.min_file_size_bytes
        return int(self.target_file_size_bytes * 0.75)

    @property
    def max_size(self) -> int:
        if self.max_file_size_bytes is not None:
            return self.max_file_size_bytes
        return int(self.target_file_size_bytes * 1.8)


@dataclass(frozen=True)
class CompactionOptions(FileSizeBounds):
    """The planning options; sizes default from the target as in Iceberg."""

    target_file_size_bytes: int
    min_file_size_bytes: int | None = None
    max_file_size_bytes: int | None = None
    min_input_files: int = DEFAULT_MIN_INPUT_FILES
    rewrite_all: bool = False
    delete_file_threshold: int = NO_DELETE_FILE_THRESHOLD
    delete_ratio_threshold: float = DEFAULT_DELETE_RATIO
    max_file_group_size_bytes: int = DEFAULT_MAX_GROUP_SIZE
    output_spec_id: int | None = None

    def check(self) -> list[str]:
        problems = []
        if self.target_file_size_bytes <= 0:
            problems.append("--target-file-size-bytes must be positive")
        if not 0 <= self.min_size <= self.target_file_size_bytes:
            problems.append("--min-file-size-bytes must be between 0 and the target size")
        if self.max_size < self.target_file_size_bytes:
            problems.append("--max-file-size-bytes must be at least the target size")
        if self.min_input_files < 1:
            problems.append("--min-input-files must be at least 1")
        if self.delete_file_threshold < 1:
            problems.append("--delete-file-threshold must be at least 1")
        if not 0 < self.delete_ratio_threshold <= 1:
            problems.append("--delete-ratio-threshold must be in (0, 1]")
        if self.max_file_group_size_bytes <= 0:
            problems.append("--max-file-group-size-bytes must be positive")
        return problems

    def write_max_file_size(self) -> int:
        """Iceberg's writer limit: half way between target and max."""
        t = self.target_file_size_bytes
        return int(t + 0.5 * (self.max_size - t))

    def output_files(self, input_size: int) -> int:
        """Iceberg's `numOutputFiles`: round the remainder up only when it is a real file."""
        target = self.target_file_size_bytes
        if input_size < target:
            return 1
        with_remainder = math.ceil(input_size / target)
        without = input_size // target
        if input_size % target > self.min_size:
            return with_remainder
        if input_size / without < min(1.1 * target, self.write_max_file_size()):
            return without
        return with_remainder


@dataclass
class FileGroup:
    """Files of one (spec, partition) rewritten together, and the deletes applied to them."""

    index: int
    spec_id: int
    partition: tuple
    tasks: list[FileScanTask]

    @property
    def data_files(self) -> list[DataFile]:
        return [t.file for t in self.tasks]

    @property
    def input_bytes(self) -> int:
        return sum(t.file.file_size_in_bytes for t in self.tasks)

    @property
    def input_records(self) -> int:
        return sum(t.file.record_count for t in self.tasks)

    @property
    def delete_files(self) -> list[DataFile]:
        seen: dict[str, DataFile] = {}
        for t in self.tasks:
            for d in t.deletes:
                seen.setdefault(d.file_path, d)
        return list(seen.values())


@dataclass
class CompactionPlan:
    """The groups to rewrite, planned from `snapshot_id` (sequence `sequence_number`)."""

    snapshot_id: int | None
    sequence_number: int
    groups: list[FileGroup]
    # delete file path -> every live data file (whole snapshot) it applies to
    delete_targets: dict[str, set[str]] = field(default_factory=dict)
    delete_files: dict[str, DataFile] = field(default_factory=dict)
    delete_sequence_numbers: dict[str, int] = field(default_factory=dict)

    def removable_deletes(
        self, groups: Iterable[FileGroup], replaced: Iterable[str] = ()
    ) -> list[DataFile]:
        """Delete files of `groups` that apply to no data file left live once the groups'
        files (and the files in `replaced`, from earlier commits) are replaced."""
        gone = set(replaced)
        chosen = list(groups)
        for g in chosen:
            gone.update(f.file_path for f in g.data_files)
        out: dict[str, DataFile] = {}
        for g in chosen:
            for d in g.delete_files:
                if self.delete_targets.get(d.file_path, set()) <= gone:
                    out.setdefault(d.file_path, d)
        return list(out.values())


def _delete_ratio(task: FileScanTask) -> float:
    if task.file.record_count <= 0:
        return 0.0
    deleted = sum(d.record_count for d in task.deletes)
    return deleted / task.file.record_count


def _wrong_spec(task: FileScanTask, output_spec_id: int) -> bool:
    return task.file.spec_id != output_spec_id


def plan_compaction(
    table: Table,
    options: CompactionOptions,
    *,
    row_filter: BooleanExpression | None = None,
    snapshot_id: int | None = None,
) -> CompactionPlan:
    """Plan the rewrite of `table` at `snapshot_id` (default: current) within `row_filter`."""
    metadata = table.metadata
    output_spec = options.output_spec_id
    if output_spec is None:
        output_spec = metadata.default_spec_id
    scan = table.scan(snapshot_id=snapshot_id) if snapshot_id is not None else table.scan()
    snapshot = scan.snapshot
    if snapshot is None:
        return CompactionPlan(None, 0, [])
    all_tasks = list(scan.plan_files())
    targets: dict[str, set[str]] = defaultdict(set)
    delete_files: dict[str, DataFile] = {}
    for t in all_tasks:
        for d in t.deletes:
            targets[d.file_path].add(t.file.file_path)
            delete_files[d.file_path] = d
    if row_filter is not None:
        filtered = table.scan(snapshot_id=snapshot.snapshot_id, row_filter=row_filter)
        keep = {t.file.file_path for t in filtered.plan_files()}
        tasks = [t for t in all_tasks if t.file.file_path in keep]
    else:
        tasks = all_tasks
    groups = group_tasks(tasks, options, output_spec)
    plan = CompactionPlan(
        snapshot.snapshot_id,
        snapshot.sequence_number,
        groups,
        dict(targets),
        delete_files,
        _delete_sequence_numbers(scan),
    )
    return plan


def _delete_sequence_numbers(scan: TableScan) -> dict[str, int]:
    """Data sequence number of every live delete file of the scan's snapshot."""
    return {
        entry.data_file.file_path: entry.sequence_number
        for entry in scan.delete_entries()
        if entry.sequence_number is not None
    }


def group_tasks(
    tasks: Sequence[FileScanTask], options: CompactionOptions, output_spec_id: int
) -> list[FileGroup]:
    """Select candidate files, bin-pack them per partition, keep groups worth rewriting."""
    by_partition: dict[tuple[int, tuple], list[FileScanTask]] = defaultdict(list)
    for t in tasks:
        if _is_candidate(t, options, output_spec_id):
            by_partition[(t.file.spec_id, t.file.partition)].append(t)
    groups: list[FileGroup] = []
    for (spec_id, partition), members in sorted(by_partition.items(), key=lambda kv: repr(kv[0])):
        for packed in _bin_pack(members, options.max_file_group_size_bytes):
            if _worth_rewriting(packed, options, output_spec_id):
                groups.append(FileGroup(len(groups), spec_id, partition, packed))
    return groups


def _too_many_deletes(t: FileScanTask, options: CompactionOptions) -> bool:
    return len(t.deletes) >= options.delete_file_threshold or (
        bool(t.deletes) and _delete_ratio(t) >= options.delete_ratio_threshold
    )


def _is_candidate(t: FileScanTask, options: CompactionOptions, output_spec_id: int) -> bool:
    if options.rewrite_all:
        return True
    size = t.file.file_size_in_bytes
    return (
        size < options.min_size
        or size > options.max_size
        or _wrong_spec(t, output_spec_id)
        or _too_many_deletes(t, options)
    )


def _bin_pack(tasks: list[FileScanTask], max_group: int) -> list[list[FileScanTask]]:
    """First-fit decreasing into bins of at most `max_group` bytes (a bigger file alone)."""
    bins: list[tuple[int, list[FileScanTask]]] = []
    ordered = sorted(tasks, key=lambda t: (-t.file.file_size_in_bytes, t.file.file_path))
    for t in ordered:
        size = t.file.file_size_in_bytes
        for i, (used, members) in enumerate(bins):
            if used + size <= max_group:
                members.append(t)
                bins[i] = (used + size, members)
                break
        else:
            bins.append((size, [t]))
    return [members for _, members in bins]


def _worth_rewriting(
    group: list[FileScanTask], options: CompactionOptions, output_spec_id: int
) -> bool:
    if options.rewrite_all:
        return True
    size = sum(t.file.file_size_in_bytes for t in group)
    many = len(group) > 1
    return (
        (many and len(group) >= options.min_input_files)
        or (many and size > options.target_file_size_bytes)
        or size > options.max_size
        or any(_wrong_spec(t, output_spec_id) for t in group)
        or any(_too_many_deletes(t, options) for t in group)
    )


def content_counts(files: Iterable[DataFile]) -> dict[str, int]:
    out = {"position": 0, "equality": 0}
    for f in files:
        if f.content == FileContent.POSITION_DELETES:
            out["position"] += 1
        elif f.content == FileContent.EQUALITY_DELETES:
            out["equality"] += 1
    return out
