"""The positions deletion vectors delete, as a Spark frame: `(_dv_id, _dv_pos)` rows.

    frame = dv_positions(spark, [(3, dv_entry), ...], io_properties)

A v3 deletion vector is a byte range of a Puffin file (`content_offset`,
`content_size_in_bytes`) holding one data file's deleted positions as a Roaring bitmap. The
ranges are read by Spark tasks through icecore's FileIO, like every other table file, and each
task turns its bitmaps into Arrow arrays (the bitmap library does that in C): no Python runs
per position, and the driver never holds the positions.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from functools import partial

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from icecore.spec.deletion_vectors import read_dv
from icecore.spec.manifest import DataFile
from spark_jobs.common.worker import cheap_cache_invalidation, worker_io

ID, POS = "_dv_id", "_dv_pos"
OUTPUT = T.StructType(
    [T.StructField(ID, T.IntegerType(), False), T.StructField(POS, T.LongType(), False)]
)
_ARROW = pa.schema([pa.field(ID, pa.int32(), False), pa.field(POS, pa.int64(), False)])
POSITIONS_PER_TASK = 8_000_000


def dv_positions(
    spark: SparkSession, dvs: Sequence[tuple[int, DataFile]], io_properties: Mapping[str, str]
) -> DataFrame:
    """Every position of `dvs` ((id, DV delete file) pairs), tagged with its id."""
    tasks: list[list[tuple[int, str, int, int, int, str | None]]] = []
    used = POSITIONS_PER_TASK
    for dv_id, dv in dvs:
        if used + dv.record_count > POSITIONS_PER_TASK:
            tasks.append([])
            used = 0
        tasks[-1].append(
            (dv_id, dv.file_path, dv.content_offset or 0, dv.content_size_in_bytes or 0,
             dv.record_count, dv.referenced_data_file)
        )  # fmt: skip
        used += dv.record_count
    if not tasks:
        return spark.createDataFrame([], OUTPUT)
    payload = json.dumps({"tasks": tasks, "io": dict(io_properties)})
    ids = spark.range(0, len(tasks), 1, numPartitions=len(tasks))
    return ids.mapInArrow(partial(_read, payload=payload), OUTPUT)


def _read(batches: Iterator[pa.RecordBatch], payload: str) -> Iterator[pa.RecordBatch]:
    cheap_cache_invalidation()
    spec = json.loads(payload)
    io = worker_io(spec["io"])
    for batch in batches:
        for index in batch.column(0).to_pylist():
            for dv_id, path, offset, length, count, referenced in spec["tasks"][index]:
                dv = read_dv(
                    io, path, offset, length, referenced_data_file=referenced, cardinality=count
                )
                positions = dv.to_numpy()
                ids = np.full(len(positions), dv_id, dtype=np.int32)
                yield pa.RecordBatch.from_arrays(
                    [pa.array(ids), pa.array(positions, pa.int64())], schema=_ARROW
                )
