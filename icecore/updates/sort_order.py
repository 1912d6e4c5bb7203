"""Replacing the default sort order as a commit (Iceberg Java's `ReplaceSortOrder`).

    table.replace_sort_order().asc("id").desc("ts", transform="day").commit()

Fields are given by column name and bound to field ids against the schema the commit lands
on; after a lost swap they are bound again, so a concurrent rename or drop of a sort column is
a `CommitConflictError`. An order equal to an existing one reuses its id; no fields at all
means unsorted (order id 0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from icecore.errors import ValidationError
from icecore.spec.metadata import TableMetadata
from icecore.spec.metadata_builder import MetadataBuilder
from icecore.spec.sorting import UNSORTED, NullOrder, SortDirection, SortField, SortOrder
from icecore.spec.transforms import Transform, parse_transform
from icecore.updates.base import ReplayedUpdate

if TYPE_CHECKING:
    from icecore.table import Table


class ReplaceSortOrder(ReplayedUpdate):
    """Build the new default order field by field; every method returns `self`."""

    def __init__(self, table: Table) -> None:
        super().__init__(table)
        self._fields: list[tuple[str, Transform, SortDirection, NullOrder]] = []

    def asc(
        self,
        column: str,
        null_order: NullOrder = NullOrder.NULLS_FIRST,
        transform: Transform | str = "identity",
    ) -> ReplaceSortOrder:
        """Ascending, nulls first by default (Java's default for ascending)."""
        return self._add(column, transform, SortDirection.ASC, null_order)

    def desc(
        self,
        column: str,
        null_order: NullOrder = NullOrder.NULLS_LAST,
        transform: Transform | str = "identity",
    ) -> ReplaceSortOrder:
        """Descending, nulls last by default (Java's default for descending)."""
        return self._add(column, transform, SortDirection.DESC, null_order)

    def order(self) -> SortOrder:
        """The order bound to the current schema (its id is assigned at commit)."""
        return self._bind(self._start)

    def _add(
        self,
        column: str,
        transform: Transform | str,
        direction: SortDirection,
        null_order: NullOrder,
    ) -> ReplaceSortOrder:
        parsed = parse_transform(transform) if isinstance(transform, str) else transform
        self._fields.append((column, parsed, direction, null_order))
        self._bind(self._start)
        return self

    def _bind(self, base: TableMetadata) -> SortOrder:
        schema = base.schema()
        fields = []
        for column, transform, direction, null_order in self._fields:
            source = schema.find_field(column)
            if not transform.can_transform(source.field_type):
                raise ValidationError(
                    f"{self.table.name}: cannot sort by {transform}({column}): it does not "
                    f"apply to type {source.field_type}"
                )
            fields.append(SortField(source.field_id, transform, direction, null_order))
        # Any non-zero id: the builder assigns the real one (or reuses an equal order's).
        return SortOrder(1, tuple(fields)) if fields else UNSORTED

    def _apply(self, base: TableMetadata) -> TableMetadata:
        return self._on(base, self._replace)

    def _replace(self, base: TableMetadata) -> TableMetadata:
        builder = MetadataBuilder(base)
        builder.add_sort_order(self._bind(base))
        return builder.build()
