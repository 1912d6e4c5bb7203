"""Committing a rewrite of delete files, and re-planning after a conflict.

`DeleteRewrite` is icecore's `RewriteFiles` (operation `replace`) that can also require data
files to still be live: a job that turns equality deletes into position deletes on data file
D must not commit if D was replaced meanwhile (a compaction may have written D's rows into a
file the removed equality delete still applied to; the new position deletes would miss it).
`commit_batches` splits a job's groups into the commits of `partial-progress.enabled`.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from icecore.commit.rewrite import RewriteFiles
from icecore.commit.validation import Validator
from icecore.errors import CommitConflictError
from icecore.spec.manifest import DataFile
from icecore.spec.refs import MAIN_BRANCH
from icecore.table import Table
from spark_jobs.common.errors import JobError

G = TypeVar("G")


class DeleteRewrite(RewriteFiles):
    """`RewriteFiles` plus `validate_data_files_exist` (replace and overwrite removals)."""

    def __init__(self, table: Table, branch: str = MAIN_BRANCH) -> None:
        super().__init__(table, branch)
        self._must_exist: set[str] = set()

    def validate_data_files_exist(self, paths: Iterable[str]) -> DeleteRewrite:
        self._must_exist.update(paths)
        return self

    def _validate_with(self, validator: Validator) -> None:
        super()._validate_with(validator)
        validator.data_files_exist(self._must_exist, include_deletes=False)


def with_replanning(
    job: str, attempt: Callable[[], dict[str, Any]], max_attempts: int
) -> dict[str, Any]:
    """Run `attempt` (plan, write, commit) again from a fresh plan after a commit conflict,
    up to `max_attempts` times; then fail naming the conflicting snapshot."""
    if max_attempts < 1:
        raise JobError("--max-attempts must be at least 1")
    conflicts = []
    for n in range(1, max_attempts + 1):
        try:
            result = attempt()
        except CommitConflictError as exc:
            conflicts.append(exc)
            if n == max_attempts:
                raise JobError(
                    f"{job}: commit conflict on each of {n} attempt(s); last: {exc} "
                    f"(conflicting snapshot {exc.snapshot_id})"
                ) from exc
            continue
        result["attempts"] = n
        result["conflicts"] = [str(c) for c in conflicts]
        return result
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
