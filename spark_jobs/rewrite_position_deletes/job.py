"""Minor compaction of delete files (Iceberg's `rewrite_position_delete_files`): the Spark
execution of `icecore.actions.rewrite_position_deletes`'s plan, and its commits.

Plan (driver, icecore): per partition of the `--where` filter, the dangling delete files to
drop and the groups of delete files to merge (see the planner for which, and for the
sequence number a merged file takes).

Spark reads the chosen position delete files and keeps a row only if the planner paired its
delete file with the data file it names. The rows are written sorted by (`file_path`,
`pos`), one file per partition per task, split near the target size
(`--target-file-size-bytes`, by default the table's `write.delete.target-file-size-bytes`).
Mergeable equality delete files are read by their key columns and written back as one file
per group.

Commits: everything is written first, then committed: in one `replace` commit, or with
`partial-progress.enabled` in up to `partial-progress.max-commits` commits of whole groups,
each validated from the planning snapshot, so a large table's work is not all lost to one
conflict. Removing a delete file that is no longer live is a conflict (another compaction
took it): without partial progress the whole job plans again from the new state, with it
only the conflicting groups' partitions do (the other commits stand); up to
`--max-attempts` plans in all (`icecore.actions.committing.with_replanning`), then the job
fails naming the conflicting snapshot (with partial progress: reports `failed_groups`, and
fails only when nothing could be committed).

Format v3: each data file the planner pairs the group's legacy position delete files with
gets a DV (`writing.deletion_vectors`) of the rows the paired files name for it, taking the
group's sequence number; the commit removes the legacy files. With partial progress, DVs of
different commits never share a Puffin file.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field, replace

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from icecore.actions.committing import (
    Attempt,
    Attempted,
    FailedBatch,
    cleanup_on_failure,
    commit_batches,
    delete_quietly,
)
from icecore.actions.file_sizes import FileSizeBounds
from icecore.actions.live_files import (
    LiveDelete,
    LiveState,
    PartitionKey,
    equality_fields,
    live_state,
    require_parquet,
)
from icecore.actions.rewrite_position_deletes import (
    DeleteGroup,
    DeletePlan,
    DeletePlanRules,
    plan_delete_rewrite,
    records_per_file,
    total_bytes,
)
from icecore.actions.run_files import RunFiles
from icecore.catalog import Catalog
from icecore.commit.delete_rewrite import DeleteRewrite
from icecore.data.dv_files import DVTarget, previous_deletes
from icecore.data.metrics import MetricsConfig
from icecore.errors import CommitConflictError
from icecore.expressions import BooleanExpression
from icecore.jobs.attempts import again, run_attempts
from icecore.jobs.jobs import RewritePositionDeletesOptions
from icecore.jobs.progress import size
from icecore.jobs.results import RewritePositionDeletesResult
from icecore.jobs.where import parse_where
from icecore.spec.manifest import DataFile, FileContent
from icecore.spec.metadata_columns import DELETE_FILE_PATH, DELETE_FILE_POS
from icecore.spec.properties import DELETE_TARGET_FILE_SIZE_BYTES
from icecore.spec.snapshots import ICEFLOE_JOB
from icecore.spec.types import LongType, NestedField, StringType
from icecore.table import Table
from spark_jobs.common.session import SessionSource, configure, session_of
from spark_jobs.reading.parquet_files import PerFile, read_parquet
from spark_jobs.schema import quoted
from spark_jobs.writing.deletion_vectors import write_deletion_vectors
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


def run(
    source: SessionSource, catalog: Catalog, options: RewritePositionDeletesOptions
) -> RewritePositionDeletesResult:
    """Plan, write and commit; after a conflict plan again from the new table state (all of
    it, or with partial progress only the partitions whose commit conflicted), at most
    `max_attempts` times."""
    where = parse_where(options.where)
    progress = _Progress()

    def once(table: Table, attempt: Attempt[PartitionKey]) -> _Attempted:
        rules = plan_rules(table, options)
        return rewrite_once(
            source, table, options, rules, where, progress=progress, attempt=attempt
        )

    result = run_attempts(JOB, catalog, options, once)
    if result.failed_groups:
        return replace(result, status="partially-committed")
    return result


def plan_rules(table: Table, options: RewritePositionDeletesOptions) -> DeletePlanRules:
    """The planner's settings from the job's options; the target size defaults to the
    table's `write.delete.target-file-size-bytes`, as in Java."""
    target = options.target_file_size_bytes or DELETE_TARGET_FILE_SIZE_BYTES.read(
        table.metadata.properties
    )
    return DeletePlanRules(
        sizes=FileSizeBounds.of(target, options.min_file_size_bytes, options.max_file_size_bytes),
        min_input_files=options.min_input_files,
        max_file_group_size_bytes=options.max_file_group_size_bytes,
        rewrite_all=options.rewrite_all,
    )


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
    "rebased_rows",
    "rewritten_groups",
)


_Attempted = Attempted[RewritePositionDeletesResult, PartitionKey]


