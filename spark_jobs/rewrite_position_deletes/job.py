"""Minor compaction of delete files (Iceberg's `rewrite_position_delete_files`).

Plan (driver, icecore), per partition (spec id and partition tuple) of the `--where` filter:
- a position delete file that applies to no live data file (every file it names is gone, or
  newer than it) is dangling: removed without being read;
- the other position delete files are candidates when smaller than `min-file-size-bytes` or
  larger than `max-file-size-bytes` (all of them with `rewrite-all`); a partition's
  candidates are rewritten when there are at least `min-input-files` of them, or more than
  one holding more than `target-file-size-bytes` together, or with `rewrite-all`;
- equality delete files are merged only with files of the same partition, the same data
  sequence number and the same equality field ids (merging across sequence numbers would
  change which data files they apply to), under the same count rule; one that applies to no
  live data file is removed.

Spark reads the chosen position delete files and keeps a row only if the planner paired its
delete file with the data file it names: rows naming files that are gone, or files the
delete never applied to, are dropped, and no row can start deleting anything. The rows are
written sorted by (`file_path`, `pos`), one file per partition per task, split near the
target size.

Sequence numbers: a position delete applies to the data files it names whose data sequence
number is at most its own. A merged file takes the largest data sequence number of the files
it replaces: every row it keeps names a data file no newer than the delete file the row came
from, hence no newer than the merged file, and since rows name files explicitly a larger
number cannot make a row apply elsewhere. It is also no newer than the starting snapshot,
so a data compaction planned before this commit does not see the merged files as new
deletes (their rows are not new). Merged equality deletes keep their common sequence number.

Groups: a partition's chosen files (and each mergeable set of equality delete files) are
bin-packed into groups of at most `max-file-group-size-bytes`. Everything is written first,
then committed: in one `replace` commit, or with `partial-progress.enabled` in up to
`partial-progress.max-commits` commits of whole groups, each validated from the planning
snapshot, so a large table's work is not all lost to one conflict. Removing a delete file
that is no longer live is a conflict (another compaction took it): without partial progress
the whole job plans again from the new state, with it only the conflicting groups'
partitions do (the other commits stand); up to `--max-attempts` plans in all, then the job
fails naming the conflicting snapshot (with partial progress: reports `failed_groups`, and
fails only when nothing could be committed).

Format v3: position delete files are legacy there (a data file's deletes belong in its one
deletion vector), so every live one in the `--where` partitions is converted, whatever its
size: per partition one group, since a data file's DV must take all of its legacy files at
once. Each data file the planner pairs them with gets a DV (`writing.deletion_vectors`) of
the rows the paired files name for it, taking the group's sequence number; the commit removes
the legacy files. Live DVs are never rewritten (there is at most one per data file already);
dangling ones, whose data file is gone, are removed like any dangling delete. With partial
progress, DVs of different commits never share a Puffin file.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from icecore.actions.binpack import bin_pack
from icecore.actions.committing import cleanup_on_failure, commit_batches, delete_quietly
from icecore.actions.file_sizes import FileSizeBounds
from icecore.catalog import Catalog
from icecore.commit.delete_rewrite import DeleteRewrite
from icecore.data.metrics import MetricsConfig
from icecore.errors import CommitConflictError
from icecore.spec.manifest import DataFile, FileContent
from icecore.spec.metadata_columns import DELETE_FILE_PATH, DELETE_FILE_POS
from icecore.spec.properties import DELETE_TARGET_FILE_SIZE_BYTES
from icecore.spec.snapshots import ICEFLOE_JOB
from icecore.spec.types import LongType, NestedField, StringType
from icecore.table import Table
from spark_jobs.common.errors import JobError
from spark_jobs.common.progress import size
from spark_jobs.common.session import SessionSource, configure, session_of
from spark_jobs.common.where import parse_where
from spark_jobs.reading.live_files import (
    LiveDelete,
    LiveState,
    PartitionKey,
    live_state,
    partition_filter,
    require_parquet,
    top_level_fields,
)
from spark_jobs.reading.parquet_files import PerFile, read_parquet
from spark_jobs.schema import quoted
from spark_jobs.specs.jobs import RewritePositionDeletesOptions
from spark_jobs.specs.results import RewritePositionDeletesResult
from spark_jobs.writing.deletion_vectors import (
    DVTarget,
    previous_deletes,
    write_deletion_vectors,
)
from spark_jobs.writing.files import RunFiles
from spark_jobs.writing.grouped_deletes import (
    GROUP,
    write_equality_deletes,
    write_position_deletes,
)

JOB = "rewrite_position_deletes"
LOG = logging.getLogger(f"icefloe.{JOB}")
_D = "_del"
# Read under other names: a table column may be called file_path or pos.
_PATH = NestedField(DELETE_FILE_PATH.field_id, "file_path", StringType())
_POS = NestedField(DELETE_FILE_POS.field_id, "pos", LongType())


@dataclass
class DeleteGroup:
    """Delete files of one partition rewritten together into that partition's new files:
    the unit of a commit with partial progress, and of re-planning after a conflict."""

    index: int
    key: PartitionKey
    files: list[LiveDelete]
    equality_ids: tuple[int, ...] | None = None  # None: position deletes
    into_dvs: bool = False  # position deletes of a v3 table: converted into DVs

    @property
    def sequence_number(self) -> int:
        """The data sequence number the group's new files take (see the module doc)."""
        return max(d.sequence_number for d in self.files)

    def describe(self) -> str:
        kind = "position" if self.equality_ids is None else f"equality {list(self.equality_ids)}"
        into = " into deletion vectors" if self.into_dvs else ""
        return f"{kind} deletes{into} of spec {self.key[0]} partition {self.key[1]!r}"


