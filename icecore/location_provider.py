"""Where a table's new files go: Iceberg Java's `LocationProviders` and metadata file locations.

Every writer asks this module, the driver's and the tasks' alike (a provider travels to tasks
as `to_json()`), so a file lands where Java, PyIceberg and the table's other writers would put
it:

- metadata files under `write.metadata.path`, else `<location>/metadata`;
- data and delete files under the data location: `write.data.path`, else the deprecated
  `write.folder-storage.path` (and, for object storage, `write.object-storage.path` before
  it), else `<location>/data`;
- with `write.object-storage.enabled=true`, below hashed directories (Java's
  `ObjectStoreLocationProvider`): S3 throttles writes per key prefix (3,500 PUTs/s), so the
  files of one table, which would share a prefix per partition, are spread over 2^20 prefixes
  by the murmur3 hash of their name, as `0101/1100/0011/10110110/`. With
  `write.object-storage.partitioned-paths` (the default) the partition path stays below the
  hash directories; without it the last hash part is joined to the file name by a `-`. A data
  location outside the table's location gets the table's last two path names after the hash
  (`<hash>/<db>/<table>/...`), so tables sharing one data location stay apart.

Java 1.10 refuses the deprecated path properties; we honour them as older Java releases did,
since tables written by those still carry them. A `write.location-provider.impl` names a Java
class we cannot run: writing to such a table is refused rather than guessed at.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from icecore.errors import ValidationError
from icecore.io.locations import split_location
from icecore.spec.hashing import murmur3_x86_32
from icecore.spec.properties import (
    OBJECT_STORE_ENABLED,
    OBJECT_STORE_PATH,
    WRITE_DATA_LOCATION,
    WRITE_FOLDER_STORAGE_LOCATION,
    WRITE_LOCATION_PROVIDER_IMPL,
    WRITE_METADATA_LOCATION,
    WRITE_OBJECT_STORE_PARTITIONED_PATHS,
)

if TYPE_CHECKING:
    from icecore.spec.metadata import TableMetadata

# Java's ObjectStoreLocationProvider: 20 bits of the hash, as three 4-bit directories and the
# remaining 8 bits.
HASH_BITS = 20
DIRECTORY_BITS = 4
DIRECTORY_DEPTH = 3


def strip_trailing_slash(location: str) -> str:
    """Java's `LocationUtil.stripTrailingSlash`: never strips the `//` of `s3://`."""
    while location.endswith("/") and not location.endswith("://"):
        location = location[:-1]
    return location


def metadata_directory(location: str, properties: Mapping[str, str]) -> str:
    """Where a table's metadata files go: `write.metadata.path`, else `<location>/metadata`."""
    configured = WRITE_METADATA_LOCATION.read(properties)
    if configured:
        return strip_trailing_slash(configured)
    return f"{strip_trailing_slash(location)}/metadata"


def metadata_file_location(metadata: TableMetadata, name: str) -> str:
    """A new metadata file (table metadata, manifest list, manifest, statistics) named `name`."""
    return f"{metadata_directory(metadata.location, metadata.properties)}/{name}"


def data_location(location: str, properties: Mapping[str, str]) -> str:
    """The directory new data and delete files of the table go in (or, with object storage,
    under): the deprecated object-storage path counts only when object storage is on, as in
    Java."""
    legacy = (OBJECT_STORE_PATH,) if OBJECT_STORE_ENABLED.read(properties) else ()
    for declared in (WRITE_DATA_LOCATION, *legacy, WRITE_FOLDER_STORAGE_LOCATION):
        configured = declared.read(properties)
        if configured:
            return strip_trailing_slash(configured)
    return f"{strip_trailing_slash(location)}/data"


class LocationProvider(ABC):
    """Names new data and delete files of one table.

    `filename` may hold directories of its own; `partition_path` is the partition's path
    (`PartitionSpec.partition_path`, Java's `partitionToPath`), None or "" for an unpartitioned
    file."""

    data_location: str

    @property
    @abstractmethod
    def hashed(self) -> bool:
        """Whether files spread over hash directories (no one directory holds a write's files)."""

    @abstractmethod
    def new_data_location(self, filename: str, partition_path: str | None = None) -> str: ...

    @abstractmethod
    def to_json(self) -> dict[str, Any]: ...

    @staticmethod
    def from_json(obj: Mapping[str, Any]) -> LocationProvider:
        if obj["kind"] == ObjectStoreLocationProvider.KIND:
            return ObjectStoreLocationProvider(
                obj["data_location"], obj["context"], obj["partitioned_paths"]
            )
        return DefaultLocationProvider(obj["data_location"])


