"""Where new files go (`icecore.location_provider`), checked against Iceberg Java's own
`LocationProviders` run for real: a file we write to an object-storage table lands in the
hash directory Java would put it in, so files written by Java and by us spread alike."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from icecore.errors import ValidationError
from icecore.location_provider import (
    data_location,
    locations_for,
    metadata_directory,
    object_store_hash,
)
from icecore.spec.partitioning import PartitionField, PartitionSpec
from icecore.spec.schema import Schema
from icecore.spec.transforms import IdentityTransform
from icecore.spec.types import NestedField, StringType
from tests.support.rest_server import ICEBERG_DIST, ICEBERG_RUNTIME_JAR, package_jars, pyspark_jars

PROBE = Path(__file__).resolve().parents[1] / "support" / "java" / "LocationProbe.java"
# Java's probe partitions by an identity field `region`; ours the same.
REGION = Schema((NestedField(1, "region", StringType()),))
BY_REGION = PartitionSpec(0, (PartitionField(1, 1000, IdentityTransform(), "region"),))
NAMES = [
    "00000-0-5c8b6d3e-1f7a-4c1e-9d0a-2b3c4d5e6f70-00001.parquet",
    "part-00003-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0-c000007.zstd.parquet",
    "d1b0c9a8-7f6e-5d4c-3b2a-190817263544-deletes.puffin",
    "ünïcode-名前.parquet",
    "a",
]
REGIONS = ["eu-west-1", "us east/2", "ä+b=c&d", ""]


def java_locations(
    table_location: str, properties: Mapping[str, str], lines: Sequence[str]
) -> list[str]:
    """What `LocationProviders.locationsFor(table_location, properties)` answers for each
    line: a file name, or a region value, a tab and a file name (see LocationProbe.java)."""
    classpath = [*package_jars(ICEBERG_DIST, [ICEBERG_RUNTIME_JAR]), *pyspark_jars()]
    done = subprocess.run(
        ["java", "-XX:TieredStopAtLevel=1", "-cp", os.pathsep.join(map(str, classpath)),
         str(PROBE), table_location, *(f"{k}={v}" for k, v in properties.items())],
        input="".join(f"{line}\n" for line in lines),
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=False,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def ours(table_location: str, properties: Mapping[str, str], lines: Sequence[str]) -> list[str]:
    provider = locations_for(table_location, properties)
    out = []
    for line in lines:
        region, tab, name = line.rpartition("\t")
        path = BY_REGION.partition_path((region,), REGION) if tab else None
        out.append(provider.new_data_location(name, path))
    return out


CASES = {
    "object store": ("s3://bucket/db/events/", {"write.object-storage.enabled": "true"}),
    "object store, data path inside": (
        "s3://bucket/db/events",
        {"write.object-storage.enabled": "true", "write.data.path": "s3://bucket/db/events/x/"},
    ),
    "object store, data path elsewhere": (
        "s3://bucket/db/events",
        {"write.object-storage.enabled": "true", "write.data.path": "s3://shared-data//"},
    ),
    "object store, table at a bucket's root": (
        "gs://bucket/events",
        {"write.object-storage.enabled": "true", "write.data.path": "gs://other/d"},
    ),
    "object store, no partition paths": (
        "/warehouse/db/events",
        {
            "write.object-storage.enabled": "true",
            "write.object-storage.partitioned-paths": "false",
        },
    ),
    "object store, no partition paths, data path elsewhere": (
        "file:/warehouse/db/events",
        {
            "write.object-storage.enabled": "TRUE",
            "write.object-storage.partitioned-paths": "false",
            "write.data.path": "file:/data",
        },
    ),
    "default": ("s3a://bucket/db/events", {}),
    "default, data path": ("s3://bucket/db/events", {"write.data.path": "s3://bucket/data/"}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_files_land_where_javas_location_provider_puts_them(case: str) -> None:
    location, properties = CASES[case]
    lines = [*NAMES, *(f"{region}\t{name}" for region in REGIONS for name in NAMES[:2])]
    assert ours(location, properties, lines) == java_locations(location, properties, lines)


def test_the_hash_directories_are_the_low_20_bits_of_murmur3() -> None:
    # Java's own example: the hash 10011001100110011001 becomes 1001/1001/1001/10011001.
    hashed = object_store_hash(NAMES[0])
    assert [len(part) for part in hashed.split("/")] == [4, 4, 4, 8]
    assert set(hashed) <= {"0", "1", "/"}
    spread = {object_store_hash(f"part-{i:05d}.parquet").split("/")[0] for i in range(200)}
    assert len(spread) == 16  # 200 names reach every first-level directory


def test_data_and_metadata_locations_and_the_deprecated_paths() -> None:
    assert data_location("s3://b/t/", {}) == "s3://b/t/data"
    assert data_location("s3://b/t", {"write.data.path": "s3://d//"}) == "s3://d"
    legacy = {"write.object-storage.path": "s3://o", "write.folder-storage.path": "s3://f"}
    # The object-storage path counts for object storage only (Java's two providers).
    assert data_location("s3://b/t", legacy) == "s3://f"
    on = {**legacy, "write.object-storage.enabled": "true"}
    assert data_location("s3://b/t", on) == "s3://o"
    assert data_location("s3://b/t", {**on, "write.data.path": "s3://d"}) == "s3://d"
    assert data_location("s3://b/t", {"write.data.path": ""}) == "s3://b/t/data"
    assert metadata_directory("s3://b/t", {}) == "s3://b/t/metadata"
    assert metadata_directory("s3://b/t", {"write.metadata.path": "s3://m/"}) == "s3://m"


def test_a_java_location_provider_class_is_refused_not_guessed_at() -> None:
    properties = {"write.location-provider.impl": "com.example.Provider"}
    with pytest.raises(ValidationError, match=r"write\.location-provider\.impl=com\.example"):
        locations_for("s3://b/t", properties)
    with pytest.raises(ValidationError, match=r"write\.object-storage\.enabled must be true or"):
        locations_for("s3://b/t", {"write.object-storage.enabled": "yes"})
