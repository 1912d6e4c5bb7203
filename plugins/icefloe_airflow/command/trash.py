"""`icefloe trash` and `icefloe restore`: a table's trash from a terminal, and the way back.

    icefloe trash   TABLE [--purge] [--json]
    icefloe restore TABLE --snapshot ID
    icefloe restore TABLE --orphans [--run RUN | --since INSTANT]

`trash` lists what expiry and orphan removal took out of the table and keep for
`icefloe.trash.retention` (`icecore.trash`): each file's original path, size, the run that
removed it and when, when it is purged, and the total; `--purge` first empties what is past
the window, as the jobs' next run would. `restore --snapshot` brings back every file an expired
snapshot needs and puts the snapshot back under the tag `restored-<id>`, leaving the current
state as it is (`icecore.updates.restore`); `restore --orphans` puts removed orphans back at
their original paths, byte for byte, and reports a path that exists again rather than
replacing it. Both restores are idempotent: run again after an interruption, they finish.

Everything is read from the table's store (the trash keeps its records there), with the
catalog flags every subcommand takes: no Airflow, no Spark. What changes the trash or the
table (`--purge`, `restore`) holds the table's lease in the state store when there is one,
as `icefloe run` does, so no maintenance job works on the table meanwhile.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from icecore.jobs.argv import OneLineParser
from icecore.jobs.grammar import (
    INSTANT_EXAMPLE,
    describe_size,
    format_duration_ms,
    parse_instant_ms,
)
from icefloe_airflow.command.common import (
    EXIT_FAILED,
    Invocation,
    Refused,
    Subcommand,
    open_catalog,
    open_store,
)

if TYPE_CHECKING:
    from icecore.catalog import Catalog
    from icecore.table import Table
    from icecore.trash import PutBack, Trash, TrashedFile

LEASE_WAIT = timedelta(minutes=10)


def _trash_arguments(parser: OneLineParser) -> None:
    parser.add_argument("table")
    parser.add_argument(
        "--purge", action="store_true", help="first purge what is past the retention window"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per line")


def _restore_arguments(parser: OneLineParser) -> None:
    parser.add_argument("table")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--snapshot", type=int, metavar="ID", help="an expired snapshot's id")
    what.add_argument("--orphans", action="store_true", help="orphans orphan removal took")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--run", help="with --orphans: only this run's (as `trash` names it)")
    which.add_argument(
        "--since",
        metavar="INSTANT",
        help=f"with --orphans: only those removed since, {INSTANT_EXAMPLE}",
    )
    parser.add_argument("--json", action="store_true", help="the outcome as one JSON object")


def _now_ms() -> int:
    return int(datetime.now(UTC).timestamp() * 1000)


def _when(ms: int | None) -> str:
    if ms is None:
        return "?"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def _load(catalog: Catalog, name: str) -> Table:
    from icecore.errors import CatalogError, NotFoundError  # noqa: PLC0415

    try:
        return catalog.load_table(name)
    except (CatalogError, NotFoundError) as exc:
        raise Refused(str(exc)) from None


def _retention(table: Table) -> int:
    from icecore.errors import ValidationError  # noqa: PLC0415
    from icecore.spec.properties import TRASH_RETENTION  # noqa: PLC0415

    try:
        return TRASH_RETENTION.read(table.metadata.properties)
    except ValidationError as exc:
        raise Refused(f"{table.name}: {exc}") from None


@contextmanager
def _lease(run: Invocation, table: str) -> Iterator[None]:
    """The table's maintenance lease, when there is a state store (see the module doc)."""
    from icefloe_airflow.state import TableBusyError  # noqa: PLC0415

    with open_store(run.state, run.catalog.name) as store:
        if store is None:
            yield
            return
        owner = f"icefloe-cli/{os.getpid()}@{os.uname().nodename}"
        try:
            with store.lock(table, owner, wait=LEASE_WAIT, poll=5.0):
                yield
        except TableBusyError as exc:
            raise Refused(str(exc), EXIT_FAILED) from None


# `icefloe trash` ----------------------------------------------------------------------------


