"""Writing the file groups of a major compaction: one Spark job for many groups.

    files = write_groups(spark, table, plan, groups, run=run, ...)  # {group index: [DataFile]}

A Spark job per group costs seconds of scheduling, broadcasts and listings whatever the
group's size, which dominated small and medium compactions. Here each group becomes one
branch of a union (its files read by field id, its deletes applied by `LiveRows` from
broadcasts built once for all groups, arranged into the group's number of output files),
and the union is written by one Spark write, its rows carrying their group's index (`_group`):
a task keeps each group's rows in files of their own and reports each file's group, so a file
belongs to exactly one group and takes that group's partition tuple (`FileSet.groups`), its
files going under that partition's path as Java's would; groups rewritten into another spec
take the partition their new partition columns give. At most `GROUPS_PER_JOB` groups share a
job, so the query plan stays small; several jobs run at once
(`max-concurrent-file-group-rewrites`).

Bin-packing into the group's own spec needs no shuffle: those groups are rewritten by Python
tasks that read, apply the deletes and write in Arrow (`in_tasks`), their rows never entering
the JVM. The rest go through Spark, arranged as Iceberg does: rewriting into another spec
hash-partitions by the new partition values, and sort range-partitions by the sort order;
then the union is sorted within tasks by (`_group`, partition, sort), so a task's writer
finishes one group's file before it starts the next's, each file in the sort order.

On a v3 table the files also get the rows' lineage, as Java's compaction writes it: the
columns `_row_id` and `_last_updated_sequence_number` (reserved field ids, after the table's
columns) hold each row's values as read (`LiveRows` with `lineage`), so a row keeps its id
and last update through the rewrite. The files' manifest entries have a null `first_row_id`
like any added file (Java nulls it for every added file), and the commit assigns them a range
of fresh ids as usual; no row of theirs inherits from it, every row having its own. The
columns are in the files only: the table's schema does not change, and a v2 table's files
are written as before.

The settings the writes need (`_WRITE_SETTINGS`) are set on a session of their own
(`common.session.isolated_session`: on classic Spark a new session on the same SparkContext
holding a copy of the caller's settings, so the caller's session, and whatever else runs in it
meanwhile, never sees them; over Spark Connect the job's own session, for the writes only).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import ExitStack
from functools import reduce
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from icecore.actions.file_sizes import FileSizeBounds
from icecore.actions.rewrite_data_files import CompactionPlan, FileGroup
from icecore.actions.run_files import FileSet, RunFiles
from icecore.data.metrics import MetricsConfig
from icecore.data.position_maps import (
    SOURCE_FILE,
    SOURCE_POS,
    CombinedMap,
    PositionMap,
    RowMap,
)
from icecore.jobs.progress import Progress
from icecore.spec.manifest import DataFile, FileContent
from icecore.spec.metadata_columns import POSITION_DELETE_NAMES, ROW_LINEAGE
from icecore.spec.partitioning import PartitionSpec
from icecore.spec.schema import Schema
from icecore.spec.sorting import SortOrder
from icecore.table import Table
from spark_jobs.common.session import isolated_session
from spark_jobs.reading.live_rows import LiveRows, check_no_lineage_names
from spark_jobs.rewrite_data_files.in_tasks import rewrite_in_tasks
from spark_jobs.schema import conform, quoted
from spark_jobs.writing.files import GROUP, write_frame
from spark_jobs.writing.layout import PartitionLayout
from spark_jobs.writing.transforms import sort_columns

GROUPS_PER_JOB = 64
LOG = logging.getLogger("icefloe.rewrite_data_files")
RESERVED_COLUMNS = (*POSITION_DELETE_NAMES, GROUP, *(f.name for f in ROW_LINEAGE))
# Adaptive execution off: it plans each group's broadcast of the deletes as a stage of its
# own and reads the delete files once per group; the static plan reuses one broadcast for all
# groups (and there is no shuffle for it to tune: file counts are explicit).
# unionOutputPartitioning off: with it, Spark sees that every branch is one partition
# (`coalesce(1)`) and zips the branches into a single task.
_WRITE_SETTINGS = {
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.unionOutputPartitioning": "false",
}


def write_groups(
    spark: SparkSession,
    table: Table,
    plan: CompactionPlan,
    groups: Sequence[FileGroup],
    *,
    run: RunFiles,
    sizes: FileSizeBounds,
    spec_id: int,
    order: SortOrder | None,
    concurrency: int,
) -> tuple[dict[int, list[DataFile]], PositionMap]:
    """Write the live rows of `groups` below `run`; the files written, per group index, and
    where each input row went (`icecore.data.position_maps`: segments the bin-packing tasks
    report, row maps the shuffled groups' writers leave beside their files)."""
    metadata = table.metadata
    schema = metadata.schema()
    spec = metadata.spec_by_id(spec_id)
    lineage = metadata.format_version >= 3
    if lineage:
        check_no_lineage_names(schema)  # both paths write the lineage columns
    file_schema = _with_lineage(schema) if lineage else schema
    same = [g for g in groups if g.spec_id == spec_id]
    moved = [g for g in groups if g.spec_id != spec_id]
    packed = same if order is None else []  # bin-packed in place: rewritten in the tasks
    same = [g for g in same if g not in packed]
    with ExitStack() as scope:
        # Only groups Spark shuffles read through `LiveRows`, in a session of their own (copying
        # the caller's settings costs a JVM round trip per setting).
        live = None
        if same or moved:
            session = scope.enter_context(isolated_session(spark, _WRITE_SETTINGS))
            live = LiveRows(
                session,
                schema,
                [*same, *moved],
                plan.delete_sequence_numbers,
                run.io_properties,
                lineage=lineage,
            )
        records = sum(g.input_records for g in groups)
        size = sum(g.input_bytes for g in groups)
        max_records = max(1, int(sizes.write_max_file_size() * records / size)) if size else None
        writer = _GroupWriter(
            live,
            schema,
            spec,
            sizes=sizes,
            order=order,
            # The file schema's: lineage columns come last, so a table with more columns than
            # get inferred metrics gives them none, as Java's default mode then is.
            metrics=MetricsConfig.for_table(metadata.properties, file_schema),
            sort_order_id=_order_id(metadata.sort_order(), order),
            file_schema=file_schema,
        )
        jobs = [
            (name, chunk, kind)
            for kind, chosen in (("packed", packed), ("group", same), ("regroup", moved))
            for n, chunk in enumerate(_chunks(chosen, GROUPS_PER_JOB))
            for name in [f"{kind}-{n}"]
        ]

        def write(name: str, chunk: list[FileGroup], kind: str) -> list[str]:
            if kind != "packed":
                return writer.write(
                    run, name, chunk, respec=kind == "regroup", max_records=max_records
                )
            return rewrite_in_tasks(
                spark,
                chunk,
                run=run,
                file_set=writer.file_set(name, chunk),
                table_schema=schema,
                output_files={g.index: sizes.output_files(g.input_bytes) for g in chunk},
                max_records=max_records,
                lineage=lineage,
            )

        workers = max(1, min(concurrency, len(jobs)))
        progress = Progress(LOG, len(groups), "groups")
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = {pool.submit(write, name, chunk, kind): chunk for name, chunk, kind in jobs}
            for future in as_completed(futures):
                chunk = futures[future]
                progress.finished(
                    len(chunk), len(future.result()), sum(g.input_bytes for g in chunk)
                )
    out: dict[int, list[DataFile]] = {g.index: [] for g in groups}
    for f, group in run.grouped_files():
        out[group].append(f)
    maps: list[PositionMap] = [
        run.position_map({f.file_path: f.record_count for g in packed for f in g.data_files})
    ]
    if live is not None:
        shuffled = [*same, *moved]
        new_files = {
            f.file_path: [n.file_path for n in out[g.index]] for g in shuffled for f in g.data_files
        }
        maps.append(RowMap(run.io, live.file_ids, new_files, run.row_maps()))
    return out, CombinedMap(maps)


class _GroupWriter:
    def __init__(
        self,
        live: LiveRows | None,
        schema: Schema,
        spec: PartitionSpec,
        *,
        sizes: FileSizeBounds,
        order: SortOrder | None,
        metrics: MetricsConfig,
        sort_order_id: int | None,
        file_schema: Schema,
    ) -> None:
        self.live = live  # None when every group is bin-packed in the tasks
        self.schema = schema
        self.file_schema = file_schema  # the table's columns, then any lineage columns
        self.spec = spec
        self.sizes = sizes
        self.layout = PartitionLayout(spec, schema, RESERVED_COLUMNS)
        self.sort = sort_columns(schema, order.fields) if order is not None else []
        self.metrics = metrics
        self.sort_order_id = sort_order_id

    def write(
        self,
        run: RunFiles,
        name: str,
        groups: Sequence[FileGroup],
        *,
        respec: bool,
        max_records: int | None,
    ) -> list[str]:
        parts = [F.col(quoted(n)) for n in self.layout.names] if respec else []
        frame = reduce(DataFrame.union, [self._arranged(g, parts) for g in groups])
        if parts or self.sort:
            frame = frame.sortWithinPartitions(GROUP, *parts, *self.sort)
        file_set = self.file_set(name, groups, respec=respec)
        return write_frame(run, frame, file_set, max_records, row_maps=True)

    def file_set(self, name: str, groups: Sequence[FileGroup], *, respec: bool = False) -> FileSet:
        """The data files of `groups`: in the groups' own partitions, or, rewritten into
        another spec, in those of the rows' partition columns."""
        return FileSet(
            name,
            content=FileContent.DATA,
            schema=self.file_schema,
            spec=self.spec,
            partition_columns=self.layout.names if respec else (),
            metrics=self.metrics,
            sort_order_id=self.sort_order_id,
            groups={} if respec else {g.index: (self.spec.spec_id, g.partition) for g in groups},
        )

    def _arranged(self, group: FileGroup, parts: list[Any]) -> DataFrame:
        assert self.live is not None, "groups Spark arranges need LiveRows"
        rows = self.live.of_group(group, sources=True)
        rows = rows.select(
            *conform(rows.schema, self.file_schema.fields), F.col(SOURCE_FILE), F.col(SOURCE_POS)
        )
        if parts:
            rows = self.layout.with_partition_columns(rows)
        rows = rows.withColumn(GROUP, F.lit(group.index))
        files = self.sizes.output_files(group.input_bytes)
        if self.sort:
            return rows.repartitionByRange(files, *parts, *self.sort)
        return rows.repartition(files, *parts)  # into another spec (bin-packs go in_tasks)


def _with_lineage(schema: Schema) -> Schema:
    """The schema of files carrying row lineage: Java's `MetadataColumns.schemaWithRowLineage`,
    the table's columns then `_row_id` and `_last_updated_sequence_number`."""
    return Schema((*schema.fields, *ROW_LINEAGE), schema.schema_id)


def _chunks(groups: Sequence[FileGroup], size: int) -> list[list[FileGroup]]:
    return [list(groups[i : i + size]) for i in range(0, len(groups), size)]


def _order_id(table_order: SortOrder, used: SortOrder | None) -> int | None:
    if used is None:
        return None
    if not table_order.is_unsorted and tuple(table_order.fields) == tuple(used.fields):
        return table_order.order_id
    return None
