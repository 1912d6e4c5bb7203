"""How the rewrite actions commit: in batches, again after a conflict, and never leaving a
half-written run behind (Java's `RewriteDataFilesCommitManager` and its callers).

- `commit_batches` splits a job's groups into the commits of `partial-progress.enabled`
  (at most `partial-progress.max-commits` of them, as Iceberg);
- `with_replanning` is the one conflict-retry loop of every action that re-plans: an
  attempt plans, writes and commits; a conflict (a `CommitConflictError`, naming the
  conflicting snapshot) starts the next attempt, up to `--max-attempts` in all. Without
  partial progress nothing of a failed attempt committed, and the next plans everything
  again; with it the batches that committed stand and the next attempt plans only the
  partitions of the groups whose commit conflicted. What still conflicts at the last attempt
  fails the run, or with partial progress is reported in `failed_groups` (the run fails only
  when nothing at all was committed);
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
K = TypeVar("K")  # what re-planning is limited to: a partition
# Run between a job's writing and its commit (tests commit concurrently there).
BeforeCommit = Callable[[Table], None]


class Discardable(Protocol):
    """What a run wrote, deletable as a whole (an engine's files of one job run)."""

    def discard(self) -> None: ...


@dataclass(frozen=True)
class Attempt(Generic[K]):
    """One plan-write-commit of a run: its number (from 1), the partitions it plans (None:
    all; else those of the groups whose commit conflicted in the attempt before, with partial
    progress), and the conflict that made it necessary (None for the first)."""

    number: int
    only: frozenset[K] | None = None
    after: CommitConflictError | None = None


@dataclass(frozen=True)
class FailedBatch(Generic[K]):
    """A commit of whole groups that conflicted while the run's other commits stood (partial
    progress): the groups' partitions, each group's description, and the conflict."""

    partitions: tuple[K, ...]
    groups: tuple[str, ...]
    conflict: CommitConflictError

    def messages(self) -> list[str]:
        """One line per group, naming the conflicting snapshot."""
        return [f"{group}: {described(self.conflict)}" for group in self.groups]


@dataclass(frozen=True)
class Attempted(Generic[R, K]):
    """What an attempt did: its value (the run's result so far), how many commits it made, and
    the batches whose commit conflicted (with partial progress; without it, an attempt
    raises the conflict, having committed nothing)."""

    value: R
    commits: int = 0
    failed: Sequence[FailedBatch[K]] = ()


@dataclass(frozen=True)
class Replanned(Generic[R]):
    """What `with_replanning` returns: the last attempt's value, after how many attempts, the
    conflicts that made attempts fail or groups re-plan, and the groups whose commit still
    conflicted at the last attempt (partial progress only)."""

    value: R
    attempts: int
    conflicts: list[str]
    failed_groups: list[str]


def described(conflict: CommitConflictError) -> str:
    """A conflict, naming the snapshot it conflicts with."""
    if conflict.snapshot_id is None:
        return str(conflict)
    return f"{conflict} (conflicting snapshot {conflict.snapshot_id})"


def with_replanning(
    job: str, attempt: Callable[[Attempt[K]], Attempted[R, K]], max_attempts: int
) -> Replanned[R]:
    """Run `attempt` (plan, write, commit) until nothing conflicts, up to `max_attempts` times
    (see the module doc); fail naming the conflicting snapshot when the last attempt
    conflicted and nothing at all was committed."""
    if max_attempts < 1:
        raise ValidationError(f"{job}: max-attempts must be at least 1, got {max_attempts}")
    conflicts: list[str] = []
    only: frozenset[K] | None = None
    after: CommitConflictError | None = None
    committed = 0
    for n in range(1, max_attempts + 1):
        try:
            done = attempt(Attempt(n, only, after))
        except CommitConflictError as exc:  # nothing of this attempt committed
            conflicts.append(described(exc))
            if n == max_attempts:
                raise CommitConflictError(
                    f"{job}: commit conflict on each of {n} attempt(s); last: {described(exc)}",
                    snapshot_id=exc.snapshot_id,
                ) from exc
            after = exc
            continue
        committed += done.commits
        if not done.failed:
            return Replanned(done.value, n, conflicts, [])
        conflicts.extend(line for batch in done.failed for line in batch.messages())
        after = done.failed[-1].conflict
        if n == max_attempts:
            if not committed:
                raise CommitConflictError(
                    f"{job}: every commit conflicted on each of {n} attempt(s); last: "
                    f"{done.failed[-1].messages()[0]}",
                    snapshot_id=after.snapshot_id,
                )
            failed = [line for batch in done.failed for line in batch.messages()]
            return Replanned(done.value, n, conflicts, failed)
        only = frozenset(k for batch in done.failed for k in batch.partitions)
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
