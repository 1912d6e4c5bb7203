"""Deletion vectors (format v3) written by Spark tasks: one per data file, merged with what
already deletes rows of that file.

    written = write_deletion_vectors(spark, run, targets, positions)
    # commit: add written.added, remove written.replaced() -- in one commit

Why merged: a data file may have one DV, and a reader that finds it ignores the file's
position delete files (`icecore.scan.delete_index`: the DV supersedes them). So the new DV of
a data file holds every position already deleted in it -- its current DV's, or those of the
legacy position delete files the planner pairs with it -- besides the new ones, and the
commit adding it removes the DV it replaces and the legacy files scoped to that one data file
(a partition-scoped file may still apply to other data files: it stays, superseded for this
one). `DVTarget.previous` says what applies now: the scan task's position deletes, taken from
the snapshot the job planned from; the commit then fails if one of them is gone meanwhile.

Where the work happens: the new positions and the rows of legacy files (`read_parquet`, kept
only for the data files the planner paired them with) are shuffled by data file, so that each
data file's positions meet in one task, sorted by data file. The task builds the file's DV
from them as an array (pyroaring, in C), and only if something new deletes rows of the file
(`positions`, or legacy rows with `convert_legacy`) does it read the file's current DV (one
ranged read) and merge it: a current DV alone is never rewritten, and the DVs of the many
data files a job plans for but finds nothing new in are never read. It appends the DV as a
blob to its Puffin file (one per task, named `<uuid>-deletes.puffin` as Java names them,
written through the table's FileIO with the run's io properties) and reports every blob's
offset and length and the file's size; the driver turns the reports into manifest entries
with the data file's spec and partition.

Failures: the Puffin files go below the run's directory (`RunFiles`), or under the hash
directories of an object-storage table, so nothing references them before the commit and
`RunFiles.discard()` removes them with the run's other files; files of failed or duplicate
task attempts are deleted once the write is done (left to orphan removal when hashed).

Buckets: DVs committed separately (a rewrite's partial-progress commits) must not share a
Puffin file, or deleting the files of a failed commit would delete DVs that another commit
references; a task writes one Puffin file per bucket it sees.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from icecore.actions.live_files import require_parquet
from icecore.io import FileIO
from icecore.location_provider import LocationProvider
from icecore.spec.delete_targets import referenced_data_file
from icecore.spec.deletion_vectors import DeletionVector, dv_blob, read_dv
from icecore.spec.manifest import DataFile, FileContent, FileFormat, content_key
from icecore.spec.metadata_columns import DELETE_FILE_PATH, DELETE_FILE_POS
from icecore.spec.puffin import PuffinWriter
from icecore.spec.types import LongType, NestedField, StringType
from spark_jobs.common.errors import JobError
from spark_jobs.common.worker import cheap_cache_invalidation, worker_io
from spark_jobs.writing.files import RunFiles

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql import types as T

FILE_PATH, POS = "file_path", "pos"
_NEW, _ID = "_dv_new", "_dv_del"
# Legacy files are read under these (optional) fields: a table column may be called file_path.
_LEGACY = (
    NestedField(DELETE_FILE_PATH.field_id, FILE_PATH, StringType()),
    NestedField(DELETE_FILE_POS.field_id, POS, LongType()),
)
# What a task reports per DV: its Puffin file and that file's size, its blob, its data file.
_REPORT_SCHEMA = pa.schema(
    [
        pa.field("location", pa.string(), False),
        pa.field("size", pa.int64(), False),
        pa.field("offset", pa.int64(), False),
        pa.field("length", pa.int64(), False),
        pa.field("cardinality", pa.int64(), False),
        pa.field("referenced", pa.string(), False),
    ]
)
DV_REPORT_NAMES = tuple(_REPORT_SCHEMA.names)  # a `dv_reports` row's, in order
_SUFFIX = "-deletes.puffin"


@dataclass(frozen=True)
class DVTarget:
    """A data file that may get a new DV: its entry (the DV takes its spec and partition),
    the position deletes that apply to it in the planned snapshot (its DV, or legacy files),
    and the bucket of the commit the DV goes into."""

    data_file: DataFile
    previous: tuple[DataFile, ...] = ()
    bucket: int = 0

    def replaced(self) -> list[DataFile]:
        """What a new DV of this file makes obsolete: its current DV, and legacy files that
        name this data file only."""
        path = self.data_file.file_path
        return [d for d in self.previous if d.is_deletion_vector or referenced_data_file(d) == path]


@dataclass(frozen=True)
class WrittenDVs:
    """The DVs written, one per data file, and the targets they were written for."""

    added: list[DataFile]
    targets: Mapping[str, DVTarget]

    def replaced(self) -> list[DataFile]:
        """The delete files the commit of the new DVs removes, each once."""
        found: dict[str, DataFile] = {}
        for dv in self.added:
            assert dv.referenced_data_file is not None
            for d in self.targets[dv.referenced_data_file].replaced():
                found.setdefault(content_key(d), d)
        return list(found.values())


def previous_deletes(deletes: Sequence[DataFile]) -> tuple[DataFile, ...]:
    """The position deletes among a scan task's deletes (what a new DV must include)."""
    return tuple(d for d in deletes if d.content == FileContent.POSITION_DELETES)


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
        frames.append(positions.select(FILE_PATH, POS, F.lit(True).alias(_NEW)))
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
            "dvs": _previous_dvs(targets),
        }
    )
    reported = rows.mapInArrow(partial(_write_task, payload=payload), dv_report()).collect()
    written = written_dvs(run.io, location, [row.asDict() for row in reported], targets)
    run.track(f.file_path for f in written.added)
    return written


