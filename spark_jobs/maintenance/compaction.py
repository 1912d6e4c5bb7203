"""Major compaction (`rewrite_data_files`): plan, rewrite each group in Spark, commit.

    result = compact(spark, catalog, RewriteDataFilesOptions(table="db.events", ...))

Order of work: plan every group from one snapshot (`compaction_plan`), write the groups' live
rows (`live_rows`) below the run's own directory, many groups per Spark job
(`compaction_write`), then commit -- once for all groups,
or with partial progress once per batch of groups (at most `partial-progress.max-commits`
commits). A commit is a `RewriteFiles` validated from the planning snapshot: new data files
keep that snapshot's sequence number (`use-starting-sequence-number`, on by default) so
equality deletes committed meanwhile still apply to them; a position delete committed
meanwhile for a replaced file is a conflict naming its snapshot. A conflicting group is
re-planned from a fresh snapshot and rewritten again, up to `--max-retries` times; what still
conflicts then fails the job (or, with partial progress, is reported in `failed_groups`).
The files of a group that is not committed are deleted; nothing references them.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession

from icecore.catalog import Catalog
from icecore.errors import CommitConflictError, CommitStateUnknownError
from icecore.expressions import BooleanExpression
from icecore.expressions.parser import parse_filter
from icecore.spec.manifest import DataFile
from icecore.spec.sorting import SortOrder
from icecore.table import Table
from spark_jobs.common.errors import JobError
from spark_jobs.common.session import configure
from spark_jobs.ingestion.table_setup import sort_order as parse_sort_order
from spark_jobs.maintenance.compaction_plan import (
    TARGET_FILE_SIZE,
    CompactionOptions,
    CompactionPlan,
    FileGroup,
    plan_compaction,
)
from spark_jobs.maintenance.compaction_write import write_groups
from spark_jobs.writing.files import RunFiles

JOB_PROPERTY = "icefloe.job"


@dataclass(frozen=True)
class RewriteDataFilesOptions:
    table: str
    strategy: str = "binpack"
    sort_order: str | None = None
    target_file_size_bytes: int | None = None
    min_file_size_bytes: int | None = None
    max_file_size_bytes: int | None = None
    min_input_files: int = 5
    rewrite_all: bool = False
    delete_file_threshold: int = 2**31 - 1
    delete_ratio_threshold: float = 0.3
    max_file_group_size_bytes: int = 100 * 1024**3
    partial_progress_enabled: bool = False
    partial_progress_max_commits: int = 10
    output_spec_id: int | None = None
    where: str | None = None
    use_starting_sequence_number: bool = True
    max_retries: int = 3
    max_concurrent_file_group_rewrites: int = 5


@dataclass
class _Written:
    group: FileGroup
    files: list[DataFile]


def compact(
    spark: SparkSession,
    catalog: Catalog,
    options: RewriteDataFilesOptions,
    *,
    before_commit: Any = None,
) -> dict[str, Any]:
    """Rewrite the table's data files; the result counters. `before_commit(table)` is a
    hook tests use to commit concurrently between writing and committing."""
    started = time.monotonic()
    configure(spark)
    table = catalog.load_table(options.table)
    plan_options = _plan_options(table, options)
    row_filter = _filter(options.where)
    order = _sort_order(table, options)
    result: dict[str, Any] = {
        "table": options.table,
        "rewritten_data_files": 0,
        "added_data_files": 0,
        "rewritten_bytes": 0,
        "removed_delete_files": 0,
        "failed_groups": [],
        "commits": [],
    }
    attempts = 0
    pending: list[str] | None = None  # partition keys still to do after a conflict
    while True:
        plan = plan_compaction(table, plan_options, row_filter=row_filter)
        groups = plan.groups
        if pending is not None:
            groups = [g for g in groups if _group_key(g) in pending]
        if attempts == 0:
            result["planned_groups"] = len(groups)
            result["snapshot_id"] = plan.snapshot_id
        if not groups:
            break
        conflicts = _rewrite(
            spark,
            table,
            plan,
            groups,
            options=options,
            order=order,
            result=result,
            before_commit=before_commit,
        )
        before_commit = None  # the hook runs for the first attempt only
        if not conflicts:
            break
        attempts += 1
        if attempts > options.max_retries:
            messages = [f"group {_group_key(g)}: {msg}" for g, msg in conflicts]
            if not options.partial_progress_enabled:
                raise CommitConflictError(
                    f"{options.table}: compaction gave up after {options.max_retries} "
                    f"retries: {messages[0]}"
                )
            result["failed_groups"].extend(messages)
            break
        result.setdefault("retries", 0)
        result["retries"] += 1
        pending = [_group_key(g) for g, _ in conflicts]
        table.refresh()
    result["seconds"] = round(time.monotonic() - started, 3)
    return result


def _group_key(group: FileGroup) -> str:
    return f"spec {group.spec_id} partition {group.partition!r}"


def _plan_options(table: Table, options: RewriteDataFilesOptions) -> CompactionOptions:
    target = options.target_file_size_bytes or table.metadata.property_as_int(*TARGET_FILE_SIZE)
    if options.strategy not in ("binpack", "sort"):
        raise JobError(f"--strategy must be binpack or sort, got {options.strategy!r}")
    spec_id = options.output_spec_id
    if spec_id is not None and spec_id not in table.metadata.specs_by_id():
        raise JobError(f"--output-spec-id {options.output_spec_id}: no such partition spec")
    if options.partial_progress_max_commits < 1:
        raise JobError("--partial-progress-max-commits must be at least 1")
    planned = CompactionOptions(
        target_file_size_bytes=target,
        min_file_size_bytes=options.min_file_size_bytes,
        max_file_size_bytes=options.max_file_size_bytes,
        min_input_files=options.min_input_files,
        rewrite_all=options.rewrite_all,
        delete_file_threshold=options.delete_file_threshold,
        delete_ratio_threshold=options.delete_ratio_threshold,
        max_file_group_size_bytes=options.max_file_group_size_bytes,
        output_spec_id=options.output_spec_id,
    )
    problems = planned.check()
    if problems:
        raise JobError("; ".join(problems))
    return planned


def _filter(where: str | None) -> BooleanExpression | None:
    if not where:
        return None
    try:
        return parse_filter(where)
    except Exception as exc:
        raise JobError(f"--where {where!r}: {exc}") from exc


def _sort_order(table: Table, options: RewriteDataFilesOptions) -> SortOrder | None:
    if options.strategy != "sort":
        if options.sort_order:
            raise JobError("--sort-order needs --strategy sort")
        return None
    if options.sort_order:
        return parse_sort_order(options.sort_order, table.metadata.schema())
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
    order: SortOrder | None,
    result: dict[str, Any],
    before_commit: Any,
) -> list[tuple[FileGroup, str]]:
    """Write and commit `groups`; the groups that conflicted, with the conflict."""
    metadata = table.metadata
    run = RunFiles(spark, table.io, metadata, "rewrite-data-files")
    conflicts: list[tuple[FileGroup, str]] = []
    committed: list[str] = []  # data files replaced by earlier commits of this run
    written: list[_Written] = []
    done: set[int] = set()  # groups committed or already cleaned up
    try:
        spec_id = options.output_spec_id
        if spec_id is None:
            spec_id = metadata.default_spec_id
        files = write_groups(
            spark,
            table,
            plan,
            groups,
            run=run,
            sizes=_plan_options(table, options),
            spec_id=spec_id,
            order=order,
            concurrency=options.max_concurrent_file_group_rewrites,
        )
        written = [_Written(g, files[g.index]) for g in groups]
        if before_commit is not None:
            before_commit(table)
        for batch in _batches(written, options):
            try:
                _commit(table, plan, batch, committed=committed, options=options, result=result)
            except CommitConflictError as exc:
                conflicts.extend((w.group, str(exc)) for w in batch)
                _delete(table, [f for w in batch for f in w.files])
            done.update(w.group.index for w in batch)
    except CommitStateUnknownError:
        raise  # the files may be committed: never delete them
    except BaseException:
        if not committed:
            run.discard()
        else:  # keep what earlier commits reference
            _delete(table, [f for w in written if w.group.index not in done for f in w.files])
        raise
    return conflicts


def _batches(written: list[_Written], options: RewriteDataFilesOptions) -> list[list[_Written]]:
    if not options.partial_progress_enabled:
        return [written] if written else []
    count = min(len(written), options.partial_progress_max_commits)
    size = math.ceil(len(written) / count) if count else 0
    return [written[i : i + size] for i in range(0, len(written), size)] if size else []


def _commit(
    table: Table,
    plan: CompactionPlan,
    batch: list[_Written],
    *,
    committed: list[str],
    options: RewriteDataFilesOptions,
    result: dict[str, Any],
) -> None:
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
    rewrite.snapshot_property(JOB_PROPERTY, "rewrite_data_files")
    rewrite.commit()
    committed.extend(f.file_path for f in replaced)
    result["rewritten_data_files"] += len(replaced)
    result["added_data_files"] += len(added)
    result["rewritten_bytes"] += sum(f.file_size_in_bytes for f in replaced)
    result["removed_delete_files"] += len(removed_deletes)
    result["commits"].append(rewrite.snapshot_id)


def _delete(table: Table, files: Sequence[DataFile]) -> None:
    for f in files:
        # Best effort: a file nothing references is only an orphan.
        with contextlib.suppress(Exception):
            table.io.delete(f.file_path, missing_ok=True)