def trash(run: Invocation) -> int:
    from icecore.trash import Trash, new_run_id  # noqa: PLC0415

    args = run.args
    with open_catalog(run.catalog) as catalog:
        table = _load(catalog, args.table)
        retention = _retention(table)
        bin_ = Trash.of(table)
        if args.purge:
            with _lease(run, args.table):
                now = _now_ms()
                purge, failed = bin_.empty(
                    retention, now_ms=now, run=new_run_id("trash", now), job="icefloe trash"
                )
                bin_.write_summary(now)
            if not args.json:
                gone = [f for f in purge.files if f.trash not in failed]
                print(
                    f"# purged {len(gone)} files ({describe_size(sum(f.size for f in gone))}) "
                    f"of {len(purge.runs)} runs past the {format_duration_ms(retention)} window"
                    + (f"; {len(failed)} could not be deleted" if failed else "")
                )
        records, done, problems = bin_.records()
        contents = bin_.contents(records)
        killed = sorted(r for r in records if r not in done)
        for line in _trash_lines(bin_, contents, retention, killed, problems, as_json=args.json):
            print(line)
    return 0


def _trash_lines(
    bin_: Trash,
    contents: Sequence[TrashedFile],
    retention: int,
    unfinished: Sequence[str],
    problems: Sequence[str],
    *,
    as_json: bool,
) -> Iterator[str]:
    if as_json:
        for f in contents:
            yield json.dumps(_file_record(bin_.table, f, retention))
        return
    window = format_duration_ms(retention)
    yield f"# trash of {bin_.table}: {bin_.layout.root} (kept {window})"
    for problem in problems:
        yield f"# unreadable record: {problem}"
    if not contents:
        yield "the trash is empty"
        return
    rows = [("REMOVED", "BY", "PURGE DUE", "SIZE", "PATH")]
    for f in contents:
        due = f.purge_due_ms(retention)
        rows.append((_when(f.removed_ms), _by(f), _when(due), describe_size(f.size), f.path))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for row in rows:
        cells = [row[i].rjust(widths[i]) if i == 3 else row[i].ljust(widths[i]) for i in range(4)]
        yield "  ".join([*cells, row[4]])
    total = sum(f.size for f in contents)
    oldest = min((f.removed_ms for f in contents if f.removed_ms is not None), default=None)
    runs = len({f.run for f in contents})
    yield (
        f"{len(contents)} files, {describe_size(total)} in {runs} runs; oldest removed "
        f"{_when(oldest)}"
    )
    for name in unfinished:
        if any(f.run == name for f in contents):
            yield f"# run {name} did not finish (killed while moving?): some files may be in place"


def _by(f: TrashedFile) -> str:
    return f"{f.job or '?'} {f.run}"


def _file_record(table: str, f: TrashedFile, retention: int) -> dict[str, Any]:
    return {
        "table": table,
        "path": f.path,
        "trash": f.trash,
        "size": f.size,
        "kind": f.kind,
        "run": f.run,
        "job": f.job,
        "removed_ms": f.removed_ms,
        "purge_due_ms": f.purge_due_ms(retention),
    }


# `icefloe restore` --------------------------------------------------------------------------


def restore(run: Invocation) -> int:
    from icecore.trash import Trash  # noqa: PLC0415

    args = run.args
    if not args.orphans and (args.run or args.since):
        raise SystemExit("icefloe restore: --run and --since go with --orphans")
    since = None
    if args.since is not None:
        try:
            since = parse_instant_ms(args.since, now_ms=_now_ms())
        except ValueError as exc:
            raise SystemExit(f"icefloe restore: --since: {exc}") from None
    with open_catalog(run.catalog) as catalog, _lease(run, args.table):
        table = _load(catalog, args.table)
        bin_ = Trash.of(table)
        if args.snapshot is not None:
            outcome = _restore_snapshot(table, bin_, args.snapshot)
        else:
            outcome = _restore_orphans(bin_, args.run, since)
    if args.json:
        print(json.dumps(outcome, default=str))
    else:
        print(outcome["message"])
        for path, why in {**outcome.get("conflicts", {}), **outcome.get("failed", {})}.items():
            print(f"  not restored: {path}: {why}")
    return EXIT_FAILED if outcome.get("conflicts") or outcome.get("failed") else 0


