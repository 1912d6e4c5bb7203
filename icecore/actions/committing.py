"""How the rewrite actions commit: in batches, again after a conflict, and never leaving a
half-written run behind (Java's `RewriteDataFilesCommitManager` and its callers).

- `commit_batches` splits a job's groups into the commits of `partial-progress.enabled`
  (at most `partial-progress.max-commits` of them, as Iceberg);
- `with_replanning` runs a whole plan-write-commit again from a fresh plan after a conflict,
  up to `--max-attempts` times;
- `cleanup_on_failure` deletes what a failed run wrote: everything when nothing was
  committed, else only the files no commit took; nothing at all when the catalog cannot say
  whether the last commit happened (the files may be live);
- `delete_quietly` is the best-effort delete all of these use: a file left behind is only an
  orphan, which must not hide the error that made it one.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from icecore.errors import CommitConflictError, CommitStateUnknownError, ValidationError
from icecore.spec.manifest import DataFile
from icecore.table import Table

G = TypeVar("G")
R = TypeVar("R")
# Run between a job's writing and its commit (tests commit concurrently there).
BeforeCommit = Callable[[Table], None]


class Discardable(Protocol):
    """What a run wrote, deletable as a whole (an engine's files of one job run)."""

    def discard(self) -> None: ...


@dataclass(frozen=True)
class Replanned(Generic[R]):
    """What `with_replanning` returns: the attempt's value, after how many attempts, and the
    conflicts that made the earlier ones fail."""

    value: R
    attempts: int
    conflicts: list[str]


def with_replanning(job: str, attempt: Callable[[], R], max_attempts: int) -> Replanned[R]:
    """Run `attempt` (plan, write, commit) again from a fresh plan after a commit conflict,
    up to `max_attempts` times; then fail naming the conflicting snapshot."""
    if max_attempts < 1:
        raise ValidationError(f"{job}: max-attempts must be at least 1, got {max_attempts}")
    conflicts = []
    for n in range(1, max_attempts + 1):
        try:
            value = attempt()
        except CommitConflictError as exc:
            conflicts.append(exc)
            if n == max_attempts:
                raise CommitConflictError(
                    f"{job}: commit conflict on each of {n} attempt(s); last: {exc} "
                    f"(conflicting snapshot {exc.snapshot_id})",
                    snapshot_id=exc.snapshot_id,
                ) from exc
            continue
        return Replanned(value, n, [str(c) for c in conflicts])
    raise AssertionError("unreachable")


def commit_batches(groups: Sequence[G], partial_progress: bool, max_commits: int) -> list[list[G]]:
    """The groups of each commit: all in one, or with partial progress spread evenly over at
    most `max_commits` commits (as Iceberg's `partial-progress.max-commits`). Always at
    least one commit, which may hold no group (it then only removes dangling files)."""
    if not partial_progress or len(groups) <= 1:
        return [list(groups)]
    size = math.ceil(len(groups) / min(len(groups), max_commits))
    return [list(groups[i : i + size]) for i in range(0, len(groups), size)]


def delete_quietly(table: Table, files: Iterable[DataFile]) -> None:
    """Delete files no commit references (best effort: what stays is only an orphan)."""
    for f in files:
        with contextlib.suppress(Exception):
            table.io.delete(f.file_path, missing_ok=True)


@contextlib.contextmanager
def cleanup_on_failure(
    table: Table,
    run: Discardable,
    *,
    committed: Callable[[], bool],
    uncommitted: Callable[[], Iterable[DataFile]],
) -> Iterator[None]:
    """On any failure inside the block, delete the run's files (`run.discard()`) when nothing
    was `committed()`, else the `uncommitted()` ones; then re-raise."""
    try:
        yield
    except CommitStateUnknownError:
        raise  # the files may be committed: never delete them
    except BaseException:
        if not committed():
            run.discard()
        else:  # keep what this run's earlier commits reference
            delete_quietly(table, uncommitted())
        raise