@dataclass
class _Plan:
    groups: list[DeleteGroup]
    dangling: list[LiveDelete]

    def of_kind(self, equality: bool) -> list[DeleteGroup]:
        return [g for g in self.groups if (g.equality_ids is not None) == equality]


def run(
    source: SessionSource, catalog: Catalog, options: RewritePositionDeletesOptions
) -> RewritePositionDeletesResult:
    """Plan, write and commit; after a conflict plan again from the new table state (all of
    it, or with partial progress only the partitions whose commit conflicted), at most
    `max_attempts` times."""
    started = time.monotonic()
    where = parse_where(options.where)
    progress = _Progress()
    conflicts: list[str] = []
    failed_groups: list[str] = []
    pending: set[PartitionKey] | None = None
    for attempt in range(1, options.max_attempts + 1):
        table = catalog.load_table(options.table)
        target = options.target_file_size_bytes or DELETE_TARGET_FILE_SIZE_BYTES.read(
            table.metadata.properties
        )
        sizes = FileSizeBounds.of(target, options.min_file_size_bytes, options.max_file_size_bytes)
        try:
            failed = rewrite_once(
                source, table, options, sizes, where, progress=progress, only=pending
            )
        except CommitConflictError as exc:  # without partial progress: nothing committed
            conflicts.append(str(exc))
            if attempt == options.max_attempts:
                raise JobError(
                    f"{JOB}: commit conflict on each of {attempt} attempt(s); last: {exc} "
                    f"(conflicting snapshot {exc.snapshot_id})"
                ) from exc
            continue
        if not failed:
            break
        conflicts.extend(message for _, message in failed)
        pending = {key for keys, _ in failed for key in keys}
        if attempt == options.max_attempts:
            failed_groups = [message for _, message in failed]
    if failed_groups and not progress.commits:
        raise JobError(
            f"{JOB}: every commit conflicted on each of {options.max_attempts} attempt(s); "
            f"last: {failed_groups[0]}"
        )
    return progress.result(
        options.table,
        failed_groups=failed_groups,
        attempts=attempt,
        conflicts=conflicts,
        seconds=round(time.monotonic() - started, 3),
    )


def plan(
    state: LiveState,
    options: RewritePositionDeletesOptions,
    sizes: FileSizeBounds,
    where: Any,
    only: Collection[PartitionKey] | None = None,
) -> _Plan:
    """The groups to rewrite and the dangling files to drop, in the partitions `where` may
    match (and, when re-planning after a conflict, only those in `only`)."""
    in_filter = partition_filter(state.table, where)

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
        for packed in _bin_pack(_choose(files, options, sizes), options.max_file_group_size_bytes):
            if options.rewrite_all or len(packed) > 1 or _size(packed) > sizes.max_size:
                groups.append(DeleteGroup(len(groups), key, packed))
    for (key, _, ids), files in equality.items():
        if len(files) < 2 or not (options.rewrite_all or len(files) >= options.min_input_files):
            continue
        for packed in _bin_pack(files, options.max_file_group_size_bytes):
            if len(packed) > 1:
                groups.append(DeleteGroup(len(groups), key, packed, ids))
    return _Plan(groups, dangling)


