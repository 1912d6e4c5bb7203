"""Every table property icefloe reads, with its default: Iceberg Java's `TableProperties`.

A property is read in one way everywhere: `TARGET_FILE_SIZE.read(metadata.properties)`. Reads
are strict where Java is lenient (Java reads any non-"true" as false and fails late on a bad
number): a typo in `gc.enabled` must not turn into a silent change of behaviour, so a value
that does not parse raises a `ValidationError` naming the property. `UpdateProperties` checks
a value against the same declaration before committing it (`check_value`), so a bad value
never reaches the table, where it would make every later commit fail, the fixing one included.

Defaults are Java's, except where noted (Java's `Long.MAX_VALUE` "forever" is -1 here).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from icecore.durations import DURATION_EXAMPLE, parse_duration_ms
from icecore.errors import ValidationError

_MIB = 1024 * 1024


class IntProperty(NamedTuple):
    """An integer property; `minimum` is the smallest value `UpdateProperties` accepts."""

    name: str
    default: int
    minimum: int = 0

    def read(self, properties: Mapping[str, str]) -> int:
        return int_value(self.name, properties.get(self.name), self.default)


class BoolProperty(NamedTuple):
    name: str
    default: bool

    def read(self, properties: Mapping[str, str]) -> bool:
        return bool_value(self.name, properties.get(self.name), self.default)


class StringProperty(NamedTuple):
    """A text property; an empty value counts as unset, as Java's location look-ups treat
    it."""

    name: str
    default: str | None = None

    def read(self, properties: Mapping[str, str]) -> str | None:
        return properties.get(self.name) or self.default


class DurationProperty(NamedTuple):
    """A duration in milliseconds, written as people type durations (`3d`, `36h`, `0s`:
    `icecore.durations`). icefloe's own properties take this form; Iceberg's `*-ms`
    properties stay integers, as Java reads them."""

    name: str
    default: int

    def read(self, properties: Mapping[str, str]) -> int:
        value = properties.get(self.name)
        return self.default if value is None else duration_value(self.name, value)


def duration_value(name: str, value: str) -> int:
    try:
        duration = parse_duration_ms(value)
    except ValueError:
        raise ValidationError(
            f"table property {name} must be a duration such as {DURATION_EXAMPLE}, got {value!r}"
        ) from None
    if duration < 0:
        raise ValidationError(f"table property {name} must not be negative, got {value!r}")
    return duration


def int_value(name: str, value: str | None, default: int) -> int:
    if value is None:
        return default
    try:
        return int(value.strip())
    except ValueError:
        raise ValidationError(f"table property {name} must be an integer, got {value!r}") from None


def bool_value(name: str, value: str | None, default: bool) -> bool:
    if value is None:
        return default
    if value.strip().lower() not in ("true", "false"):
        raise ValidationError(f"table property {name} must be true or false, got {value!r}")
    return value.strip().lower() == "true"


# Format version: setting it upgrades the table (never downgrades); it is not stored.
FORMAT_VERSION = "format-version"
# Java's RESERVED_PROPERTIES: derived from the metadata, never stored.
RESERVED = frozenset(
    {
        FORMAT_VERSION,
        "uuid",
        "snapshot-count",
        "current-snapshot-id",
        "current-snapshot-summary",
        "current-snapshot-timestamp-ms",
        "current-schema",
        "default-partition-spec",
        "default-sort-order",
    }
)

# Commits: retries of a lost swap, manifest merging, manifest codec.
COMMIT_NUM_RETRIES = IntProperty("commit.retry.num-retries", 4)
COMMIT_MIN_RETRY_WAIT_MS = IntProperty("commit.retry.min-wait-ms", 100)
COMMIT_MAX_RETRY_WAIT_MS = IntProperty("commit.retry.max-wait-ms", 60_000)
COMMIT_TOTAL_RETRY_TIME_MS = IntProperty("commit.retry.total-timeout-ms", 1_800_000)
MANIFEST_TARGET_SIZE_BYTES = IntProperty("commit.manifest.target-size-bytes", 8 * _MIB, 1)
MANIFEST_MIN_MERGE_COUNT = IntProperty("commit.manifest.min-count-to-merge", 100, 1)
MANIFEST_MERGE_ENABLED = BoolProperty("commit.manifest-merge.enabled", True)
MANIFEST_COMPRESSION = StringProperty("write.manifest.compression-codec", "gzip")

# Metadata files.
WRITE_METADATA_LOCATION = StringProperty("write.metadata.path")
METADATA_COMPRESSION = StringProperty("write.metadata.compression-codec", "none")
METADATA_DELETE_AFTER_COMMIT_ENABLED = BoolProperty(
    "write.metadata.delete-after-commit.enabled", False
)
METADATA_PREVIOUS_VERSIONS_MAX = IntProperty("write.metadata.previous-versions-max", 100, 1)

# Where data files go (`icecore.location_provider`).
WRITE_DATA_LOCATION = StringProperty("write.data.path")
OBJECT_STORE_PATH = StringProperty("write.object-storage.path")  # deprecated in Java
WRITE_FOLDER_STORAGE_LOCATION = StringProperty("write.folder-storage.path")  # deprecated
OBJECT_STORE_ENABLED = BoolProperty("write.object-storage.enabled", False)
WRITE_OBJECT_STORE_PARTITIONED_PATHS = BoolProperty("write.object-storage.partitioned-paths", True)
WRITE_LOCATION_PROVIDER_IMPL = StringProperty("write.location-provider.impl")

# Data files.
WRITE_TARGET_FILE_SIZE_BYTES = IntProperty("write.target-file-size-bytes", 512 * _MIB, 1)
WRITE_DISTRIBUTION_MODE = StringProperty("write.distribution-mode")
PARQUET_COMPRESSION = StringProperty("write.parquet.compression-codec", "zstd")
PARQUET_COMPRESSION_LEVEL = StringProperty("write.parquet.compression-level")
PARQUET_PAGE_SIZE_BYTES = IntProperty("write.parquet.page-size-bytes", _MIB, 1)
PARQUET_DICT_SIZE_BYTES = IntProperty("write.parquet.dict-size-bytes", 2 * _MIB, 1)
PARQUET_ROW_GROUP_SIZE_BYTES = IntProperty("write.parquet.row-group-size-bytes", 128 * _MIB, 1)

# Delete files (position deletes merged by minor compaction).
DELETE_TARGET_FILE_SIZE_BYTES = IntProperty("write.delete.target-file-size-bytes", 64 * _MIB, 1)

# Column metrics in manifests.
DEFAULT_WRITE_METRICS_MODE = StringProperty("write.metadata.metrics.default", "truncate(16)")
METRICS_MAX_INFERRED_COLUMN_DEFAULTS = IntProperty(
    "write.metadata.metrics.max-inferred-column-defaults", 100
)
METRICS_MODE_COLUMN_CONF_PREFIX = "write.metadata.metrics.column."
# Per-column properties that name a column after the prefix; Java renames or drops them with
# the column (`SchemaUpdate.applyChangesToMetadata`), so settings follow their column.
COLUMN_PROPERTY_PREFIXES = (
    METRICS_MODE_COLUMN_CONF_PREFIX,
    "write.parquet.bloom-filter-enabled.column.",
    "write.parquet.stats-enabled.column.",
)

# Snapshot expiry and file deletion.
GC_ENABLED = BoolProperty("gc.enabled", True)
MAX_SNAPSHOT_AGE_MS = IntProperty("history.expire.max-snapshot-age-ms", 5 * 24 * 3_600_000, 1)
MIN_SNAPSHOTS_TO_KEEP = IntProperty("history.expire.min-snapshots-to-keep", 1, 1)
MAX_REF_AGE_MS = IntProperty("history.expire.max-ref-age-ms", -1, 1)  # -1: refs never expire

# icefloe's trash (`icecore.trash`): how long files that expiry and orphan removal take out
# of a table are kept before they are deleted; `0s` deletes them at once.
TRASH_RETENTION = DurationProperty("icefloe.trash.retention", 3 * 86_400_000)

# What `UpdateProperties` checks before a commit: the properties icecore parses.
CHECKED: Mapping[str, IntProperty | BoolProperty | DurationProperty] = {
    p.name: p
    for p in (
        COMMIT_NUM_RETRIES,
        COMMIT_MIN_RETRY_WAIT_MS,
        COMMIT_MAX_RETRY_WAIT_MS,
        COMMIT_TOTAL_RETRY_TIME_MS,
        MANIFEST_TARGET_SIZE_BYTES,
        MANIFEST_MIN_MERGE_COUNT,
        MANIFEST_MERGE_ENABLED,
        METADATA_DELETE_AFTER_COMMIT_ENABLED,
        METADATA_PREVIOUS_VERSIONS_MAX,
        OBJECT_STORE_ENABLED,
        WRITE_OBJECT_STORE_PARTITIONED_PATHS,
        WRITE_TARGET_FILE_SIZE_BYTES,
        DELETE_TARGET_FILE_SIZE_BYTES,
        GC_ENABLED,
        MAX_SNAPSHOT_AGE_MS,
        MIN_SNAPSHOTS_TO_KEEP,
        MAX_REF_AGE_MS,
        TRASH_RETENTION,
    )
}


def check_value(key: str, value: str) -> None:
    """Raise if `key` may not be set to `value`: reserved, or a value icecore cannot use."""
    if not key:
        raise ValidationError("a table property needs a non-empty name")
    if key == FORMAT_VERSION:
        if value.strip() not in ("2", "3"):
            raise ValidationError(f"{FORMAT_VERSION} can be set to 2 or 3, got {value!r}")
        return
    if key in RESERVED:
        raise ValidationError(f"table property {key!r} is reserved: it is derived, not stored")
    declared = CHECKED.get(key)
    if isinstance(declared, DurationProperty):
        duration_value(key, value)
    elif isinstance(declared, BoolProperty):
        bool_value(key, value, declared.default)
    elif isinstance(declared, IntProperty):
        try:
            number: int | None = int(value.strip())
        except ValueError:
            number = None
        if number is None or number < declared.minimum:
            raise ValidationError(
                f"table property {key} must be an integer >= {declared.minimum}, got {value!r}"
            )
