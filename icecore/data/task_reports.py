"""What a writing task reports of the files it wrote, and which of them the driver keeps.

A task's report is the only thing the driver collects of a write: per file its location, the
group of its rows, the partition values its partition columns gave, its footer metrics
(`icecore.data.parquet_writer`) and, for a rewrite, where its rows came from
(`icecore.data.position_maps`). A retried or speculative task attempt writes new files under
new names (a uuid per attempt); only the files the successful attempts report are kept, and
the others are deleted once the write is done: those below the write's directory, that is; a
failed attempt's files under an object-storage table's hash directories cannot be listed
apart from the table's and are left to orphan removal.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from icecore.data.metrics import decode
from icecore.io import FileIO

# What a task reports of a file: location, group, partition values as JSON, metrics as JSON,
# and (a rewrite's files) where its rows came from as JSON.
Reported = tuple[str, int | None, str | None, str, str | None]
REPORTED = pa.schema(
    [("location", pa.string()), ("group", pa.int32()), ("partition", pa.string()),
     ("metrics", pa.string()), ("moved", pa.string())]
)  # fmt: skip
REPORTED_NAMES = tuple(REPORTED.names)  # a `written_batch` row's, in order


def written_batch(written: Sequence[Reported]) -> pa.RecordBatch:
    """What a writing task reports: each file's location, the group of its rows (null when
    the write has no groups), the partition values its partition columns gave (a JSON list of
    Iceberg's single-value forms; null when it has no such columns), its metrics as JSON and
    where its rows came from (null but in a rewrite)."""
    columns = list(zip(*written, strict=True)) or [() for _ in REPORTED]
    return pa.RecordBatch.from_arrays(
        [pa.array(c, f.type) for c, f in zip(columns, REPORTED, strict=True)], schema=REPORTED
    )


@dataclass(frozen=True)
class Written:
    """A file a task wrote: the group of its rows (None when the write has none), the
    partition values its partition columns gave (JSON forms; None when it has none) and its
    metrics as `DataFile` keyword values."""

    group: int | None
    partition: list[Any] | None
    metrics: dict[str, Any]
    moved: str | None = None  # a rewrite's: where the rows came from (`position_maps`)


def kept_files(io: FileIO, location: str, reported: Sequence[Any]) -> dict[str, Written]:
    """The files the successful task attempts reported (`written_batch` rows), sorted by
    location; every other Parquet file below `location` (failed or duplicate attempts) is
    deleted."""
    rows = sorted(reported, key=lambda row: row["location"])
    kept = {
        row["location"]: Written(
            row["group"],
            None if row["partition"] is None else json.loads(row["partition"]),
            decode(json.loads(row["metrics"])),
            row["moved"],
        )
        for row in rows
    }
    delete_strays(io, location, list(kept), ".parquet")
    return kept


def delete_strays(io: FileIO, location: str, kept: Collection[str], suffix: str) -> None:
    """Delete the files ending in `suffix` below `location` that are not `kept`: those of
    failed or duplicate task attempts, which no manifest will reference.

    File names are unique (a uuid per task attempt), so they are compared by name: the
    listing may spell the directory differently from how the tasks did."""
    names = {k.rsplit("/", 1)[-1] for k in kept}
    for listed in io.list_prefix(location):
        name = listed.location.rsplit("/", 1)[-1]
        if name.endswith(suffix) and name not in names:
            io.delete(listed.location, missing_ok=True)