def _size(files: list[LiveDelete]) -> int:
    return sum(d.file.file_size_in_bytes for d in files)


def _choose(
    files: list[LiveDelete], options: RewritePositionDeletesOptions, sizes: FileSizeBounds
) -> list[LiveDelete]:
    if options.rewrite_all:
        return files
    candidates = [
        d
        for d in files
        if d.file.file_size_in_bytes < sizes.min_size or d.file.file_size_in_bytes > sizes.max_size
    ]
    if len(candidates) >= options.min_input_files or (
        len(candidates) > 1 and _size(candidates) > sizes.target
    ):
        return candidates
    return []


def _bin_pack(files: list[LiveDelete], max_group: int) -> list[list[LiveDelete]]:
    """Groups of at most `max_group` bytes, so that no commit (and no Spark write) holds
    more than that; members in path order."""
    packed = bin_pack(
        files, lambda d: d.file.file_size_in_bytes, lambda d: d.file.file_path, max_group
    )
    return [sorted(members, key=lambda d: d.file.file_path) for members in packed]


# The counters of a commit, summed over the run's commits.
_COUNTERS = (
    "rewritten_delete_files",
    "added_delete_files",
    "rewritten_bytes",
    "added_bytes",
    "removed_dangling_delete_files",
    "rewritten_position_deletes",
    "added_position_deletes",
    "dropped_position_deletes",
    "merged_equality_delete_files",
    "added_equality_delete_files",
    "added_deletion_vectors",
    "rewritten_groups",
)


@dataclass
class _Progress:
    """What the run's plans and commits did so far; each commit as a result of its own."""

    commits: list[RewritePositionDeletesResult] = field(default_factory=list)
    planned_groups: int = 0
    snapshot_id: int | None = None  # of the first plan
    empty_table: bool = False

    def result(
        self,
        table: str,
        *,
        failed_groups: list[str],
        attempts: int,
        conflicts: list[str],
        seconds: float,
    ) -> RewritePositionDeletesResult:
        last = self.commits[-1] if self.commits else None
        status = "empty-table" if self.empty_table else "nothing-to-rewrite"
        if last is not None:
            status = "partially-committed" if failed_groups else "committed"
        return RewritePositionDeletesResult(
            table=table,
            status=status,
            snapshot_id=self.snapshot_id if last is None else last.snapshot_id,
            sequence_number=None if last is None else last.sequence_number,
            starting_snapshot_id=None if last is None else last.starting_snapshot_id,
            **{name: sum(getattr(c, name) for c in self.commits) for name in _COUNTERS},
            planned_groups=self.planned_groups,
            commits=[c.snapshot_id for c in self.commits if c.snapshot_id is not None],
            failed_groups=failed_groups,
            attempts=attempts,
            conflicts=conflicts,
            seconds=seconds,
        )


Failed = list[tuple[list[PartitionKey], str]]


