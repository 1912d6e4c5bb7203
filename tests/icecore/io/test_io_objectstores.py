"""FileIO against real object-store servers on 127.0.0.1: moto (S3), gcp-storage-emulator
(GCS) and Azurite (Azure Blob), plus a proxy that throttles moto like S3 does.

What is checked is what table maintenance relies on: a listing is bounded by its directory
and complete past a page, bulk deletes go in batches and report every failure, throttling
is survived without duplicating or losing a file, a write that fails or is killed leaves no
object behind, and no credential ever shows in an error, a log or a repr.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from icecore.errors import FileError
from icecore.io import FileIO, RetryPolicy
from tests.support.objectstores import ObjectStore
from tests.support.throttle_proxy import ThrottleProxy

ROOT = Path(__file__).resolve().parents[3]
STORES = ["s3_store", "gcs_store", "azure_store"]
MiB = 1024 * 1024


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest) -> ObjectStore:
    return request.getfixturevalue(request.param)


def _put_many(store: ObjectStore, bucket_root: str, keys: list[str]) -> None:
    """Create objects straight through boto3, many at once: setup, not the code under test."""
    client = store.extra["client"]
    bucket = bucket_root.removeprefix("s3://")
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(lambda k: client.put_object(Bucket=bucket, Key=k, Body=b"x"), keys))


def test_round_trip(store: ObjectStore) -> None:
    io = FileIO(store.properties)
    root = store.new_bucket()
    location = f"{root}/wh/db/t/metadata/v1.metadata.json"
    before_ms = (time.time() - 5) * 1000
    io.write_bytes(location, b'{"format-version": 2}')
    assert io.exists(location)
    assert io.size(location) == 21
    assert io.read_bytes(location) == b'{"format-version": 2}'
    with io.open_input(location) as f:
        f.seek(1)
        assert f.read(15) == b'"format-version'

    with pytest.raises(FileError, match="refusing to overwrite"):
        io.write_bytes(location, b"other")
    io.write_bytes(location, b"replaced", overwrite=True)
    assert io.read_bytes(location) == b"replaced"

    [listed] = io.list_prefix(f"{root}/wh")
    assert listed.location == location
    assert listed.size == 8
    assert listed.mtime_ms is not None
    assert before_ms <= listed.mtime_ms <= (time.time() + 5) * 1000

    io.delete(location)
    assert not io.exists(location)
    with pytest.raises(FileError, match="not found"):
        io.read_bytes(location)
    with pytest.raises(FileError, match="not found"):
        io.delete(location)
    io.delete(location, missing_ok=True)
    assert list(io.list_prefix(f"{root}/wh")) == []


def test_listing_is_bounded_by_the_directory(store: ObjectStore) -> None:
    io = FileIO(store.properties)
    root = store.new_bucket()
    names = ["db/t/a.parquet", "db/t/data/p=1/b.parquet", "db/t_2/c.parquet", "db/t.json"]
    for name in names:
        io.write_bytes(f"{root}/{name}", name.encode())
    expected = {f"{root}/db/t/a.parquet", f"{root}/db/t/data/p=1/b.parquet"}
    assert {f.location for f in io.list_prefix(f"{root}/db/t")} == expected
    assert {f.location for f in io.list_prefix(f"{root}/db/t/")} == expected
    assert list(io.list_prefix(f"{root}/db/missing")) == []
    assert {f.location for f in io.list_prefix(root)} == {f"{root}/{n}" for n in names}


def test_delete_many_on_each_store(store: ObjectStore) -> None:
    io = FileIO(store.properties)
    root = store.new_bucket()
    locations = [f"{root}/t/data/f{i:03d}.parquet" for i in range(40)]
    for location in locations[:30]:
        io.write_bytes(location, b"x")
    keep = f"{root}/t_2/keep.parquet"
    io.write_bytes(keep, b"k")
    # The last ten were never written: a missing file counts as deleted.
    assert io.delete_many(locations) == {}
    assert [f.location for f in io.list_prefix(root)] == [keep]


def test_s3_listing_returns_every_page(
    s3_store: ObjectStore, s3_proxy: tuple[ObjectStore, ThrottleProxy]
) -> None:
    proxied, proxy = s3_proxy
    root = s3_store.new_bucket()
    keys = [f"wh/t/data/part-{i:05d}.parquet" for i in range(1234)]
    _put_many(s3_store, root, [*keys, "wh/t_2/data/x.parquet", "wh/t.json"])
    proxy.reset()
    listed = list(FileIO(proxied.properties).list_prefix(f"{root}/wh/t"))
    assert sorted(f.location for f in listed) == [f"{root}/{k}" for k in keys]
    pages = [r for r in proxy.recorded() if r.method == "GET" and "list-type=2" in r.query]
    assert len(pages) >= 2  # moto pages at 1,000 keys, as S3 does


def test_s3_delete_many_sends_batches_of_1000(
    s3_store: ObjectStore, s3_proxy: tuple[ObjectStore, ThrottleProxy]
) -> None:
    proxied, proxy = s3_proxy
    root = s3_store.new_bucket()
    keys = [f"t/data/f{i:05d}.parquet" for i in range(2500)]
    _put_many(s3_store, root, [*keys, "t_2/keep.parquet"])
    locations = [f"{root}/{k}" for k in keys] + [f"{root}/t/data/never-written.parquet"]
    proxy.reset()
    assert FileIO(proxied.properties).delete_many(locations) == {}
    batches = [r for r in proxy.recorded() if r.method == "POST" and r.query.startswith("delete")]
    assert len(batches) == 3
    assert len(proxy.recorded()) == 3  # nothing else: no per-key requests, no markers
    client = s3_store.extra["client"]
    left = client.list_objects_v2(Bucket=root.removeprefix("s3://"))
    assert [o["Key"] for o in left.get("Contents", [])] == ["t_2/keep.parquet"]


def test_s3_delete_many_reports_every_key_that_stays(s3_store: ObjectStore) -> None:
    io = FileIO(s3_store.properties)
    root = s3_store.new_bucket()
    present = [f"{root}/t/f{i}.parquet" for i in range(5)]
    for location in present:
        io.write_bytes(location, b"x")
    missing_bucket = [f"s3://no-such-bucket-{os.getpid()}/t/f{i:04d}.parquet" for i in range(1500)]
    failed = io.delete_many(present + missing_bucket)
    assert sorted(failed) == sorted(missing_bucket)
    assert all("NoSuchBucket" in why for why in failed.values())
    assert list(io.list_prefix(root)) == []


def test_throttled_store_loses_and_duplicates_nothing(
    s3_store: ObjectStore, s3_proxy: tuple[ObjectStore, ThrottleProxy]
) -> None:
    """icecore's own retries, alone: the SDK gives up at the first 503 here."""
    proxied, proxy = s3_proxy
    root = s3_store.new_bucket()
    policy = RetryPolicy(max_attempts=8, base_delay=0.01, sdk_max_attempts=1)
    io = FileIO(proxied.properties, retry=policy)
    # Sizes from empty to a few KiB: S3's error body is larger than a small ranged read.
    contents = {f"{root}/t/data/f{i:02d}.parquet": os.urandom(i * i) for i in range(50)}
    proxy.reset(throttle_every=5)
    for location, data in contents.items():
        io.write_bytes(location, data)
    for location, data in contents.items():
        assert io.read_bytes(location) == data
    listed = [f.location for f in io.list_prefix(f"{root}/t")]
    recorded = proxy.recorded()
    proxy.reset()
    assert sorted(listed) == sorted(contents)
    assert sum(r.throttled for r in recorded) >= len(recorded) // 5
    # Every object reached the server exactly once: no write was repeated after it landed.
    for location in contents:
        path = "/" + location.removeprefix("s3://")
        puts = [r for r in recorded if r.method == "PUT" and r.path == path and not r.throttled]
        assert len(puts) == 1, location


