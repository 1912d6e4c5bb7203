"""Deleting or moving many files: on the driver when there are few, as a Spark job over the
list of paths when there are many (a frame of the paths spread over tasks, each handling its
share through `mapInArrow` with the executor's `FileIO`, built from the catalog's properties,
so credentials travel as they do for the data files; the same on classic Spark and over Spark
Connect). The maintenance jobs move files into the table's trash (`icecore.trash`) and delete
them for good once it is past its window, or at once with a retention of `0s`.

A file already gone counts as deleted (another cleanup got there first), and a move whose
source is gone and target there as done; any other failure is collected, never raised: by
the time the maintenance jobs remove files, their commit has happened, and a file left
behind only costs storage (orphan-file removal finds it later).
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
_PAIRS = "path string, target string"


@dataclass(frozen=True)
class DeletionOutcome:
    """Paths deleted or moved (or already gone), and those that could not be, with the
    cause."""

    deleted: frozenset[str] = frozenset()
    failed: Mapping[str, str] = field(default_factory=dict)
    on_executors: bool = False


def _handle(
    io: FileIO, pairs: Sequence[tuple[str, str | None]], threads: int
) -> Iterator[tuple[str, str | None]]:
    """(path, None when it is done, else why not): a pair with a target is a move into a
    directory of the run's own (`FileIO.move_many`), without one a delete (S3 keys in bulk)."""
    moves = [(path, target) for path, target in pairs if target is not None]
    failed = io.move_many(moves, threads, fresh_targets=True) if moves else {}
    failed.update(io.delete_many([path for path, target in pairs if target is None], threads))
    for path, _ in pairs:
        yield path, failed.get(path)


def _handle_paths(
    batches: Iterator[pa.RecordBatch], properties: dict[str, str], threads: int
) -> Iterator[pa.RecordBatch]:
    """Handle the task's share of the pairs; `_OUTCOME` rows (cause null: done)."""
    io = worker_io(properties)
    for batch in batches:
        pairs = list(zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True))
        outcome = list(_handle(io, pairs, threads))
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
    return move_and_delete(
        spark, io, (), paths, executor_threshold=executor_threshold, threads=threads
    )


def move_and_delete(
    spark: SessionSource | None,
    io: FileIO,
    moves: Iterable[tuple[str, str]],
    deletes: Iterable[str],
    *,
    executor_threshold: int = DEFAULT_EXECUTOR_THRESHOLD,
    threads: int = DEFAULT_THREADS,
) -> DeletionOutcome:
    """Move each (path, target), targets in a directory of the caller's own, and delete
    `deletes`, in one pass as `delete_files` deletes: `deleted` are the paths moved or
    deleted."""
    pairs: dict[str, str | None] = dict.fromkeys(deletes)
    pairs.update(moves)
    return _run(spark, io, pairs, executor_threshold=executor_threshold, threads=threads)


def _run(
    spark: SessionSource | None,
    io: FileIO,
    pairs: Mapping[str, str | None],
    *,
    executor_threshold: int,
    threads: int,
) -> DeletionOutcome:
    unique = sorted(pairs.items())
    if not unique:
        return DeletionOutcome()
    on_executors = spark is not None and len(unique) >= executor_threshold
    if on_executors:
        assert spark is not None
        session = session_of(spark)  # started only now: few files need no Spark
        slices = max(1, min(len(unique) // _FILES_PER_TASK + 1, 10_000))
        slices = max(slices, min(len(unique), parallelism(session)))
        handle = partial(_handle_paths, properties=dict(io.properties), threads=threads)
        frame = session.createDataFrame(unique, _PAIRS)
        rows = frame.repartition(slices).mapInArrow(handle, _OUTCOME).collect()
        results = [(row.path, row.cause) for row in rows]
    else:
        results = list(_handle(io, unique, threads))
    failed = {path: cause for path, cause in results if cause is not None}
    done = frozenset(path for path, cause in results if cause is None)
    return DeletionOutcome(deleted=done, failed=failed, on_executors=on_executors)
