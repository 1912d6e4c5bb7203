"""FileIO: real local files, locations that keep their scheme, and cloud resolution offline."""

import os
import shutil
from datetime import UTC, datetime

import pytest
from pyarrow import fs as pafs

from icecore.errors import FileError
from icecore.io import FileIO, ListedFile
from icecore.io.retry import is_transient


@pytest.fixture
def io() -> FileIO:
    return FileIO()


def test_plain_path_round_trip_creates_parent_directories(io: FileIO, tmp_path) -> None:
    location = str(tmp_path / "a" / "b" / "data.bin")
    io.write_bytes(location, b"\x00iceberg\xff")
    assert io.read_bytes(location) == b"\x00iceberg\xff"
    assert io.exists(location)
    assert io.size(location) == 9
    with io.open_input(location) as f:
        f.seek(1)
        assert f.read(7) == b"iceberg"


def test_file_uri_forms_resolve_to_the_local_path(io: FileIO, tmp_path) -> None:
    target = tmp_path / "x.json"
    target.write_bytes(b"{}")
    for location in (f"file://{target}", f"file:{target}", f"file://localhost{target}"):
        filesystem, path = io.resolve(location)
        assert isinstance(filesystem, pafs.LocalFileSystem)
        assert path == str(target)
        assert io.read_bytes(location) == b"{}"


def test_open_output_refuses_to_overwrite(io: FileIO, tmp_path) -> None:
    location = f"file://{tmp_path}/v1.metadata.json"
    io.write_bytes(location, b"first")
    with pytest.raises(FileError) as err:
        io.write_bytes(location, b"second")
    assert err.value.path == location
    assert "refusing to overwrite" in err.value.problem
    assert io.read_bytes(location) == b"first"

    io.write_bytes(location, b"second", overwrite=True)
    assert io.read_bytes(location) == b"second"


def test_missing_file_errors_name_the_location(io: FileIO, tmp_path) -> None:
    location = f"file://{tmp_path}/nope.avro"
    for call in (io.read_bytes, io.open_input, io.size):
        with pytest.raises(FileError) as err:
            call(location)
        assert err.value.path == location
        assert "not found" in err.value.problem
        assert str(err.value).startswith(location)
    assert not io.exists(location)


def test_delete_is_explicit_about_missing_files(io: FileIO, tmp_path) -> None:
    location = str(tmp_path / "gone.parquet")
    io.write_bytes(location, b"x")
    io.delete(location)
    assert not io.exists(location)
    with pytest.raises(FileError, match=r"gone\.parquet: cannot delete: file not found"):
        io.delete(location)
    io.delete(location, missing_ok=True)


def test_size_of_a_directory_is_an_error(io: FileIO, tmp_path) -> None:
    with pytest.raises(FileError, match="is not a file"):
        io.size(str(tmp_path))


def _write_tree(root) -> None:
    for name, size in {"t/data/a.parquet": 3, "t/data/p=1/b.parquet": 5, "t/m.json": 1}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)
    (root / "t_backup").mkdir()
    (root / "t_backup" / "keep.parquet").write_bytes(b"k")
    (root / "t" / "empty_dir").mkdir()


@pytest.mark.parametrize("prefix", ["", "file://", "file:"])
def test_list_prefix_recurses_and_keeps_the_callers_spelling(
    io: FileIO, tmp_path, prefix: str
) -> None:
    _write_tree(tmp_path)
    listed = sorted(io.list_prefix(f"{prefix}{tmp_path}/t"))
    assert [(f.location, f.size) for f in listed] == [
        (f"{prefix}{tmp_path}/t/data/a.parquet", 3),
        (f"{prefix}{tmp_path}/t/data/p=1/b.parquet", 5),
        (f"{prefix}{tmp_path}/t/m.json", 1),
    ]
    a = listed[0]
    assert isinstance(a, ListedFile)
    assert a.mtime_ms == os.stat(tmp_path / "t/data/a.parquet").st_mtime_ns // 1_000_000


def test_list_prefix_is_bounded_by_the_directory(io: FileIO, tmp_path) -> None:
    _write_tree(tmp_path)
    locations = [f.location for f in io.list_prefix(str(tmp_path / "t"))]
    assert not any("t_backup" in loc for loc in locations)
    assert list(io.list_prefix(str(tmp_path / "missing"))) == []


