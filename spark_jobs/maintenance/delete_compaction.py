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

One `replace` commit; removing a delete file that is no longer live is a conflict (another
compaction took it), retried from a fresh plan up to `--max-attempts`.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from icecore.catalog import Catalog
from icecore.errors import CommitStateUnknownError
from icecore.expression_parser import parse_filter
from icecore.manifest import FileContent
from icecore.table import Table
from icecore.types import LongType, NestedField, StringType
from spark_jobs.common.errors import JobError
from spark_jobs.common.session import configure
from spark_jobs.maintenance.delete_rewrite import DeleteRewrite, with_replanning
from spark_jobs.maintenance.file_ids import read_with_file_id
from spark_jobs.maintenance.grouped_deletes import (
    GROUP,
    finish,
    write_equality_deletes,
    write_position_deletes,
)
from spark_jobs.maintenance.live_files import (
    LiveDelete,
    LiveState,
    PartitionKey,
    live_state,
    partition_filter,
    require_parquet,
    top_level_fields,
)
from spark_jobs.writing.files import DELETE_FILE_PATH, DELETE_POS, RunFiles
from spark_jobs.writing.metrics import MetricsConfig

JOB = "rewrite_position_deletes"
JOB_PROPERTY = "icefloe.job"
MB = 1024 * 1024
_D = "_del"
# Read under other names: a table column may be called file_path or pos.
_PATH = NestedField(DELETE_FILE_PATH.field_id, "file_path", StringType())
_POS = NestedField(DELETE_POS.field_id, "pos", LongType())


@dataclass(frozen=True)
class RewriteDeletesOptions:
    table: str
    target_file_size_bytes: int = 64 * MB
    min_file_size_bytes: int | None = None  # default 75% of the target, as Iceberg
    max_file_size_bytes: int | None = None  # default 180% of the target, as Iceberg
    min_input_files: int = 5
    rewrite_all: bool = False
    where: str | None = None
    max_attempts: int = 3

    def __post_init__(self) -> None:
        if self.target_file_size_bytes <= 0:
            raise JobError("--target-file-size-bytes must be positive")
        if self.min_input_files < 1:
            raise JobError("--min-input-files must be at least 1")

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


def rewrite_position_deletes(
    spark: SparkSession, catalog: Catalog, options: RewriteDeletesOptions
) -> dict[str, Any]:
    started = time.monotonic()
    configure(spark)
    where = parse_filter(options.where) if options.where else None

    def attempt() -> dict[str, Any]:
        table = catalog.load_table(options.table)
        return rewrite_once(spark, table, options, where)

    result = with_replanning(JOB, attempt, options.max_attempts)
    result["seconds"] = round(time.monotonic() - started, 3)
    return {"table": options.table, **result}


@dataclass
class _Plan:
    position_groups: dict[PartitionKey, list[LiveDelete]]
    dangling: list[LiveDelete]
    equality_groups: dict[tuple[PartitionKey, int, tuple[int, ...]], list[LiveDelete]]


def plan(state: LiveState, options: RewriteDeletesOptions, where: Any) -> _Plan:
    keep = partition_filter(state.table, where)
    dangling: list[LiveDelete] = []
    by_partition: dict[PartitionKey, list[LiveDelete]] = defaultdict(list)
    for d in state.of_content(FileContent.POSITION_DELETES):
        if not keep(d.partition_key):
            continue
        if not state.applies.get(d.file.file_path):
            dangling.append(d)
        else:
            by_partition[d.partition_key].append(d)
    position_groups = {}
    for key, files in by_partition.items():
        chosen = _choose(files, options)
        if chosen:
            position_groups[key] = chosen
    equality: dict[tuple[PartitionKey, int, tuple[int, ...]], list[LiveDelete]] = defaultdict(list)
    for d in state.of_content(FileContent.EQUALITY_DELETES):
        if not keep(d.partition_key):
            continue
        if not state.applies.get(d.file.file_path):
            dangling.append(d)
        else:
            equality[(d.partition_key, d.sequence_number, tuple(d.file.equality_ids or ()))].append(
                d
            )
    equality_groups = {
        k: v
        for k, v in equality.items()
        if len(v) > 1 and (options.rewrite_all or len(v) >= options.min_input_files)
    }
    return _Plan(position_groups, dangling, equality_groups)


def _choose(files: list[LiveDelete], options: RewriteDeletesOptions) -> list[LiveDelete]:
    if options.rewrite_all:
        return files
    candidates = [
        d
        for d in files
        if d.file.file_size_in_bytes < options.min_size
        or d.file.file_size_in_bytes > options.max_size
    ]
    size = sum(d.file.file_size_in_bytes for d in candidates)
    if len(candidates) >= options.min_input_files or (
        len(candidates) > 1 and size > options.target_file_size_bytes
    ):
        return candidates
    return []


def _counters() -> dict[str, Any]:
    return {
        "rewritten_delete_files": 0,
        "added_delete_files": 0,
        "rewritten_bytes": 0,
        "added_bytes": 0,
        "removed_dangling_delete_files": 0,
        "rewritten_position_deletes": 0,
        "added_position_deletes": 0,
        "dropped_position_deletes": 0,
        "merged_equality_delete_files": 0,
        "added_equality_delete_files": 0,
        "rewritten_groups": 0,
    }


