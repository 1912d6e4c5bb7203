"""Major compaction (`rewrite_data_files`): plan, rewrite each group in Spark, commit.

    result = run(spark, catalog, RewriteDataFilesOptions(table="db.events", ...))

Order of work: plan every group from one snapshot (`icecore.actions.rewrite_data_files`),
write the groups' live rows below the run's own directory, many groups per Spark job
(`.write`), then commit -- once for all groups, or with partial progress once per batch of
groups (at most `partial-progress.max-commits` commits). A commit is a `RewriteFiles`
validated from the planning snapshot: new data files keep that snapshot's sequence number
(`use-starting-sequence-number`, on by default) so equality deletes committed meanwhile
still apply to them; position deletes and DVs committed meanwhile for a replaced file are
rebased onto the new files (`rebase-concurrent-deletes`, on by default: the tasks report
where each input row went, `icecore.commit.rebase`), or, switched off, a conflict naming
the snapshot. A change of the table's schema or default spec meanwhile is a conflict too.
After a conflict the job plans again from the new table state -- all
of it, or with partial progress only the conflicting groups' partitions, the other commits
standing -- up to `--max-attempts` plans in all (`icecore.actions.committing.
with_replanning`); what still conflicts then fails the job (with partial progress: is
reported in `failed_groups`, and fails the job only when nothing could be committed).
The files of a group that is not committed are deleted; nothing references them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from icecore.actions.committing import (
    Attempt,
    Attempted,
    BeforeCommit,
    FailedBatch,
    cleanup_on_failure,
    commit_batches,
    delete_quietly,
)
from icecore.actions.file_sizes import FileSizeBounds
from icecore.actions.live_files import PartitionKey
from icecore.actions.rebased_deletes import PositionDeleteWriter
from icecore.actions.rewrite_data_files import (
    CompactionPlan,
    FileGroup,
    PlanRules,
    plan_compaction,
)
from icecore.actions.run_files import RunFiles
from icecore.catalog import Catalog
from icecore.commit.rebase import Rebased
from icecore.data.position_maps import PositionMap
from icecore.errors import CommitConflictError, ValidationError
from icecore.jobs.attempts import again, run_attempts
from icecore.jobs.errors import JobError
from icecore.jobs.jobs import RewriteDataFilesOptions
from icecore.jobs.progress import size
from icecore.jobs.results import RewriteDataFilesResult
from icecore.jobs.where import parse_where
from icecore.spec.manifest import DataFile, content_key
from icecore.spec.properties import WRITE_TARGET_FILE_SIZE_BYTES
from icecore.spec.snapshots import ICEFLOE_JOB
from icecore.spec.sorting import SortOrder
from icecore.spec.terms import parse_sort_order
from icecore.table import Table
from spark_jobs.common.session import SessionSource, configure, session_of
from spark_jobs.rewrite_data_files.write import write_groups
from spark_jobs.schema import check_spark_readable

JOB = "rewrite_data_files"
LOG = logging.getLogger(f"icefloe.{JOB}")


@dataclass
class _Written:
    group: FileGroup
    files: list[DataFile]


@dataclass(frozen=True)
class _Committed:
    """What one commit did."""

    snapshot_id: int
    replaced_files: int
    replaced_bytes: int
    added_files: int
    removed_deletes: int
    rebased: Rebased


@dataclass
class _Progress:
    """What the run's plans and commits did so far."""

    commits: list[_Committed] = field(default_factory=list)
    planned: tuple[int, int | None] | None = None  # the first plan's groups and snapshot

    def result(self) -> RewriteDataFilesResult:
        """What the commits so far did (the attempts and conflicts are the loop's)."""
        groups, snapshot_id = self.planned or (0, None)
        return RewriteDataFilesResult(
            planned_groups=groups,
            snapshot_id=snapshot_id,
            rewritten_data_files=sum(c.replaced_files for c in self.commits),
            added_data_files=sum(c.added_files for c in self.commits),
            rewritten_bytes=sum(c.replaced_bytes for c in self.commits),
            removed_delete_files=sum(c.removed_deletes for c in self.commits),
            commits=[c.snapshot_id for c in self.commits],
            rebased_commits=len({s for c in self.commits for s in c.rebased.snapshot_ids}),
            rebased_rows=sum(c.rebased.rows for c in self.commits),
        )