def dv_report() -> T.StructType:
    """The Spark type of the rows the DV writing tasks report (`dv_reports`)."""
    from pyspark.sql import types as T  # noqa: PLC0415 (Spark work only)

    return T.StructType(
        [
            T.StructField(f.name, T.StringType() if f.type == pa.string() else T.LongType(), False)
            for f in _REPORT_SCHEMA
        ]
    )


def written_dvs(
    io: FileIO,
    location: str,
    reported: Sequence[Mapping[str, Any]],
    targets: Mapping[str, DVTarget],
) -> WrittenDVs:
    """The DVs the successful tasks reported (`dv_reports` rows) below `location`, as manifest
    entries; Puffin files of failed or duplicate attempts are deleted."""
    added = [_entry(row, targets) for row in reported]
    added.sort(key=lambda f: (f.file_path, f.content_offset or 0))
    _delete_strays(io, location, {f.file_path for f in added})
    return WrittenDVs(added, targets)


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
        .select(FILE_PATH, POS, F.lit(convert_legacy).alias(_NEW))
    )


def _previous_dvs(targets: Mapping[str, DVTarget]) -> dict[str, list[Any]]:
    """Data file -> (Puffin file, offset, length, cardinality) of its current DV."""
    found: dict[str, list[Any]] = {}
    for path, target in targets.items():
        for d in target.previous:
            if not d.is_deletion_vector:
                continue
            if d.referenced_data_file != path or path in found:
                raise JobError(f"{path}: deletion vector {d.file_path} is not its one DV")
            found[path] = [d.file_path, d.content_offset, d.content_size_in_bytes, d.record_count]
    return found


def _entry(row: Mapping[str, Any], targets: Mapping[str, DVTarget]) -> DataFile:
    """The manifest entry of one reported DV: the data file's spec and partition."""
    referenced = str(row["referenced"])
    target = targets.get(referenced)
    if target is None:
        raise JobError(f"a deletion vector was written for {referenced}, which is no target")
    data_file = target.data_file
    return DataFile(
        file_path=str(row["location"]),
        file_format=FileFormat.PUFFIN,
        partition=tuple(data_file.partition),
        record_count=int(row["cardinality"]),
        file_size_in_bytes=int(row["size"]),
        content=FileContent.POSITION_DELETES,
        referenced_data_file=referenced,
        content_offset=int(row["offset"]),
        content_size_in_bytes=int(row["length"]),
        spec_id=data_file.spec_id,
    )


def _delete_strays(io: FileIO, location: str, kept: set[str]) -> None:
    """Delete Puffin files of failed or duplicate task attempts (compared by name: a listing
    may spell the directory differently from how the tasks did)."""
    names = {k.rsplit("/", 1)[-1] for k in kept}
    for listed in io.list_prefix(location):
        found = listed.location.rsplit("/", 1)[-1]
        if found.endswith(_SUFFIX) and found not in names:
            io.delete(listed.location, missing_ok=True)


# In the tasks ---------------------------------------------------------------------------------


