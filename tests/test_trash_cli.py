"""`icefloe trash` and `icefloe restore`, in process (`cli.main`), on a table whose snapshots the
expire_snapshots job (without Spark: a few files are moved by the driver) took into its trash:
the listing, a restore that cannot be whole changing nothing, a restore refused by the commit
putting its files back into the trash, a snapshot's statistics coming back with it, orphans
by run and by instant, and `--purge` with its deletion log. The end-to-end
path with another engine's table and readers is tests/spark/test_trash_restore.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from icefloe_airflow.command.cli import main

from icecore.catalog import SqlCatalog
from icecore.jobs.jobs import ExpireSnapshotsOptions, RemoveOrphanFilesOptions
from icecore.spec.metadata_builder import PARTITION_STATISTICS, MetadataBuilder
from icecore.table import Table
from icecore.trash import PurgeRecord, Trash
from spark_jobs.expire_snapshots import run as expire
from spark_jobs.remove_orphan_files import run as remove_orphan_files
from tests.support.catalogs import append_rows
from tests.support.committing import SCHEMA, rows

NAME = "db.t"


@pytest.fixture
def expired(tmp_path: Path) -> tuple[SqlCatalog, Table, list[int]]:
    """A table of three appends, each replacing the last; the first two expired."""
    catalog = SqlCatalog("default", warehouse=tmp_path / "wh")
    catalog.create_namespace("db")
    table = catalog.create_table(NAME, SCHEMA)
    for i in range(3):
        append_rows(table, [{"id": i, "cat": "a", "v": i}], replace_all=True)
    snapshots = [s.snapshot_id for s in table.metadata.snapshots]
    result = expire(
        None, catalog, ExpireSnapshotsOptions(NAME, snapshot_ids=snapshots[:2], force=True)
    )
    assert sorted(result.expired_snapshot_ids) == sorted(snapshots[:2])
    assert result.trashed_files_count == result.trash_files_count == 6  # a file, a manifest, a list
    yield catalog, catalog.load_table(NAME), snapshots
    catalog.close()


def icefloe(
    catalog: SqlCatalog, capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[int, str, str]:
    code = main([*argv, "--catalog-uri", catalog.uri])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_trash_lists_what_expiry_took(
    expired: tuple[SqlCatalog, Table, list[int]], capsys: pytest.CaptureFixture[str]
) -> None:
    catalog, table, _ = expired
    code, out, _ = icefloe(catalog, capsys, "trash", NAME)
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith(
        f"# trash of {NAME}: {table.metadata.location}/.icefloe-trash/"
    )
    assert lines[0].endswith("(kept 3d)")
    assert lines[1].split() == ["REMOVED", "BY", "PURGE", "DUE", "SIZE", "PATH"]
    assert (
        len(lines) == 2 + 6 + 1 and lines[-1].startswith("6 files, ") and " in 1 runs;" in lines[-1]
    )
    records = [
        json.loads(line)
        for line in icefloe(catalog, capsys, "trash", NAME, "--json")[1].splitlines()
    ]
    assert {r["kind"] for r in records} == {"data", "manifest", "manifest-list"}
    assert all(r["job"] == "expire_snapshots" and r["table"] == NAME for r in records)
    assert all(Path(r["trash"]).stat().st_size == r["size"] for r in records)


def test_a_restore_that_cannot_be_whole_or_is_refused_changes_nothing(
    expired: tuple[SqlCatalog, Table, list[int]], capsys: pytest.CaptureFixture[str]
) -> None:
    catalog, table, snapshots = expired
    trash = Trash.of(table)
    before = trash.contents()
    code, _, err = icefloe(catalog, capsys, "restore", NAME, "--snapshot", "42")
    assert (code, err.strip()) == (
        1,
        f"icefloe: snapshot 42 of {NAME} is not in its trash: not expired by icefloe, or purged "
        "after icefloe.trash.retention",
    )
    # A tag of that name exists already: the commit refuses, the files go back to the trash.
    table.manage_snapshots().create_tag(f"restored-{snapshots[0]}", snapshots[2]).commit()
    code, _, err = icefloe(catalog, capsys, "restore", NAME, "--snapshot", str(snapshots[0]))
    assert code == 1 and "was not restored" in err and "its files are back in the trash" in err
    assert trash.contents() == before
    assert catalog.load_table(NAME).metadata.snapshots == table.refresh().metadata.snapshots
    code, _, err = icefloe(catalog, capsys, "restore", NAME, "--snapshot", "1", "--since", "2d")
    assert (code, err.strip()) == (2, "icefloe restore: --run and --since go with --orphans")


def test_purge_empties_what_is_past_the_window_and_logs_it(
    expired: tuple[SqlCatalog, Table, list[int]], capsys: pytest.CaptureFixture[str]
) -> None:
    catalog, table, _ = expired
    trash = Trash.of(table)
    held = {f.path for f in trash.contents()}
    code, out, _ = icefloe(catalog, capsys, "trash", NAME, "--purge")
    assert code == 0 and out.startswith("# purged 0 files (0 B) of 0 runs past the 3d window")
    table.update_properties().set("icefloe.trash.retention", "0s").commit()
    code, out, _ = icefloe(catalog, capsys, "trash", NAME, "--purge")
    assert code == 0 and out.startswith("# purged 6 files")
    assert out.splitlines()[-1] == "the trash is empty"
    assert not any(Path(p).exists() for p in held)
    [log] = Path(trash.layout.purged).glob("*.jsonl")
    record = PurgeRecord.from_bytes(log.read_bytes(), str(log))
    assert record.job == "icefloe trash" and {f.path for f in record.files} == held


def test_a_restored_snapshot_brings_its_statistics_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog = SqlCatalog("default", warehouse=tmp_path / "wh")
    catalog.create_namespace("db")
    table = catalog.create_table(NAME, SCHEMA)
    append_rows(table, [{"id": 1, "cat": "a", "v": 1}])
    first = table.metadata.current_snapshot()
    assert first is not None
    expected = rows(table)
    location = table.metadata.location
    puffin, parquet = f"{location}/metadata/s1.stats", f"{location}/metadata/s1.partition-stats"
    table.io.write_bytes(puffin, b"PFA1 blobs PFA1")
    table.io.write_bytes(parquet, b"PAR1 stats PAR1")
    statistics = {
        "snapshot-id": first.snapshot_id,
        "statistics-path": puffin,
        "file-size-in-bytes": 15,
        "file-footer-size-in-bytes": 4,
        "blob-metadata": [],
    }
    partition = {
        "snapshot-id": first.snapshot_id,
        "statistics-path": parquet,
        "file-size-in-bytes": 15,
    }
    base = table.metadata
    builder = MetadataBuilder(base).set_statistics(statistics)
    table.commit_metadata(base, builder.set_statistics(partition, PARTITION_STATISTICS).build())
    append_rows(table.refresh(), [{"id": 2, "cat": "a", "v": 2}], replace_all=True)

    options = ExpireSnapshotsOptions(NAME, snapshot_ids=[first.snapshot_id], force=True)
    result = expire(None, catalog, options)
    assert result.deleted_statistics_files_count == 2
    assert not table.io.exists(puffin) and not table.io.exists(parquet)
    code, _, err = icefloe(catalog, capsys, "restore", NAME, "--snapshot", str(first.snapshot_id))
    assert code == 0, err
    restored = catalog.load_table(NAME)
    assert restored.metadata.extra["statistics"] == [statistics]
    assert restored.metadata.extra["partition-statistics"] == [partition]
    assert table.io.read_bytes(puffin) == b"PFA1 blobs PFA1"
    assert table.io.read_bytes(parquet) == b"PAR1 stats PAR1"
    assert rows(restored, snapshot_id=first.snapshot_id) == expected
    assert Trash.of(restored).contents() == []  # everything it had is back
    catalog.close()


def test_orphans_come_back_by_run_or_since_an_instant(
    expired: tuple[SqlCatalog, Table, list[int]], capsys: pytest.CaptureFixture[str]
) -> None:
    catalog, table, _ = expired
    stray = Path(table.metadata.location, "data", "stray.bin")
    stray.write_bytes(b"a writer's leftovers")
    options = RemoveOrphanFilesOptions(NAME, older_than="2100-01-01T00:00:00", force=True)
    removed = remove_orphan_files(None, catalog, options)
    assert removed.orphan_files_count == 1 and not stray.exists()

    code, _, err = icefloe(catalog, capsys, "restore", NAME, "--orphans", "--run", "nope")
    assert (code, err.strip()) == (1, f"icefloe: no orphans of run nope in the trash of {NAME}")
    code, out, _ = icefloe(catalog, capsys, "restore", NAME, "--orphans", "--since", "2100-01-01")
    assert (code, out.strip()) == (0, f"restored 0 of 0 orphans of {NAME} to their paths")
    assert not stray.exists()
    run = str(removed.trash_run)
    code, out, _ = icefloe(catalog, capsys, "restore", NAME, "--orphans", "--run", run, "--json")
    assert code == 0 and json.loads(out)["restored_files"] == [str(stray)]
    assert stray.read_bytes() == b"a writer's leftovers"
    # Expiry's files are not orphans: only `--snapshot` brings them back.
    assert len(Trash.of(table).contents()) == 6
