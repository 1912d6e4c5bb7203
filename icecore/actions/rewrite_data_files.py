"""Which data files a major compaction rewrites, in which groups: planning without an engine.

The plan is made from one snapshot with icecore's scan planner, after Iceberg's bin-pack
planner (`SizeBasedFileRewritePlanner`), with the option names of its `rewrite_data_files`:

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

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from icecore.actions.binpack import bin_pack
from icecore.actions.file_sizes import FileSizeBounds
from icecore.expressions import BooleanExpression
from icecore.scan import FileScanTask, TableScan
from icecore.spec.manifest import DataFile, content_key
from icecore.table import Table


@dataclass(frozen=True)
class PlanRules:
    """The planner's settings (Iceberg's option names, snake-cased): the size bounds resolved
    against the table's target, the spec files are written in, and what makes a file and a
    group worth rewriting."""

    sizes: FileSizeBounds
    output_spec_id: int
    max_file_group_size_bytes: int
    min_input_files: int
    delete_file_threshold: int
    delete_ratio_threshold: float
    rewrite_all: bool = False


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
                seen.setdefault(content_key(d), d)  # DVs share Puffin files
        return list(seen.values())


@dataclass
class CompactionPlan:
    """The groups to rewrite, planned from `snapshot_id` (sequence `sequence_number`)."""

    snapshot_id: int | None
    sequence_number: int
    groups: list[FileGroup]
    # delete file (`content_key`) -> every live data file (whole snapshot) it applies to
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
                if self.delete_targets.get(content_key(d), set()) <= gone:
                    out.setdefault(content_key(d), d)
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
    rules: PlanRules,
    *,
    row_filter: BooleanExpression | None = None,
    snapshot_id: int | None = None,
) -> CompactionPlan:
    """Plan the rewrite of `table` at `snapshot_id` (default: current) within `row_filter`."""
    # One read of every manifest: with a row filter, the unfiltered plan keeps the files'
    # metrics, and the filter narrows its tasks in memory.
    scan = table.scan(snapshot_id=snapshot_id, include_metrics=row_filter is not None)
    snapshot = scan.snapshot
    if snapshot is None:
        return CompactionPlan(None, 0, [])
    all_tasks = list(scan.plan_files())
    targets: dict[str, set[str]] = defaultdict(set)
    delete_files: dict[str, DataFile] = {}
    for t in all_tasks:
        for d in t.deletes:
            targets[content_key(d)].add(t.file.file_path)
            delete_files[content_key(d)] = d
    if row_filter is not None:
        filtered = table.scan(snapshot_id=snapshot.snapshot_id, row_filter=row_filter)
        tasks = [t for t in all_tasks if filtered.matches(t.file)]
    else:
        tasks = all_tasks
    groups = group_tasks(tasks, rules)
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
    """Data sequence number of every live delete file of the planned snapshot."""
    return {d.file_path: seq for d, seq in scan.planned_deletes()}


def group_tasks(tasks: Sequence[FileScanTask], rules: PlanRules) -> list[FileGroup]:
    """Select candidate files, bin-pack them per partition, keep groups worth rewriting."""
    by_partition: dict[tuple[int, tuple], list[FileScanTask]] = defaultdict(list)
    for t in tasks:
        if _is_candidate(t, rules):
            by_partition[(t.file.spec_id, t.file.partition)].append(t)
    groups: list[FileGroup] = []
    for (spec_id, partition), members in sorted(by_partition.items(), key=lambda kv: repr(kv[0])):
        packed_groups = bin_pack(
            members,
            lambda t: t.file.file_size_in_bytes,
            lambda t: t.file.file_path,
            rules.max_file_group_size_bytes,
        )
        for packed in packed_groups:
            if _worth_rewriting(packed, rules):
                groups.append(FileGroup(len(groups), spec_id, partition, packed))
    return groups


def _too_many_deletes(t: FileScanTask, rules: PlanRules) -> bool:
    return len(t.deletes) >= rules.delete_file_threshold or (
        bool(t.deletes) and _delete_ratio(t) >= rules.delete_ratio_threshold
    )


def _is_candidate(t: FileScanTask, rules: PlanRules) -> bool:
    if rules.rewrite_all:
        return True
    size = t.file.file_size_in_bytes
    return (
        size < rules.sizes.min_size
        or size > rules.sizes.max_size
        or _wrong_spec(t, rules.output_spec_id)
        or _too_many_deletes(t, rules)
    )


def _worth_rewriting(group: list[FileScanTask], rules: PlanRules) -> bool:
    if rules.rewrite_all:
        return True
    size = sum(t.file.file_size_in_bytes for t in group)
    many = len(group) > 1
    return (
        (many and len(group) >= rules.min_input_files)
        or (many and size > rules.sizes.target)
        or size > rules.sizes.max_size
        or any(_wrong_spec(t, rules.output_spec_id) for t in group)
        or any(_too_many_deletes(t, rules) for t in group)
    )