class PuffinTaskWriter:
    """The Puffin files of one task, one per bucket, and the DV of the data file at hand."""

    def __init__(
        self,
        location: str,
        io: FileIO,
        buckets: Mapping[str, int],
        previous: Mapping[str, Sequence[Any]],
        hashed: LocationProvider | None = None,
    ) -> None:
        self.location = location  # the directory of the Puffin files, unless hashed
        self.hashed = hashed
        self.io = io
        self.buckets = buckets
        self.previous = previous
        self.writers: dict[int, PuffinWriter] = {}
        self.blobs: dict[int, list[tuple[int, int, int, str]]] = {}
        self.path: str | None = None
        self.chunks: list[np.ndarray] = []
        self.new = False

    def add(self, path: str, positions: np.ndarray, new: bool) -> None:
        if path != self.path:
            self.finish_file()
            self.path = path
        self.chunks.append(positions)
        self.new = self.new or new

    def finish_file(self) -> None:
        """Write the DV of the data file at hand, if anything new deletes rows of it."""
        path, chunks, new = self.path, self.chunks, self.new
        self.path, self.chunks, self.new = None, [], False
        if path is None or not new:
            return
        dv = DeletionVector.from_positions(np.concatenate(chunks))
        if path in self.previous:  # read only now: most data files may get no new DV
            puffin, offset, length, count = self.previous[path]
            dv = dv.union(read_dv(self.io, puffin, offset, length, cardinality=count))
        bucket = self.buckets.get(path, 0)
        writer = self.writers.get(bucket)
        if writer is None:
            name = f"{uuid.uuid4()}{_SUFFIX}"
            location = (
                f"{self.location}/{name}"
                if self.hashed is None
                else self.hashed.new_data_location(name, "")
            )
            writer = self.writers[bucket] = PuffinWriter(self.io, location, overwrite=True)
            self.blobs[bucket] = []
        blob = writer.write(dv_blob(path, dv))
        self.blobs[bucket].append((blob.offset, blob.length, dv.cardinality, path))

    def close(self) -> list[tuple[str, int, int, int, int, str]]:
        self.finish_file()
        out = []
        for bucket, writer in self.writers.items():
            size = writer.close().file_size
            out.extend((writer.location, size, *blob) for blob in self.blobs[bucket])
        return out

    def abort(self) -> None:
        for writer in self.writers.values():
            writer.abort()


def _write_task(batches: Iterator[pa.RecordBatch], payload: str) -> Iterator[pa.RecordBatch]:
    cheap_cache_invalidation()
    plan = json.loads(payload)
    io = worker_io(plan["io"])
    hashed = None if plan["hashed"] is None else LocationProvider.from_json(plan["hashed"])
    writer = PuffinTaskWriter(plan["location"], io, plan["buckets"], plan["dvs"], hashed)
    try:
        for batch in batches:
            for path, positions, new in _runs(batch):
                writer.add(path, positions, new)
        written = writer.close()
    except BaseException:
        writer.abort()
        raise
    if written:
        yield dv_reports(written)


def dv_reports(written: Sequence[tuple[str, int, int, int, int, str]]) -> pa.RecordBatch:
    """What a task reports of the DVs it wrote (`PuffinTaskWriter.close`), one row each."""
    columns = list(zip(*written, strict=True)) or [[] for _ in _REPORT_SCHEMA]
    return pa.RecordBatch.from_arrays(
        [pa.array(c, f.type) for c, f in zip(columns, _REPORT_SCHEMA, strict=True)],
        schema=_REPORT_SCHEMA,
    )


def _runs(batch: pa.RecordBatch) -> Iterator[tuple[str, np.ndarray, bool]]:
    """(data file, its positions, whether any is new) per run of equal paths of a batch
    sorted by path."""
    if batch.num_rows == 0:
        return
    paths = batch.column(FILE_PATH)
    positions = batch.column(POS).to_numpy(zero_copy_only=False)
    new = batch.column(_NEW).to_numpy(zero_copy_only=False)
    changes = pc.not_equal(paths.slice(1), paths.slice(0, len(paths) - 1))
    starts = [0, *(np.flatnonzero(changes.to_numpy(zero_copy_only=False)) + 1).tolist()]
    ends = [*starts[1:], batch.num_rows]
    for start, end in zip(starts, ends, strict=True):
        yield paths[start].as_py(), positions[start:end], bool(new[start:end].any())