_Attempted = Attempted[RewriteDataFilesResult, PartitionKey]


@dataclass(frozen=True)
class _Layout:
    """What the new files were written for, and where their rows came from: the schema, the
    spec when it was the table's default, the position map (None: rebase switched off)."""

    schema_id: int
    spec_id: int | None
    positions: PositionMap | None


def run(
    source: SessionSource,
    catalog: Catalog,
    options: RewriteDataFilesOptions,
    *,
    before_commit: BeforeCommit | None = None,
) -> RewriteDataFilesResult:
    """Rewrite the table's data files; the result counters. `before_commit(table)` runs
    between writing and committing, in the first attempt only (tests commit concurrently
    there)."""
    row_filter = parse_where(options.where)
    progress = _Progress()

    def once(table: Table, attempt: Attempt[PartitionKey]) -> _Attempted:
        check_spark_readable(table.metadata.schema().fields)  # every column is rewritten
        rules = _plan_rules(table, options)
        order = _sort_order(table, options)
        plan = plan_compaction(table, rules, row_filter=row_filter)
        groups = plan.groups
        if attempt.only is not None:
            groups = [g for g in groups if _partition(g) in attempt.only]
        if progress.planned is None:
            progress.planned = (len(groups), plan.snapshot_id)
        _log_plan(table, groups, attempt)
        if not groups:
            return Attempted(progress.result())
        return _rewrite(
            configure(session_of(source)),  # started only for groups to rewrite
            table,
            plan,
            groups,
            options=options,
            rules=rules,
            order=order,
            progress=progress,
            before_commit=before_commit if attempt.number == 1 else None,
        )

    return run_attempts(JOB, catalog, options, once)


def _partition(group: FileGroup) -> PartitionKey:
    return group.spec_id, group.partition


def _describe(group: FileGroup) -> str:
    return f"group of spec {group.spec_id} partition {group.partition!r}"


def _log_plan(table: Table, groups: list[FileGroup], attempt: Attempt[PartitionKey]) -> None:
    files = sum(len(g.tasks) for g in groups)
    deletes = len({content_key(d) for g in groups for d in g.delete_files})
    LOG.info(
        "plan%s: %d data files (%s) in %d groups, %d delete files to apply, on %s",
        again(attempt),
        files,
        size(sum(g.input_bytes for g in groups)),
        len(groups),
        deletes,
        table.name,
    )


def _plan_rules(table: Table, options: RewriteDataFilesOptions) -> PlanRules:
    target = options.target_file_size_bytes or WRITE_TARGET_FILE_SIZE_BYTES.read(
        table.metadata.properties
    )
    spec_id = options.output_spec_id
    if spec_id is not None and spec_id not in table.metadata.specs_by_id():
        raise JobError(f"--output-spec-id {options.output_spec_id}: no such partition spec")
    sizes = FileSizeBounds.of(target, options.min_file_size_bytes, options.max_file_size_bytes)
    output = table.metadata.default_spec_id if spec_id is None else spec_id
    return plan_rules(options, sizes, output)


def plan_rules(
    options: RewriteDataFilesOptions, sizes: FileSizeBounds, output_spec_id: int
) -> PlanRules:
    """The planner's settings from the job's options."""
    return PlanRules(
        sizes=sizes,
        output_spec_id=output_spec_id,
        max_file_group_size_bytes=options.max_file_group_size_bytes,
        min_input_files=options.min_input_files,
        delete_file_threshold=options.delete_file_threshold,
        delete_ratio_threshold=options.delete_ratio_threshold,
        rewrite_all=options.rewrite_all,
    )


def _sort_order(table: Table, options: RewriteDataFilesOptions) -> SortOrder | None:
    if options.strategy != "sort":
        return None
    if options.sort_order:
        try:
            return parse_sort_order(options.sort_order, table.metadata.schema())
        except ValidationError as exc:
            raise JobError(f"--sort-order {options.sort_order!r}: {exc}") from None
    order = table.metadata.sort_order()
    if order.is_unsorted:
        raise JobError(f"{table.name} has no sort order: give --sort-order with --strategy sort")
    return order


