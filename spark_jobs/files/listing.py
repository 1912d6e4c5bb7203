"""Listing every file under a table location, in parallel for large tables.

The driver lists the top of the tree itself, directory level by directory level, down to
`depth` levels; the directories it reached are then listed recursively as a Spark job (a
frame of their locations spread over tasks, each listing its share through `mapInArrow` with
the executor's `FileIO`, built from the catalog's properties), which runs the same on classic
Spark and over Spark Connect. With fewer directories than `parallel_threshold` everything is
listed on the driver.

Object stores (S3, GCS, Azure Blob) have no directories, only keys: a walk level by level
costs a request per "directory" and depends on the store synthesizing them (not every
S3-compatible store or emulator does). There the driver lists the prefix flat instead, a
thousand keys a request, pages followed.

Locations come back spelled with the caller's scheme and authority, which is what makes them
comparable with the ones the metadata holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import partial

import pyarrow as pa
from pyarrow import fs as pafs

from icecore.errors import FileError
from icecore.io import FileIO, ListedFile
from icecore.io.locations import Store, key_within, location_key, parse
from spark_jobs.common.session import SessionSource, parallelism, session_of
from spark_jobs.common.worker import worker_io

_OBJECT_STORES = frozenset({Store.S3, Store.GCS, Store.AZURE})
DEFAULT_DEPTH = 2
DEFAULT_PARALLEL_THRESHOLD = 8
_LISTED = "location string, size long, mtime_ms long"


@dataclass(frozen=True)
class Listing:
    files: list[ListedFile]
    directories_listed_on_executors: int


def _children(io: FileIO, location: str) -> tuple[list[ListedFile], list[str]]:
    """(files, subdirectory locations) directly under `location`."""
    filesystem, path = io.resolve(location)
    selector = pafs.FileSelector(path, recursive=False, allow_not_found=True)
    try:
        infos = filesystem.get_file_info(selector)
    except OSError as exc:
        raise FileError(location, f"cannot list: {exc}") from exc
    base = location.rstrip("/")
    files, directories = [], []
    for info in infos:
        child = f"{base}/{info.base_name}"
        if info.type == pafs.FileType.Directory:
            directories.append(child)
        elif info.type == pafs.FileType.File:
            mtime_ms = None if info.mtime_ns is None else info.mtime_ns // 1_000_000
            files.append(ListedFile(child, int(info.size), mtime_ms))
    return files, directories


def _list_directories(
    batches: Iterator[pa.RecordBatch], properties: dict[str, str]
) -> Iterator[pa.RecordBatch]:
    """Every file under each directory of the task's share (`_LISTED` rows)."""
    io = worker_io(properties)
    for batch in batches:
        listed = [f for location in batch.column(0).to_pylist() for f in io.list_prefix(location)]
        yield pa.RecordBatch.from_pydict(
            {
                "location": [f.location for f in listed],
                "size": pa.array([f.size for f in listed], pa.int64()),
                "mtime_ms": pa.array([f.mtime_ms for f in listed], pa.int64()),
            }
        )


def list_files(
    spark: SessionSource | None,
    io: FileIO,
    location: str,
    *,
    depth: int = DEFAULT_DEPTH,
    parallel_threshold: int = DEFAULT_PARALLEL_THRESHOLD,
    skip: Iterable[str] = (),
) -> Listing:
    """Every file under the directory `location`, at any depth. Directories in `skip` that
    the driver reaches are not descended into (another table's trees: listing them is
    wasted work; callers still filter, since executors list whole subtrees)."""
    skipped = {location_key(s) for s in skip}
    if parse(location).store in _OBJECT_STORES:
        listed = [
            f
            for f in io.list_prefix(location)
            if not any(key_within(location_key(f.location), s) for s in skipped)
        ]
        return Listing(listed, 0)
    files: list[ListedFile] = []
    frontier = [location]
    for _ in range(depth):
        next_level: list[str] = []
        for directory in frontier:
            found, subdirectories = _children(io, directory)
            files.extend(found)
            next_level.extend(d for d in subdirectories if location_key(d) not in skipped)
        frontier = next_level
        if not frontier:
            break
    if not frontier:
        return Listing(files, 0)
    if spark is None or len(frontier) < parallel_threshold:
        for directory in frontier:
            files.extend(io.list_prefix(directory))
        return Listing(files, 0)
    session = session_of(spark)  # started only now: a small tree needs no Spark
    slices = min(len(frontier), max(1, parallelism(session) * 4))
    directories = session.createDataFrame([(d,) for d in sorted(frontier)], "location string")
    rows = (
        directories.repartition(slices)
        .mapInArrow(partial(_list_directories, properties=dict(io.properties)), _LISTED)
        .collect()
    )
    files.extend(ListedFile(r.location, r.size, r.mtime_ms) for r in rows)
    return Listing(files, len(frontier))
