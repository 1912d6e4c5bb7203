"""A job's JSON result in words, for the task log and the Iceberg page.

    describe("rewrite_data_files", {"rewritten_data_files": 7, "added_data_files": 2, ...})
    == "rewrote 7 data files (1.2 GB) into 2, removed 3 delete files, in 1 commit"

Each job has one sentence built from the fields of its result class
(`icecore.jobs.results`); anything else stays in the JSON, which the page keeps behind a
toggle. Unknown jobs fall back to the first few counters, so a new job shows something before
it gets its sentence.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from icecore.jobs.grammar import describe_size as size
from icecore.jobs.results import (
    ConvertEqualityDeletesResult,
    ExpireSnapshotsResult,
    IngestResult,
    JobResult,
    RemoveOrphanFilesResult,
    RewriteDataFilesResult,
    RewriteManifestsResult,
    RewritePositionDeletesResult,
    TrashingResult,
    result_of,
)


def _plural(count: Any, noun: str) -> str:
    number = int(count or 0)
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _commits(commits: list[int] | None, snapshot_id: int | None, failed: list[str]) -> str:
    """`, in 2 commits; 1 group failed`, or nothing when the result does not say."""
    if commits is not None:
        count = len(commits)
    elif snapshot_id:
        count = 1
    else:
        return ""
    text = f", in {_plural(count, 'commit')}" if count else ", nothing committed"
    if failed:
        text += f"; {_plural(len(failed), 'group')} failed"
    return text


def _rebased(
    r: RewriteDataFilesResult | RewritePositionDeletesResult | ConvertEqualityDeletesResult,
) -> str:
    """`; rebased 520 rows other writers deleted meanwhile (3 commits)`: the concurrent
    deletes the run carried onto its own files instead of giving way."""
    if not r.rebased_commits:
        return ""
    return (
        f"; rebased {_plural(r.rebased_rows, 'row')} other writers deleted meanwhile "
        f"({_plural(r.rebased_commits, 'commit')})"
    )


def _ingest(r: IngestResult) -> str:
    if r.status == "already-committed":
        return f"batch {r.batch_id} was committed before: nothing to do"
    rows = r.rows if r.rows is not None else r.data_records
    parts = [f"{r.mode}: {_plural(rows, 'row')}"]
    parts.append(f"{_plural(r.data_files, 'data file')} ({size(r.bytes_written)})")
    if r.position_delete_files or r.equality_delete_files:
        parts.append(
            f"{_plural(r.position_delete_files, 'position delete file')} and "
            f"{_plural(r.equality_delete_files, 'equality delete file')}"
        )
    if r.deletion_vectors:
        parts.append(_plural(r.deletion_vectors, "deletion vector"))
    if r.table_created:
        parts.append("table created")
    return ", ".join(parts)


def _convert(r: ConvertEqualityDeletesResult) -> str:
    if not r.removed_equality_delete_files:
        return "no equality deletes to convert"
    commits = _commits(None, r.snapshot_id, [])
    if r.added_deletion_vectors:
        return (
            f"replaced {_plural(r.removed_equality_delete_files, 'equality delete file')} "
            f"with {_plural(r.added_deletion_vectors, 'deletion vector')} "
            f"({_plural(r.deletion_vector_positions, 'position')}), scanning "
            f"{_plural(r.data_files_scanned, 'data file')}{commits}{_rebased(r)}"
        )
    return (
        f"replaced {_plural(r.removed_equality_delete_files, 'equality delete file')} "
        f"with {_plural(r.added_position_delete_files, 'position delete file')} "
        f"({_plural(r.added_position_deletes, 'row')} deleted), scanning "
        f"{_plural(r.data_files_scanned, 'data file')}{commits}{_rebased(r)}"
    )


def _minor(r: RewritePositionDeletesResult) -> str:
    if not r.rewritten_delete_files and not r.removed_dangling_delete_files:
        return "no delete files worth rewriting"
    return (
        f"rewrote {_plural(r.rewritten_delete_files, 'delete file')} "
        f"({size(r.rewritten_bytes)}) into {r.added_delete_files}"
        f"{' deletion vectors' if r.added_deletion_vectors else ''}, dropped "
        f"{_plural(r.removed_dangling_delete_files, 'dangling delete file')}"
        f"{_commits(r.commits, r.snapshot_id, r.failed_groups)}{_rebased(r)}"
    )


def _major(r: RewriteDataFilesResult) -> str:
    if not r.rewritten_data_files:
        return "no data files worth rewriting"
    return (
        f"rewrote {_plural(r.rewritten_data_files, 'data file')} "
        f"({size(r.rewritten_bytes)}) into {r.added_data_files}, removed "
        f"{_plural(r.removed_delete_files, 'delete file')}"
        f"{_commits(r.commits, r.snapshot_id, r.failed_groups)}{_rebased(r)}"
    )


def _kept(r: TrashingResult) -> str:
    """How the run's files left: ` to the trash (kept 3d)`, or nothing (deleted at once, or
    a result from before the trash)."""
    if r.trash_retention in (None, "0s") or not r.trashed_files_count:
        return ""
    return f" to the trash (kept {r.trash_retention})"


def _purged(r: TrashingResult) -> str:
    """`; purged 4 files (1.2 MB) of the trash`: what the run deleted for good."""
    if not r.purged_files_count:
        return ""
    purged = _plural(r.purged_files_count, "file")
    return f"; purged {purged} ({size(r.purged_bytes or 0)}) of the trash"


def _expire(r: ExpireSnapshotsResult) -> str:
    verb = "would delete" if r.dry_run else "moved" if _kept(r) else "deleted"
    files = r.unreachable_files() if r.dry_run else r.figures().removed_files
    text = f"expired {_plural(r.expired_snapshots_count, 'snapshot')}, {verb} "
    text += _plural(files, "file") + _kept(r)
    if r.failed_deletes_count:
        text += f" ({r.failed_deletes_count} could not be deleted)"
    text += _purged(r)
    if r.kept_files_of_other_tables_count:
        text += f"; kept {_plural(r.kept_files_of_other_tables_count, 'file')} of other tables"
    return text + (" (dry run)" if r.dry_run else "")


def _orphans(r: RemoveOrphanFilesResult) -> str:
    found = _plural(r.orphan_files_count, "orphan file")
    if r.dry_run:
        text = f"found {found} (dry run, nothing deleted)"
    else:
        verb = "moved" if _kept(r) else "deleted"
        text = f"{verb} {r.deleted_files_count} of {found}{_kept(r)}"
    text += f" among {_plural(r.listed_files_count, 'listed file')}" + _purged(r)
    if r.excluded_locations:
        text += f"; left {_plural(len(r.excluded_locations), 'nested table')} alone"
    if r.failed_deletes_count:
        text += f"; {r.failed_deletes_count} could not be deleted"
    if r.abandoned_uploads_count:
        uploads = _plural(r.abandoned_uploads_count, "unfinished upload")
        verb = "found" if r.dry_run else f"aborted {r.aborted_uploads_count or 0} of"
        text += f"; {verb} {uploads}"
    return text


def _manifests(r: RewriteManifestsResult) -> str:
    before = r.data_manifests_before + r.delete_manifests_before
    if not r.rewritten_manifests:
        return f"no manifests worth rewriting ({_plural(before, 'manifest')})"
    after = r.data_manifests_after + r.delete_manifests_after
    return (
        f"rewrote {_plural(r.rewritten_manifests, 'manifest')} "
        f"({size(r.rewritten_bytes)}, {r.entries} entries) into "
        f"{r.added_manifests}: the table lists {_plural(after, 'manifest')}, was "
        f"{before}"
        f"{_commits(None, r.snapshot_id, [])}"
    )


SENTENCES: dict[str, Callable[[Any], str]] = {
    "ingest": _ingest,
    "convert_equality_deletes": _convert,
    "rewrite_position_deletes": _minor,
    "rewrite_data_files": _major,
    "expire_snapshots": _expire,
    "remove_orphan_files": _orphans,
    "rewrite_manifests": _manifests,
}


def brief(result: Mapping[str, Any] | None, limit: int = 4) -> str:
    """The first counters, `key=value` joined: what a job without a sentence shows."""
    if not result:
        return ""
    items = [f"{k}={json.dumps(v, default=str)}" for k, v in list(result.items())[:limit]]
    more = f" (+{len(result) - limit} more)" if len(result) > limit else ""
    return ", ".join(items) + more


def describe(job: str, result: Mapping[str, Any] | JobResult | None) -> str:
    """One sentence saying what the run did, from `result` read as the job's result class
    (counters missing from it read as their defaults)."""
    if not result:
        return ""
    typed = result_of(job, result)
    sentence = SENTENCES.get(job)
    printed = result.to_dict() if isinstance(result, JobResult) else result
    if typed is None or sentence is None:
        return brief(printed)
    try:
        return sentence(typed)
    except (TypeError, ValueError):  # counters of an unexpected type: still say something
        return brief(printed)
