"""Iceberg locations: the one parser, the one table of scheme spellings, and comparison.

Iceberg tables store absolute locations (`s3://bucket/t/data/x.parquet`, `hdfs://nn/t/...`,
`file:/t/...`, plain `/t/...`) in their metadata, and those exact strings must come back out:
orphan-file removal compares listed locations with the ones the manifests hold, so a listing
that dropped or changed the scheme would make every live file look orphaned. A `Location`
therefore carries, besides the path to hand to `pyarrow.fs`, how to turn a filesystem path back
into a location spelled the way the caller spelled it (`s3a://` stays `s3a://`).

Other engines write several spellings of one object: `s3a`/`s3n` for `s3`, `gcs` for `gs`,
`abfs` for `abfss`, `wasb` for `wasbs` (`ALIASES`), `file:` for a bare path, duplicate
slashes. `location_key` compares locations whatever the spelling; `split_location` keeps the
scheme as written, for comparisons whose equivalences the user declares (orphan removal,
`icecore.orphans`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

from icecore.errors import FileError


class Store(StrEnum):
    """Kinds of storage; schemes that are spellings of one store share its filesystem."""

    LOCAL = "local"
    S3 = "s3"
    GCS = "gcs"
    AZURE = "azure"
    HDFS = "hdfs"


# Each other spelling of a scheme, and the one it stands for. s3a and s3n are Hadoop's
# spellings of S3 and appear in tables Spark wrote; gcs is GCS's in some clients; abfs and
# wasb are the unencrypted forms of Azure's Data Lake (abfss) and Blob (wasbs) endpoints.
ALIASES: dict[str, str] = {"s3a": "s3", "s3n": "s3", "gcs": "gs", "abfs": "abfss", "wasb": "wasbs"}
_STORES = {"s3": Store.S3, "gs": Store.GCS, "abfss": Store.AZURE, "wasbs": Store.AZURE}
# Which store serves each scheme, aliases included (`file` and bare paths are local).
SCHEMES: dict[str, Store] = {
    **_STORES,
    **{alias: _STORES[scheme] for alias, scheme in ALIASES.items()},
    "hdfs": Store.HDFS,
}


class SplitLocation(NamedTuple):
    scheme: str  # lower case, as spelled; "" for a bare path
    authority: str  # "" when there is none
    path: str


def _split(location: str) -> tuple[str | None, str, str]:
    """The one split of a location: scheme (lower case; None for a bare path), authority,
    path as written. Split by hand: urlsplit would read "#" and "?" in a key as fragment and
    query."""
    spelled, sep, rest = location.partition(":")
    scheme: str | None = spelled.lower()
    # A bare path, or a Windows drive letter (C:\...), has no scheme.
    if not sep or len(spelled) == 1 or "/" in spelled:
        scheme, rest = None, location
    authority = ""
    if rest.startswith("//"):
        authority, slash, tail = rest[2:].partition("/")
        rest = slash + tail
    return scheme, authority, rest


_SLASHES = re.compile(r"/{2,}")


def split_location(location: str) -> SplitLocation:
    """`location` split for comparison: scheme as spelled, duplicate slashes collapsed, no
    trailing slash."""
    scheme, authority, path = _split(location)
    path = _SLASHES.sub("/", path)
    if len(path) > 1:
        path = path.rstrip("/")
    return SplitLocation(scheme or "", authority, path)


Key = tuple[str, str, str]


def location_key(location: str) -> Key:
    """`location` as (canonical scheme, authority, path): equal for every spelling of one
    object."""
    scheme, authority, path = split_location(location)
    scheme = ALIASES.get(scheme, scheme)
    return ("", "", path) if scheme == "file" else (scheme, authority, path)


def key_within(inner: Key, outer: Key) -> bool:
    """Whether the object `inner` is the directory `outer` or lies under it, component-wise
    (`t_2` is not under `t`)."""
    if outer[:2] != inner[:2]:
        return False
    return inner[2] == outer[2] or inner[2].startswith(outer[2].rstrip("/") + "/")


def is_within(location: str, directory: str) -> bool:
    """Whether `location` is `directory` or lies under it (`t_2` is not under `t`)."""
    return key_within(location_key(location), location_key(directory))


@dataclass(frozen=True)
class Location:
    """One location, split for the store that serves it.

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
    """Split `location` for the store that serves it; raises FileError for one no store can
    serve."""
    if not location:
        raise FileError(location, "empty location")
    scheme, authority, path = _split(location)
    if scheme is None:
        return Location(location, Store.LOCAL, location)
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