def _rewrite(
    spark: SparkSession,
    table: Table,
    plan: CompactionPlan,
    groups: list[FileGroup],
    *,
    options: RewriteDataFilesOptions,
    rules: PlanRules,
    order: SortOrder | None,
    progress: _Progress,
    before_commit: BeforeCommit | None,
) -> _Attempted:
    """Write and commit `groups`, adding each commit to `progress`; with partial progress,
    the batches whose commit conflicted (without it the conflict is raised)."""
    run = RunFiles(table.io, table.metadata, "rewrite-data-files")
    failed: list[FailedBatch[PartitionKey]] = []
    committed: list[str] = []  # data files replaced by earlier commits of this attempt
    written: list[_Written] = []
    done: set[int] = set()  # groups committed or already cleaned up
    try:
        with cleanup_on_failure(
            table,
            run,
            committed=lambda: bool(committed),
            uncommitted=lambda: [f for w in written if w.group.index not in done for f in w.files],
        ):
            files, positions = write_groups(
                spark,
                table,
                plan,
                groups,
                run=run,
                sizes=rules.sizes,
                spec_id=rules.output_spec_id,
                order=order,
                concurrency=options.max_concurrent_file_group_rewrites,
            )
            written = [_Written(g, files[g.index]) for g in groups]
            layout = _Layout(
                table.metadata.current_schema_id,
                rules.output_spec_id
                if rules.output_spec_id == table.metadata.default_spec_id
                else None,
                positions if options.rebase_concurrent_deletes else None,
            )
            if before_commit is not None:
                before_commit(table)
            batches = commit_batches(
                written, options.partial_progress_enabled, options.partial_progress_max_commits
            )
            commits_before = len(progress.commits)
            for batch in batches:
                try:
                    progress.commits.append(
                        _commit(table, plan, batch, committed=committed, options=options, at=layout)
                    )
                except CommitConflictError as exc:
                    if not options.partial_progress_enabled:
                        raise
                    delete_quietly(table, [f for w in batch for f in w.files])
                    failed.append(
                        FailedBatch(
                            tuple(_partition(w.group) for w in batch),
                            tuple(_describe(w.group) for w in batch),
                            exc,
                        )
                    )
                done.update(w.group.index for w in batch)
    finally:
        run.drop_scratch()
    return Attempted(progress.result(), len(progress.commits) - commits_before, failed)


def _commit(
    table: Table,
    plan: CompactionPlan,
    batch: list[_Written],
    *,
    committed: list[str],
    options: RewriteDataFilesOptions,
    at: _Layout,
) -> _Committed:
    table.refresh()
    groups = [w.group for w in batch]
    replaced = [f for g in groups for f in g.data_files]
    added = [f for w in batch for f in w.files]
    removed_deletes = plan.removable_deletes(groups, committed)
    rewrite = table.new_rewrite()
    assert plan.snapshot_id is not None
    rewrite.validate_from_snapshot(plan.snapshot_id)
    rewrite.rewrite_files(replaced, added, removed_deletes)
    if options.use_starting_sequence_number:
        rewrite.use_starting_sequence_number()
    rewrite.validate_written_with(at.schema_id, at.spec_id)
    if at.positions is not None:
        v2 = table.metadata.format_version < 3
        rewrite.rebase_concurrent_deletes(at.positions, PositionDeleteWriter(table) if v2 else None)
    rewrite.snapshot_property(ICEFLOE_JOB, JOB)
    rewrite.commit()
    committed.extend(f.file_path for f in replaced)
    LOG.info(
        "committed %d of the groups: %d data files replaced by %d, %d delete files dropped "
        "(snapshot %s)",
        len(batch),
        len(replaced),
        len(added),
        len(removed_deletes),
        rewrite.snapshot_id,
    )
    rebased = rewrite.rebased
    if rebased.snapshot_ids:
        LOG.info(
            "rebased %d rows that %d commits of other writers deleted meanwhile onto the new "
            "files (snapshots %s)",
            rebased.rows,
            len(rebased.snapshot_ids),
            ", ".join(str(s) for s in sorted(rebased.snapshot_ids)),
        )
    return _Committed(
        snapshot_id=rewrite.snapshot_id,
        replaced_files=len(replaced),
        replaced_bytes=sum(f.file_size_in_bytes for f in replaced),
        added_files=len(added),
        removed_deletes=len(removed_deletes),
        rebased=rebased,
    )
