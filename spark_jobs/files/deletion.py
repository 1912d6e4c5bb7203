"""Deleting many files: on the driver when there are few, as a Spark job
over the list of paths when there are many (a frame of the paths spread over tasks, each
deleting its share through `mapInArrow` with the executor's `FileIO`, built from the catalog's
properties, so credentials travel as they do for the data files; the same on classic Spark and
over Spark Connect).

A file already gone counts as deleted (another cleanup got there first); any other failure is
collected, never raised: by the time the maintenance jobs delete, their commit has happened,
and a file left behind only costs storage (orphan-file removal finds it later).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

import pyarrow as pa

from icecore.io import FileIO
from spark_jobs.common.session import SessionSource, parallelism, session_of
from spark_jobs.common.worker import worker_io

# Below this many files a Spark job costs more than it saves.
DEFAULT_EXECUTOR_THRESHOLD = 1000
DEFAULT_THREADS = 16
_FILES_PER_TASK = 500
_OUTCOME = "path string, cause string"


@dataclass(frozen=True)
class DeletionOutcome:
    """Paths deleted (or already gone) and paths that could not be deleted, with the cause."""

    deleted: frozenset[str] = frozenset()
    failed: Mapping[str, str] = field(default_factory=dict)
    on_executors: bool = False


def _delete_all(io: FileIO, paths: Sequence[str], threads: int) -> Iterator[tuple[str, str | None]]:
    """(path, None when it is gone afterwards, else why not); S3 keys go in bulk requests."""
    failed = io.delete_many(paths, threads=threads)
    for path in paths:
        yield path, failed.get(path)


def _delete_paths(
    batches: Iterator[pa.RecordBatch], properties: dict[str, str], threads: int
) -> Iterator[pa.RecordBatch]:
    """Delete the task's share of the paths; `_OUTCOME` rows (cause null: deleted)."""
    io = worker_io(properties)
    for batch in batches:
        outcome = list(_delete_all(io, batch.column(0).to_pylist(), threads))
        yield pa.RecordBatch.from_pydict(
            {
                "path": [path for path, _ in outcome],
                "cause": pa.array([cause for _, cause in outcome], pa.string()),
            }
        )


def delete_files(
    spark: SessionSource | None,
    io: FileIO,
    paths: Iterable[str],
    *,
    executor_threshold: int = DEFAULT_EXECUTOR_THRESHOLD,
    threads: int = DEFAULT_THREADS,
) -> DeletionOutcome:
    """Delete `paths`; on the executors when there are at least `executor_threshold` of them
    (and a session is given, or can be started), else on the driver with `threads` threads."""
    unique = sorted(set(paths))
    if not unique:
        return DeletionOutcome()
    on_executors = spark is not None and len(unique) >= executor_threshold
    if on_executors:
        assert spark is not None
        session = session_of(spark)  # started only now: few files need no Spark
        slices = max(1, min(len(unique) // _FILES_PER_TASK + 1, 10_000))
        slices = max(slices, min(len(unique), parallelism(session)))
        delete = partial(_delete_paths, properties=dict(io.properties), threads=threads)
        paths = session.createDataFrame([(p,) for p in unique], "path string")
        rows = paths.repartition(slices).mapInArrow(delete, _OUTCOME).collect()
        results = [(row.path, row.cause) for row in rows]
    else:
        results = list(_delete_all(io, unique, threads))
    failed = {path: cause for path, cause in results if cause is not None}
    deleted = frozenset(path for path, cause in results if cause is None)
    return DeletionOutcome(deleted=deleted, failed=failed, on_executors=on_executors)
