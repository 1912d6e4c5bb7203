"""Iceberg Java's orphan removal never takes a table's trash for orphans: its own listing
(`FileSystemWalker` in iceberg-core 1.10.2, both the Hadoop walk and the FileIO prefix listing
that `DeleteOrphanFilesSparkAction` runs) skips `.icefloe-trash`, the table's and a nested
table's, as it skips every hidden name, and lists the table's files around it."""

from __future__ import annotations

from pathlib import Path

from icecore.io import FileIO
from icecore.trash import Trash, TrashLayout
from icecore.trash.records import ORPHAN
from tests.support.iceberg_java import java_orphan_listing


def test_iceberg_javas_orphan_listing_skips_every_trash(tmp_path: Path) -> None:
    io = FileIO()
    location = tmp_path / "db" / "events"
    visible = {
        location / "data" / "ts_day=2024-01-01" / "a.parquet",
        location / "metadata" / "v1.metadata.json",
        location / "archive" / "data" / "c.parquet",  # a nested table's file: listed
    }
    for path in visible:
        io.write_bytes(str(path), b"x")
    for table, uuid in ((location, "u-outer"), (location / "archive", "u-nested")):
        trash = Trash(io, TrashLayout(str(table), uuid), str(table))
        stray = f"{table}/data/stray-{uuid}.parquet"
        io.write_bytes(stray, b"s")
        record = trash.new_record("remove_orphan_files", [(stray, ORPHAN, 1)], now_ms=0)
        assert io.move_many(trash.begin(record)) == {}
        trash.finish(record.run)
        trash.write_summary(0)
    in_trash = {p for p in location.rglob("*") if p.is_file() and ".icefloe-trash" in p.parts}
    assert len(in_trash) == 2 * 4  # per table: a file, its record, done, the summary

    hadoop, fileio = java_orphan_listing(str(location))
    assert hadoop == fileio == {str(p) for p in visible}
