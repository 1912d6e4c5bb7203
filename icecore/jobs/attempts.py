"""A job run as attempts (`icecore.actions.committing.with_replanning`): each loads the table,
plans, writes and commits; a commit conflict starts the next attempt, from a fresh plan of
everything, or with partial progress of the conflicting groups' partitions only. The result
then says how many attempts it took, which commits it lost to and which groups still
conflicted at the end."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import fields, replace
from typing import Any, Protocol, TypeVar

from icecore.actions.committing import Attempt, Attempted, with_replanning
from icecore.catalog import Catalog
from icecore.table import Table


class ReplannedOptions(Protocol):
    """The options of a job that re-plans after a conflict (`icecore.jobs.jobs`)."""

    @property
    def table(self) -> str: ...

    @property
    def max_attempts(self) -> int: ...


R = TypeVar("R")
K = TypeVar("K")


def run_attempts(
    job: str,
    catalog: Catalog,
    options: ReplannedOptions,
    once: Callable[[Table, Attempt[K]], Attempted[R, K]],
) -> R:
    """`once(table, attempt)` on the freshly loaded `options.table`, up to
    `options.max_attempts` times; the last attempt's result (a `icecore.jobs.results`
    dataclass with `attempts`, `conflicts` and `seconds`, and `failed_groups` if the job
    has partial progress) with the table, the attempts, the conflicts, the failed groups and
    the run's seconds."""
    started = time.monotonic()
    done = with_replanning(
        job,
        lambda attempt: once(catalog.load_table(options.table), attempt),
        options.max_attempts,
    )
    counters: dict[str, Any] = {
        "table": options.table,
        "attempts": done.attempts,
        "conflicts": done.conflicts,
        "seconds": round(time.monotonic() - started, 3),
    }
    if "failed_groups" in {f.name for f in fields(done.value)}:  # type: ignore[arg-type]
        counters["failed_groups"] = done.failed_groups
    return replace(done.value, **counters)  # type: ignore[type-var]


def again(attempt: Attempt[Any]) -> str:
    """What a plan's log line adds when it is not the first: the attempt, and the snapshot
    whose commit made it necessary."""
    if attempt.after is None:
        return ""
    return (
        f" (again, attempt {attempt.number}, after a conflict with snapshot "
        f"{attempt.after.snapshot_id})"
    )