def test_pyarrow_retries_throttled_requests_itself(
    s3_store: ObjectStore, s3_proxy: tuple[ObjectStore, ThrottleProxy]
) -> None:
    """The SDK's retries, alone: icecore gives up at the first failure it sees here."""
    proxied, proxy = s3_proxy
    root = s3_store.new_bucket()
    io = FileIO(proxied.properties, retry=RetryPolicy(max_attempts=1, sdk_max_attempts=4))
    contents = {f"{root}/t/f{i}": os.urandom(4096 + i) for i in range(4)}
    proxy.reset(throttle_every=3)
    for location, data in contents.items():
        io.write_bytes(location, data)
        assert io.read_bytes(location) == data
    assert sorted(f.location for f in io.list_prefix(f"{root}/t")) == sorted(contents)
    assert any(r.throttled for r in proxy.recorded())
    proxy.reset()


def test_s3a_and_s3n_share_the_filesystem_and_keep_their_spelling(s3_store: ObjectStore) -> None:
    io = FileIO(s3_store.properties)
    bucket = s3_store.new_bucket().removeprefix("s3://")
    filesystems = {id(io.resolve(f"{scheme}://{bucket}/k")[0]) for scheme in ("s3", "s3a", "s3n")}
    assert len(filesystems) == 1
    io.write_bytes(f"s3a://{bucket}/t/a.parquet", b"a")
    assert [f.location for f in io.list_prefix(f"s3n://{bucket}/t")] == [
        f"s3n://{bucket}/t/a.parquet"
    ]
    assert io.read_bytes(f"s3://{bucket}/t/a.parquet") == b"a"
    assert io.delete_many([f"s3a://{bucket}/t/a.parquet"]) == {}
    assert not io.exists(f"s3n://{bucket}/t/a.parquet")


