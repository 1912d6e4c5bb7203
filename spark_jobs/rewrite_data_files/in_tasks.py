"""Bin-packing groups rewritten inside Python tasks: read, apply deletes, write, all in Arrow.

    rewrite_in_tasks(spark, groups, run=run, file_set=file_set, ...)  # files in `run`

A bin-pack into the group's own partition needs neither a shuffle nor a sort: Iceberg's own
bin-pack runner reads a group with a split size of its input divided by its output file count,
so each task writes one output file from a share of the inputs. The same shape here, with
the task doing the whole rewrite in pyarrow (`icecore.data.live_batches` applies the deletes,
`writing.arrow_files.TaskWriter` writes and describes the files): the rows never cross into
the JVM and back, which was most of a compaction's cost once table files were read and
written through FileIO (Arrow to Spark rows on the read, rows to Arrow on the write, a join
plan and broadcasts per delete kind). Spark still schedules the tasks, retries them, and
bounds their parallelism to the cluster's cores.

A group's input is cut into as many bins as it will have output files: data files, split at
row-group boundaries when large (a row group belongs to the split holding its midpoint, as
in Spark), packed in order, so a bin reads a contiguous run of a group's splits. Each bin is
one task; its files are reported with their group, so the group gives each file its partition
tuple (`FileSet.groups`), as in the Spark path.

Groups that must be sorted, or that move to another partition spec, need Spark's shuffle
and stay on the Spark path (`write.py`).
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from queue import Full, Queue
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession

from icecore.actions.live_files import equality_fields
from icecore.actions.rewrite_data_files import FileGroup
from icecore.data.live_batches import DataRef, DeleteRef, LiveBatches
from icecore.spec.manifest import FileContent, content_key
from icecore.spec.properties import WRITE_TARGET_FILE_SIZE_BYTES
from icecore.spec.schema import Schema
from icecore.spec.types import NestedField
from spark_jobs.common.worker import cheap_cache_invalidation, worker_io
from spark_jobs.writing.arrow_files import (
    WRITTEN,
    Reported,
    TaskWriter,
    WritePlan,
    kept_files,
    written_batch,
)
from spark_jobs.writing.files import FileSet, RunFiles

MIN_SPLIT_BYTES = 4 * 1024 * 1024  # no point cutting files finer than Spark's open cost
_WHOLE_FILE = 2**62


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
    bins = [b for g in groups for b in _bins(g, output_files[g.index])]
    if not bins:
        return []
    location = run.location_of(file_set)
    plan = WritePlan.of(
        location=location,
        schema=file_set.schema,
        all_optional=True,
        metrics=file_set.metrics,
        data_columns=[f.name for f in file_set.schema.fields],
        partition_names=[],
        io_properties=run.io_properties,
        table_properties=run.metadata.properties,
        max_records=max_records,
        target_bytes=WRITE_TARGET_FILE_SIZE_BYTES.read(run.metadata.properties),
        partitions=run.partitions(file_set),
        hashed=run.hashed,
        grouped=True,
    )
    payload = json.dumps(
        {
            "plan": plan.to_json(),
            "fields": [f.to_json() for f in table_schema.fields],
            "lineage": lineage,
            "bins": bins,
        }
    )
    ids = spark.range(0, len(bins), 1, numPartitions=len(bins))
    reported = ids.mapInArrow(partial(_rewrite_bins, payload=payload), WRITTEN).collect()
    kept = kept_files(run.io, location, reported)
    run.add(file_set, kept)
    return list(kept)


def _bins(group: FileGroup, files: int) -> list[dict[str, Any]]:
    """The group's input as `files` bins (fewer when it has fewer splits), each a task."""
    total = group.input_bytes
    split = max(MIN_SPLIT_BYTES, math.ceil(total / max(1, files)))
    deletes: dict[str, int] = {}
    refs: list[dict[str, Any]] = []
    splits: list[tuple[dict[str, Any], int]] = []
    for task in group.tasks:
        indexes = []
        for d in task.deletes:
            key = content_key(d)
            if key not in deletes:
                deletes[key] = len(refs)
                refs.append(DeleteRef.of(d).__dict__)
            indexes.append(deletes[key])
        size = task.file.file_size_in_bytes
        for start in range(0, max(size, 1), split):
            # The last split reaches past the recorded size: a row group is never lost to a
            # size in the manifest that is off.
            last = start + split >= size
            ref = DataRef(
                task.file.file_path,
                start,
                _WHOLE_FILE if last else split,
                task.data_sequence_number,
                task.file.first_row_id,
                tuple(indexes),
            )
            splits.append((ref.__dict__, min(split, size - start)))
    target = math.ceil(sum(w for _, w in splits) / max(1, files))
    bins: list[list[dict[str, Any]]] = []
    used = 0
    for ref, weight in splits:
        if not bins or (used >= target and len(bins) < files):
            bins.append([])
            used = 0
        bins[-1].append(ref)
        used += weight
    return [{"group": group.index, "data": b, "deletes": refs} for b in bins]


def _rewrite_bins(batches: Iterator[pa.RecordBatch], payload: str) -> Iterator[pa.RecordBatch]:
    cheap_cache_invalidation()
    spec = json.loads(payload)
    plan = WritePlan.from_json(spec["plan"])
    fields = [NestedField.from_json(f) for f in spec["fields"]]
    for batch in batches:
        for index in batch.column(0).to_pylist():
            yield written_batch(_rewrite_bin(spec["bins"][index], plan, fields, spec["lineage"]))


def _rewrite_bin(
    work: dict[str, Any], plan: WritePlan, fields: list[NestedField], lineage: bool
) -> list[Reported]:
    """Write one bin's live rows; its files and their metrics."""
    writer = TaskWriter(plan)
    data = [DataRef.from_json(d) for d in work["data"]]
    reader = LiveBatches(
        worker_io(plan.io),
        fields,
        writer.schema,
        [DeleteRef.from_json(d) for d in work["deletes"]],
        sorted({d.path for d in data}),
        lineage=lineage,
    )
    try:
        for batch in _prefetched(b for ref in data for b in reader.read(ref)):
            writer.add(pa.Table.from_batches([batch]), group=work["group"])
        return writer.close()
    except BaseException:
        writer.abort()
        raise


@dataclass(frozen=True)
class _Failed:
    error: BaseException


_DONE = object()


def _prefetched(items: Iterator[Any], depth: int = 4) -> Iterator[Any]:
    """`items`, produced on a thread of their own: reading (decoding, applying deletes) then
    overlaps with encoding and writing, both pyarrow work that releases the GIL, so a task
    writing one large file (an unpartitioned group) keeps a second core busy. At most `depth`
    batches wait; the reader stops when the writer does."""
    waiting: Queue[Any] = Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                waiting.put(item, timeout=0.1)
                return True
            except Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put(item):
                    return
            put(_DONE)
        except BaseException as exc:
            put(_Failed(exc))

    thread = threading.Thread(target=produce, name="icefloe-read", daemon=True)
    thread.start()
    try:
        while (item := waiting.get()) is not _DONE:
            if isinstance(item, _Failed):
                raise item.error
            yield item
    finally:
        stop.set()
        thread.join()
