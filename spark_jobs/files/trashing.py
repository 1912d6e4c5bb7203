"""Taking files out of a table through its trash: the last step of expiry and orphan removal.

A run moves the files into the table's trash (`icecore.trash`), its record written first, or,
with `icefloe.trash.retention` at `0s`, deletes them at once, as before the trash existed,
after logging them in the deletion log. Either way it then purges what is past the window
(logged first too), settles the moves of a run that was killed, and keeps the trash's summary
current for the health check. Moves, purge and at-once deletions go in one pass
(`spark_jobs.files.deletion`): on the executors from `executor_threshold` files on.

The retention is read before the job commits (`retention_of`): a value that does not parse
fails the job while the table is still untouched.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from icecore.errors import ValidationError
from icecore.jobs.errors import JobError
from icecore.jobs.grammar import format_duration_ms
from icecore.spec.properties import TRASH_RETENTION
from icecore.table import Table
from icecore.trash import PurgedFile, Trash, new_run_id, purged_files
from spark_jobs.common.session import SessionSource
from spark_jobs.files.deletion import move_and_delete

LOG = logging.getLogger("icefloe.trash")
_MAX_REPORTED = 20

# A file to take out: (location, kind as `icecore.trash.records` names it, size if known).
File = tuple[str, str, int | None]


def retention_of(table: Table) -> int:
    """The table's `icefloe.trash.retention` in milliseconds; JobError if it does not parse."""
    try:
        return TRASH_RETENTION.read(table.metadata.properties)
    except ValidationError as exc:
        raise JobError(f"{table.name}: {exc}; nothing was changed") from None


@dataclass(frozen=True)
class Removal:
    """What taking files out did: `removed` are the paths no longer in place (in the trash,
    or deleted at once), `failed` those left, with why."""

    retention_ms: int
    run: str | None = None
    removed: frozenset[str] = frozenset()
    failed: Mapping[str, str] = field(default_factory=dict)
    on_executors: bool = False
    trashed_files: int = 0
    trashed_bytes: int = 0
    purged_runs: tuple[str, ...] = ()
    purged_files: int = 0
    purged_bytes: int = 0
    failed_purges: Mapping[str, str] = field(default_factory=dict)
    reconciled_runs: tuple[str, ...] = ()
    trash_files: int = 0
    trash_bytes: int = 0
    logged: bool = False  # the run wrote a deletion log (under its id)

    def report(self) -> dict[str, Any]:
        """The result counters both jobs share (`icecore.jobs.results.TrashingResult`)."""
        return {
            "trash_retention": format_duration_ms(self.retention_ms),
            "trash_run": self.run if self.trashed_files or self.logged else None,
            "trashed_files_count": self.trashed_files,
            "trashed_bytes": self.trashed_bytes,
            "purged_runs": list(self.purged_runs),
            "purged_files_count": self.purged_files,
            "purged_bytes": self.purged_bytes,
            "failed_purges_count": len(self.failed_purges),
            "failed_purges": dict(sorted(self.failed_purges.items())[:_MAX_REPORTED]),
            "trash_files_count": self.trash_files,
            "trash_bytes": self.trash_bytes,
        }


def take_out(
    spark: SessionSource | None,
    table: Table,
    job: str,
    files: Sequence[File],
    *,
    retention_ms: int,
    now_ms: int,
    executor_threshold: int,
    threads: int,
    expired: Mapping[str, Sequence[dict[str, Any]]] | None = None,
) -> Removal:
    """Take `files` out of `table` (see the module doc). `expired` keeps an expiry's
    `snapshots`, `statistics` and `partition_statistics` in the run's record."""
    trash = Trash.of(table)
    records, done, problems = trash.records()
    for problem in problems:
        LOG.warning("trash of %s: %s", table.name, problem)
    contents = trash.contents(records)
    reconciled = trash.reconcile(now_ms, records=records, done=done, contents=contents)
    if reconciled:
        contents = trash.contents(records)
    run = new_run_id(job, now_ms)
    purge = trash.past_window(retention_ms, now_ms, keep=[run], contents=contents, records=records)
    log_lines = purged_files(purge)
    moves: list[tuple[str, str]] = []
    deletes = [f.trash for f in purge.files]
    if retention_ms == 0:
        deletes += [path for path, _, _ in files]
        log_lines += [PurgedFile(path, size) for path, _, size in files]
    elif files:
        moves = trash.begin(trash.new_record(job, files, now_ms=now_ms, run=run, **(expired or {})))
    trash.log_deletions(run, job, log_lines, now_ms=now_ms, retention_ms=retention_ms)
    outcome = move_and_delete(
        spark,
        table.io,
        moves,
        deletes,
        executor_threshold=executor_threshold,
        threads=threads,
    )
    purging = {f.trash for f in purge.files}
    failed_purges = {t: why for t, why in outcome.failed.items() if t in purging}
    if moves:
        trash.finish(run)
    if purge.runs:
        trash.forget(purge, failed_purges)
    taken = {path for path, _, _ in files}
    removed = frozenset(p for p in outcome.deleted if p in taken)
    failed = {p: why for p, why in outcome.failed.items() if p in taken}
    summary = None
    if moves or purge.runs or reconciled:
        summary = trash.write_summary(now_ms)
    mine = next((r for r in summary.runs if r.run == run), None) if summary else None
    purged = [f for f in purge.files if f.trash not in failed_purges]
    removal = Removal(
        retention_ms=retention_ms,
        run=run,
        removed=removed,
        failed=failed,
        on_executors=outcome.on_executors,
        trashed_files=mine.files if mine else 0,
        trashed_bytes=mine.bytes if mine else 0,
        purged_runs=purge.runs,
        purged_files=len(purged),
        purged_bytes=sum(f.size for f in purged),
        failed_purges=failed_purges,
        reconciled_runs=tuple(reconciled),
        trash_files=summary.files if summary else len(contents),
        trash_bytes=summary.bytes if summary else sum(f.size for f in contents),
        logged=bool(log_lines),
    )
    _log(table.name, removal, deleted_at_once=retention_ms == 0 and bool(files))
    return removal


def _log(name: str, removal: Removal, *, deleted_at_once: bool) -> None:
    window = format_duration_ms(removal.retention_ms)
    if deleted_at_once:
        LOG.info("trash of %s: retention 0s, %d files deleted at once", name, len(removal.removed))
    elif removal.trashed_files:
        LOG.info(
            "trash of %s: %d files (%d bytes) moved to the trash by run %s, kept %s",
            name,
            removal.trashed_files,
            removal.trashed_bytes,
            removal.run,
            window,
        )
    if removal.purged_runs:
        LOG.info(
            "trash of %s: purged %d files (%d bytes) of %d runs past the %s window%s",
            name,
            removal.purged_files,
            removal.purged_bytes,
            len(removal.purged_runs),
            window,
            f"; {len(removal.failed_purges)} could not be deleted" if removal.failed_purges else "",
        )
    if removal.reconciled_runs:
        LOG.info("trash of %s: settled killed runs %s", name, list(removal.reconciled_runs))
