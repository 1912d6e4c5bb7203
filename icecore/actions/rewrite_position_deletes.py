"""Which delete files a minor compaction rewrites, in which groups: planning without an engine
(Iceberg's `rewrite_position_delete_files`, with the option names of its procedure).

Per partition (spec id and partition tuple) the row filter may match:
- a delete file that applies to no live data file (every file it names is gone, or newer
  than it) is dangling: removed without being read;
- the other position delete files are candidates when smaller than `min-file-size-bytes` or
  larger than `max-file-size-bytes` (all of them with `rewrite-all`); a partition's
  candidates are rewritten when there are at least `min-input-files` of them, or more than
  one holding more than `target-file-size-bytes` together, or with `rewrite-all`;
- equality delete files are merged only with files of the same partition, the same data
  sequence number and the same equality field ids (merging across sequence numbers would
  change which data files they apply to), under the same count rule.

A rewrite keeps a row of a position delete file only for a data file the scan planner paired
the file with (`LiveState.applies_to`): rows naming files that are gone, or files the delete
never applied to, are dropped, and no row can start deleting anything.

Sequence numbers: a position delete applies to the data files it names whose data sequence
number is at most its own. A merged file takes the largest data sequence number of the files
it replaces (`DeleteGroup.sequence_number`): every row it keeps names a data file no newer
than the delete file the row came from, hence no newer than the merged file, and since rows
name files explicitly a larger number cannot make a row apply elsewhere. It is also no newer
than the planning snapshot, so a data compaction planned before the rewrite commits does not
see the merged files as new deletes (their rows are not new). Merged equality deletes keep
their common sequence number.

Groups: a partition's chosen files (and each mergeable set of equality delete files) are
bin-packed into groups of at most `max-file-group-size-bytes`: the unit of a commit with
partial progress, and of re-planning after a conflict (`only`: the partitions to plan again).

Format v3: position delete files are legacy there (a data file's deletes belong in its one
deletion vector), so every live one in the filter's partitions is converted, whatever its
size: per partition one group, since a data file's DV must take all of its legacy files at
once. Live DVs are never rewritten (there is at most one per data file already); dangling
ones, whose data file is gone, are removed like any dangling delete.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from icecore.actions.binpack import bin_pack
from icecore.actions.file_sizes import FileSizeBounds
from icecore.actions.live_files import LiveDelete, LiveState, PartitionKey
from icecore.expressions import BooleanExpression
from icecore.expressions.projection import inclusive_projection
from icecore.expressions.pruning import PartitionEvaluator
from icecore.spec.manifest import FileContent
from icecore.table import Table


@dataclass(frozen=True)
class DeletePlanRules:
    """The planner's settings (Iceberg's option names, snake-cased), the size bounds resolved
    against the table's delete target size."""

    sizes: FileSizeBounds
    min_input_files: int
    max_file_group_size_bytes: int
    rewrite_all: bool = False


@dataclass
class DeleteGroup:
    """Delete files of one partition rewritten together into that partition's new files."""

    index: int
    key: PartitionKey
    files: list[LiveDelete]
    equality_ids: tuple[int, ...] | None = None  # None: position deletes
    into_dvs: bool = False  # position deletes of a v3 table: converted into DVs

    @property
    def sequence_number(self) -> int:
        """The data sequence number the group's new files take (see the module doc)."""
        return max(d.sequence_number for d in self.files)

    @property
    def input_bytes(self) -> int:
        return total_bytes(self.files)

    def describe(self) -> str:
        kind = "position" if self.equality_ids is None else f"equality {list(self.equality_ids)}"
        into = " into deletion vectors" if self.into_dvs else ""
        return f"{kind} deletes{into} of spec {self.key[0]} partition {self.key[1]!r}"


@dataclass
class DeletePlan:
    """The groups to rewrite and the dangling delete files to drop."""

    groups: list[DeleteGroup]
    dangling: list[LiveDelete]

    def of_kind(self, equality: bool) -> list[DeleteGroup]:
        return [g for g in self.groups if (g.equality_ids is not None) == equality]


def total_bytes(files: Iterable[LiveDelete]) -> int:
    return sum(d.file.file_size_in_bytes for d in files)