class DefaultLocationProvider(LocationProvider):
    """`<data location>/<partition path>/<file name>`."""

    KIND = "default"

    def __init__(self, data_location: str) -> None:
        self.data_location = data_location

    @property
    def hashed(self) -> bool:
        return False

    def new_data_location(self, filename: str, partition_path: str | None = None) -> str:
        if partition_path:
            return f"{self.data_location}/{partition_path}/{filename}"
        return f"{self.data_location}/{filename}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.KIND, "data_location": self.data_location}


class ObjectStoreLocationProvider(LocationProvider):
    """`<data location>/<hash directories>[/<context>]/<partition path>/<file name>`."""

    KIND = "object-store"

    def __init__(self, data_location: str, context: str | None, partitioned_paths: bool) -> None:
        self.data_location = data_location
        self.context = context
        self.partitioned_paths = partitioned_paths

    @property
    def hashed(self) -> bool:
        return True

    def new_data_location(self, filename: str, partition_path: str | None = None) -> str:
        if partition_path and self.partitioned_paths:
            filename = f"{partition_path}/{filename}"
        hashed = object_store_hash(filename)
        if self.context is not None:
            return f"{self.data_location}/{hashed}/{self.context}/{filename}"
        if self.partitioned_paths:
            return f"{self.data_location}/{hashed}/{filename}"
        return f"{self.data_location}/{hashed}-{filename}"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.KIND,
            "data_location": self.data_location,
            "context": self.context,
            "partitioned_paths": self.partitioned_paths,
        }


def locations_for(location: str, properties: Mapping[str, str]) -> LocationProvider:
    """The provider of a table at `location` with `properties` (Java's `locationsFor`)."""
    impl = WRITE_LOCATION_PROVIDER_IMPL.read(properties)
    if impl:
        raise ValidationError(
            f"table property {WRITE_LOCATION_PROVIDER_IMPL.name}={impl} names a Java location "
            f"provider, which icefloe cannot run: its files would land elsewhere than the "
            f"table's other writers put them"
        )
    table_location = strip_trailing_slash(location)
    data = data_location(table_location, properties)
    if not OBJECT_STORE_ENABLED.read(properties):
        return DefaultLocationProvider(data)
    # Java compares the strings as they are: a data path spelled differently (s3a, a
    # sibling `t_2`) counts as outside, or inside, exactly as Java decides.
    context = None if data.startswith(table_location) else _path_context(table_location)
    return ObjectStoreLocationProvider(
        data, context, WRITE_OBJECT_STORE_PARTITIONED_PATHS.read(properties)
    )


def table_locations(metadata: TableMetadata) -> LocationProvider:
    return locations_for(metadata.location, metadata.properties)


def object_store_hash(filename: str) -> str:
    """Java's `computeHash`: the low 20 bits of murmur3 (seed 0) of the UTF-8 name, as a
    binary string cut into directories: `1001/1001/1001/10011001`."""
    bits = format(murmur3_x86_32(filename.encode("utf-8")) & ((1 << HASH_BITS) - 1), "020b")
    cut = DIRECTORY_BITS * DIRECTORY_DEPTH
    parts = [bits[i : i + DIRECTORY_BITS] for i in range(0, cut, DIRECTORY_BITS)]
    return "/".join([*parts, bits[cut:]])


def _path_context(table_location: str) -> str:
    """Hadoop `Path`'s `<parent name>/<name>` of the table location, Java's `pathContext`
    (a table at the root of a bucket has the empty parent name: `/t`)."""
    path = split_location(table_location).path
    name = path[path.rfind("/") + 1 :]
    if path in ("", "/"):
        return name
    last = path.rfind("/")
    parent = "." if last < 0 else (path[:last] or "/")
    return f"{parent[parent.rfind('/') + 1 :]}/{name}"
