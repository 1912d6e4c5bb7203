"""A job run as attempts: each loads the table, plans, writes and commits; a commit conflict
starts the next attempt from a fresh plan (`icecore.actions.committing.with_replanning`).
The result then says how many attempts it took and which commits it lost to."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol, TypeVar

from icecore.actions.committing import with_replanning
from icecore.catalog import Catalog
from icecore.table import Table


class ReplannedOptions(Protocol):
    """The options of a job that re-plans after a conflict (`spark_jobs.specs.jobs`)."""

    @property
    def table(self) -> str: ...

    @property
    def max_attempts(self) -> int: ...


R = TypeVar("R")


def run_attempts(
    job: str, catalog: Catalog, options: ReplannedOptions, once: Callable[[Table], R]
) -> R:
    """`once(table)` on the freshly loaded `options.table`, up to `options.max_attempts`
    times; its result (a `spark_jobs.specs.results` dataclass with `attempts`, `conflicts`
    and `seconds`) with the table, the attempts, the conflicts and the run's seconds."""
    started = time.monotonic()
    done = with_replanning(
        job, lambda: once(catalog.load_table(options.table)), options.max_attempts
    )
    counters: dict[str, Any] = {
        "table": options.table,
        "attempts": done.attempts,
        "conflicts": done.conflicts,
        "seconds": round(time.monotonic() - started, 3),
    }
    return replace(done.value, **counters)  # type: ignore[type-var]
