"""Locations, in one place: how each spelling is split for its store, which spellings name one
object (`location_key`), containment, and orphan removal's comparison (`icecore.orphans`)."""

from __future__ import annotations

import pytest

from icecore.errors import FileError
from icecore.io import FileIO
from icecore.io.locations import Store, is_within, location_key, parse, split_location
from icecore.orphans import DEFAULT_EQUAL_SCHEMES, LocationMatcher, classify, is_hidden

DFS, BLOB = "a.dfs.core.windows.net", "a.blob.core.windows.net"


@pytest.mark.parametrize(
    ("location", "split"),
    [
        ("/wh/t/x", (Store.LOCAL, "/wh/t/x", "", "", "")),
        ("C:\\wh\\x", (Store.LOCAL, "C:\\wh\\x", "", "", "")),
        ("file:/wh/t/x", (Store.LOCAL, "/wh/t/x", "", "", "")),
        ("file:///wh/t/x", (Store.LOCAL, "/wh/t/x", "", "", "")),
        ("file://localhost/wh/t/x", (Store.LOCAL, "/wh/t/x", "", "", "")),
        ("s3://b/t/x", (Store.S3, "b/t/x", "b", "t/x", "")),
        ("S3A://b/t/x", (Store.S3, "b/t/x", "b", "t/x", "")),
        ("s3n://b", (Store.S3, "b", "b", "", "")),
        ("gs://b/t/x", (Store.GCS, "b/t/x", "b", "t/x", "")),
        ("gcs://b/t/x", (Store.GCS, "b/t/x", "b", "t/x", "")),
        (f"abfss://c@{DFS}/t", (Store.AZURE, "c/t", "c", "t", DFS)),
        (f"abfs://c@{DFS}/t", (Store.AZURE, "c/t", "c", "t", DFS)),
        (f"wasbs://c@{BLOB}/t", (Store.AZURE, "c/t", "c", "t", BLOB)),
        (f"wasb://c@{BLOB}/t", (Store.AZURE, "c/t", "c", "t", BLOB)),
        ("hdfs://nn:8020/wh/t", (Store.HDFS, "/wh/t", "", "", "nn:8020")),
        ("s3://b/p=a#b?c/f", (Store.S3, "b/p=a#b?c/f", "b", "p=a#b?c/f", "")),
    ],
)
def test_each_spelling_is_split_for_its_store(
    location: str, split: tuple[Store, str, str, str, str]
) -> None:
    parsed = parse(location)
    assert (parsed.store, parsed.path, parsed.bucket, parsed.key, parsed.endpoint) == split
    # A filesystem path below the location is spelled back the caller's way.
    assert parsed.to_location(parsed.path) == location.replace("S3A:", "s3a:")


def test_one_filesystem_per_bucket_or_account_whatever_the_spelling() -> None:
    keys = {parse(loc).filesystem_key for loc in ("s3://b/x", "s3a://b/y", "s3n://b/z")}
    assert keys == {("s3", "b")}
    assert parse("s3://c/x").filesystem_key != parse("s3://b/x").filesystem_key
    azure = {
        parse(loc).filesystem_key
        for loc in ("abfss://c@a.dfs.core.windows.net/x", "wasb://d@a.blob.core.windows.net/x")
    }
    assert azure == {("azure", "a.dfs.core.windows.net")}


@pytest.mark.parametrize(
    ("location", "problem"),
    [
        ("ftp://host/file", "unsupported scheme 'ftp'"),
        (":no-scheme", "unsupported scheme ''"),
        ("s3:///no-bucket", "lacks a bucket"),
        ("abfss://no-container/x", "container@account"),
        ("wasbs://c@/x", "container@account"),
        ("file://otherhost/tmp/x", "remote host"),
        ("", "empty location"),
    ],
)
def test_unusable_locations(location: str, problem: str) -> None:
    with pytest.raises(FileError, match=problem):
        FileIO().resolve(location)


def test_location_keys_equal_for_every_spelling_of_one_object() -> None:
    assert location_key("s3a://b//wh/t/") == location_key("s3://b/wh/t")
    assert location_key("file:///wh/t") == location_key("/wh/t") == location_key("file:/wh/t")
    assert location_key("gcs://b/t") == location_key("gs://b/t")
    assert location_key("abfs://c@a/t") == location_key("abfss://c@a/t")
    assert location_key("wasb://c@a/t") == location_key("wasbs://c@a/t")
    assert location_key("s3://b/t") != location_key("s3://c/t")


def test_within_is_component_wise() -> None:
    assert is_within("s3://b/wh/db/t/data/x.parquet", "s3://b/wh/db/t")
    assert is_within("s3://b/wh/db/t", "s3a://b/wh/db/t/")
    assert not is_within("s3://b/wh/db/t_2/data/x.parquet", "s3://b/wh/db/t")
    assert not is_within("/wh/db/t", "/wh/db/t/data")


def test_location_matching_rules() -> None:
    matcher = LocationMatcher()
    assert split_location("s3://b//t/x/") == ("s3", "b", "/t/x")
    assert is_hidden("s3://b/t/data/_p=1/.x.crc", "s3://b/t")
    assert is_hidden("s3://b/t/_temporary/0/x.parquet", "s3://b/t")
    assert not is_hidden("s3://b/t/data/_p=1/x.parquet", "s3://b/t")
    assert not is_hidden("s3://b/_t/data/x.parquet", "s3://b/_t")
    assert split_location("file:/t/x") == split_location("file:///t/x") == ("file", "", "/t/x")
    assert matcher.agree(split_location("s3a://b/t"), split_location("s3://b/t"))
    assert matcher.agree(split_location("/t/x"), split_location("hdfs://nn/t/x"))
    assert not matcher.agree(split_location("s3://b/t"), split_location("s3://c/t"))
    listed = ["s3://b/t/a", "s3://b/t/b", "s3://b/t/c", "s3a://b/t/d"]
    referenced = ["s3://b/t/a", "s3://other/t/b", "s3n://b/t/d"]
    result = classify(listed, referenced, matcher)
    assert result.orphans == ["s3://b/t/c"]
    assert result.mismatched == [("s3://b/t/b", ["s3://other/t/b"])]


def test_orphan_removal_equates_only_what_iceberg_does_unless_declared() -> None:
    """Iceberg's `equal_schemes` default is `s3a,s3n => s3`; other spellings of one store are
    prefix mismatches until the user declares them (`--equal-schemes gcs=gs`)."""
    assert DEFAULT_EQUAL_SCHEMES == {"s3a": "s3", "s3n": "s3"}
    gcs, gs = split_location("gcs://b/t"), split_location("gs://b/t")
    assert not LocationMatcher().agree(gcs, gs)
    declared = LocationMatcher({**DEFAULT_EQUAL_SCHEMES, "GCS": "gs"}, {"b2": "b"})
    assert declared.agree(gcs, gs)
    assert declared.agree(split_location("gs://b2/t"), gs)
    assert declared.agree(split_location("s3n://b/t"), split_location("s3://b/t"))
