"""Equality deletes converted bin by bin (`icecore.data.equality_conversion`): in Spark tasks,
or in the driver's own threads when the key columns are small.

    written = convert_in_tasks(work, spark=session_or_none)  # files in work.run

Where the bins run: with a session, one Spark task each (Spark schedules and retries them);
without, on a thread pool in the driver. A conversion of a table whose key columns are a few
hundred megabytes is done before a SparkContext would have started, so the job does not
start one then (`spark_jobs.common.session.OnDemandSession`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from icecore.actions.run_files import FileSet, RunFiles
from icecore.data.dv_files import (
    DV_REPORT_NAMES,
    DVTarget,
    WrittenDVs,
    dv_reports,
    written_dvs,
)
from icecore.data.equality_conversion import Target, conversion_bins, convert_bin
from icecore.data.parquet_writer import WritePlan
from icecore.data.task_reports import REPORTED_NAMES, kept_files, written_batch
from icecore.spec.types import NestedField
from spark_jobs.common.session import parallelism
from spark_jobs.common.worker import cheap_cache_invalidation, task_partition, worker_io
from spark_jobs.writing.deletion_vectors import dv_report
from spark_jobs.writing.files import reported_type

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_DV_DIRECTORY = "deletion-vectors"


@dataclass(frozen=True)
class Work:
    """One conversion's matching and writing: the targets, what their files hold, where the
    files go."""

    run: RunFiles
    key_fields: Sequence[NestedField]
    targets: Sequence[Target]
    groups: Mapping[int, tuple[int, tuple[Any, ...]]]
    deletion_vectors: bool


def convert_in_tasks(work: Work, *, spark: SparkSession | None) -> WrittenDVs:
    """Match and write, in Spark tasks with a session, else in the driver's threads: position
    delete files go into `work.run` (under each group's partition path); DVs are returned."""
    workers = parallelism(spark) if spark is not None else os.cpu_count() or 1
    bins = conversion_bins(work.targets, work.key_fields, workers)
    file_set = FileSet.position_deletes(work.run.metadata.spec(), groups=work.groups)
    location = None
    if work.deletion_vectors:
        location = f"{work.run.location}/{_DV_DIRECTORY}"
    plan = work.run.write_plan(file_set, location=location)
    reported: list[dict[str, Any]] = []
    if bins and spark is None:
        io = work.run.io
        names = DV_REPORT_NAMES if work.deletion_vectors else REPORTED_NAMES
        convert = partial(
            convert_bin,
            plan=plan,
            key_fields=work.key_fields,
            deletion_vectors=work.deletion_vectors,
            io=io,
        )
        with ThreadPoolExecutor(min(workers, len(bins)), "icefloe-convert") as pool:
            for written in pool.map(convert, bins):
                reported.extend(dict(zip(names, row, strict=True)) for row in written)
    elif bins:
        spec = {
            "plan": plan.to_json(),
            "fields": [f.to_json() for f in work.key_fields],
            "dvs": work.deletion_vectors,
            "bins": bins,
        }
        report = dv_report() if work.deletion_vectors else reported_type()
        ids = spark.range(0, len(bins), 1, numPartitions=len(bins))
        rows = ids.mapInArrow(partial(_task, payload=json.dumps(spec)), report).collect()
        reported = [r.asDict() for r in rows]
    if work.deletion_vectors:
        targets = {t.file.file_path: DVTarget(t.file, t.previous) for t in work.targets}
        return written_dvs(work.run.io, plan.location, reported, targets)
    work.run.add(file_set, kept_files(work.run.io, plan.location, reported))
    return WrittenDVs([], {})


def _task(batches: Iterator[pa.RecordBatch], payload: str) -> Iterator[pa.RecordBatch]:
    cheap_cache_invalidation()
    spec = json.loads(payload)
    plan = WritePlan.from_json(spec["plan"])
    fields = [NestedField.from_json(f) for f in spec["fields"]]
    io, task = worker_io(plan.io), task_partition()
    report = dv_reports if spec["dvs"] else written_batch
    for batch in batches:
        for index in batch.column(0).to_pylist():
            work = spec["bins"][index]
            yield report(
                convert_bin(work, plan, fields, deletion_vectors=spec["dvs"], io=io, task=task)
            )
