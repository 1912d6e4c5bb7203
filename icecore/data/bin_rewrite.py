"""A compaction's bin-pack rewritten inside a task, all in Arrow: read, apply deletes, write.

A bin-pack into the group's own partition needs neither a shuffle nor a sort: Iceberg's own
bin-pack runner reads a group with a split size of its input divided by its output file count,
so each task writes one output file from a share of the inputs. The same shape here, with
the task doing the whole rewrite in pyarrow (`icecore.data.live_batches` applies the deletes,
`icecore.data.parquet_writer.TaskWriter` writes and describes the files): the rows never
cross into an engine's own row format and back. The engine (Spark: `spark_jobs.
rewrite_data_files.in_tasks`) only schedules the bins, retries them and bounds their
parallelism.

A group's input is cut into as many bins as it will have output files (`group_bins`): data
files, split at row-group boundaries when large (a row group belongs to the split holding its
midpoint, as in Spark), packed in order, so a bin reads a contiguous run of a group's
splits. Each bin is one task (`rewrite_bin`); its files are reported with their group, so the
group gives each file its partition tuple (`icecore.actions.run_files.FileSet.groups`).
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from queue import Full, Queue
from typing import Any

import pyarrow as pa

from icecore.actions.rewrite_data_files import FileGroup
from icecore.data.live_batches import DataRef, DeleteRef, LiveBatches
from icecore.data.parquet_writer import TaskWriter, WritePlan
from icecore.data.position_maps import SegmentRecorder
from icecore.data.task_reports import Reported
from icecore.io import FileIO
from icecore.spec.manifest import content_key
from icecore.spec.types import NestedField

MIN_SPLIT_BYTES = 4 * 1024 * 1024  # no point cutting files finer than an engine's open cost
_WHOLE_FILE = 2**62


def group_bins(group: FileGroup, files: int) -> list[dict[str, Any]]:
    """The group's input as `files` bins (fewer when it has fewer splits), each a task's
    work (JSON-able: it travels to the task)."""
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


def rewrite_bin(
    work: dict[str, Any],
    plan: WritePlan,
    fields: Sequence[NestedField],
    *,
    lineage: bool,
    io: FileIO,
    task: int = 0,
) -> list[Reported]:
    """Write the live rows of one bin (`group_bins`) as task `task`, reading the table's
    columns `fields` (with their row lineage, `lineage`) through `io`; its files, their
    metrics and where their rows came from (`icecore.data.position_maps`: a bin's rows keep
    their order, so a few segments say it)."""
    writer = TaskWriter(plan, io, task)
    data = [DataRef.from_json(d) for d in work["data"]]
    reader = LiveBatches(
        io,
        fields,
        writer.schema,
        [DeleteRef.from_json(d) for d in work["deletes"]],
        sorted({d.path for d in data}),
        lineage=lineage,
    )
    recorder = SegmentRecorder()
    try:
        for batch in prefetched(b for ref in data for b in reader.read(ref, recorder)):
            writer.add(pa.Table.from_batches([batch]), group=work["group"])
        written = writer.close()
    except BaseException:
        writer.abort()
        raise
    rows = [(w[0], json.loads(w[3])["record_count"]) for w in written]
    return [(*w[:4], moved) for w, moved in zip(written, recorder.reports(rows), strict=True)]


@dataclass(frozen=True)
class _Failed:
    error: BaseException


_DONE = object()


def prefetched(items: Iterator[Any], depth: int = 4) -> Iterator[Any]:
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