def rewrite_once(
    source: SessionSource,
    table: Table,
    options: RewritePositionDeletesOptions,
    sizes: FileSizeBounds,
    where: Any,
    *,
    progress: _Progress,
    only: Collection[PartitionKey] | None = None,
) -> Failed:
    """One plan, write and commit(s), adding what was committed to `progress`. Returns the
    batches whose commit conflicted (partial progress; without it the conflict is raised)
    as their partitions and the conflict. Spark is started only for files to write."""
    state = live_state(table)
    if state is None:
        progress.empty_table = True
        return []
    chosen = plan(state, options, sizes, where, only)
    if only is None:
        progress.planned_groups = len(chosen.groups)
        if progress.snapshot_id is None:
            progress.snapshot_id = state.snapshot.snapshot_id
    if not (chosen.groups or chosen.dangling):
        return []
    require_parquet([d.file for g in chosen.groups for d in g.files])

    LOG.info(
        "plan: %d delete files (%s) in %d groups, %d dangling delete files to drop, on %s",
        sum(len(g.files) for g in chosen.groups),
        size(sum(_size(g.files) for g in chosen.groups)),
        len(chosen.groups),
        len(chosen.dangling),
        table.name,
    )
    run = RunFiles(table.io, table.metadata, "rewrite-deletes")
    written: dict[int, list[DataFile]] = defaultdict(list)
    done: set[int] = set()  # groups committed, or whose files were already deleted
    commits_before = len(progress.commits)
    batches = commit_batches(
        chosen.groups, options.partial_progress_enabled, options.partial_progress_max_commits
    )
    with cleanup_on_failure(
        table,
        run,
        committed=lambda: len(progress.commits) > commits_before,
        uncommitted=lambda: [f for g, fs in written.items() if g not in done for f in fs],
    ):
        to_dvs = [g for g in chosen.of_kind(equality=False) if g.into_dvs]
        if to_dvs:
            spark = configure(session_of(source))
            _write_dvs(spark, run, state, groups=to_dvs, batches=batches, written=written)
        if len(to_dvs) < len(chosen.of_kind(equality=False)):
            spark = configure(session_of(source))
            _write_positions(spark, run, table, state=state, chosen=chosen, sizes=sizes)
        if chosen.of_kind(equality=True):
            _write_equalities(configure(session_of(source)), run, table, chosen=chosen)
        for f, g in run.grouped_files():
            written[g].append(f)
        failed: Failed = []
        for n, batch in enumerate(batches):
            dangling = chosen.dangling if n == 0 else []
            try:
                progress.commits.append(
                    _commit(table, state, batch, dangling=dangling, written=written)
                )
            except CommitConflictError as exc:
                if not options.partial_progress_enabled:
                    raise
                delete_quietly(table, [f for g in batch for f in written[g.index]])
                keys = [g.key for g in batch] + [d.partition_key for d in dangling]
                names = "; ".join(g.describe() for g in batch) or "dangling deletes"
                failed.append((keys, f"{names}: {exc} (conflicting snapshot {exc.snapshot_id})"))
            done.update(g.index for g in batch)
    return failed


def _commit(
    table: Table,
    state: LiveState,
    batch: list[DeleteGroup],
    *,
    dangling: list[LiveDelete],
    written: dict[int, list[DataFile]],
) -> RewritePositionDeletesResult:
    """One `replace` commit of `batch` (and the dangling files), validated from the
    planning snapshot; what it did."""
    rewrite = DeleteRewrite(table).validate_from_snapshot(state.snapshot.snapshot_id)
    inputs = [d for g in batch for d in g.files]
    for d in inputs + dangling:
        rewrite.delete_file(d.file)
    added: list[DataFile] = []
    for g in batch:
        for f in written[g.index]:
            rewrite.add_file(f, data_sequence_number=g.sequence_number)
            added.append(f)
    rewrite.validate_no_new_position_deletes(  # a second DV for a data file: corrupt
        state.data_by_path[f.referenced_data_file or ""].file for f in added if f.is_deletion_vector
    )
    rewrite.snapshot_property(ICEFLOE_JOB, JOB)
    metadata = rewrite.commit()
    snapshot = metadata.snapshot_by_id(rewrite.snapshot_id)
    positions = [d for g in batch if g.equality_ids is None for d in g.files]
    added_positions = [f for f in added if f.content == FileContent.POSITION_DELETES]
    sizes = {f.file_path: f.file_size_in_bytes for f in added}  # a Puffin file counts once
    rewritten_positions = sum(d.file.record_count for d in positions)
    added_position_deletes = sum(f.record_count for f in added_positions)
    return RewritePositionDeletesResult(
        table=table.name,
        status="committed",
        snapshot_id=snapshot.snapshot_id,
        sequence_number=snapshot.sequence_number,
        starting_snapshot_id=state.snapshot.snapshot_id,
        rewritten_delete_files=len(inputs),
        added_delete_files=len(added),
        rewritten_bytes=_size(inputs),
        added_bytes=sum(sizes.values()),
        removed_dangling_delete_files=len(dangling),
        rewritten_position_deletes=rewritten_positions,
        added_position_deletes=added_position_deletes,
        dropped_position_deletes=rewritten_positions - added_position_deletes,
        merged_equality_delete_files=len(inputs) - len(positions),
        added_equality_delete_files=len(added) - len(added_positions),
        added_deletion_vectors=sum(f.is_deletion_vector for f in added),
        rewritten_groups=len(batch),
    )


