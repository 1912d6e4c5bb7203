"""Equality deletes matched and written as position deletes or DVs, bin by bin, inside a task
(an engine's, or one of the driver's threads): the bins, and what a bin's task does.

Most of a conversion is one look-up: each data row's key against the keys of the equality
deletes paired with its file (`icecore.data.live_batches.LiveBatches.equality_deleted`,
through its `KeySet`). Only the key columns are read. The task that finds a data file's
positions also writes them: a position delete file per task and partition group, its rows
sorted by (`file_path`, `pos`) because a bin's data files are taken in path order and
positions come out ascending; or (format v3) a DV per data file, merged with the positions
its current DV or legacy position delete files already delete, in one Puffin file per task.

Bins (`conversion_bins`): the data files in (partition group, path) order, cut into runs of
about the same key bytes, at least as many runs overall as there are workers, so a
one-partition table still keeps every core busy, and many small partitions share a task.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from icecore.data.arrow_numpy import int64s, repeated_string
from icecore.data.arrow_schema import arrow_schema
from icecore.data.dv_files import PuffinTaskWriter
from icecore.data.live_batches import DataRef, DeleteRef, LiveBatches
from icecore.data.parquet_writer import TaskWriter, WritePlan
from icecore.io import FileIO
from icecore.spec.manifest import DataFile, content_key
from icecore.spec.types import NestedField

MAX_BIN_BYTES = 256 * 1024 * 1024  # key-column bytes one task reads at most
_WHOLE_FILE = 2**62


@dataclass(frozen=True)
class Target:
    """A data file some equality deletes apply to: its scan task's pieces the task needs."""

    file: DataFile
    sequence_number: int
    group: int
    equality: tuple[DataFile, ...]
    previous: tuple[DataFile, ...] = ()  # v3: the position deletes and DV a new DV merges


def key_bytes(file: DataFile, field_ids: Sequence[int]) -> int:
    """The bytes of `file` a match reads: its key columns' (from the manifest's column sizes),
    the whole file when they are not recorded."""
    sizes = file.column_sizes or {}
    if all(i in sizes for i in field_ids):
        return sum(sizes[i] for i in field_ids)
    return file.file_size_in_bytes


def conversion_bins(
    targets: Sequence[Target], key_fields: Sequence[NestedField], workers: int
) -> list[dict[str, Any]]:
    """The targets in (group, path) order, in runs of about equal key bytes, each a task's
    work (JSON-able: it travels to the task). A bin may span groups (one position delete file
    each), so many small partitions do not make as many tasks."""
    ids = [f.field_id for f in key_fields]
    total = sum(key_bytes(t.file, ids) for t in targets)
    per_bin = min(MAX_BIN_BYTES, max(1, math.ceil(total / max(1, workers))))
    bins: list[dict[str, Any]] = []
    used = per_bin
    for t in sorted(targets, key=lambda t: (t.group, t.file.file_path)):
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


def convert_bin(
    work: dict[str, Any],
    plan: WritePlan,
    key_fields: Sequence[NestedField],
    *,
    deletion_vectors: bool,
    io: FileIO,
    task: int = 0,
) -> list[tuple[Any, ...]]:
    """Find one bin's (`conversion_bins`) deleted positions, reading the `key_fields`
    through `io`, and write them (as DVs with `deletion_vectors`) as task `task`; what the
    task wrote (its writer's report rows). The driver's threads call this too, so nothing
    here converts Python or NumPy values with pyarrow's own calls (`icecore.data.arrow_numpy`)."""
    fields = list(key_fields)
    data = [DataRef.from_json(d) for d in work["data"]]
    deletes = [DeleteRef.from_json(d) for d in work["deletes"]]
    # One reader: its equality look-up reads only the equality deletes of a data file, its
    # `deleted_positions` only the position deletes and DV.
    reader = LiveBatches(
        io,
        fields,
        arrow_schema(fields, all_optional=True),
        deletes,
        [d.path for d in data],
    )
    if deletion_vectors:
        return _write_dvs(data, reader, plan, io)
    writer = TaskWriter(plan, io, task)
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
    data: Sequence[DataRef], reader: LiveBatches, plan: WritePlan, io: FileIO
) -> list[tuple[Any, ...]]:
    """A DV for every data file with newly deleted positions, holding its old ones too."""
    writer = PuffinTaskWriter(plan.location, io, {}, {}, plan.provider())
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
