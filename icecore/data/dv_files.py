"""Deletion vectors (format v3) written by tasks into Puffin files: one per data file, merged
with what already deletes rows of that file; and the manifest entries of what the tasks
report.

    # commit: add written.added, remove written.replaced() -- in one commit

Why merged: a data file may have one DV, and a reader that finds it ignores the file's
position delete files (`icecore.scan.delete_index`: the DV supersedes them). So the new DV of
a data file holds every position already deleted in it -- its current DV's, or those of the
legacy position delete files the planner pairs with it -- besides the new ones, and the
commit adding it removes the DV it replaces and the legacy files scoped to that one data file
(a partition-scoped file may still apply to other data files: it stays, superseded for this
one). `DVTarget.previous` says what applies now: the scan task's position deletes, taken from
the snapshot the job planned from; the commit then fails if one of them is gone meanwhile.

In a task (`PuffinTaskWriter`): the positions of each data file come together, sorted by data
file. The task builds the file's DV from them as an array (pyroaring, in C), and only if
something new deletes rows of the file does it read the file's current DV (one ranged read)
and merge it: a current DV alone is never rewritten, and the DVs of the many data files a job
plans for but finds nothing new in are never read. It appends the DV as a blob to its Puffin
file (named `<uuid>-deletes.puffin` as Java names them, written through the table's FileIO)
and reports every blob's offset and length and the file's size (`dv_reports`); the driver
turns the reports into manifest entries with the data file's spec and partition
(`written_dvs`), and deletes the Puffin files of failed or duplicate task attempts.

Buckets: DVs committed separately (a rewrite's partial-progress commits) must not share a
Puffin file, or deleting the files of a failed commit would delete DVs that another commit
references; a task writes one Puffin file per bucket it sees.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from icecore.data.task_reports import delete_strays
from icecore.errors import ValidationError
from icecore.io import FileIO
from icecore.location_provider import LocationProvider
from icecore.spec.delete_targets import referenced_data_file
from icecore.spec.deletion_vectors import DeletionVector, dv_blob, read_dv
from icecore.spec.manifest import DataFile, FileContent, FileFormat, content_key
from icecore.spec.puffin import PuffinWriter

# The columns of the rows a DV writing task gets: a data file, a position in it, and whether
# the position is newly deleted (else it is one the file's legacy files delete already).
FILE_PATH, POS, NEW = "file_path", "pos", "_dv_new"
# What a task reports per DV: its Puffin file and that file's size, its blob, its data file.
DV_REPORT = pa.schema(
    [
        pa.field("location", pa.string(), False),
        pa.field("size", pa.int64(), False),
        pa.field("offset", pa.int64(), False),
        pa.field("length", pa.int64(), False),
        pa.field("cardinality", pa.int64(), False),
        pa.field("referenced", pa.string(), False),
    ]
)
DV_REPORT_NAMES = tuple(DV_REPORT.names)  # a `dv_reports` row's, in order
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
    delete_strays(io, location, {f.file_path for f in added}, _SUFFIX)
    return WrittenDVs(added, targets)


def previous_dvs(targets: Mapping[str, DVTarget]) -> dict[str, list[Any]]:
    """Data file -> (Puffin file, offset, length, cardinality) of its current DV."""
    found: dict[str, list[Any]] = {}
    for path, target in targets.items():
        for d in target.previous:
            if not d.is_deletion_vector:
                continue
            if d.referenced_data_file != path or path in found:
                raise ValidationError(f"{path}: deletion vector {d.file_path} is not its one DV")
            found[path] = [d.file_path, d.content_offset, d.content_size_in_bytes, d.record_count]
    return found


def _entry(row: Mapping[str, Any], targets: Mapping[str, DVTarget]) -> DataFile:
    """The manifest entry of one reported DV: the data file's spec and partition."""
    referenced = str(row["referenced"])
    target = targets.get(referenced)
    if target is None:
        raise ValidationError(f"a deletion vector was written for {referenced}, which is no target")
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
        """Puffin files below `location`, or where the object-storage provider `hashed`
        puts them; `buckets` gives a data file's bucket (default 0), `previous` its current
        DV (`previous_dvs`), merged into a new one."""
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

    def add_batch(self, batch: pa.RecordBatch) -> None:
        """Add the rows of a batch (`FILE_PATH`, `POS`, `NEW`) sorted by data file, which
        go on in the next batch if they do not end in this one."""
        for path, positions, new in _runs(batch):
            self.add(path, positions, new)

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


def dv_reports(written: Sequence[tuple[str, int, int, int, int, str]]) -> pa.RecordBatch:
    """What a task reports of the DVs it wrote (`PuffinTaskWriter.close`), one row each."""
    columns = list(zip(*written, strict=True)) or [[] for _ in DV_REPORT]
    return pa.RecordBatch.from_arrays(
        [pa.array(c, f.type) for c, f in zip(columns, DV_REPORT, strict=True)],
        schema=DV_REPORT,
    )


def _runs(batch: pa.RecordBatch) -> Iterator[tuple[str, np.ndarray, bool]]:
    """(data file, its positions, whether any is new) per run of equal paths of a batch
    sorted by path."""
    if batch.num_rows == 0:
        return
    paths = batch.column(FILE_PATH)
    positions = batch.column(POS).to_numpy(zero_copy_only=False)
    new = batch.column(NEW).to_numpy(zero_copy_only=False)
    changes = pc.not_equal(paths.slice(1), paths.slice(0, len(paths) - 1))
    starts = [0, *(np.flatnonzero(changes.to_numpy(zero_copy_only=False)) + 1).tolist()]
    ends = [*starts[1:], batch.num_rows]
    for start, end in zip(starts, ends, strict=True):
        yield paths[start].as_py(), positions[start:end], bool(new[start:end].any())
