"""Equality deletes matched and written as position deletes or DVs inside Python tasks, or in
the driver's own threads when the key columns are small.

    written = convert_in_tasks(work, spark=session_or_none)  # files in work.run

Most of a conversion is one look-up: each data row's key against the keys of the equality
deletes paired with its file (`icecore.data.live_batches.LiveBatches.equality_deleted`, through
its `KeySet`). Only the key columns are read and no row crosses into the JVM. The task that
finds a data file's positions also writes them: a position delete file per task and
partition group, its rows sorted by (`file_path`, `pos`) because a bin's data files are
taken in path order and positions come out ascending; or (format v3) a DV per data file,
merged with the positions its current DV or legacy position delete files already delete, in
one Puffin file per task.

Where the bins run: with a session, one Spark task each (Spark schedules and retries them);
without, on a thread pool in the driver. A conversion of a table whose key columns are a few
hundred megabytes is done before a SparkContext would have started, so the job does not
start one then (`spark_jobs.common.session.OnDemandSession`).

Bins: the data files in (partition group, path) order, cut into runs of about the same key
bytes, at least as many runs overall as there are workers, so a one-partition table still
keeps every core busy, and many small partitions share a task.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from icecore.data.arrow_numpy import int64s, repeated_string
from icecore.data.arrow_schema import arrow_schema
from icecore.data.live_batches import DataRef, DeleteRef, LiveBatches
from icecore.data.metrics import MetricsConfig
from icecore.spec.manifest import DataFile, content_key
from icecore.spec.metadata_columns import POSITION_DELETE_SCHEMA
from icecore.spec.types import NestedField
from spark_jobs.common.session import parallelism
from spark_jobs.common.worker import cheap_cache_invalidation, worker_io
from spark_jobs.writing.arrow_files import (
    WRITTEN,
    WRITTEN_NAMES,
    TaskWriter,
    WritePlan,
    kept_files,
    written_batch,
)
from spark_jobs.writing.deletion_vectors import (
    DV_REPORT_NAMES,
    DVTarget,
    PuffinTaskWriter,
    WrittenDVs,
    dv_report,
    dv_reports,
    written_dvs,
)
from spark_jobs.writing.files import FileSet, RunFiles

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MAX_BIN_BYTES = 256 * 1024 * 1024  # key-column bytes one task reads at most
_DV_DIRECTORY = "deletion-vectors"
_WHOLE_FILE = 2**62


@dataclass(frozen=True)
class Target:
    """A data file some equality deletes apply to: its scan task's pieces the task needs."""

    file: DataFile
    sequence_number: int
    group: int
    equality: tuple[DataFile, ...]
    previous: tuple[DataFile, ...] = ()  # v3: the position deletes and DV a new DV merges


@dataclass(frozen=True)
class Work:
    """One conversion's matching and writing: the targets, what their files hold, where the
    files go."""

    run: RunFiles
    key_fields: Sequence[NestedField]
    targets: Sequence[Target]
    groups: Mapping[int, tuple[int, tuple[Any, ...]]]
    deletion_vectors: bool


def key_bytes(file: DataFile, field_ids: Sequence[int]) -> int:
    """The bytes of `file` a match reads: its key columns' (from the manifest's column sizes),
    the whole file when they are not recorded."""
    sizes = file.column_sizes or {}
    if all(i in sizes for i in field_ids):
        return sum(sizes[i] for i in field_ids)
    return file.file_size_in_bytes


def convert_in_tasks(work: Work, *, spark: SparkSession | None) -> WrittenDVs:
    """Match and write, in Spark tasks with a session, else in the driver's threads: position
    delete files go into `work.run` (under each group's partition path); DVs are returned."""
    workers = parallelism(spark) if spark is not None else os.cpu_count() or 1
    bins = _bins(work, workers)
    file_set = FileSet.position_deletes(work.run.metadata.spec(), None, groups=work.groups)
    location = work.run.location_of(file_set)
    if work.deletion_vectors:
        location = f"{work.run.location}/{_DV_DIRECTORY}"
    plan = WritePlan.of(
        location=location,
        schema=POSITION_DELETE_SCHEMA,
        all_optional=False,
        metrics=MetricsConfig.full(),
        data_columns=[f.name for f in POSITION_DELETE_SCHEMA.fields],
        partition_names=[],
        io_properties=work.run.io_properties,
        table_properties=work.run.metadata.properties,
        max_records=None,
        target_bytes=None,
        partitions=work.run.partitions(file_set),
        hashed=work.run.hashed,
        grouped=True,
    )
    spec = {
        "plan": plan.to_json(),
        "fields": [f.to_json() for f in work.key_fields],
        "dvs": work.deletion_vectors,
    }
    reported: list[dict[str, Any]] = []
    if bins and spark is None:
        names = DV_REPORT_NAMES if work.deletion_vectors else WRITTEN_NAMES
        with ThreadPoolExecutor(min(workers, len(bins)), "icefloe-convert") as pool:
            for written in pool.map(partial(_convert_bin, spec=spec), bins):
                reported.extend(dict(zip(names, row, strict=True)) for row in written)
    elif bins:
        payload = json.dumps({**spec, "bins": bins})
        report = dv_report() if work.deletion_vectors else WRITTEN
        ids = spark.range(0, len(bins), 1, numPartitions=len(bins))
        rows = ids.mapInArrow(partial(_task, payload=payload), report).collect()
        reported = [r.asDict() for r in rows]
    if work.deletion_vectors:
        targets = {t.file.file_path: DVTarget(t.file, t.previous) for t in work.targets}
        return written_dvs(work.run.io, location, reported, targets)
    work.run.add(file_set, kept_files(work.run.io, location, reported))
    return WrittenDVs([], {})


