"""A manifest rewrite executed by Spark tasks, for tables whose entries the driver should not
hold: the shape of Java's `RewriteManifestsSparkAction` (entries range-partitioned by their
partition, sorted, written as manifests by the tasks), through DataFrames and `mapInArrow`
only, so that it runs over Spark Connect as well.

1. Ranges: tasks read the replaced manifests without column metrics (the cheap part of an
   entry) and return a random sample of clustering keys, about `SAMPLES_PER_OUTPUT` per output
   manifest; the driver cuts each group's sorted sample into its output ranges. (Spark's own
   `repartitionByRange` would sample by reading every entry in full once more.)
2. Tasks read the manifests again, in full, and emit each live entry (pickled) with its key
   and its output: the range its key falls in, numbered across groups.
3. Repartitioned by output and sorted by (output, key) within each partition, the entries
   reach the writing tasks in clustering order; each output's entries become one manifest
   (more when a skewed range holds more than the target size) and the tasks return their
   descriptions, the only thing the driver collects.

What a failed task attempt wrote is referenced by nothing (an orphan, as with any job).
"""

from __future__ import annotations

import pickle
import random
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial
from itertools import accumulate

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from icecore.actions.manifest_output import WRITER_SLACK, ManifestOutput, write_manifests
from icecore.actions.rewrite_manifests import ManifestGroup
from icecore.io import FileIO
from icecore.spec.manifest import ManifestEntry, read_manifest
from icecore.spec.manifest_list import ManifestFile
from spark_jobs.common.worker import cheap_cache_invalidation, worker_io

SAMPLES_PER_OUTPUT = 100
READ_BYTES_PER_TASK = 4 * 1024 * 1024  # manifest bytes one reading task reads
_BATCH_ROWS = 4096
_SAMPLE = "group int, key binary"
_ENTRIES = "output int, key binary, entry binary"
_WRITTEN = "output int, manifest binary"


@dataclass(frozen=True)
class _Work:
    """Everything the tasks get (pickled into their function)."""

    io: dict[str, str]
    groups: list[ManifestGroup]  # without their manifests (the bins have them)
    outputs: list[ManifestOutput]
    bins: list[list[tuple[int, ManifestFile]]]  # per reading task: (group, manifest)
    steps: list[int]  # sampling: about one entry in so many of each group
    boundaries: list[list[bytes]]  # per group: the keys its outputs start at (but the first)
    offsets: list[int]  # per group: the number of its first output