def test_listed_locations_can_be_deleted_as_listed(io: FileIO, tmp_path) -> None:
    _write_tree(tmp_path)
    for listed in io.list_prefix(f"file://{tmp_path}/t"):
        io.delete(listed.location)
    assert list(io.list_prefix(f"file://{tmp_path}/t")) == []


def test_s3_location_resolves_offline_with_iceberg_properties() -> None:
    io = FileIO(
        {
            "s3.endpoint": "http://localhost:9000",
            "s3.access-key-id": "admin",
            "s3.secret-access-key": "password",
            "s3.region": "eu-west-1",
            "s3.path-style-access": "false",
        }
    )
    filesystem, path = io.resolve("s3://warehouse/db/t/metadata/v1.metadata.json")
    assert isinstance(filesystem, pafs.S3FileSystem)
    assert path == "warehouse/db/t/metadata/v1.metadata.json"
    assert filesystem.region == "eu-west-1"
    expected = pafs.S3FileSystem(
        access_key="admin",
        secret_key="password",
        region="eu-west-1",
        endpoint_override="http://localhost:9000",
        force_virtual_addressing=True,
        allow_delayed_open=True,
    )
    assert filesystem.equals(expected)


def test_s3_path_style_access_keeps_pyarrow_path_addressing() -> None:
    filesystem, _ = FileIO({"s3.path-style-access": "true", "s3.region": "us-east-1"}).resolve(
        "s3://b/k"
    )
    assert filesystem.equals(
        pafs.S3FileSystem(
            region="us-east-1", force_virtual_addressing=False, allow_delayed_open=True
        )
    )


def test_filesystems_are_cached_per_scheme_and_authority() -> None:
    io = FileIO({"s3.region": "us-east-1"})
    first, _ = io.resolve("s3://bucket-a/x")
    again, _ = io.resolve("s3://bucket-a/y/z")
    other, _ = io.resolve("s3://bucket-b/x")
    assert first is again
    assert first is not other


def test_object_store_listings_map_back_to_the_callers_scheme() -> None:
    io = FileIO({"s3.region": "us-east-1"})
    s3a = io._resolve("s3a://bucket/tbl")
    assert s3a.path == "bucket/tbl"
    assert s3a.to_location("bucket/tbl/data/f.parquet") == "s3a://bucket/tbl/data/f.parquet"
    gs = io._resolve("gs://bucket/tbl")
    assert isinstance(gs.filesystem, pafs.GcsFileSystem)
    assert gs.to_location("bucket/tbl/f") == "gs://bucket/tbl/f"
    abfs = io._resolve("abfss://container@acct.dfs.core.windows.net/wh/tbl")
    assert isinstance(abfs.filesystem, pafs.AzureFileSystem)
    assert abfs.path == "container/wh/tbl"
    assert abfs.to_location("container/wh/tbl/f") == (
        "abfss://container@acct.dfs.core.windows.net/wh/tbl/f"
    )


def test_gcs_properties() -> None:
    io = FileIO(
        {
            "gcs.project-id": "proj",
            "gcs.service.host": "http://localhost:4443",
            "gcs.oauth2.token": "tok",
            "gcs.oauth2.token-expires-at": "1700000000000",
        }
    )
    filesystem, path = io.resolve("gs://bucket/a/b")
    assert path == "bucket/a/b"
    expected = pafs.GcsFileSystem(
        project_id="proj",
        scheme="http",
        endpoint_override="localhost:4443",
        access_token="tok",
        credential_token_expiration=datetime.fromtimestamp(1_700_000_000, tz=UTC),
    )
    assert filesystem.equals(expected)


def test_bad_boolean_property_is_named() -> None:
    with pytest.raises(FileError, match=r"s3.path-style-access: .*'yes'"):
        FileIO({"s3.path-style-access": "yes"}).resolve("s3://b/k")


def test_hash_and_question_mark_are_part_of_the_key(io: FileIO, tmp_path) -> None:
    # Partition values end up in paths; they are not URL fragments or queries.
    _, path = FileIO({"s3.region": "us-east-1"}).resolve("s3://bucket/t/data/p=a#b?c/f.parquet")
    assert path == "bucket/t/data/p=a#b?c/f.parquet"
    location = f"file://{tmp_path}/p=a#b?c/f.parquet"
    io.write_bytes(location, b"1")
    assert [f.location for f in io.list_prefix(f"file://{tmp_path}")] == [location]
    assert (tmp_path / "p=a#b?c" / "f.parquet").read_bytes() == b"1"


