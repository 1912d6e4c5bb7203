"""Deleting many files: on the driver when there are few, as a Spark job
over the list of paths when there are many (each executor builds its own `FileIO` from the
catalog's properties, so credentials travel as they do for the data files).

A file already gone counts as deleted (another cleanup got there first); any other failure is
collected, never raised: by the time the maintenance jobs delete, their commit has happened,
and a file left behind only costs storage (orphan-file removal finds it later).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from icecore.io import FileIO
from spark_jobs.common.session import SessionSource, session_of

# Below this many files a Spark job costs more than it saves.
DEFAULT_EXECUTOR_THRESHOLD = 1000
DEFAULT_THREADS = 16
_FILES_PER_TASK = 500


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


def _delete_partition(
    properties: Mapping[str, str], threads: int
) -> Callable[[Iterable[str]], Iterator[tuple[str, str | None]]]:
    def run(paths: Iterable[str]) -> Iterator[tuple[str, str | None]]:
        io = FileIO(properties)
        yield from _delete_all(io, list(paths), threads)

    return run


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
        slices = max(slices, min(len(unique), session.sparkContext.defaultParallelism))
        rdd = session.sparkContext.parallelize(unique, slices)
        results = rdd.mapPartitions(_delete_partition(dict(io.properties), threads)).collect()
    else:
        results = list(_delete_all(io, unique, threads))
    failed = {path: cause for path, cause in results if cause is not None}
    deleted = frozenset(path for path, cause in results if cause is None)
    return DeletionOutcome(deleted=deleted, failed=failed, on_executors=on_executors)