def _bins(work: Work, workers: int) -> list[dict[str, Any]]:
    """The targets in (group, path) order, in runs of about equal key bytes: a bin may span
    groups (one position delete file each), so many small partitions do not make as many
    tasks."""
    ids = [f.field_id for f in work.key_fields]
    total = sum(key_bytes(t.file, ids) for t in work.targets)
    per_bin = min(MAX_BIN_BYTES, max(1, math.ceil(total / max(1, workers))))
    bins: list[dict[str, Any]] = []
    used = per_bin
    for t in sorted(work.targets, key=lambda t: (t.group, t.file.file_path)):
        if used >= per_bin:
            bins.append({"groups": [], "data": [], "deletes": []})
            refs: dict[str, int] = {}
            used = 0
        current = bins[-1]
        indexes = []
        for d in (*t.equality, *t.previous):
            key = content_key(d)
            if key not in refs:
                refs[key] = len(current["deletes"])
                current["deletes"].append(DeleteRef.of(d).__dict__)
            indexes.append(refs[key])
        whole = DataRef(t.file.file_path, 0, _WHOLE_FILE, t.sequence_number, None, tuple(indexes))
        current["data"].append(whole.__dict__)
        current["groups"].append(t.group)
        used += key_bytes(t.file, ids)
    return bins


def _task(batches: Iterator[pa.RecordBatch], payload: str) -> Iterator[pa.RecordBatch]:
    cheap_cache_invalidation()
    spec = json.loads(payload)
    report = dv_reports if spec["dvs"] else written_batch
    for batch in batches:
        for index in batch.column(0).to_pylist():
            yield report(_convert_bin(spec["bins"][index], spec))


def _convert_bin(work: dict[str, Any], spec: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Find one bin's deleted positions and write them; what the task wrote (its writer's
    report rows). The driver's threads call this too, so nothing here converts Python or
    NumPy values with pyarrow's own calls (`icecore.data.arrow_numpy`)."""
    plan = WritePlan.from_json(spec["plan"])
    fields = [NestedField.from_json(f) for f in spec["fields"]]
    data = [DataRef.from_json(d) for d in work["data"]]
    deletes = [DeleteRef.from_json(d) for d in work["deletes"]]
    # One reader: its equality look-up reads only the equality deletes of a data file, its
    # `deleted_positions` only the position deletes and DV.
    reader = LiveBatches(
        worker_io(plan.io),
        fields,
        arrow_schema(fields, all_optional=True),
        deletes,
        [d.path for d in data],
    )
    if spec["dvs"]:
        return _write_dvs(data, reader, plan)
    writer = TaskWriter(plan)
    try:
        for ref, group in zip(data, work["groups"], strict=True):
            positions = reader.equality_deleted(ref)
            if positions.size:
                paths = repeated_string(ref.path, positions.size)
                rows = pa.Table.from_arrays([paths, int64s(positions)], schema=writer.schema)
                writer.add(rows, group=group)
        return writer.close()
    except BaseException:
        writer.abort()
        raise


def _write_dvs(
    data: Sequence[DataRef], reader: LiveBatches, plan: WritePlan
) -> list[tuple[Any, ...]]:
    """A DV for every data file with newly deleted positions, holding its old ones too."""
    writer = PuffinTaskWriter(plan.location, worker_io(plan.io), {}, {}, plan.provider())
    try:
        for ref in data:
            positions = reader.equality_deleted(ref)
            if positions.size:
                old = reader.deleted_positions(ref)
                writer.add(ref.path, np.concatenate([positions, old]), True)
        return writer.close()
    except BaseException:
        writer.abort()
        raise
