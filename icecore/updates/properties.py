"""Table property changes as a commit (Iceberg Java's `PropertiesUpdate`).

Sets and removals are replayed on the refreshed metadata after a lost swap, so two jobs
changing different properties at the same time both land. A key set by both keeps the value
of whichever committed last, as in Java.

Values of the properties icecore itself reads are checked before they are committed: icecore
parses them strictly, so a bad `commit.retry.num-retries` would otherwise make every later
commit of the table fail, including the one meant to fix it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from icecore.errors import ValidationError
from icecore.spec.metadata import TableMetadata
from icecore.spec.metadata_builder import MetadataBuilder
from icecore.updates.base import ReplayedUpdate

if TYPE_CHECKING:
    from icecore.table import Table

# Setting it upgrades the table (never downgrades), as in Java; it is not stored.
FORMAT_VERSION = "format-version"
# Java's TableProperties.RESERVED_PROPERTIES: derived from the metadata, never stored.
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

# Properties icecore parses, and the smallest value each accepts.
_INTEGERS = {
    "commit.retry.num-retries": 0,
    "commit.retry.min-wait-ms": 0,
    "commit.retry.max-wait-ms": 0,
    "commit.retry.total-timeout-ms": 0,
    "commit.manifest.min-count-to-merge": 1,
    "commit.manifest.target-size-bytes": 1,
    "write.metadata.previous-versions-max": 1,
    "write.target-file-size-bytes": 1,
    "history.expire.max-snapshot-age-ms": 1,
    "history.expire.min-snapshots-to-keep": 1,
    "history.expire.max-ref-age-ms": 1,
}
_BOOLEANS = frozenset(
    {
        "commit.manifest-merge.enabled",
        "write.metadata.delete-after-commit.enabled",
        "gc.enabled",
    }
)


def check_property(key: str, value: str) -> None:
    """Raise if `key` may not be set to `value` (reserved, or not a value icecore can parse)."""
    if not key:
        raise ValidationError("a table property needs a non-empty name")
    if key == FORMAT_VERSION:
        if value.strip() not in ("2", "3"):
            raise ValidationError(f"{FORMAT_VERSION} can be set to 2 or 3, got {value!r}")
        return
    if key in RESERVED:
        raise ValidationError(f"table property {key!r} is reserved: it is derived, not stored")
    if key in _INTEGERS:
        try:
            number = int(value.strip())
        except ValueError:
            number = None
        if number is None or number < _INTEGERS[key]:
            raise ValidationError(
                f"table property {key} must be an integer >= {_INTEGERS[key]}, got {value!r}"
            )
    if key in _BOOLEANS and value.strip().lower() not in ("true", "false"):
        raise ValidationError(f"table property {key} must be true or false, got {value!r}")


class UpdateProperties(ReplayedUpdate):
    """`table.update_properties().set("k", "v").remove("old").commit()`."""

    def __init__(self, table: Table) -> None:
        super().__init__(table)
        self._updates: dict[str, str] = {}
        self._removals: set[str] = set()

    def set(self, key: str, value: str | int | bool) -> UpdateProperties:
        text = str(value).lower() if isinstance(value, bool) else str(value)
        if key in self._removals:
            raise ValidationError(f"cannot set and remove table property {key!r} in one update")
        check_property(key, text)
        self._updates[key] = text
        return self

    def remove(self, *keys: str) -> UpdateProperties:
        """Remove properties; a key the table does not have is ignored."""
        for key in keys:
            if key in self._updates:
                raise ValidationError(f"cannot set and remove table property {key!r} in one update")
            self._removals.add(key)
        return self

    def _apply(self, base: TableMetadata) -> TableMetadata:
        return (
            MetadataBuilder(base)
            .set_properties(self._updates)
            .remove_properties(self._removals)
            .build()
        )
