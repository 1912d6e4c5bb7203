"""Table property changes as a commit (Iceberg Java's `PropertiesUpdate`).

Sets and removals are replayed on the refreshed metadata after a lost swap, so two jobs
changing different properties at the same time both land. A key set by both keeps the value
of whichever committed last, as in Java.

Values of the properties icecore itself reads are checked before they are committed
(`icecore.spec.properties.check_value`): icecore parses them strictly, so a bad
`commit.retry.num-retries` would otherwise make every later commit of the table fail,
including the one meant to fix it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from icecore.errors import ValidationError
from icecore.spec.metadata import TableMetadata
from icecore.spec.metadata_builder import MetadataBuilder
from icecore.spec.properties import check_value
from icecore.updates.base import ReplayedUpdate

if TYPE_CHECKING:
    from icecore.table import Table


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
        check_value(key, text)
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