def records_per_file(files: Collection[LiveDelete], target_bytes: int) -> int | None:
    """Rows per written file that reach `target_bytes` at the inputs' average bytes per row,
    so the merged output is split near the target size; None (no limit) without rows."""
    records = sum(d.file.record_count for d in files)
    if not records:
        return None
    return max(1, int(target_bytes / (total_bytes(files) / records)))


def partition_filter(
    table: Table, row_filter: BooleanExpression | None
) -> Callable[[PartitionKey], bool]:
    """A predicate on (spec id, partition) keeping the partitions `row_filter` may match."""
    if row_filter is None:
        return lambda key: True
    metadata = table.metadata
    evaluators: dict[int, PartitionEvaluator] = {}

    def keep(key: PartitionKey) -> bool:
        spec_id, partition = key
        evaluator = evaluators.get(spec_id)
        if evaluator is None:
            spec = metadata.spec_by_id(spec_id)
            projected = inclusive_projection(spec, metadata.schema(), row_filter)
            evaluator = PartitionEvaluator(spec.partition_type(metadata.schema()), projected)
            evaluators[spec_id] = evaluator
        return evaluator.eval(partition)

    return keep


def plan_delete_rewrite(
    state: LiveState,
    rules: DeletePlanRules,
    *,
    row_filter: BooleanExpression | None = None,
    only: Collection[PartitionKey] | None = None,
) -> DeletePlan:
    """The groups to rewrite and the dangling files to drop, in the partitions `row_filter`
    may match (and, when re-planning after a conflict, only those in `only`)."""
    in_filter = partition_filter(state.table, row_filter)

    def keep(key: PartitionKey) -> bool:
        return in_filter(key) and (only is None or key in only)

    dangling: list[LiveDelete] = []
    by_partition: dict[PartitionKey, list[LiveDelete]] = defaultdict(list)
    equality: dict[tuple[PartitionKey, int, tuple[int, ...]], list[LiveDelete]] = defaultdict(list)
    for d in state.deletes.values():
        if not keep(d.partition_key):
            continue
        if not state.applies_to(d):
            dangling.append(d)
        elif d.file.is_deletion_vector:
            continue  # the one DV of its data file: nothing to merge it with
        elif d.file.content == FileContent.POSITION_DELETES:
            by_partition[d.partition_key].append(d)
        elif d.file.content == FileContent.EQUALITY_DELETES:
            ids = tuple(d.file.equality_ids or ())
            equality[(d.partition_key, d.sequence_number, ids)].append(d)
    groups: list[DeleteGroup] = []
    into_dvs = state.table.metadata.format_version >= 3
    for key, files in by_partition.items():
        if into_dvs:
            members = sorted(files, key=lambda d: d.file.file_path)
            groups.append(DeleteGroup(len(groups), key, members, into_dvs=True))
            continue
        for packed in _bin_pack(_choose(files, rules), rules.max_file_group_size_bytes):
            if rules.rewrite_all or len(packed) > 1 or total_bytes(packed) > rules.sizes.max_size:
                groups.append(DeleteGroup(len(groups), key, packed))
    for (key, _, ids), files in equality.items():
        if len(files) < 2 or not (rules.rewrite_all or len(files) >= rules.min_input_files):
            continue
        for packed in _bin_pack(files, rules.max_file_group_size_bytes):
            if len(packed) > 1:
                groups.append(DeleteGroup(len(groups), key, packed, ids))
    return DeletePlan(groups, dangling)


def _choose(files: list[LiveDelete], rules: DeletePlanRules) -> list[LiveDelete]:
    if rules.rewrite_all:
        return files
    sizes = rules.sizes
    candidates = [
        d
        for d in files
        if d.file.file_size_in_bytes < sizes.min_size or d.file.file_size_in_bytes > sizes.max_size
    ]
    if len(candidates) >= rules.min_input_files or (
        len(candidates) > 1 and total_bytes(candidates) > sizes.target
    ):
        return candidates
    return []


def _bin_pack(files: list[LiveDelete], max_group: int) -> list[list[LiveDelete]]:
    """Groups of at most `max_group` bytes, so that no commit (and no write) holds more than
    that; members in path order."""
    packed = bin_pack(
        files, lambda d: d.file.file_size_in_bytes, lambda d: d.file.file_path, max_group
    )
    return [sorted(members, key=lambda d: d.file.file_path) for members in packed]