def rewrite_in_spark(
    spark: SparkSession,
    io_properties: dict[str, str],
    groups: Sequence[tuple[ManifestGroup, ManifestOutput]],
    written: list[ManifestFile],
) -> None:
    """Write every group's new manifests in Spark tasks, appending them to `written` in
    clustering order."""
    chosen = [(g, o) for g, o in groups if g.outputs > 0]
    if not chosen:
        return
    outputs = [g.outputs for g, _ in chosen]
    work = _Work(
        io=dict(io_properties),
        groups=[replace(g, manifests=()) for g, _ in chosen],
        outputs=[o for _, o in chosen],
        bins=_bins([g for g, _ in chosen]),
        steps=[max(1, g.live_files // (g.outputs * SAMPLES_PER_OUTPUT)) for g, _ in chosen],
        boundaries=[[] for _ in chosen],
        offsets=[0, *accumulate(outputs)][:-1],
    )
    if any(n > 1 for n in outputs):
        work = _with_boundaries(spark, work, outputs)
    tasks = spark.range(0, len(work.bins), 1, numPartitions=len(work.bins))
    entries = tasks.mapInArrow(partial(_read_task, payload=pickle.dumps(work)), _ENTRIES)
    rows = (
        entries.repartition(sum(outputs), "output")
        .sortWithinPartitions("output", "key")
        .mapInArrow(partial(_write_task, payload=pickle.dumps(work)), _WRITTEN)
        .withColumn("n", F.monotonically_increasing_id())
        .collect()
    )
    for row in sorted(rows, key=lambda r: (r["output"], r["n"])):
        written.append(pickle.loads(row["manifest"]))


def _bins(groups: Sequence[ManifestGroup]) -> list[list[tuple[int, ManifestFile]]]:
    """The manifests in runs of about `READ_BYTES_PER_TASK`, one reading task each."""
    bins: list[list[tuple[int, ManifestFile]]] = [[]]
    used = 0
    for index, group in enumerate(groups):
        for manifest in group.manifests:
            if bins[-1] and used + manifest.manifest_length > READ_BYTES_PER_TASK:
                bins.append([])
                used = 0
            bins[-1].append((index, manifest))
            used += manifest.manifest_length
    return bins


def _with_boundaries(spark: SparkSession, work: _Work, outputs: list[int]) -> _Work:
    tasks = spark.range(0, len(work.bins), 1, numPartitions=len(work.bins))
    sampled = tasks.mapInArrow(partial(_sample_task, payload=pickle.dumps(work)), _SAMPLE)
    keys: list[list[bytes]] = [[] for _ in outputs]
    for row in sampled.collect():
        keys[row["group"]].append(bytes(row["key"]))
    boundaries = []
    for sample, n in zip(keys, outputs, strict=True):
        sample.sort()
        boundaries.append([sample[i * len(sample) // n] for i in range(1, n)] if sample else [])
    return replace(work, boundaries=boundaries)


def _entries(
    io: FileIO, work: _Work, index: int, metrics: bool
) -> Iterator[tuple[int, ManifestEntry]]:
    for group, manifest in work.bins[index]:
        spec = work.groups[group].form.spec
        for entry in read_manifest(
            io, manifest, spec=spec, include_metrics=metrics, live_only=True
        ):
            yield group, entry


def _bins_of(
    batches: Iterator[pa.RecordBatch], payload: bytes, *, metrics: bool
) -> Iterator[tuple[_Work, int, Iterator[tuple[int, bytes, ManifestEntry]]]]:
    """A task's bins: the work, the bin's number, and its live entries as (group, sort key,
    entry)."""
    cheap_cache_invalidation()
    work: _Work = pickle.loads(payload)
    io = worker_io(work.io)
    keys = [g.sort_key() for g in work.groups]
    for batch in batches:
        for index in batch.column(0).to_pylist():
            entries = _entries(io, work, index, metrics=metrics)
            yield work, index, ((g, keys[g](e.data_file), e) for g, e in entries)


def _sample_task(batches: Iterator[pa.RecordBatch], payload: bytes) -> Iterator[pa.RecordBatch]:
    """About one entry in `step` of each group, drawn at random (seeded by the bin: a retried
    task draws the same): every n-th entry would follow the period manifests often have, one
    file per partition per commit, and miss whole partitions."""
    for work, index, entries in _bins_of(batches, payload, metrics=False):
        draw = random.Random(index).random
        groups, sample = [], []
        for group, key, _ in entries:
            if draw() * work.steps[group] < 1:
                groups.append(group)
                sample.append(key)
        yield pa.RecordBatch.from_pydict(
            {"group": pa.array(groups, pa.int32()), "key": pa.array(sample, pa.binary())}
        )


def _read_task(batches: Iterator[pa.RecordBatch], payload: bytes) -> Iterator[pa.RecordBatch]:
    for work, _, entries in _bins_of(batches, payload, metrics=True):
        rows: tuple[list, list, list] = ([], [], [])
        for group, key, entry in entries:
            rows[0].append(work.offsets[group] + bisect_right(work.boundaries[group], key))
            rows[1].append(key)
            rows[2].append(pickle.dumps(entry, pickle.HIGHEST_PROTOCOL))
            if len(rows[0]) >= _BATCH_ROWS:
                yield _entry_batch(*rows)
                rows = ([], [], [])
        if rows[0]:
            yield _entry_batch(*rows)


def _entry_batch(outputs: list[int], keys: list[bytes], entries: list[bytes]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "output": pa.array(outputs, pa.int32()),
            "key": pa.array(keys, pa.binary()),
            "entry": pa.array(entries, pa.binary()),
        }
    )


def _write_task(batches: Iterator[pa.RecordBatch], payload: bytes) -> Iterator[pa.RecordBatch]:
    """Each output's entries (consecutive: sorted by output) as its manifests."""
    cheap_cache_invalidation()
    work: _Work = pickle.loads(payload)
    io = worker_io(work.io)
    current: int | None = None
    entries: list[ManifestEntry] = []
    for batch in batches:
        outputs = batch.column("output").to_pylist()
        blobs = batch.column("entry").to_pylist()
        for output, blob in zip(outputs, blobs, strict=True):
            if output != current:
                if entries:
                    yield _flush(io, work, current, entries)
                current, entries = output, []
            entries.append(pickle.loads(blob))
    if entries:
        yield _flush(io, work, current, entries)


def _flush(
    io: FileIO, work: _Work, number: int | None, entries: list[ManifestEntry]
) -> pa.RecordBatch:
    """Output `number`'s entries as its manifests."""
    assert number is not None
    index = bisect_right(work.offsets, number) - 1
    group = work.groups[index]
    parts = group.manifests_for(len(entries), WRITER_SLACK)
    target = group.target_size_bytes
    manifests = write_manifests(io, work.outputs[index], entries, parts, target)
    return pa.RecordBatch.from_pydict(
        {
            "output": pa.array([number] * len(manifests), pa.int32()),
            "manifest": pa.array([pickle.dumps(m) for m in manifests], pa.binary()),
        }
    )
