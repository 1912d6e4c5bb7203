"""Writing a DataFrame's rows as table files: each Spark task runs icecore's `TaskWriter` on
its Arrow batches (`mapInArrow`), and the driver records what the tasks report.

    write_frame(run, frame, file_set)  # `run.files()` then describes the files

The files are the run's (`icecore.actions.run_files.RunFiles`: where they go, how they
become DataFiles, how a failed run's are deleted), written with pyarrow through the table's
FileIO (`icecore.data.parquet_writer`), never through a Hadoop FileSystem: an `s3://`,
`gs://` or `abfss://` table needs no Hadoop connector, and the files get Iceberg's own
Parquet types (uuid, fixed, time, field ids on list and map fields), which Spark's writer
cannot produce. Spark's part: it computes the partition columns (`layout`), casts them to
their text forms, shuffles and sorts as the job asks, and schedules and retries the tasks.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

import pyarrow as pa

from icecore.actions.run_files import FileSet, RunFiles
from icecore.data.parquet_writer import TaskWriter, WritePlan
from icecore.data.position_maps import SOURCE_FILE, SOURCE_POS
from icecore.data.task_reports import REPORTED, kept_files, written_batch
from icecore.jobs.errors import JobError
from spark_jobs.common.worker import cheap_cache_invalidation, task_partition, worker_io

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql import types as T

# The integer column of rows written by (spec, partition) group (`FileSet.groups`).
GROUP = "_group"
# The columns a task groups rows by: each partition column as Spark's string cast, the group.
_PARTITION_COLUMN = "_key_partition{}"
_GROUP_COLUMN = "_key_group"


def write_frame(
    run: RunFiles,
    frame: DataFrame,
    file_set: FileSet,
    max_records: int | None = None,
    *,
    row_maps: bool = False,
) -> list[str]:
    """Write `frame` (the file set's columns, then its partition columns and, when it has
    groups, the integer `_group`; with `row_maps`, the rows' sources too) as files of `run`;
    their locations. With `row_maps` a row map goes beside each file (`RunFiles.row_maps`).

    A source value the table's type cannot hold (a malformed uuid, a fixed value of the
    wrong length, ...) fails the write with a JobError naming the column."""
    try:
        return _write(run, frame, file_set, max_records, row_maps)
    except Exception as exc:
        from spark_jobs.schema import invalid_value  # noqa: PLC0415 (Spark work only)

        message = invalid_value(exc)
        if message is None:
            raise
        raise JobError(message) from None


def _write(
    run: RunFiles, frame: DataFrame, file_set: FileSet, max_records: int | None, row_maps: bool
) -> list[str]:
    from pyspark.sql import functions as F  # noqa: PLC0415 (Spark work only)

    from spark_jobs.schema import quote_name  # noqa: PLC0415 (Spark work only)

    group_column = GROUP if file_set.groups is not None else None
    keys = {*file_set.partition_columns, *([group_column] if group_column else [])}
    sources = [SOURCE_FILE, SOURCE_POS] if row_maps else []
    data_columns = [c for c in frame.columns if c not in keys and c not in sources]
    if len(data_columns) != len(file_set.schema.fields):
        raise JobError(
            f"expected the {len(file_set.schema.fields)} columns of the file set, "
            f"got {data_columns}"
        )
    key_columns = [
        F.col(quote_name(n)).cast("string").alias(_PARTITION_COLUMN.format(i))
        for i, n in enumerate(file_set.partition_columns)
    ]
    if group_column:
        key_columns.append(F.col(quote_name(group_column)).cast("int").alias(_GROUP_COLUMN))
    prepared = frame.select(
        *(F.col(quote_name(c)) for c in data_columns), *key_columns, *(F.col(c) for c in sources)
    )
    plan = run.write_plan(file_set, data_columns, max_records, row_maps=row_maps)
    tasks = partial(_write_batches, payload=plan.to_json())
    reported = prepared.mapInArrow(tasks, reported_type()).collect()
    kept = kept_files(run.io, plan.location, reported)
    run.add(file_set, kept)
    return list(kept)


def reported_type() -> T.StructType:
    """The Spark type of what a writing task reports (`icecore.data.task_reports`)."""
    from pyspark.sql.pandas.types import from_arrow_schema  # noqa: PLC0415 (Spark work only)

    return from_arrow_schema(REPORTED)


def _write_batches(batches: Iterator[pa.RecordBatch], payload: str) -> Iterator[pa.RecordBatch]:
    cheap_cache_invalidation()
    plan = WritePlan.from_json(payload)
    writer = TaskWriter(plan, worker_io(plan.io), task_partition())
    columns = [_PARTITION_COLUMN.format(i) for i in range(len(plan.partition_names))]
    if plan.grouped:
        columns.append(_GROUP_COLUMN)
    try:
        for batch in batches:
            writer.add_batch(pa.Table.from_batches([batch]), columns)
        written = writer.close()
    except BaseException:
        writer.abort()
        raise
    yield written_batch(written)
