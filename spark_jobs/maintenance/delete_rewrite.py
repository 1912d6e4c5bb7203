"""Committing a rewrite of delete files, and re-planning after a conflict.

`DeleteRewrite` is icecore's `RewriteFiles` (operation `replace`) that can also require data
files to still be live: a job that turns equality deletes into position deletes on data file
D must not commit if D was replaced meanwhile (a compaction may have written D's rows into a
file the removed equality delete still applied to; the new position deletes would miss it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from icecore.commit.rewrite import RewriteFiles
from icecore.commit.validation import Validator
from icecore.errors import CommitConflictError
from icecore.refs import MAIN_BRANCH
from icecore.table import Table
from spark_jobs.common.errors import JobError


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
