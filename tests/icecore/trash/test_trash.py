"""The trash's layout, records and the settling of a run killed while it moved files (local
disk; every store: test_trash_stores.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from icecore.errors import ValidationError
from icecore.io import FileIO
from icecore.orphans import is_hidden
from icecore.trash import RunRecord, Trash, TrashLayout, new_run_id, run_time_ms
from icecore.trash.records import ORPHAN
from icecore.trash.trash import RECONCILE_AFTER_MS

NOW = 1_767_225_600_000  # 2026-01-01T00:00:00Z


@pytest.mark.parametrize(
    ("location", "original", "decoded"),
    [
        ("s3://b/wh/db/t", "s3://b/wh/db/t/data/ts_day=2024-01-01/x.parquet", None),
        # Inside the location under another spelling: named as the location spells it.
        (
            "s3://b/wh/db/t",
            "s3a://b/wh/db/t/metadata/snap-1.avro",
            "s3://b/wh/db/t/metadata/snap-1.avro",
        ),
        ("s3://b/wh/db/t", "s3://other/data/y.parquet", None),  # `write.data.path` elsewhere
        ("/wh/db/t", "/wh/db/t/data/z.parquet", None),
        ("/wh/db/t", "/elsewhere/z.parquet", None),
        ("abfss://c@acct.dfs.core.windows.net/t", "abfss://c@acct.dfs.core.windows.net/d/q", None),
    ],
)
def test_a_trash_name_says_where_the_file_was(
    location: str, original: str, decoded: str | None
) -> None:
    layout = TrashLayout(location, "u-1")
    run = new_run_id("expire_snapshots", NOW)
    target = layout.trash_location(run, original)
    assert target.startswith(f"{location}/.icefloe-trash/u-1/files/{run}/")
    assert is_hidden(target, location)  # no orphan removal takes it, Java's neither
    assert layout.run_of(target) == run
    assert layout.original_of(target) == (decoded or original)
    assert run_time_ms(run) == NOW


def test_a_record_reads_back_and_a_newer_one_is_refused() -> None:
    trash = Trash(FileIO(), TrashLayout("/wh/t", "u"), "db.t")
    record = trash.new_record(
        "expire_snapshots",
        [("/wh/t/data/a.parquet", "data", 12), ("/wh/t/metadata/l.avro", "manifest-list", None)],
        now_ms=NOW,
        snapshots=[{"snapshot-id": 7, "manifest-list": "/wh/t/metadata/l.avro"}],
        statistics=[{"snapshot-id": 7, "statistics-path": "/wh/t/metadata/s.puffin"}],
    )
    assert RunRecord.from_bytes(record.to_bytes(), "r") == record
    lines = record.to_bytes().decode().splitlines()
    assert json.loads(lines[1]) == {
        "path": "/wh/t/data/a.parquet",
        "trash": record.entries[0].trash,
        "kind": "data",
        "size": 12,
    }
    header = json.loads(lines[0]) | {"format": 99}
    with pytest.raises(ValidationError, match="newer icefloe"):
        RunRecord.from_bytes((json.dumps(header) + "\n").encode(), "r")
    with pytest.raises(ValidationError, match=r"not an icefloe\.trash\.run record"):
        RunRecord.from_bytes(b'{"record": "something else"}\n', "r")


def test_a_killed_run_is_settled_a_day_later_and_never_loses_a_file(tmp_path: Path) -> None:
    """Killed after copying some files and before deleting their sources (what a copy and
    delete store can leave): each file is in place, in the trash, or both; the next run a day
    on drops the copies of files still in place, keeps the moved ones, and marks it done."""
    io = FileIO()
    location = str(tmp_path / "t")
    paths = [f"{location}/data/{i}.parquet" for i in range(6)]
    for i, path in enumerate(paths):
        io.write_bytes(path, bytes([i]) * (i + 1))
    trash = Trash(io, TrashLayout(location, "u"), "db.t")
    record = trash.new_record("remove_orphan_files", [(p, ORPHAN, None) for p in paths], now_ms=NOW)
    moves = dict(trash.begin(record))
    for path in paths[:2]:  # moved
        io.move(path, moves[path])
    for path in paths[2:4]:  # copied, the source still there
        io.write_bytes(moves[path], io.read_bytes(path))
    # paths[4:] never started.
    for i, path in enumerate(paths):
        assert io.exists(path) or io.exists(moves[path])
        where = path if io.exists(path) else moves[path]
        assert io.read_bytes(where) == bytes([i]) * (i + 1)

    records, done, _ = trash.records()
    assert set(records) == {record.run} and done == set()
    contents = trash.contents(records)
    assert trash.reconcile(NOW + 1000, records=records, done=done, contents=contents) == []
    settled = trash.reconcile(
        NOW + RECONCILE_AFTER_MS, records=records, done=done, contents=contents
    )
    assert settled == [record.run] and trash.records()[1] == {record.run}
    assert {f.path for f in trash.contents()} == set(paths[:2])
    assert all(io.exists(p) for p in paths[2:])
