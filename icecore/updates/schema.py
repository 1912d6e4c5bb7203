"""Schema evolution as a table commit (Iceberg Java's `SchemaUpdate.commit`).

    table.update_schema().add_column("note", StringType()).rename_column("data", "payload").commit()

The calls are checked at once against the current schema and replayed on the refreshed one
after a lost swap (`ReplayedUpdate`). A replay must resolve every column name to the same
field id as the first time; otherwise a concurrent schema change (a rename, a drop and re-add)
means the user's intent no longer holds, which is a `CommitConflictError`.

Like Java, the table's default partition spec and sort order must still bind to the evolved
schema: a column the current spec partitions by (or the current order sorts by) cannot be
dropped until the spec (order) stops using it, since every writer would otherwise fail to
compute partitions. Columns used only by older specs can be dropped; those specs keep the
source id, and manifests written with them stay readable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from icecore.errors import CommitConflictError, ValidationError
from icecore.spec.metadata import TableMetadata
from icecore.spec.metadata_builder import MetadataBuilder
from icecore.spec.properties import COLUMN_PROPERTY_PREFIXES
from icecore.spec.schema import Schema
from icecore.spec.types import IcebergType
from icecore.updates.base import ReplayedUpdate
from icecore.updates.schema_changes import SchemaChanges

if TYPE_CHECKING:
    from icecore.table import Table


class UpdateSchema(ReplayedUpdate):
    """Evolve the current schema; every method returns `self` for chaining."""

    def __init__(self, table: Table, *, allow_incompatible_changes: bool = False) -> None:
        super().__init__(table)
        self._allow_incompatible = allow_incompatible_changes
        self._calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self._changes = self._changes_for(self._start)

    def add_column(
        self,
        path: str | Sequence[str],
        field_type: IcebergType,
        *,
        doc: str | None = None,
        required: bool = False,
    ) -> UpdateSchema:
        """Add a column at `path` (`name`, or `parent.name` inside a struct, list or map)."""
        return self._call("add_column", path, field_type, doc=doc, required=required)

    def delete_column(self, name: str) -> UpdateSchema:
        return self._call("delete_column", name)

    def rename_column(self, name: str, new_name: str) -> UpdateSchema:
        return self._call("rename_column", name, new_name)

    def update_column(self, name: str, new_type: IcebergType) -> UpdateSchema:
        """Widen a type: int -> long, float -> double, decimal(P,S) -> decimal(P2,S), P2 > P."""
        return self._call("update_column", name, new_type)

    def update_column_doc(self, name: str, doc: str | None) -> UpdateSchema:
        return self._call("update_column_doc", name, doc)

    def make_column_optional(self, name: str) -> UpdateSchema:
        return self._call("make_column_optional", name)

    def require_column(self, name: str) -> UpdateSchema:
        """Make a column required; only with `allow_incompatible_changes`."""
        return self._call("require_column", name)

    def set_identifier_fields(self, *names: str) -> UpdateSchema:
        """Set the row key (required primitive columns, not float or double)."""
        return self._call("set_identifier_fields", names)

    def move_first(self, name: str) -> UpdateSchema:
        return self._call("move_first", name)

    def move_before(self, name: str, before: str) -> UpdateSchema:
        return self._call("move_before", name, before)

    def move_after(self, name: str, after: str) -> UpdateSchema:
        return self._call("move_after", name, after)

    def schema(self) -> Schema:
        """The evolved schema against the current metadata (its id is assigned at commit)."""
        return self._changes.apply()

    # Commit ---------------------------------------------------------------------------------

    def _call(self, method: str, *args: Any, **kwargs: Any) -> UpdateSchema:
        getattr(self._changes, method)(*args, **kwargs)  # validate now, against the start
        self._calls.append((method, args, kwargs))
        return self

    def _changes_for(self, base: TableMetadata) -> SchemaChanges:
        return SchemaChanges(
            base.schema(),
            base.last_column_id,
            allow_incompatible_changes=self._allow_incompatible,
        )

    def _apply(self, base: TableMetadata) -> TableMetadata:
        return self._on(base, self._evolve)

    def _evolve(self, base: TableMetadata) -> TableMetadata:
        start = self._start
        if (base.schema(), base.last_column_id) == (start.schema(), start.last_column_id):
            changes = self._changes  # same input, same ids: nothing to replay
        else:
            changes = self._changes_for(base)
            for method, args, kwargs in self._calls:
                getattr(changes, method)(*args, **kwargs)
            if changes.resolved != self._changes.resolved:
                moved = [
                    f"{name!r} (field id {was}, now {now})"
                    for (name, was), (_, now) in zip(
                        self._changes.resolved, changes.resolved, strict=True
                    )
                    if was != now
                ]
                raise CommitConflictError(
                    f"{self.table.name}: the schema changed concurrently (now schema "
                    f"{base.current_schema_id}); columns resolve differently: {', '.join(moved)}"
                )
        schema = changes.apply()
        self._check_spec_and_order(base, schema)
        builder = MetadataBuilder(base)
        builder.add_schema(schema)
        old = base.schema()
        deleted = {old.column_name(i) for i in changes.deleted_ids}
        renamed = {
            old.column_name(i): schema.column_name(i)
            for i in changes.updated_ids & schema.field_ids()
            if old.column_name(i) != schema.column_name(i)
        }
        _move_column_properties(builder, base.properties, deleted, renamed)
        return builder.build()

    def _check_spec_and_order(self, base: TableMetadata, schema: Schema) -> None:
        """Java's build-time check: the default spec and sort order must bind to the schema."""
        ids, old = schema.field_ids(), base.schema()
        spec, order = base.spec(), base.sort_order()
        uses = [
            (f.source_id, f"partition field {f.name!r} of the current spec {spec.spec_id}")
            for f in spec.fields
            if not f.transform.is_void
        ] + [
            (f.source_id, f"a sort field of the current sort order {order.order_id}")
            for f in order.fields
        ]
        for source_id, user in uses:
            if source_id not in ids:
                column = old.column_name(source_id) if source_id in old.field_ids() else source_id
                raise ValidationError(
                    f"{self.table.name}: cannot delete column {column!r}: {user} uses it; "
                    "change the partition spec / sort order first"
                )
        spec.validate(schema)


def _move_column_properties(
    builder: MetadataBuilder,
    properties: Mapping[str, str],
    deleted: set[str],
    renamed: dict[str, str],
) -> None:
    """Drop the per-column properties of deleted columns and rename those of renamed ones."""
    if not deleted and not renamed:
        return
    removed, added = [], {}
    for key, value in properties.items():
        prefix = next((p for p in COLUMN_PROPERTY_PREFIXES if key.startswith(p)), None)
        if prefix is None:
            continue
        column = key[len(prefix) :]
        if column in deleted:
            removed.append(key)
        elif column in renamed:
            removed.append(key)
            added[prefix + renamed[column]] = value
    builder.remove_properties(removed)
    builder.set_properties(added)
