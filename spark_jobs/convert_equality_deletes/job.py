"""Replacing every live equality delete with position deletes, in one `replace` commit.

Plan (driver, icecore): the live files of the current snapshot, and from the planner, for
every equality delete file E, the data files it applies to (data sequence number below E's,
same partition, or any partition for a delete of an unpartitioned spec).

Matching, in Python (`in_tasks`, up to `--task-max-keys` delete keys, which every task
holds): each data file's key columns are read and looked up in the keys of the equality
deletes the planner paired it with, and the positions found are written by the same task.
When the data files' key columns are at most `--driver-max-bytes`, the bins run on the
driver's threads and the job never starts Spark (see `spark_jobs.common.session`); otherwise
each bin is a Spark task.

Matching, in Spark (more delete keys than a task should hold): per set of equality field ids,
read only the key columns of the delete files and of
the data files they apply to (by field id; the data rows with `_metadata.row_index`), and
join them on the keys (null matches null in an equality delete), keeping the rows where the
delete's sequence number is higher and it applies to the data file's partition (see
`in_spark`). The (file, position) pairs are written as position delete files, sorted by
(`file_path`, `pos`), one per data file partition and task, by pyarrow in the writing tasks,
which also describe them.

Sequence numbers: a position delete applies to the data files named in it whose data
sequence number is at most its own. Each new file takes the largest data sequence number of
the equality deletes that applied to its partition's data files: every data file it names
has a lower one (so it applies to all of them), it is no newer than the starting snapshot
(so a compaction planned before this commit does not see it as a new delete: the rows it
names were already deleted, by the equality delete), and the positions it names are in
files that exist, so it can never apply to anything else.

Conflicts: the commit requires every data file it names to still be live (not replaced or
overwritten meanwhile: a compaction that kept an older sequence number could have carried
rows the removed equality delete still deleted into a new file), and removing an equality
delete that is no longer live is a conflict as well. New data committed meanwhile does not
matter: the equality deletes never applied to it.

Format v3: the matches become deletion vectors instead (`writing.deletion_vectors`), one per
data file that has any, merged with the position deletes that apply to the file in the
starting snapshot (its DV, or legacy position delete files of a table upgraded from v2),
which a DV supersedes. The same commit removes the DVs they replace and the legacy files
scoped to those data files; it fails if one of them is gone meanwhile, or if another writer
added a position delete or DV for one of the data files (two DVs for one data file is a
corrupt table). Each DV takes its partition's sequence number, as above.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from icecore.actions.committing import Attempted, cleanup_on_failure
from icecore.actions.live_files import (
    LiveDelete,
    LiveState,
    PartitionKey,
    equality_fields,
    live_state,
    require_parquet,
)
from icecore.actions.run_files import RunFiles
from icecore.catalog import Catalog
from icecore.commit.delete_rewrite import DeleteRewrite
from icecore.commit.rebase import Rebased
from icecore.data.dv_files import DVTarget, WrittenDVs, previous_deletes
from icecore.data.equality_conversion import Target, key_bytes
from icecore.jobs.attempts import run_attempts
from icecore.jobs.errors import JobError
from icecore.jobs.jobs import ConvertEqualityDeletesOptions
from icecore.jobs.progress import size
from icecore.jobs.results import ConvertEqualityDeletesResult
from icecore.spec.manifest import DataFile, FileContent
from icecore.spec.snapshots import ICEFLOE_JOB, Snapshot
from icecore.spec.types import NestedField
from icecore.table import Table
from spark_jobs.common.session import SessionSource, configure, session_of
from spark_jobs.convert_equality_deletes.in_tasks import Work, convert_in_tasks
from spark_jobs.writing.deletion_vectors import write_deletion_vectors
from spark_jobs.writing.grouped_deletes import write_position_deletes

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

JOB = "convert_equality_deletes"
LOG = logging.getLogger(f"icefloe.{JOB}")


def run(
    spark: SessionSource, catalog: Catalog, options: ConvertEqualityDeletesOptions
) -> ConvertEqualityDeletesResult:
    return run_attempts(
        JOB, catalog, options, lambda table, _: Attempted(convert_once(spark, table, options))
    )


def convert_once(
    spark: SessionSource, table: Table, options: ConvertEqualityDeletesOptions
) -> ConvertEqualityDeletesResult:
    """One attempt: plan on the current snapshot, write, commit (CommitConflictError when
    something committed meanwhile forbids it)."""
    state = live_state(table)
    if state is None:
        return ConvertEqualityDeletesResult(status="empty-table")
    equality = state.of_content(FileContent.EQUALITY_DELETES)
    if not equality:
        return ConvertEqualityDeletesResult(
            status="no-equality-deletes", snapshot_id=state.snapshot.snapshot_id
        )
    used = [d for d in equality if state.applies_to(d)]
    targets = sorted({t.file.file_path for d in used for t in state.applies_to(d)})
    require_parquet([d.file for d in used] + [state.data_by_path[p].file for p in targets])

    groups, group_of_data, group_seq = _groups(state, used)
    LOG.info(
        "plan: %d equality delete files (%d keys) apply to %d data files (%s) of %s",
        len(equality),
        sum(d.file.record_count for d in equality),
        len(targets),
        size(sum(state.data_by_path[p].file.file_size_in_bytes for p in targets)),
        table.name,
    )
    files = RunFiles(table.io, table.metadata, "convert-eq-deletes")
    dvs = WrittenDVs([], {})
    matched_in = None
    with cleanup_on_failure(table, files, committed=lambda: False, uncommitted=list):
        if used and sum(d.file.record_count for d in used) <= options.task_max_keys:
            work = _work(table, state, used, run=files, groups=groups, group_of=group_of_data)
            ids = [f.field_id for f in work.key_fields]
            read = sum(key_bytes(t.file, ids) for t in work.targets)
            in_driver = read <= options.driver_max_bytes
            dvs = convert_in_tasks(work, spark=None if in_driver else _started(spark))
            files.track(f.file_path for f in dvs.added)
            matched_in = "driver" if in_driver else "spark-tasks"
        elif used:
            from spark_jobs.convert_equality_deletes.in_spark import matches  # noqa: PLC0415 (Spark only)

            matched_in = "spark-join"
            session = _started(spark)
            positions = matches(session, table, state, used, group_of_data)
            if table.metadata.format_version >= 3:
                dv_targets = {
                    p: DVTarget(t.file, previous_deletes(t.deletes))
                    for p in targets
                    for t in [state.data_by_path[p]]
                }
                dvs = write_deletion_vectors(session, files, dv_targets, positions)
            else:
                write_position_deletes(files, positions, table.metadata.spec(), groups)
        added = files.grouped_files()
        added += [(dv, group_of_data[dv.referenced_data_file or ""]) for dv in dvs.added]
        snapshot, merged = _commit(
            table,
            state,
            equality=equality,
            added=added,
            removed=dvs.replaced(),
            group_seq=group_seq,
            targets=targets,
        )
    parquet = [f for f, _ in added if not f.is_deletion_vector]
    replaced = dvs.replaced()
    replaced_dvs = sum(f.is_deletion_vector for f in replaced)
    puffins = {f.file_path: f.file_size_in_bytes for f in dvs.added}  # shared: counted once
    return ConvertEqualityDeletesResult(
        status="committed",
        snapshot_id=snapshot.snapshot_id,
        sequence_number=snapshot.sequence_number,
        starting_snapshot_id=state.snapshot.snapshot_id,
        matched_in=matched_in,
        removed_equality_delete_files=len(equality),
        removed_equality_deletes=sum(d.file.record_count for d in equality),
        unused_equality_delete_files=len(equality) - len(used),
        added_position_delete_files=len(parquet),
        added_position_deletes=sum(f.record_count for f in parquet),
        added_deletion_vectors=len(dvs.added),
        deletion_vector_positions=sum(f.record_count for f in dvs.added),
        replaced_deletion_vectors=replaced_dvs,
        replaced_position_delete_files=len(replaced) - replaced_dvs,
        rebased_commits=len(merged.snapshot_ids),
        rebased_rows=merged.rows,
        added_bytes=sum(f.file_size_in_bytes for f in parquet) + sum(puffins.values()),
        data_files_scanned=len(targets),
        data_bytes_scanned=sum(state.data_by_path[p].file.file_size_in_bytes for p in targets),
    )


def _started(spark: SessionSource) -> SparkSession:
    return configure(session_of(spark))


def _work(
    table: Table,
    state: LiveState,
    used: list[LiveDelete],
    *,
    run: RunFiles,
    groups: Mapping[int, PartitionKey],
    group_of: Mapping[str, int],
) -> Work:
    """The in-task matching of `used`: its key columns (refused when one cannot be read) and
    every target with the equality deletes the planner paired it with."""
    schema = table.metadata.schema()
    key_fields: dict[int, NestedField] = {}
    for d in used:
        for f in equality_fields(schema, d.file):
            key_fields[f.field_id] = f
    v3 = table.metadata.format_version >= 3
    targets = sorted({t.file.file_path for d in used for t in state.applies_to(d)})
    return Work(
        run=run,
        key_fields=[key_fields[i] for i in sorted(key_fields)],
        targets=[
            Target(
                file=task.file,
                sequence_number=task.data_sequence_number,
                group=group_of[path],
                equality=tuple(
                    d for d in task.deletes if d.content == FileContent.EQUALITY_DELETES
                ),
                previous=previous_deletes(task.deletes) if v3 else (),
            )
            for path in targets
            for task in [state.data_by_path[path]]
        ],
        groups=groups,
        deletion_vectors=v3,
    )


def _groups(
    state: LiveState, used: list[LiveDelete]
) -> tuple[dict[int, PartitionKey], dict[str, int], dict[int, int]]:
    """Group ids per data file partition; per group the largest sequence number of the
    equality deletes applying to its files."""
    ids: dict[PartitionKey, int] = {}
    group_of_data: dict[str, int] = {}
    group_seq: dict[int, int] = {}
    for d in used:
        for task in state.applies_to(d):
            key = (task.file.spec_id, tuple(task.file.partition))
            g = ids.setdefault(key, len(ids))
            group_of_data[task.file.file_path] = g
            group_seq[g] = max(group_seq.get(g, 0), d.sequence_number)
            if task.data_sequence_number >= d.sequence_number:  # the planner's contract
                raise JobError(
                    f"planner paired equality delete {d.file.file_path} (seq {d.sequence_number}) "
                    f"with newer data file {task.file.file_path} (seq {task.data_sequence_number})"
                )
    return {g: key for key, g in ids.items()}, group_of_data, group_seq


def _commit(
    table: Table,
    state: LiveState,
    *,
    equality: list[LiveDelete],
    added: list[tuple[DataFile, int]],
    removed: list[DataFile],
    group_seq: Mapping[int, int],
    targets: list[str],
) -> tuple[Snapshot, Rebased]:
    rewrite = DeleteRewrite(table).validate_from_snapshot(state.snapshot.snapshot_id)
    for d in equality:
        rewrite.delete_file(d.file)
    for f in removed:  # what the new DVs replace
        rewrite.delete_file(f)
    for f, g in added:
        rewrite.add_file(f, data_sequence_number=group_seq[g])
    rewrite.validate_data_files_exist(targets)
    rewrite.validate_no_new_position_deletes(
        state.data_by_path[f.referenced_data_file or ""].file
        for f, _ in added
        if f.is_deletion_vector
    )
    rewrite.merge_concurrent_deletes()  # a writer's DV meanwhile: one DV holding both
    rewrite.snapshot_property(ICEFLOE_JOB, JOB)
    snapshot = rewrite.commit().snapshot_by_id(rewrite.snapshot_id)
    if rewrite.merged.snapshot_ids:
        LOG.info(
            "merged %d positions that %d commits of other writers deleted meanwhile into the "
            "new deletion vectors",
            rewrite.merged.rows,
            len(rewrite.merged.snapshot_ids),
        )
    return snapshot, rewrite.merged
