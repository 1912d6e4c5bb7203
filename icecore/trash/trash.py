"""One table's trash: recording a run, what is in it, purging it, putting files back.

    trash = Trash.of(table)
    record = trash.new_record("remove_orphan_files", [(path, ORPHAN, size), ...], now_ms=now)
    moves = trash.begin(record)            # the record first, then move: see below
    failed = table.io.move_many(moves, fresh_targets=True)
    trash.finish(record.run)
    trash.empty(retention_ms, now_ms=now, run=record.run, job=...)  # what is past the window

Faults. A file leaves the table only by a move (`FileIO.move`: a rename, or a complete copy
before the source goes), after its run's record is on the store; so a run killed at any
point leaves every file it names in place, in the trash, or (a copy done, its source not yet
deleted) in both, and never in neither, and every trashed file with its record. What is in
the trash is what the listing of `files/` shows, never what a record claims, so nothing has
to be rewritten after a kill. A finished run writes `runs/<run>.done`; a later run
reconciles one without it (`reconcile`): a file found in both places keeps its original
(the move had not happened yet) and loses its trash copy. A reconcile never deletes an
original, whatever the records say: a restore may have brought it back and made it live.

Purging deletes the trash files of runs older than the retention (`icefloe.trash.retention`,
counted from the run's removal time, as Delta counts VACUUM's window from the logical
removal), after logging them (`records`); a run's record goes once all its files are gone.
Putting files back (`restore`) never replaces a file: a path that exists again is reported,
unless it holds the very bytes of the trash copy (a restore cut short), which then just goes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from icecore.errors import FileError, ValidationError
from icecore.io import FileIO, ListedFile
from icecore.trash.layout import TrashLayout, new_run_id
from icecore.trash.records import PurgedFile, PurgeRecord, RunRecord, TrashEntry

if TYPE_CHECKING:
    from icecore.table import Table

log = logging.getLogger(__name__)
# A run without its `.done` is left alone this long: it may still be moving its files.
RECONCILE_AFTER_MS = 86_400_000
_RECORD, _DONE = ".jsonl", ".done"


def run_time_ms(run: str) -> int | None:
    """When a run began, from its id (`new_run_id`); None for a name that is not one."""
    try:
        stamp = datetime.strptime(run.split("-", 1)[0], "%Y%m%dT%H%M%SZ")
    except ValueError:
        return None
    return int(stamp.replace(tzinfo=UTC).timestamp() * 1000)


@dataclass(frozen=True)
class TrashedFile:
    """A file in the trash, as its listing shows it, with what its record says."""

    path: str  # where it was
    trash: str  # where it is
    size: int
    run: str
    removed_ms: int | None
    job: str | None = None
    kind: str | None = None

    def purge_due_ms(self, retention_ms: int) -> int | None:
        return None if self.removed_ms is None else self.removed_ms + retention_ms


@dataclass(frozen=True)
class RunSummary:
    run: str
    job: str | None
    removed_ms: int | None
    files: int
    bytes: int


@dataclass(frozen=True)
class TrashSummary:
    """Files and bytes in the trash per run: what the health check and the Iceberg page
    show, read from `summary.json` (one small read) rather than listed."""

    runs: tuple[RunSummary, ...] = ()
    updated_ms: int | None = None

    @property
    def files(self) -> int:
        return sum(r.files for r in self.runs)

    @property
    def bytes(self) -> int:
        return sum(r.bytes for r in self.runs)

    @property
    def oldest_removed_ms(self) -> int | None:
        return min((r.removed_ms for r in self.runs if r.removed_ms is not None), default=None)

    def past_window(self, retention_ms: int, now_ms: int) -> tuple[RunSummary, ...]:
        """The runs whose files are kept past the retention: the next run purges them."""
        return tuple(
            r
            for r in self.runs
            if r.removed_ms is not None and r.removed_ms + retention_ms <= now_ms
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "updated-ms": self.updated_ms,
            "runs": [
                {
                    "run": r.run,
                    "job": r.job,
                    "removed-ms": r.removed_ms,
                    "files": r.files,
                    "bytes": r.bytes,
                }
                for r in self.runs
            ],
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> TrashSummary:
        runs = tuple(
            RunSummary(
                run=str(r["run"]),
                job=r.get("job"),
                removed_ms=r.get("removed-ms"),
                files=int(r["files"]),
                bytes=int(r["bytes"]),
            )
            for r in obj.get("runs") or ()
        )
        return cls(runs, obj.get("updated-ms"))


@dataclass(frozen=True)
class Purge:
    """What purging found past the window: the runs, and their files still in the trash."""

    runs: tuple[str, ...] = ()
    files: tuple[TrashedFile, ...] = ()


@dataclass(frozen=True)
class PutBack:
    """What a restore of trashed files did."""

    restored: tuple[str, ...] = ()  # moved back to their original paths
    came_from: Mapping[str, str] = field(default_factory=dict)  # restored path -> trash copy
    already: tuple[str, ...] = ()  # were back already (the same bytes): trash copy dropped
    conflicts: Mapping[str, str] = field(default_factory=dict)  # path exists with other bytes
    failed: Mapping[str, str] = field(default_factory=dict)


class Trash:
    """The trash of one table (see the module doc); `io` reaches the table's files."""

    def __init__(self, io: FileIO, layout: TrashLayout, table: str) -> None:
        self.io = io
        self.layout = layout
        self.table = table

    @classmethod
    def of(cls, table: Table) -> Trash:
        return cls(table.io, TrashLayout.of(table.metadata), table.name)

    # A run -------------------------------------------------------------------------------

    def new_record(
        self,
        job: str,
        files: Iterable[tuple[str, str, int | None]],
        *,
        now_ms: int,
        run: str | None = None,
        **expired: Sequence[dict[str, Any]],
    ) -> RunRecord:
        """The record of a run taking `files` ((path, kind, size)) out of the table;
        `expired` holds an expiry's `snapshots`, `statistics` and `partition_statistics`."""
        run = run or new_run_id(job, now_ms)
        entries = tuple(
            TrashEntry(path, self.layout.trash_location(run, path), kind, size)
            for path, kind, size in files
        )
        return RunRecord(
            run=run,
            job=job,
            table=self.table,
            table_uuid=self.layout.table_uuid,
            location=self.layout.table_location,
            removed_ms=now_ms,
            entries=entries,
            snapshots=tuple(expired.get("snapshots", ())),
            statistics=tuple(expired.get("statistics", ())),
            partition_statistics=tuple(expired.get("partition_statistics", ())),
        )

    def begin(self, record: RunRecord) -> list[tuple[str, str]]:
        """Write the run's record, and return its moves (source, target): only once the
        record is on the store may a file move."""
        self.io.write_bytes(self.layout.record(record.run), record.to_bytes())
        return [(e.path, e.trash) for e in record.entries]

    def finish(self, run: str) -> None:
        """Mark the run's moves over: no later run needs to reconcile it."""
        self.io.write_bytes(self.layout.done(run), b"", overwrite=True)

    # Reading -----------------------------------------------------------------------------

    def records(self) -> tuple[dict[str, RunRecord], set[str], list[str]]:
        """(run -> its record, runs marked done, why some records could not be read)."""
        records: dict[str, RunRecord] = {}
        done: set[str] = set()
        problems: list[str] = []
        for listed in self.io.list_prefix(self.layout.runs):
            name = listed.location.rsplit("/", 1)[-1]
            if name.endswith(_DONE):
                done.add(name.removesuffix(_DONE))
            elif name.endswith(_RECORD):
                try:
                    record = RunRecord.from_bytes(self.io.read_bytes(listed.location), name)
                except (FileError, ValidationError) as exc:
                    problems.append(str(exc))
                    continue
                records[record.run] = record
        return records, done, problems

    def listing(self) -> list[ListedFile]:
        return list(self.io.list_prefix(self.layout.files))

    def contents(self, records: Mapping[str, RunRecord] | None = None) -> list[TrashedFile]:
        """Every file in the trash, sorted by run then path; a file no record names (its
        record unreadable) still says where it came from, by its name."""
        if records is None:
            records = self.records()[0]
        by_trash = {e.trash: (r, e) for r in records.values() for e in r.entries}
        found = []
        for listed in self.listing():
            run = self.layout.run_of(listed.location)
            if run is None:
                continue
            record, entry = by_trash.get(listed.location, (records.get(run), None))
            original = entry.path if entry else self.layout.original_of(listed.location)
            if original is None:
                continue
            found.append(
                TrashedFile(
                    path=original,
                    trash=listed.location,
                    size=listed.size,
                    run=run,
                    removed_ms=record.removed_ms if record else run_time_ms(run),
                    job=record.job if record else None,
                    kind=entry.kind if entry else None,
                )
            )
        return sorted(found, key=lambda f: (f.run, f.path))

    def summarize(self, contents: Sequence[TrashedFile], now_ms: int) -> TrashSummary:
        runs: dict[str, list[TrashedFile]] = {}
        for item in contents:
            runs.setdefault(item.run, []).append(item)
        return TrashSummary(
            tuple(
                RunSummary(
                    run=run,
                    job=files[0].job,
                    removed_ms=files[0].removed_ms,
                    files=len(files),
                    bytes=sum(f.size for f in files),
                )
                for run, files in sorted(runs.items())
            ),
            updated_ms=now_ms,
        )

    def write_summary(self, now_ms: int) -> TrashSummary:
        """List the trash and keep its summary for readers that cannot afford a listing."""
        summary = self.summarize(self.contents(), now_ms)
        data = json.dumps(summary.to_json(), separators=(",", ":")).encode()
        self.io.write_bytes(self.layout.summary, data, overwrite=True)
        return summary

    # Purging -----------------------------------------------------------------------------

    def past_window(
        self,
        retention_ms: int,
        now_ms: int,
        *,
        keep: Iterable[str] = (),
        contents: Sequence[TrashedFile] | None = None,
        records: Mapping[str, RunRecord] | None = None,
    ) -> Purge:
        """The runs (but those in `keep`) removed at least `retention_ms` before `now_ms`,
        with their files still in the trash."""
        if records is None:
            records = self.records()[0]
        if contents is None:
            contents = self.contents(records)
        kept = set(keep)

        def due(run: str, removed_ms: int | None) -> bool:
            return (
                run not in kept and removed_ms is not None and removed_ms + retention_ms <= now_ms
            )

        runs = {r.run for r in records.values() if due(r.run, r.removed_ms)}
        runs |= {f.run for f in contents if due(f.run, f.removed_ms)}
        files = tuple(f for f in contents if f.run in runs)
        return Purge(tuple(sorted(runs)), files)

    def log_deletions(
        self,
        run: str,
        job: str,
        files: Sequence[PurgedFile],
        *,
        now_ms: int,
        retention_ms: int,
    ) -> None:
        """The deletion log of `run`, written before it deletes `files` for good."""
        if not files:
            return
        record = PurgeRecord(run, job, now_ms, retention_ms, tuple(files))
        self.io.write_bytes(self.layout.purge_log(run), record.to_bytes(), overwrite=True)

    def forget(self, purge: Purge, failed: Mapping[str, str]) -> None:
        """Drop the records of the purged runs whose files are all gone (a file left behind
        keeps its record, for the next purge), and their empty directories."""
        left = {f.run for f in purge.files if f.trash in failed}
        for run in purge.runs:
            if run in left:
                continue
            self.io.delete(self.layout.record(run), missing_ok=True)
            self.io.delete(self.layout.done(run), missing_ok=True)
            self.io.remove_empty_directories(self.layout.run_files(run))

    def empty(
        self, retention_ms: int, *, now_ms: int, run: str, job: str, threads: int = 16
    ) -> tuple[Purge, dict[str, str]]:
        """Purge, in this process, what is past the window: (what was due, trash file ->
        why it could not be deleted). The driver's way; the jobs spread large purges."""
        purge = self.past_window(retention_ms, now_ms, keep=[run])
        self.log_deletions(run, job, purged_files(purge), now_ms=now_ms, retention_ms=retention_ms)
        failed = self.io.delete_many([f.trash for f in purge.files], threads)
        self.forget(purge, failed)
        return purge, failed

    # Reconciling -------------------------------------------------------------------------

    def reconcile(
        self,
        now_ms: int,
        *,
        records: Mapping[str, RunRecord],
        done: set[str],
        contents: Sequence[TrashedFile],
    ) -> list[str]:
        """Settle the runs killed while moving (no `.done`, recorded over a day before
        `now_ms`): a file found both in place and in the trash had not left yet, so its
        trash copy goes; then the run is marked done. The runs settled."""
        in_trash = {f.trash for f in contents}
        settled = []
        for run, record in sorted(records.items()):
            if run in done or record.removed_ms + RECONCILE_AFTER_MS > now_ms:
                continue
            both = [
                e.trash for e in record.entries if e.trash in in_trash and self.io.exists(e.path)
            ]
            failed = self.io.delete_many(both)
            if failed:
                log.warning("trash of %s: %d copies of run %s stay", self.table, len(failed), run)
                continue
            self.finish(run)
            settled.append(run)
        return settled

    # Putting back ------------------------------------------------------------------------

    def restore(self, files: Sequence[TrashedFile], threads: int = 16) -> PutBack:
        """Move `files` back to their original paths, never replacing a file there. A path
        with several copies in the trash (trashed again after a restore cut short) gets the
        latest; the others go once they prove to hold the same bytes."""
        copies: dict[str, list[TrashedFile]] = {}
        for item in sorted(files, key=lambda f: (f.run, f.trash)):
            copies.setdefault(item.path, []).append(item)
        paths = list(copies)
        with ThreadPoolExecutor(max_workers=max(1, min(threads, len(paths)))) as pool:
            present = dict(zip(paths, pool.map(self.io.exists, paths), strict=True))
        moves = [(copies[p][-1].trash, p) for p in paths if not present[p]]
        origin = dict(moves)
        failed = {origin[t]: why for t, why in self.io.move_many(moves, threads).items()}
        restored = tuple(p for _, p in moves if p not in failed)
        # Every other copy: the bytes now in place (restored, or there before) or a conflict.
        others = [
            c for p in paths if p not in failed for c in copies[p][: -1 if not present[p] else None]
        ]
        with ThreadPoolExecutor(max_workers=max(1, min(threads, len(others) or 1))) as pool:
            same = list(pool.map(lambda c: self.io.same_content(c.path, c.trash), others))
        duplicates = [c for c, equal in zip(others, same, strict=True) if equal]
        conflicts = {
            c.path: f"exists again with other content; kept in {c.trash}"
            for c, equal in zip(others, same, strict=True)
            if not equal
        }
        dropped = self.io.delete_many([c.trash for c in duplicates], threads)
        by_trash = {c.trash: c.path for c in duplicates}
        failed.update(
            {by_trash[t]: f"back, but a trash copy stays: {why}" for t, why in dropped.items()}
        )
        already = tuple(dict.fromkeys(c.path for c in duplicates if present[c.path]))
        came_from = {path: trash for trash, path in moves if path in restored}
        return PutBack(restored, came_from, already, conflicts, failed)

    def undo(self, back: PutBack, threads: int = 16) -> dict[str, str]:
        """Move what `back` restored into the trash again (a restore whose commit failed);
        path -> why for those that stay in place."""
        return self.io.move_many(
            [(path, back.came_from[path]) for path in back.restored], threads, fresh_targets=True
        )


def purged_files(purge: Purge) -> list[PurgedFile]:
    """The deletion log's lines for the trash files a purge deletes."""
    return [
        PurgedFile(f.path, f.size, run=f.run, removed_ms=f.removed_ms, trash=f.trash)
        for f in purge.files
    ]


def read_summary(io: FileIO, layout: TrashLayout) -> TrashSummary | None:
    """The trash's summary as its last writer left it; None when the table has no trash
    (or its summary cannot be read: a display must not fail on it)."""
    try:
        data = io.read_bytes(layout.summary)
    except FileError:
        return None
    try:
        return TrashSummary.from_json(json.loads(data))
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("%s: unreadable trash summary: %s", layout.summary, exc)
        return None
