"""Deletion vectors (format v3) written by Spark tasks: one per data file, merged with what
already deletes rows of that file (`icecore.data.dv_files`: why, and what a task does).

    written = write_deletion_vectors(spark, run, targets, positions)
    # commit: add written.added, remove written.replaced() -- in one commit

Spark's part: the new positions and the rows of legacy files (`read_parquet`, kept only for
the data files the planner paired them with) are shuffled by data file, so that each data
file's positions meet in one task, sorted by data file; each task runs a `PuffinTaskWriter`
on them, through the table's FileIO with the run's io properties.

Failures: the Puffin files go below the run's directory (`RunFiles`), or under the hash
directories of an object-storage table, so nothing references them before the commit and
`RunFiles.discard()` removes them with the run's other files; files of failed or duplicate
task attempts are deleted once the write is done (left to orphan removal when hashed).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from functools import partial
from typing import TYPE_CHECKING

import pyarrow as pa

from icecore.actions.live_files import require_parquet
from icecore.actions.run_files import RunFiles
from icecore.data.dv_files import (
    DV_REPORT,
    FILE_PATH,
    NEW,
    POS,
    DVTarget,
    PuffinTaskWriter,
    WrittenDVs,
    dv_reports,
    previous_dvs,
    written_dvs,
)
from icecore.location_provider import LocationProvider
from icecore.spec.manifest import DataFile, FileContent
from icecore.spec.metadata_columns import DELETE_FILE_PATH, DELETE_FILE_POS
from icecore.spec.types import LongType, NestedField, StringType
from spark_jobs.common.worker import cheap_cache_invalidation, worker_io

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql import types as T

_ID = "_dv_del"
# Legacy files are read under these (optional) fields: a table column may be called file_path.
_LEGACY = (
    NestedField(DELETE_FILE_PATH.field_id, FILE_PATH, StringType()),
    NestedField(DELETE_FILE_POS.field_id, POS, LongType()),
)


def write_deletion_vectors(
    spark: SparkSession,
    run: RunFiles,
    targets: Mapping[str, DVTarget],
    positions: DataFrame | None = None,
    *,
    convert_legacy: bool = False,
    name: str = "deletion-vectors",
) -> WrittenDVs:
    """Write the DVs of `targets` (data file location -> target): `positions` holds new
    (`file_path`, `pos`) rows, each naming a target; the targets' previous deletes are merged
    in. With `convert_legacy`, rows of legacy position delete files count as new (a target
    having any gets a DV); without, only `positions` do."""
    from pyspark.sql import functions as F  # noqa: PLC0415 (Spark work only)

    frames = []
    if positions is not None:
        frames.append(positions.select(FILE_PATH, POS, F.lit(True).alias(NEW)))
    legacy = _legacy_positions(spark, run, targets, convert_legacy)
    if legacy is not None:
        frames.append(legacy)
    if not frames:
        return WrittenDVs([], targets)
    rows = frames[0]
    for frame in frames[1:]:
        rows = rows.unionByName(frame)
    rows = rows.repartition(F.col(FILE_PATH)).sortWithinPartitions(FILE_PATH)
    location = f"{run.location}/{name}"
    hashed = run.hashed
    payload = json.dumps(
        {
            "location": location,
            "hashed": None if hashed is None else hashed.to_json(),
            "io": run.io_properties,
            "buckets": {p: t.bucket for p, t in targets.items() if t.bucket},
            "dvs": previous_dvs(targets),
        }
    )
    reported = rows.mapInArrow(partial(_write_task, payload=payload), dv_report()).collect()
    written = written_dvs(run.io, location, [row.asDict() for row in reported], targets)
    run.track(f.file_path for f in written.added)
    return written


def dv_report() -> T.StructType:
    """The Spark type of the rows the DV writing tasks report (`dv_reports`)."""
    from pyspark.sql.pandas.types import from_arrow_schema  # noqa: PLC0415 (Spark work only)

    return from_arrow_schema(DV_REPORT)


def _legacy_positions(
    spark: SparkSession, run: RunFiles, targets: Mapping[str, DVTarget], convert_legacy: bool
) -> DataFrame | None:
    """(`file_path`, `pos`, new) rows of the targets' legacy position delete files, each row
    kept only for a data file the planner paired its file with."""
    from pyspark.sql import functions as F  # noqa: PLC0415 (Spark work only)
    from pyspark.sql import types as T  # noqa: PLC0415 (Spark work only)

    from spark_jobs.reading.local_frames import local_frame  # noqa: PLC0415 (Spark work only)
    from spark_jobs.reading.parquet_files import PerFile, read_parquet  # noqa: PLC0415 (Spark work only)

    legacy: dict[str, DataFile] = {}
    pairs: list[tuple[str, str]] = []  # (legacy file, data file it applies to)
    for path, target in targets.items():
        for d in target.previous:
            if not d.is_deletion_vector and d.content == FileContent.POSITION_DELETES:
                legacy.setdefault(d.file_path, d)
                pairs.append((d.file_path, path))
    if not legacy:
        return None
    files = list(legacy.values())
    require_parquet(files)
    ids_of = {f.file_path: i for i, f in enumerate(files)}
    raw = read_parquet(
        spark,
        [(f.file_path, f.file_size_in_bytes) for f in files],
        _LEGACY,
        run.io_properties,
        per_file=PerFile([(_ID, T.IntegerType())], {p: (i,) for p, i in ids_of.items()}),
    )
    paired = local_frame(
        spark, [(ids_of[d], p) for d, p in pairs], [(_ID, "int"), (FILE_PATH, "string")]
    )
    return (
        raw.join(F.broadcast(paired), [_ID, FILE_PATH])
        .where(F.col(POS).isNotNull())
        .select(FILE_PATH, POS, F.lit(convert_legacy).alias(NEW))
    )


def _write_task(batches: Iterator[pa.RecordBatch], payload: str) -> Iterator[pa.RecordBatch]:
    cheap_cache_invalidation()
    plan = json.loads(payload)
    io = worker_io(plan["io"])
    hashed = None if plan["hashed"] is None else LocationProvider.from_json(plan["hashed"])
    writer = PuffinTaskWriter(plan["location"], io, plan["buckets"], plan["dvs"], hashed)
    try:
        for batch in batches:
            writer.add_batch(batch)
        written = writer.close()
    except BaseException:
        writer.abort()
        raise
    if written:
        yield dv_reports(written)
