"""Splitting an Iceberg location into the store that holds it and the path within.

Iceberg tables store absolute locations (`s3://bucket/t/data/x.parquet`, `hdfs://nn/t/...`,
`file:/t/...`, plain `/t/...`) in their metadata, and those exact strings must come back out:
orphan-file removal compares listed locations with the ones the manifests hold, so a listing
that dropped or changed the scheme would make every live file look orphaned. A `Location`
therefore carries, besides the path to hand to `pyarrow.fs`, how to turn a filesystem path back
into a location spelled the way the caller spelled it (`s3a://` stays `s3a://`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from icecore.errors import FileError


class Store(StrEnum):
    """Kinds of storage; schemes that are spellings of one store share its filesystem."""

    LOCAL = "local"
    S3 = "s3"
    GCS = "gcs"
    AZURE = "azure"
    HDFS = "hdfs"


# s3a and s3n are Hadoop's spellings of S3 and appear in tables Spark wrote; wasb(s) is the
# Blob endpoint's spelling of an Azure location.
SCHEMES: dict[str, Store] = {
    "s3": Store.S3,
    "s3a": Store.S3,
    "s3n": Store.S3,
    "gs": Store.GCS,
    "gcs": Store.GCS,
    "abfs": Store.AZURE,
    "abfss": Store.AZURE,
    "wasb": Store.AZURE,
    "wasbs": Store.AZURE,
    "hdfs": Store.HDFS,
}


@dataclass(frozen=True)
class Location:
    """One location, split.

    `path` is what `pyarrow.fs` takes (`bucket/key` on object stores); `bucket` and `key` are
    what object-store APIs take; `endpoint` names the service (the account host on Azure, the
    name node on HDFS) and, with `store`, decides which filesystem serves the location.
    """

    location: str
    store: Store
    path: str
    bucket: str = ""
    key: str = ""
    endpoint: str = ""
    to_location: Callable[[str], str] = str

    @property
    def filesystem_key(self) -> tuple[str, str]:
        """What filesystems are cached by, whatever the spelling of the scheme: one per bucket
        on S3 and GCS (S3 clients are regional, and buckets may live in different regions),
        one per account on Azure (whether spelled by its Blob or its Data Lake host), one per
        name node on HDFS."""
        if self.store is Store.AZURE:
            return (self.store.value, self.endpoint.replace(".blob.", ".dfs.", 1))
        return (self.store.value, self.endpoint or self.bucket)


def _prefixer(prefix: str) -> Callable[[str], str]:
    return lambda path: path if "://" in path else prefix + path


def parse(location: str) -> Location:
    """Split `location`; raises FileError for one no store can serve."""
    if not location:
        raise FileError(location, "empty location")
    scheme, sep, rest = location.partition(":")
    # A bare path, or a Windows drive letter (C:\...), is a local file.
    if not sep or len(scheme) == 1 or "/" in scheme:
        return Location(location, Store.LOCAL, location)
    scheme = scheme.lower()
    # Split by hand: urlsplit would read "#" and "?" in a key as fragment and query.
    authority, path = "", rest
    if rest.startswith("//"):
        authority, slash, tail = rest[2:].partition("/")
        path = slash + tail
    if scheme == "file":
        if authority not in ("", "localhost"):
            raise FileError(location, f"file location on remote host {authority!r}")
        prefix = location[: len(location) - len(path)]
        return Location(location, Store.LOCAL, path, to_location=_prefixer(prefix))
    store = SCHEMES.get(scheme)
    if store is None:
        raise FileError(location, f"unsupported scheme {scheme!r}")
    if not authority:
        raise FileError(location, f"{scheme} location lacks a bucket or authority")
    key = path.lstrip("/")
    if store in (Store.S3, Store.GCS):
        bucket_path = f"{authority}/{key}" if key else authority
        return Location(
            location, store, bucket_path, authority, key, to_location=_prefixer(f"{scheme}://")
        )
    if store is Store.AZURE:
        container, at, host = authority.partition("@")
        if not at or not container or not host:
            raise FileError(location, f"{scheme} location must be container@account.host")

        def to_azure_location(fs_path: str) -> str:
            container_name, _, blob = fs_path.partition("/")
            return f"{scheme}://{container_name}@{host}/{blob}"

        container_path = f"{container}/{key}" if key else container
        return Location(location, store, container_path, container, key, host, to_azure_location)
    return Location(
        location,
        store,
        path or "/",
        endpoint=authority,
        to_location=_prefixer(f"hdfs://{authority}"),
    )
