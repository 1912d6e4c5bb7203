"""Bin-packing groups rewritten inside Python tasks, Spark scheduling them: one Spark task per
bin of `icecore.data.bin_rewrite` (read, apply deletes, write, all in Arrow).

    rewrite_in_tasks(spark, groups, run=run, file_set=file_set, ...)  # files in `run`

The rows never cross into the JVM and back, which was most of a compaction's cost once table
files were read and written through FileIO (Arrow to Spark rows on the read, rows to Arrow on
the write, a join plan and broadcasts per delete kind). Spark still schedules the tasks,
retries them, and bounds their parallelism to the cluster's cores.

Groups that must be sorted, or that move to another partition spec, need Spark's shuffle
and stay on the Spark path (`write.py`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from functools import partial

import pyarrow as pa
from pyspark.sql import SparkSession

from icecore.actions.live_files import equality_fields
from icecore.actions.rewrite_data_files import FileGroup
from icecore.actions.run_files import FileSet, RunFiles
from icecore.data.bin_rewrite import group_bins, rewrite_bin
from icecore.data.parquet_writer import WritePlan
from icecore.data.task_reports import kept_files, written_batch
from icecore.spec.manifest import FileContent
from icecore.spec.schema import Schema
from icecore.spec.types import NestedField
from spark_jobs.common.worker import cheap_cache_invalidation, task_partition, worker_io
from spark_jobs.writing.files import reported_type


def rewrite_in_tasks(
    spark: SparkSession,
    groups: Sequence[FileGroup],
    *,
    run: RunFiles,
    file_set: FileSet,
    table_schema: Schema,
    output_files: Mapping[int, int],
    max_records: int | None,
    lineage: bool,
) -> list[str]:
    """Rewrite `groups` (each into `output_files[index]` files) into `file_set` of `run`; the
    locations of the files written."""
    for d in {d.file_path: d for g in groups for d in g.delete_files}.values():
        if d.content == FileContent.EQUALITY_DELETES:  # refused here, not as a task's KeyError
            equality_fields(table_schema, d)
    bins = [b for g in groups for b in group_bins(g, output_files[g.index])]
    if not bins:
        return []
    plan = run.write_plan(file_set, max_records=max_records)
    payload = json.dumps(
        {
            "plan": plan.to_json(),
            "fields": [f.to_json() for f in table_schema.fields],
            "lineage": lineage,
            "bins": bins,
        }
    )
    ids = spark.range(0, len(bins), 1, numPartitions=len(bins))
    reported = ids.mapInArrow(partial(_rewrite_bins, payload=payload), reported_type()).collect()
    kept = kept_files(run.io, plan.location, reported)
    run.add(file_set, kept)
    return list(kept)


def _rewrite_bins(batches: Iterator[pa.RecordBatch], payload: str) -> Iterator[pa.RecordBatch]:
    cheap_cache_invalidation()
    spec = json.loads(payload)
    plan = WritePlan.from_json(spec["plan"])
    fields = [NestedField.from_json(f) for f in spec["fields"]]
    io, task = worker_io(plan.io), task_partition()
    for batch in batches:
        for index in batch.column(0).to_pylist():
            work = spec["bins"][index]
            yield written_batch(
                rewrite_bin(work, plan, fields, lineage=spec["lineage"], io=io, task=task)
            )