def _restore_snapshot(table: Table, bin_: Trash, snapshot_id: int) -> dict[str, Any]:
    from icecore.errors import CommitStateUnknownError, IcecoreError  # noqa: PLC0415
    from icecore.trash.snapshots import SnapshotNotInTrash, plan_snapshot_restore  # noqa: PLC0415
    from icecore.updates.restore import RestoreSnapshot, restored_tag  # noqa: PLC0415

    tag = restored_tag(snapshot_id)
    outcome: dict[str, Any] = {"table": table.name, "snapshot_id": snapshot_id, "tag": tag}
    if any(s.snapshot_id == snapshot_id for s in table.metadata.snapshots):
        ref = table.metadata.refs.get(tag)
        restored = ref is not None and ref.snapshot_id == snapshot_id
        why = f"already restored, as tag {tag}" if restored else "in the table: not expired"
        return {**outcome, "restored": False, "message": f"snapshot {snapshot_id}: {why}"}
    try:
        plan = plan_snapshot_restore(bin_, table.metadata, snapshot_id)
    except SnapshotNotInTrash as exc:
        raise Refused(str(exc), EXIT_FAILED) from None
    back = bin_.restore(plan.from_trash)
    outcome |= _put_back(back)
    if back.conflicts or back.failed:
        bin_.write_summary(_now_ms())
        message = f"snapshot {snapshot_id} was not restored: files it needs could not come back"
        return {**outcome, "restored": False, "message": message}
    update = RestoreSnapshot(
        table,
        plan.snapshot,
        tag=tag,
        statistics=plan.statistics,
        partition_statistics=plan.partition_statistics,
    )
    try:
        update.commit()
    except CommitStateUnknownError as exc:
        raise Refused(
            f"snapshot {snapshot_id}: {exc}; run the restore again: it finishes, or says it "
            "is done",
            EXIT_FAILED,
        ) from None
    except IcecoreError as exc:  # refused: the files go back where they were found
        left = bin_.undo(back)
        bin_.write_summary(_now_ms())
        where = (
            f"{len(left)} of its files stay in place" if left else "its files are back in the trash"
        )
        raise Refused(
            f"snapshot {snapshot_id} was not restored: {exc}; {where}", EXIT_FAILED
        ) from None
    bin_.write_summary(_now_ms())
    message = (
        f"restored snapshot {snapshot_id} of {table.name} as tag {tag}: "
        f"{len(back.restored) + len(back.already)} files back from the trash, "
        f"{plan.live} were in place; the current snapshot is unchanged. Read it by id or as "
        f"of tag {tag}; roll back to it, or copy rows from it, as with any snapshot"
    )
    return {**outcome, "restored": True, "run": plan.run, "message": message}


def _restore_orphans(bin_: Trash, run_id: str | None, since: int | None) -> dict[str, Any]:
    from icecore.trash.records import ORPHAN  # noqa: PLC0415

    wanted = [
        f
        for f in bin_.contents()
        if f.kind == ORPHAN
        and (run_id is None or f.run == run_id)
        and (since is None or (f.removed_ms is not None and f.removed_ms >= since))
    ]
    if run_id is not None and not wanted:
        raise Refused(f"no orphans of run {run_id} in the trash of {bin_.table}", EXIT_FAILED)
    back = bin_.restore(wanted)
    bin_.write_summary(_now_ms())
    count = len(back.restored) + len(back.already)
    message = f"restored {count} of {len(wanted)} orphans of {bin_.table} to their paths"
    return {"table": bin_.table, **_put_back(back), "message": message}


def _put_back(back: PutBack) -> dict[str, Any]:
    return {
        "restored_files": list(back.restored),
        "already_back": list(back.already),
        "conflicts": dict(back.conflicts),
        "failed": dict(back.failed),
    }


SUBCOMMANDS = (
    Subcommand(
        "trash",
        "what a table's trash holds (--purge: empty what is past it)",
        _trash_arguments,
        trash,
    ),
    Subcommand(
        "restore", "restore an expired snapshot or removed orphans", _restore_arguments, restore
    ),
)
