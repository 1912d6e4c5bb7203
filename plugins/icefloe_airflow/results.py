"""A job's JSON result in words, for the task log and the Iceberg page.

    describe("rewrite_data_files", {"rewritten_data_files": 7, "added_data_files": 2, ...})
    == "rewrote 7 data files (1.2 GB) into 2, removed 3 delete files, in 1 commit"

Each job has one sentence built from the counters it always reports; anything else stays in
the JSON, which the page keeps behind a toggle. Unknown jobs and results fall back to the
first few counters, so a new job shows something before it gets its sentence.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from spark_jobs.specs.grammar import describe_size as size


def _plural(count: Any, noun: str) -> str:
    number = int(count or 0)
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _commits(result: Mapping[str, Any]) -> str:
    """`, in 2 commits; 1 group failed`, or nothing when the result does not say."""
    commits = result.get("commits")
    if isinstance(commits, list):
        count = len(commits)
    elif result.get("snapshot_id"):
        count = 1
    else:
        return ""
    text = f", in {_plural(count, 'commit')}" if count else ", nothing committed"
    failed = result.get("failed_groups") or []
    if failed:
        text += f"; {_plural(len(failed), 'group')} failed"
    return text


def _ingest(r: Mapping[str, Any]) -> str:
    if r.get("status") == "already-committed":
        return f"batch {r.get('batch_id')} was committed before: nothing to do"
    parts = [f"{r.get('mode', 'ingest')}: {_plural(r.get('rows', r.get('data_records')), 'row')}"]
    parts.append(f"{_plural(r.get('data_files'), 'data file')} ({size(r.get('bytes_written'))})")
    if r.get("position_delete_files") or r.get("equality_delete_files"):
        parts.append(
            f"{_plural(r.get('position_delete_files'), 'position delete file')} and "
            f"{_plural(r.get('equality_delete_files'), 'equality delete file')}"
        )
    if r.get("deletion_vectors"):
        parts.append(_plural(r.get("deletion_vectors"), "deletion vector"))
    if r.get("table_created"):
        parts.append("table created")
    return ", ".join(parts)


def _convert(r: Mapping[str, Any]) -> str:
    if not r.get("removed_equality_delete_files"):
        return "no equality deletes to convert"
    if r.get("added_deletion_vectors"):
        return (
            f"replaced {_plural(r.get('removed_equality_delete_files'), 'equality delete file')} "
            f"with {_plural(r.get('added_deletion_vectors'), 'deletion vector')} "
            f"({_plural(r.get('deletion_vector_positions'), 'position')}), scanning "
            f"{_plural(r.get('data_files_scanned'), 'data file')}{_commits(r)}"
        )
    return (
        f"replaced {_plural(r.get('removed_equality_delete_files'), 'equality delete file')} "
        f"with {_plural(r.get('added_position_delete_files'), 'position delete file')} "
        f"({_plural(r.get('added_position_deletes'), 'row')} deleted), scanning "
        f"{_plural(r.get('data_files_scanned'), 'data file')}{_commits(r)}"
    )


def _minor(r: Mapping[str, Any]) -> str:
    if not r.get("rewritten_delete_files") and not r.get("removed_dangling_delete_files"):
        return "no delete files worth rewriting"
    return (
        f"rewrote {_plural(r.get('rewritten_delete_files'), 'delete file')} "
        f"({size(r.get('rewritten_bytes'))}) into {r.get('added_delete_files', 0)}"
        f"{' deletion vectors' if r.get('added_deletion_vectors') else ''}, dropped "
        f"{_plural(r.get('removed_dangling_delete_files'), 'dangling delete file')}"
        f"{_commits(r)}"
    )


def _major(r: Mapping[str, Any]) -> str:
    if not r.get("rewritten_data_files"):
        return "no data files worth rewriting"
    return (
        f"rewrote {_plural(r.get('rewritten_data_files'), 'data file')} "
        f"({size(r.get('rewritten_bytes'))}) into {r.get('added_data_files', 0)}, removed "
        f"{_plural(r.get('removed_delete_files'), 'delete file')}{_commits(r)}"
    )


def _expire(r: Mapping[str, Any]) -> str:
    verb = "would delete" if r.get("dry_run") else "deleted"
    files = sum(
        int(v or 0)
        for k, v in r.items()
        if k.startswith("unreachable_" if r.get("dry_run") else "deleted_") and k.endswith("_count")
    )
    text = f"expired {_plural(r.get('expired_snapshots_count'), 'snapshot')}, {verb} "
    text += _plural(files, "file")
    if r.get("failed_deletes_count"):
        text += f" ({r['failed_deletes_count']} could not be deleted)"
    if r.get("kept_files_of_other_tables_count"):
        text += f"; kept {_plural(r['kept_files_of_other_tables_count'], 'file')} of other tables"
    return text + (" (dry run)" if r.get("dry_run") else "")


def _orphans(r: Mapping[str, Any]) -> str:
    found = _plural(r.get("orphan_files_count"), "orphan file")
    if r.get("dry_run"):
        text = f"found {found} (dry run, nothing deleted)"
    else:
        text = f"deleted {r.get('deleted_files_count', 0)} of {found}"
    text += f" among {_plural(r.get('listed_files_count'), 'listed file')}"
    excluded = r.get("excluded_locations") or []
    if excluded:
        text += f"; left {_plural(len(excluded), 'nested table')} alone"
    if r.get("failed_deletes_count"):
        text += f"; {r['failed_deletes_count']} could not be deleted"
    uploads = _plural(r.get("abandoned_uploads_count"), "unfinished upload")
    if r.get("abandoned_uploads_count"):
        verb = "found" if r.get("dry_run") else f"aborted {r.get('aborted_uploads_count', 0)} of"
        text += f"; {verb} {uploads}"
    return text


def _manifests(r: Mapping[str, Any]) -> str:
    before = int(r.get("data_manifests_before") or 0) + int(r.get("delete_manifests_before") or 0)
    if not r.get("rewritten_manifests"):
        return f"no manifests worth rewriting ({_plural(before, 'manifest')})"
    after = int(r.get("data_manifests_after") or 0) + int(r.get("delete_manifests_after") or 0)
    return (
        f"rewrote {_plural(r.get('rewritten_manifests'), 'manifest')} "
        f"({size(r.get('rewritten_bytes'))}, {int(r.get('entries') or 0)} entries) into "
        f"{r.get('added_manifests', 0)}: the table lists {_plural(after, 'manifest')}, was "
        f"{before}"
        f"{_commits(r)}"
    )


SENTENCES: dict[str, Callable[[Mapping[str, Any]], str]] = {
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


def describe(job: str, result: Mapping[str, Any] | None) -> str:
    """One sentence saying what the run did; counters missing from `result` read as 0."""
    if not result:
        return ""
    sentence = SENTENCES.get(job)
    if sentence is None:
        return brief(result)
    try:
        return sentence(result)
    except (TypeError, ValueError):  # a result of an older or newer shape: still say something
        return brief(result)