def test_gcs_emulator_properties() -> None:
    filesystem, _ = FileIO(
        {"gcs.service.host": "http://127.0.0.1:4443", "gcs.no-auth": "true"}
    ).resolve("gs://bucket/a")
    expected = pafs.GcsFileSystem(anonymous=True, scheme="http", endpoint_override="127.0.0.1:4443")
    assert filesystem.equals(expected)


def test_azure_authority_properties_point_abfss_locations_at_an_emulator() -> None:
    io = FileIO(
        {
            "adls.account-key": "a2V5",
            "adls.blob-storage-authority": "127.0.0.1:10000",
            "adls.dfs-storage-authority": "127.0.0.1:10000",
            "adls.blob-storage-scheme": "http",
            "adls.dfs-storage-scheme": "http",
        }
    )
    filesystem, path = io.resolve("abfss://c@devstoreaccount1.dfs.core.windows.net/wh/t")
    assert path == "c/wh/t"
    expected = pafs.AzureFileSystem(
        "devstoreaccount1",
        account_key="a2V5",
        blob_storage_authority="127.0.0.1:10000",
        dfs_storage_authority="127.0.0.1:10000",
        blob_storage_scheme="http",
        dfs_storage_scheme="http",
    )
    assert filesystem.equals(expected)
    # wasbs:// is the Blob endpoint's spelling of the same account: one filesystem.
    assert io.resolve("wasbs://c@devstoreaccount1.blob.core.windows.net/x")[0] is filesystem


def test_s3_spellings_share_one_filesystem_per_bucket() -> None:
    io = FileIO({"s3.region": "us-east-1"})
    assert io.resolve("s3a://b/k")[0] is io.resolve("s3://b/k")[0] is io.resolve("s3n://b/x")[0]


def test_repr_hides_credentials() -> None:
    io = FileIO({"s3.secret-access-key": "hunter2-secret", "adls.sas-token": "sv=1&sig=abcdefgh"})
    assert "hunter2" not in repr(io)
    assert "abcdefgh" not in repr(io)


@pytest.mark.parametrize(
    ("message", "transient"),
    [
        (
            "AWS Error SLOW_DOWN during ListObjectsV2 operation: Please reduce your request rate.",
            True,
        ),
        (
            "AWS Error UNKNOWN (HTTP status 503) during HeadObject operation: No response body.",
            True,
        ),
        (
            "AWS Error INTERNAL_FAILURE during GetObject: Failed to flush response stream",
            True,
        ),
        (
            "AWS Error NETWORK_CONNECTION during HeadObject: curlCode: 56, Connection reset",
            True,
        ),
        ("AWS Error UNKNOWN (HTTP status 429) during PutObject operation", True),
        ("google::cloud::Status(UNAVAILABLE: Retry policy exhausted)", True),
        ("AWS Error ACCESS_DENIED during HeadObject operation: No response body.", False),
        ("NoSuchBucket: The specified bucket does not exist", False),
        ("Path does not exist 'bucket/x'", False),
    ],
)
def test_which_errors_are_retried(message: str, transient: bool) -> None:
    assert is_transient(OSError(message)) is transient


def test_a_move_across_devices_copies_whole_then_deletes(io: FileIO, tmp_path) -> None:
    """`/dev/shm` is another device than the test's directory: the link fails (EXDEV), the
    file is copied under a hidden name linked into place, then the source goes; an existing
    target is refused on the way back, as on one device."""
    if not os.path.isdir("/dev/shm") or os.stat("/dev/shm").st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no second local device to move across")
    source = tmp_path / "data" / "a.parquet"
    source.parent.mkdir()
    source.write_bytes(b"across" * 1000)
    away = f"/dev/shm/icefloe-{os.getpid()}-{tmp_path.name}/trash/a.parquet"
    try:
        io.move(str(source), away)
        assert not source.exists() and io.read_bytes(away) == b"across" * 1000
        assert os.listdir(os.path.dirname(away)) == ["a.parquet"]  # no temporary left
        source.write_bytes(b"taken again")
        with pytest.raises(FileError, match="refusing to replace it"):
            io.move(away, str(source))
        assert source.read_bytes() == b"taken again" and io.exists(away)
    finally:
        shutil.rmtree(os.path.dirname(os.path.dirname(away)), ignore_errors=True)
