"""Table files read into Spark through icecore's FileIO, not through Hadoop.

    frame = read_parquet(spark, files, fields, io_properties, per_file=..., position_column="_pos")

Spark's own Parquet reader goes through a Hadoop FileSystem, so an `s3://`, `gs://` or
`abfss://` table would need the matching Hadoop connector, its SDK and its settings on every
cluster, and could not use the credentials a catalog vends per table. Here each Spark task
opens its files with a `FileIO` built from the catalog's properties (Iceberg's `s3.*`,
`gcs.*`, `adls.*` names) and hands Spark Arrow batches, so a table file is read the same way
wherever it lives and by whichever engine wrote it.

What Spark's reader gave the jobs, this reader gives too:

- columns matched by Parquet field id, at every depth (a renamed column keeps its id; a
  column the file lacks reads null), falling back to names only in files that carry no ids;
- the row's position in its file (`_metadata.row_index`), and values fixed per file (the
  file's location as the manifest spells it, its id in the job, its sequence number, ...)
  attached by the task reading the file: no lookup join maps Spark's URI spelling of a file
  back to the table's, and no row can come from a file the job did not plan;
- large files split by row group (a row group belongs to the split holding its midpoint, as
  in Spark and Hadoop), so a few large files still keep every core busy.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from icecore.data.parquet_columns import (
    match_columns,
    project_column,
    row_group_batches,
    row_group_midpoint,
)
from icecore.spec.types import NestedField
from spark_jobs.common.session import parallelism
from spark_jobs.common.worker import cheap_cache_invalidation, worker_io
from spark_jobs.schema import spark_schema

SPLIT_BYTES = 128 * 1024 * 1024  # Spark's spark.sql.files.maxPartitionBytes default
_WHOLE_FILE = 2**62
_OPEN_COST = 4 * 1024 * 1024  # Spark's spark.sql.files.openCostInBytes default


@dataclass(frozen=True)
class PerFile:
    """Columns whose value is fixed per file, attached by the task that reads the file:
    `PerFile([("_id", T.IntegerType())], {location: (3,)})`."""

    columns: Sequence[tuple[str, T.DataType]]
    values: Mapping[str, Sequence[Any]]


def read_parquet(
    spark: SparkSession,
    files: Sequence[tuple[str, int | None]],
    fields: Sequence[NestedField],
    io_properties: Mapping[str, str],
    *,
    per_file: PerFile | None = None,
    position_column: str | None = None,
    split_bytes: int = SPLIT_BYTES,
) -> DataFrame:
    """`fields` of every row of `files` ((location, size in bytes) pairs; a file of unknown
    size is read by one task), then the `per_file` columns, then the row's position in its
    file if asked."""
    splits = [
        (location, start, min(split_bytes, size - start))
        for location, size in files
        if size is not None
        for start in range(0, max(size, 1), split_bytes)
    ] + [(location, 0, _WHOLE_FILE) for location, size in files if size is None]
    tasks = pack_splits(splits, parallelism(spark), split_bytes)
    extra = [T.StructField(n, t, True) for n, t in (per_file.columns if per_file else ())]
    if position_column:
        extra.append(T.StructField(position_column, T.LongType(), False))
    output = T.StructType([*spark_schema(fields).fields, *extra])
    if not tasks:
        return spark.createDataFrame([], output)
    payload = json.dumps(
        {
            "tasks": tasks,
            "fields": [f.to_json() for f in fields],
            "output": output.json(),
            "io": dict(io_properties),
            "values": {p: list(per_file.values[p]) for p, _ in files} if per_file else None,
            "position": bool(position_column),
        }
    )
    ids = spark.range(0, len(tasks), 1, numPartitions=len(tasks))
    return ids.mapInArrow(partial(_read_splits, payload=payload), output)


def pack_splits(
    splits: list[tuple[str, int, int]], parallelism: int, split_bytes: int
) -> list[list[tuple[str, int, int]]]:
    """Splits packed into tasks as Spark packs files: up to max(4 MB, total / parallelism)
    (at most `split_bytes`) a task, each file costing at least 4 MB, so many small files make
    a few tasks, not one each (a task costs a Python worker round trip)."""
    cost = [
        max(length if length != _WHOLE_FILE else split_bytes, _OPEN_COST) for *_, length in splits
    ]
    target = min(split_bytes, max(_OPEN_COST, sum(cost) // max(1, parallelism)))
    tasks: list[list[tuple[str, int, int]]] = []
    used = 0
    for split, weight in zip(splits, cost, strict=True):
        if not tasks or used + weight > target:
            tasks.append([])
            used = 0
        tasks[-1].append(split)
        used += weight
    return tasks


def _read_splits(batches: Iterator[pa.RecordBatch], payload: str) -> Iterator[pa.RecordBatch]:
    cheap_cache_invalidation()
    task = _Task(json.loads(payload))
    for batch in batches:
        for index in batch.column(0).to_pylist():
            for split in task.tasks[index]:
                yield from task.read(*split)


class _Task:
    """One Spark task's reading: its FileIO, and the shapes file batches are turned into."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.tasks = spec["tasks"]
        self.fields = [NestedField.from_json(f) for f in spec["fields"]]
        self.target = to_arrow_schema(T.StructType.fromJson(json.loads(spec["output"])))
        self.values: dict[str, list[Any]] | None = spec["values"]
        self.position: bool = spec["position"]
        self.io = worker_io(spec["io"])

    def read(self, location: str, start: int, length: int) -> Iterator[pa.RecordBatch]:
        with self.io.open_input(location) as source:
            parquet = pq.ParquetFile(source)
            meta = parquet.metadata
            columns = match_columns(parquet.schema_arrow, self.fields)
            names = sorted({c.name for c in columns.values()})
            position = 0
            for group in range(meta.num_row_groups):
                rows = meta.row_group(group).num_rows
                if start <= row_group_midpoint(meta, group) < start + length:
                    for raw in row_group_batches(parquet, group, names, rows):
                        yield self._batch(raw, columns, location, position)
                        position += raw.num_rows
                else:
                    position += rows

    def _batch(
        self, raw: pa.RecordBatch, columns: dict[int, pa.Field], location: str, position: int
    ) -> pa.RecordBatch:
        arrays = [
            project_column(raw, columns.get(f.field_id), f, target)
            for f, target in zip(self.fields, self.target, strict=False)
        ]
        n = raw.num_rows
        if self.values is not None:
            values = self.values[location]
            kinds = self.target.types[len(arrays) : len(arrays) + len(values)]
            arrays.extend(pa.repeat(pa.scalar(v, k), n) for v, k in zip(values, kinds, strict=True))
        if self.position:
            arrays.append(pa.array(np.arange(position, position + n, dtype=np.int64)))
        return pa.RecordBatch.from_arrays(arrays, schema=self.target)
