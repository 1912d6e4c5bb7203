"""The trash on every store: a local disk, and real S3 (moto), GCS (the emulator) and Azure
(Azurite, a flat namespace: copy then delete) servers on 127.0.0.1.

One run's life on each: recorded, moved in (files below the table location and one outside
it), listed with where each came from, put back byte for byte, a path that exists again left
alone and reported, a second restore a no-op, purged past the window with its deletion log,
and another table's trash at the same location never seen.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from icecore.io import FileIO
from icecore.trash import PurgeRecord, Trash, TrashLayout, read_summary
from icecore.trash.records import DATA, MANIFEST, ORPHAN
from tests.support.objectstores import ObjectStore

DAY_MS = 86_400_000
NOW = 1_767_225_600_000  # 2026-01-01T00:00:00Z


@pytest.fixture(params=["local", "s3_store", "gcs_store", "azure_store"])
def root(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[FileIO, str]:
    """A FileIO and a fresh root on one store."""
    if request.param == "local":
        return FileIO(), str(tmp_path / "bucket")
    store: ObjectStore = request.getfixturevalue(request.param)
    return FileIO(store.properties), store.new_bucket()


def test_a_run_through_the_trash_and_back(root: tuple[FileIO, str]) -> None:
    io, base = root
    location = f"{base}/wh/db/t"
    files = {
        f"{location}/data/a=1/x.parquet": b"x" * 300,
        f"{location}/metadata/m1.avro": b"manifest",
        f"{location}/data/orphan.bin": b"o" * 10,
        f"{base}/elsewhere/data/y.parquet": b"y" * 7,  # `write.data.path` outside the location
    }
    for path, data in files.items():
        io.write_bytes(path, data)
    trash = Trash(io, TrashLayout(location, str(uuid.uuid4())), "db.t")
    kinds = [DATA, MANIFEST, ORPHAN, DATA]
    record = trash.new_record(
        "expire_snapshots",
        [(p, k, len(d)) for (p, d), k in zip(files.items(), kinds, strict=True)],
        now_ms=NOW,
        snapshots=[{"snapshot-id": 1}],
    )
    moves = trash.begin(record)
    assert io.move_many(moves, fresh_targets=True) == {}
    trash.finish(record.run)
    assert not any(io.exists(p) for p in files)
    assert all(t.startswith(f"{location}/.icefloe-trash/") for _, t in moves)

    contents = trash.contents()
    assert {f.path: f.size for f in contents} == {p: len(d) for p, d in files.items()}
    assert {f.run for f in contents} == {record.run} and {f.removed_ms for f in contents} == {NOW}
    summary = trash.write_summary(NOW)
    assert read_summary(io, trash.layout) == summary
    assert (summary.files, summary.bytes, summary.oldest_removed_ms) == (4, 325, NOW)
    # Another table at the same location has a trash of its own, empty.
    assert Trash(io, TrashLayout(location, str(uuid.uuid4())), "db.u").contents() == []

    orphan, manifest = f"{location}/data/orphan.bin", f"{location}/metadata/m1.avro"
    io.write_bytes(manifest, b"another manifest")  # the path is taken again meanwhile
    back = trash.restore([f for f in contents if f.path in (orphan, manifest)])
    assert back.restored == (orphan,) and back.failed == {}
    assert list(back.conflicts) == [manifest]
    assert io.read_bytes(orphan) == files[orphan]
    assert io.read_bytes(manifest) == b"another manifest"  # not replaced
    again = trash.restore([f for f in contents if f.path == orphan])
    assert again.restored == () and again.already == ()  # gone from the trash: nothing to do
    outside = f"{base}/elsewhere/data/y.parquet"
    assert trash.restore([f for f in trash.contents() if f.path == outside]).restored == (outside,)
    assert io.read_bytes(outside) == files[outside]

    # Past the window: purged, logged first; the run's record goes with its last file.
    left = {f.path for f in trash.contents()}
    assert left == {f"{location}/data/a=1/x.parquet", manifest}
    assert trash.past_window(3 * DAY_MS, NOW + 3 * DAY_MS - 1).runs == ()
    purge, failed = trash.empty(3 * DAY_MS, now_ms=NOW + 3 * DAY_MS, run="purger", job="test")
    assert purge.runs == (record.run,) and failed == {}
    assert trash.contents() == [] and trash.records()[0] == {}
    log = PurgeRecord.from_bytes(io.read_bytes(trash.layout.purge_log("purger")), "log")
    assert {f.path for f in log.files} == left and {f.run for f in log.files} == {record.run}
    assert io.read_bytes(manifest) == b"another manifest"  # only trash copies were purged