@pytest.mark.parametrize("size", [100, 12 * MiB], ids=["small", "multipart"])
def test_write_that_fails_before_close_leaves_no_object(store: ObjectStore, size: int) -> None:
    # moto answers 500 (real S3: 404) to parts of an aborted upload: do not retry those here.
    io = FileIO(store.properties, retry=RetryPolicy(sdk_max_attempts=1))
    root = store.new_bucket()
    location = f"{root}/t/data/partial.parquet"
    with pytest.raises(RuntimeError, match="writer failed"), io.open_output(location) as f:
        for _ in range(0, size, MiB):
            f.write(os.urandom(min(MiB, size)))
        raise RuntimeError("writer failed")
    abandoned = io.open_output(f"{root}/t/data/abandoned.parquet")
    abandoned.write(b"half a file")
    del abandoned
    assert list(io.list_prefix(root)) == []
    if store.name == "s3":
        uploads = store.extra["client"].list_multipart_uploads(Bucket=root.removeprefix("s3://"))
        assert uploads.get("Uploads", []) == []


_KILLED_WRITER = """
import json, sys, time
from icecore.io import FileIO
properties, location = json.loads(sys.argv[1]), sys.argv[2]
f = FileIO(properties).open_output(location)
for i in range(1000):
    f.write(bytes([i % 256]) * (1024 * 1024))
    if i == 24:
        print("uploading", flush=True)
    if i >= 24:
        time.sleep(0.05)
f.close()
"""


def test_killed_upload_leaves_no_object(s3_store: ObjectStore) -> None:
    io = FileIO(s3_store.properties)
    root = s3_store.new_bucket()
    location = f"{root}/t/data/killed.parquet"
    writer = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER, json.dumps(s3_store.properties), location],
        stdout=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline() == b"uploading\n"
        time.sleep(0.3)
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    assert not io.exists(location)
    assert list(io.list_prefix(root)) == []
    bucket = root.removeprefix("s3://")
    client = s3_store.extra["client"]
    [upload] = client.list_multipart_uploads(Bucket=bucket)["Uploads"]  # killed mid-upload
    assert upload["Key"] == "t/data/killed.parquet"
    # FileIO finds it under its directory (not under `t/dat`, a raw prefix of its key) and
    # aborts it, as remove_orphan_files does; aborting twice is no error.
    assert io.pending_uploads(f"{root}/t/dat") == []
    [pending] = io.pending_uploads(f"{root}/t")
    assert (pending.location, pending.upload_id) == (location, upload["UploadId"])
    io.abort_upload(pending)
    assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    io.abort_upload(pending)


def _assert_hidden(secret: str, error: FileError, caplog: pytest.LogCaptureFixture) -> None:
    assert secret not in str(error)
    assert secret not in "".join(traceback.format_exception(error))
    assert secret not in caplog.text


def test_s3_secret_never_shows(s3_store: ObjectStore, caplog: pytest.LogCaptureFixture) -> None:
    secret = s3_store.properties["s3.secret-access-key"]
    properties = {
        **s3_store.properties,
        # Userinfo in an endpoint is a credential too; port 9 (discard) refuses connections.
        "s3.endpoint": f"http://user:{secret}@127.0.0.1:9",
        "s3.connect-timeout": "1",
    }
    io = FileIO(properties, retry=RetryPolicy(max_attempts=2, base_delay=0.01))
    caplog.set_level(logging.DEBUG, logger="icecore")
    assert secret not in repr(io)
    with pytest.raises(FileError) as err:
        io.read_bytes("s3://bucket/t/metadata/v1.metadata.json")
    _assert_hidden(secret, err.value, caplog)
    failed = io.delete_many(["s3://bucket/t/a.parquet"])
    assert list(failed) == ["s3://bucket/t/a.parquet"]
    assert secret not in failed["s3://bucket/t/a.parquet"]


def test_azure_sas_token_never_shows(
    azure_store: ObjectStore, caplog: pytest.LogCaptureFixture
) -> None:
    # pyarrow puts the SAS token into the URL it names in its errors.
    sas = "sv=2022-11-02&ss=b&srt=sco&sp=rl&se=2030-01-01T00:00:00Z&sig=c2VjcmV0LXNpZw%3D%3D"
    properties = {k: v for k, v in azure_store.properties.items() if k != "adls.account-key"}
    properties["adls.sas-token"] = sas
    io = FileIO(properties, retry=RetryPolicy(max_attempts=1))
    caplog.set_level(logging.DEBUG, logger="icecore")
    assert "c2VjcmV0LXNpZw" not in repr(io)
    with pytest.raises(FileError) as err:
        io.read_bytes(f"abfss://missing@devstoreaccount1.dfs.core.windows.net/t/{os.getpid()}")
    _assert_hidden("c2VjcmV0LXNpZw", err.value, caplog)
