"""The jobs' results, declared once (`icecore.jobs.results`): every job has its class,
its JSON round-trips, another version's JSON still reads, the charted figures add up the
fields each class names, and the plugin's sentences read the fields."""

from __future__ import annotations

import importlib
import json
import types
import typing
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

import pytest
from icefloe_airflow.results import describe

from icecore.jobs import JOBS
from icecore.jobs.results import (
    RESULTS,
    ExpireSnapshotsResult,
    Figures,
    IngestResult,
    JobResult,
    RemoveOrphanFilesResult,
    RewriteDataFilesResult,
    RewritePositionDeletesResult,
    result_of,
)


def _sample(hint: Any, n: int) -> Any:
    """A value of type `hint` unlike the field's default (`n` varies it per field)."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return _sample(next(a for a in args if a is not type(None)), n)
    origin = typing.get_origin(hint) or hint
    if origin is bool:
        return True
    if origin is int:
        return 1000 + n
    if origin is float:
        return n + 0.5
    if origin is str:
        return f"text-{n}"
    if origin is list:
        return [_sample(args[0], n), _sample(args[0], n + 1)]
    if origin is dict:
        return {f"key-{n}": _sample(args[1], n)} if args[1] is not Any else {"k": n}
    raise AssertionError(f"no sample for {hint}")


def _filled(cls: type[JobResult]) -> JobResult:
    hints = typing.get_type_hints(cls)
    return cls(**{f.name: _sample(hints[f.name], i) for i, f in enumerate(fields(cls))})


def test_every_job_has_a_result_class_and_its_run_returns_it() -> None:
    assert set(RESULTS) == set(JOBS)
    for job, cls in RESULTS.items():
        assert cls.job == job
        run = importlib.import_module(f"spark_jobs.{job}").run
        assert typing.get_type_hints(run)["return"] is cls, job


@pytest.mark.parametrize("job", sorted(RESULTS))
def test_the_json_round_trips_every_field(job: str) -> None:
    cls = RESULTS[job]
    result = _filled(cls)
    printed = json.loads(result.to_json())
    assert set(printed) == {f.name for f in fields(cls)}
    assert cls.from_dict(printed) == result
    assert result_of(job, printed) == result
    assert result.to_dict() == printed
    for name in (*cls.rewritten_bytes_fields, *cls.removed_files_fields):
        assert name in printed, f"{job}: figures add up {name}, which is no field"


def test_another_versions_json_still_reads() -> None:
    newer = {"table": "db.t", "rewritten_data_files": 3, "a_counter_from_later": 1}
    read = RewriteDataFilesResult.from_dict(newer)
    assert (read.table, read.rewritten_data_files, read.commits) == ("db.t", 3, [])
    assert "a_counter_from_later" not in read.to_dict()
    # Keys an older worker did not write take their defaults; null reads as missing.
    older = RewritePositionDeletesResult.from_dict({"table": "db.t", "status": None})
    assert older.status == "nothing-to-rewrite" and older.failed_groups == []
    assert result_of("a_job_from_later", newer) is None


def test_fields_left_none_are_not_printed() -> None:
    """An append reports no upsert counters and no batch: its JSON has no such keys."""
    result = IngestResult(table="db.t", mode="append", rows=3, status="committed")
    assert result.to_dict() == {"table": "db.t", "mode": "append", "rows": 3, "status": "committed"}
    assert "inserts" not in result.to_dict() and result.batch_id is None
    # Read by attribute only: a counter is never a string looked up.
    assert not isinstance(result, Mapping)
    with pytest.raises(TypeError):
        result["rows"]  # type: ignore[index]
    with pytest.raises(AttributeError):
        result.rows = 4  # type: ignore[misc]


def test_figures_add_up_the_charted_fields() -> None:
    minor = RewritePositionDeletesResult(
        rewritten_delete_files=4, removed_dangling_delete_files=1, rewritten_bytes=50
    )
    assert minor.figures() == Figures(rewritten_bytes=50, removed_files=5)
    major = RewriteDataFilesResult(
        rewritten_data_files=6, removed_delete_files=2, rewritten_bytes=9
    )
    assert major.figures() == Figures(rewritten_bytes=9, removed_files=6)
    expired = ExpireSnapshotsResult(
        deleted_data_files_count=3, deleted_metadata_files_count=1, unreachable_data_files_count=8
    )
    assert expired.figures() == Figures(removed_files=4)
    assert expired.unreachable_files() == 8
    # A counter of another type (hand-written JSON) counts nothing rather than failing.
    odd = RemoveOrphanFilesResult.from_dict({"deleted_files_count": "many"})
    assert odd.figures() == Figures()
    assert IngestResult(rows=10, bytes_written=100).figures() == Figures()


@pytest.mark.parametrize(
    ("job", "result", "sentence"),
    [
        (
            "rewrite_data_files",
            {"rewritten_data_files": 7, "added_data_files": 2, "rewritten_bytes": 1536 * 1024**2,
             "removed_delete_files": 3, "commits": [11]},
            "rewrote 7 data files (1.5 GB) into 2, removed 3 delete files, in 1 commit",
        ),
        (
            "rewrite_data_files",
            {"rewritten_data_files": 40, "added_data_files": 4, "rewritten_bytes": 4096,
             "removed_delete_files": 0, "commits": [7], "rebased_commits": 3,
             "rebased_rows": 520},
            "rewrote 40 data files (4.0 KB) into 4, removed 0 delete files, in 1 commit; rebased "
            "520 rows other writers deleted meanwhile (3 commits)",
        ),
        (
            "convert_equality_deletes",
            {"removed_equality_delete_files": 1, "added_deletion_vectors": 2,
             "deletion_vector_positions": 9, "data_files_scanned": 2, "snapshot_id": 4,
             "rebased_commits": 1, "rebased_rows": 1},
            "replaced 1 equality delete file with 2 deletion vectors (9 positions), scanning 2 "
            "data files, in 1 commit; rebased 1 row other writers deleted meanwhile (1 commit)",
        ),
        (
            "rewrite_position_deletes",
            {"rewritten_delete_files": 4, "added_delete_files": 1, "rewritten_bytes": 2048,
             "removed_dangling_delete_files": 1, "commits": [1, 2],
             "failed_groups": ["spec 0 partition ()"]},
            "rewrote 4 delete files (2.0 KB) into 1, dropped 1 dangling delete file, in 2 commits; "
            "1 group failed",
        ),
        (
            "convert_equality_deletes",
            {"removed_equality_delete_files": 2, "added_position_delete_files": 1,
             "added_position_deletes": 5, "data_files_scanned": 3, "snapshot_id": 9},
            "replaced 2 equality delete files with 1 position delete file (5 rows deleted), "
            "scanning 3 data files, in 1 commit",
        ),
        (
            "expire_snapshots",
            {"expired_snapshots_count": 2, "deleted_data_files_count": 3,
             "deleted_manifest_lists_count": 2, "failed_deletes_count": 1},
            "expired 2 snapshots, deleted 5 files (1 could not be deleted)",
        ),
        (
            "expire_snapshots",
            {"dry_run": True, "expired_snapshots_count": 1, "unreachable_data_files_count": 4,
             "deleted_data_files_count": 0},
            "expired 1 snapshot, would delete 4 files (dry run)",
        ),
        (
            "remove_orphan_files",
            {"orphan_files_count": 3, "deleted_files_count": 3, "listed_files_count": 40,
             "abandoned_uploads_count": 1, "aborted_uploads_count": 1},
            "deleted 3 of 3 orphan files among 40 listed files; aborted 1 of 1 unfinished upload",
        ),
        (
            "expire_snapshots",
            {"expired_snapshots_count": 1, "deleted_data_files_count": 2,
             "trash_retention": "3d", "trashed_files_count": 2, "purged_files_count": 3,
             "purged_bytes": 2048},
            "expired 1 snapshot, moved 2 files to the trash (kept 3d); purged 3 files (2.0 KB) "
            "of the trash",
        ),
        (
            "remove_orphan_files",
            {"orphan_files_count": 2, "deleted_files_count": 2, "listed_files_count": 9,
             "trash_retention": "0s", "trashed_files_count": 0},
            "deleted 2 of 2 orphan files among 9 listed files",
        ),
        (
            "remove_orphan_files",
            {"orphan_files_count": 2, "deleted_files_count": 2, "listed_files_count": 9,
             "trash_retention": "12h", "trashed_files_count": 2},
            "moved 2 of 2 orphan files to the trash (kept 12h) among 9 listed files",
        ),
        (
            "rewrite_manifests",
            {"rewritten_manifests": 4, "added_manifests": 1, "rewritten_bytes": 4096,
             "entries": 12, "data_manifests_before": 4, "data_manifests_after": 1,
             "snapshot_id": 5},
            "rewrote 4 manifests (4.0 KB, 12 entries) into 1: the table lists 1 manifest, was 4, "
            "in 1 commit",
        ),
        (
            "ingest",
            {"mode": "upsert", "rows": 9, "data_files": 2, "bytes_written": 1024,
             "equality_delete_files": 1, "table_created": True},
            "upsert: 9 rows, 2 data files (1.0 KB), 0 position delete files and 1 equality delete "
            "file, table created",
        ),
        ("ingest", {"status": "already-committed", "batch_id": "b7"},
         "batch b7 was committed before: nothing to do"),
        ("a_job_from_later", {"moved": 3}, "moved=3"),
    ],
)  # fmt: skip
def test_the_sentences_read_the_fields(job: str, result: dict[str, Any], sentence: str) -> None:
    assert describe(job, result) == sentence
    typed = result_of(job, result)
    if typed is not None:  # the same from the job's own result as from its JSON
        assert describe(job, typed) == sentence