def _write_positions(
    spark: SparkSession,
    run: RunFiles,
    table: Table,
    *,
    state: LiveState,
    chosen: _Plan,
    sizes: FileSizeBounds,
) -> None:
    groups = [g for g in chosen.of_kind(equality=False) if not g.into_dvs]
    inputs = [d for g in groups for d in g.files]
    delete_id = {d.file.file_path: i for i, d in enumerate(inputs)}
    pairs = [
        (delete_id[d.file.file_path], task.file.file_path, g.index)
        for g in groups
        for d in g.files
        for task in state.applies_to(d)
    ]
    rows = read_parquet(
        spark,
        [(d.file.file_path, d.file.file_size_in_bytes) for d in inputs],
        [_PATH, _POS],
        run.io_properties,
        per_file=PerFile([(_D, T.IntegerType())], {p: (i,) for p, i in delete_id.items()}),
    )
    applicable = spark.createDataFrame(
        pairs,
        T.StructType(
            [
                T.StructField(_D, T.IntegerType()),
                T.StructField("file_path", T.StringType()),
                T.StructField(GROUP, T.IntegerType()),
            ]
        ),
    )
    kept = rows.join(F.broadcast(applicable), [_D, "file_path"]).select("file_path", "pos", GROUP)
    records = sum(d.file.record_count for d in inputs)
    max_records = max(1, int(sizes.target / (_size(inputs) / records))) if records else None
    keys = {g.index: g.key for g in groups}
    write_position_deletes(
        run, kept.distinct(), table.metadata.spec(), keys, max_records=max_records
    )


def _write_dvs(
    spark: SparkSession,
    run: RunFiles,
    state: LiveState,
    *,
    groups: list[DeleteGroup],
    batches: list[list[DeleteGroup]],
    written: dict[int, list[DataFile]],
) -> None:
    """The DVs of every data file the groups' legacy files apply to, into `written` by
    group; DVs of different commits (`batches`) go to different Puffin files. The legacy
    files each DV replaces are the group's own files, which the commit removes."""
    bucket = {g.index: n for n, batch in enumerate(batches) for g in batch}
    group_of: dict[str, int] = {}
    targets: dict[str, DVTarget] = {}
    for g in groups:
        for d in g.files:
            for task in state.applies_to(d):
                path = task.file.file_path
                group_of[path] = g.index
                previous = previous_deletes(task.deletes)
                targets[path] = DVTarget(task.file, previous, bucket[g.index])
    dvs = write_deletion_vectors(spark, run, targets, convert_legacy=True)
    for dv in dvs.added:
        written[group_of[dv.referenced_data_file or ""]].append(dv)


def _write_equalities(spark: SparkSession, run: RunFiles, table: Table, *, chosen: _Plan) -> None:
    schema = table.metadata.schema()
    by_ids: dict[tuple[int, ...], list[DeleteGroup]] = defaultdict(list)
    for g in chosen.of_kind(equality=True):
        assert g.equality_ids is not None
        by_ids[g.equality_ids].append(g)
    for n, (ids, members) in enumerate(sorted(by_ids.items())):
        fields = top_level_fields(schema, ids, members[0].files[0].file.file_path)
        files = [(g.index, d) for g in members for d in g.files]
        delete_id = {d.file.file_path: i for i, (_, d) in enumerate(files)}
        keys = read_parquet(
            spark,
            [(d.file.file_path, d.file.file_size_in_bytes) for _, d in files],
            fields,
            run.io_properties,
            per_file=PerFile([(_D, T.IntegerType())], {p: (i,) for p, i in delete_id.items()}),
        )
        group_of = spark.createDataFrame(
            [(delete_id[d.file.file_path], g) for g, d in files],
            T.StructType(
                [T.StructField(_D, T.IntegerType()), T.StructField(GROUP, T.IntegerType())]
            ),
        )
        merged = (
            keys.join(F.broadcast(group_of), _D)
            .select(
                *(
                    F.col(quoted(f.name)).alias(f.name, metadata={"parquet.field.id": f.field_id})
                    for f in fields
                ),
                GROUP,
            )
            .distinct()
        )
        write_equality_deletes(
            run,
            merged,
            table.metadata.spec(),
            key_fields=fields,
            groups={g.index: g.key for g in members},
            name=f"equality-deletes-{n}",
            metrics=MetricsConfig.for_table(table.metadata.properties, schema),
        )