def rewrite_once(
    spark: SparkSession, table: Table, options: RewriteDeletesOptions, where: Any
) -> dict[str, Any]:
    result = _counters()
    state = live_state(table)
    if state is None:
        return {**result, "status": "empty-table"}
    chosen = plan(state, options, where)
    if not (chosen.position_groups or chosen.dangling or chosen.equality_groups):
        return {**result, "status": "nothing-to-rewrite", "snapshot_id": state.snapshot.snapshot_id}
    position_inputs = [d for files in chosen.position_groups.values() for d in files]
    equality_inputs = [d for files in chosen.equality_groups.values() for d in files]
    require_parquet([d.file for d in position_inputs + equality_inputs])

    groups: dict[int, PartitionKey] = {}
    group_seq: dict[int, int] = {}
    run = RunFiles(spark, table.io, table.metadata, "rewrite-deletes")
    try:
        if position_inputs:
            _write_positions(
                spark,
                run,
                table,
                state=state,
                chosen=chosen,
                groups=groups,
                group_seq=group_seq,
                options=options,
            )
        if equality_inputs:
            _write_equalities(spark, run, table, chosen=chosen, groups=groups, group_seq=group_seq)
        added = finish(run, groups)
        rewrite = DeleteRewrite(table).validate_from_snapshot(state.snapshot.snapshot_id)
        for d in position_inputs + equality_inputs + chosen.dangling:
            rewrite.delete_file(d.file)
        for f, g in added:
            rewrite.add_file(f, data_sequence_number=group_seq[g])
        rewrite.snapshot_property(JOB_PROPERTY, JOB)
        committed = rewrite.commit()
    except CommitStateUnknownError:
        raise
    except BaseException:
        run.discard()
        raise
    snapshot = committed.snapshot_by_id(rewrite.snapshot_id)
    inputs = position_inputs + equality_inputs
    added_positions = [f for f, _ in added if f.content == FileContent.POSITION_DELETES]
    result.update(
        status="committed",
        snapshot_id=snapshot.snapshot_id,
        sequence_number=snapshot.sequence_number,
        starting_snapshot_id=state.snapshot.snapshot_id,
        rewritten_delete_files=len(inputs),
        added_delete_files=len(added),
        rewritten_bytes=sum(d.file.file_size_in_bytes for d in inputs),
        added_bytes=sum(f.file_size_in_bytes for f, _ in added),
        removed_dangling_delete_files=len(chosen.dangling),
        rewritten_position_deletes=sum(d.file.record_count for d in position_inputs),
        added_position_deletes=sum(f.record_count for f in added_positions),
        merged_equality_delete_files=len(equality_inputs),
        added_equality_delete_files=len(added) - len(added_positions),
        rewritten_groups=len(chosen.position_groups) + len(chosen.equality_groups),
    )
    result["dropped_position_deletes"] = (
        result["rewritten_position_deletes"] - result["added_position_deletes"]
    )
    return result


def _write_positions(
    spark: SparkSession,
    run: RunFiles,
    table: Table,
    *,
    state: LiveState,
    chosen: _Plan,
    groups: dict[int, PartitionKey],
    group_seq: dict[int, int],
    options: RewriteDeletesOptions,
) -> None:
    inputs = [d for files in chosen.position_groups.values() for d in files]
    delete_id = {d.file.file_path: i for i, d in enumerate(inputs)}
    pairs = []
    for key, files in chosen.position_groups.items():
        g = len(groups)
        groups[g] = key
        group_seq[g] = max(d.sequence_number for d in files)
        for d in files:
            for task in state.applies[d.file.file_path]:
                pairs.append((delete_id[d.file.file_path], task.file.file_path, g))
    paths = [d.file.file_path for d in inputs]
    rows = read_with_file_id(
        spark, paths, [_PATH, _POS], ["file_path", "pos"], ids=delete_id, id_column=_D
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
    size = sum(d.file.file_size_in_bytes for d in inputs)
    max_records = (
        max(1, int(options.target_file_size_bytes / (size / records))) if records else None
    )
    write_position_deletes(
        run, kept.distinct(), table.metadata.spec(), groups, max_records=max_records
    )


def _write_equalities(
    spark: SparkSession,
    run: RunFiles,
    table: Table,
    *,
    chosen: _Plan,
    groups: dict[int, PartitionKey],
    group_seq: dict[int, int],
) -> None:
    schema = table.metadata.schema()
    by_ids: dict[tuple[int, ...], list[tuple[int, list[LiveDelete]]]] = defaultdict(list)
    for (key, seq, ids), files in chosen.equality_groups.items():
        g = len(groups)
        groups[g] = key
        group_seq[g] = seq
        by_ids[ids].append((g, files))
    for n, (ids, members) in enumerate(sorted(by_ids.items())):
        fields = top_level_fields(schema, ids, members[0][1][0].file.file_path)
        files = [(g, d) for g, ds in members for d in ds]
        delete_id = {d.file.file_path: i for i, (_, d) in enumerate(files)}
        aliases = [f"_k{i}" for i in range(len(fields))]
        keys = read_with_file_id(
            spark,
            [d.file.file_path for _, d in files],
            fields,
            aliases,
            ids=delete_id,
            id_column=_D,
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
                    F.col(a).alias(f.name, metadata={"parquet.field.id": f.field_id})
                    for a, f in zip(aliases, fields, strict=True)
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
            groups=groups,
            name=f"equality-deletes-{n}",
            metrics=MetricsConfig.for_table(table.metadata.properties, schema),
        )