@dataclass
class _Progress:
    """What the run's plans and commits did so far; each commit as a result of its own."""

    commits: list[RewritePositionDeletesResult] = field(default_factory=list)
    planned_groups: int = 0
    snapshot_id: int | None = None  # of the first plan
    empty_table: bool = False
    merged_from: set[int] = field(default_factory=set)  # writers' commits merged into DVs

    def result(self) -> RewritePositionDeletesResult:
        """What the commits so far did (the attempts and conflicts are the loop's)."""
        last = self.commits[-1] if self.commits else None
        status = "empty-table" if self.empty_table else "nothing-to-rewrite"
        if last is not None:
            status = "committed"
        return RewritePositionDeletesResult(
            status=status,
            snapshot_id=self.snapshot_id if last is None else last.snapshot_id,
            sequence_number=None if last is None else last.sequence_number,
            starting_snapshot_id=None if last is None else last.starting_snapshot_id,
            **{name: sum(getattr(c, name) for c in self.commits) for name in _COUNTERS},
            planned_groups=self.planned_groups,
            commits=[c.snapshot_id for c in self.commits if c.snapshot_id is not None],
            rebased_commits=len(self.merged_from),
        )


def rewrite_once(
    source: SessionSource,
    table: Table,
    options: RewritePositionDeletesOptions,
    rules: DeletePlanRules,
    where: BooleanExpression | None,
    *,
    progress: _Progress,
    attempt: Attempt[PartitionKey],
) -> _Attempted:
    """One plan, write and commit(s), adding what was committed to `progress`, of the
    partitions `attempt` plans; with partial progress, the batches whose commit conflicted
    (without it the conflict is raised). Spark is started only for files to write."""
    state = live_state(table)
    if state is None:
        progress.empty_table = True
        return Attempted(progress.result())
    chosen = plan_delete_rewrite(state, rules, row_filter=where, only=attempt.only)
    if attempt.only is None:
        progress.planned_groups = len(chosen.groups)
        if progress.snapshot_id is None:
            progress.snapshot_id = state.snapshot.snapshot_id
    if not (chosen.groups or chosen.dangling):
        return Attempted(progress.result())
    require_parquet([d.file for g in chosen.groups for d in g.files])

    LOG.info(
        "plan%s: %d delete files (%s) in %d groups, %d dangling delete files to drop, on %s",
        again(attempt),
        sum(len(g.files) for g in chosen.groups),
        size(sum(g.input_bytes for g in chosen.groups)),
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
            _write_positions(spark, run, table, state=state, chosen=chosen, rules=rules)
        if chosen.of_kind(equality=True):
            _write_equalities(configure(session_of(source)), run, table, chosen=chosen)
        for f, g in run.grouped_files():
            written[g].append(f)
        failed: list[FailedBatch[PartitionKey]] = []
        for n, batch in enumerate(batches):
            dangling = chosen.dangling if n == 0 else []
            try:
                progress.commits.append(
                    _commit(
                        table, state, batch, dangling=dangling, written=written, progress=progress
                    )
                )
            except CommitConflictError as exc:
                if not options.partial_progress_enabled:
                    raise
                delete_quietly(table, [f for g in batch for f in written[g.index]])
                keys = (*(g.key for g in batch), *(d.partition_key for d in dangling))
                names = tuple(g.describe() for g in batch) or ("dangling deletes",)
                failed.append(FailedBatch(keys, names, exc))
            done.update(g.index for g in batch)
    return Attempted(progress.result(), len(progress.commits) - commits_before, failed)


def _commit(
    table: Table,
    state: LiveState,
    batch: list[DeleteGroup],
    *,
    dangling: list[LiveDelete],
    written: dict[int, list[DataFile]],
    progress: _Progress,
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
    rewrite.merge_concurrent_deletes()  # ... unless merged with ours
    rewrite.snapshot_property(ICEFLOE_JOB, JOB)
    metadata = rewrite.commit()
    merged = rewrite.merged
    progress.merged_from.update(merged.snapshot_ids)
    if merged.snapshot_ids:
        LOG.info(
            "merged %d positions that %d commits of other writers deleted meanwhile into the "
            "new deletion vectors",
            merged.rows,
            len(merged.snapshot_ids),
        )
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
        rewritten_bytes=total_bytes(inputs),
        added_bytes=sum(sizes.values()),
        removed_dangling_delete_files=len(dangling),
        rewritten_position_deletes=rewritten_positions,
        added_position_deletes=added_position_deletes,
        dropped_position_deletes=rewritten_positions - added_position_deletes,
        merged_equality_delete_files=len(inputs) - len(positions),
        added_equality_delete_files=len(added) - len(added_positions),
        added_deletion_vectors=sum(f.is_deletion_vector for f in added),
        rebased_commits=len(merged.snapshot_ids),
        rebased_rows=merged.rows,
        rewritten_groups=len(batch),
    )


def _write_positions(
    spark: SparkSession,
    run: RunFiles,
    table: Table,
    *,
    state: LiveState,
    chosen: DeletePlan,
    rules: DeletePlanRules,
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
    max_records = records_per_file(inputs, rules.sizes.target)
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


def _write_equalities(
    spark: SparkSession, run: RunFiles, table: Table, *, chosen: DeletePlan
) -> None:
    schema = table.metadata.schema()
    by_ids: dict[tuple[int, ...], list[DeleteGroup]] = defaultdict(list)
    for g in chosen.of_kind(equality=True):
        assert g.equality_ids is not None
        by_ids[g.equality_ids].append(g)
    for n, (_, members) in enumerate(sorted(by_ids.items())):
        fields = equality_fields(schema, members[0].files[0].file)
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
