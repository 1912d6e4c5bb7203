"""Table schemas: a struct of fields with ids, plus the identifier fields used as row keys.

A schema is validated when it is built: duplicate field ids would let two columns resolve to
the same Parquet column, which silently mixes data, so they are rejected at the door.

Format v3 columns need care from jobs that touch data: `unsupported_columns` names the
columns whose values icecore cannot process (variant, geometry, geography), so a job can refuse
before it reads anything, and `stored_fields` leaves out the `unknown` columns, which data
files never hold.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from icecore.errors import ValidationError
from icecore.spec.defaults import check_defaults
from icecore.spec.types import (
    IcebergType,
    ListType,
    MapType,
    NestedField,
    StructType,
    UnknownType,
)


def _walk(struct: StructType, prefix: str = "") -> Iterator[tuple[str, NestedField]]:
    """Every field at every depth, with its dotted name; list and map children included."""
    for f in struct.fields:
        name = f"{prefix}{f.name}"
        yield name, f
        yield from _walk_type(f.field_type, name + ".")


def _walk_type(t: IcebergType, prefix: str) -> Iterator[tuple[str, NestedField]]:
    if isinstance(t, StructType):
        yield from _walk(t, prefix)
    elif isinstance(t, ListType):
        elem = t.element_field
        yield prefix + "element", elem
        yield from _walk_type(elem.field_type, prefix + "element.")
    elif isinstance(t, MapType):
        for child, label in ((t.key_field, "key"), (t.value_field, "value")):
            yield prefix + label, child
            yield from _walk_type(child.field_type, f"{prefix}{label}.")


@dataclass(frozen=True)
class Schema:
    """An Iceberg schema; `fields` are the top-level columns."""

    fields: tuple[NestedField, ...]
    schema_id: int = 0
    identifier_field_ids: tuple[int, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        seen: dict[int, str] = {}
        for name, f in _walk(self.struct):
            check_defaults(f)
            if f.field_id in seen:
                raise ValidationError(
                    f"schema {self.schema_id}: field id {f.field_id} is used by both "
                    f"{seen[f.field_id]!r} and {name!r}"
                )
            seen[f.field_id] = name
        for fid in self.identifier_field_ids:
            if fid not in seen:
                raise ValidationError(
                    f"schema {self.schema_id}: identifier field id {fid} is not in the schema"
                )

    @cached_property
    def struct(self) -> StructType:
        return StructType(*self.fields)

    @cached_property
    def _by_id(self) -> dict[int, NestedField]:
        return {f.field_id: f for _, f in _walk(self.struct)}

    @cached_property
    def _name_by_id(self) -> dict[int, str]:
        return {f.field_id: name for name, f in _walk(self.struct)}

    @cached_property
    def _by_name(self) -> dict[str, NestedField]:
        return {name: f for name, f in _walk(self.struct)}

    @property
    def highest_field_id(self) -> int:
        return max(self._by_id, default=0)

    def find_field(self, key: int | str) -> NestedField:
        """A field by id or dotted name (list elements are `col.element`)."""
        found = self._by_id.get(key) if isinstance(key, int) else self._by_name.get(key)
        if found is None:
            raise ValidationError(f"schema {self.schema_id} has no field {key!r}")
        return found

    def find_type(self, key: int | str) -> IcebergType:
        return self.find_field(key).field_type

    def column_name(self, field_id: int) -> str:
        """The dotted name of a field id, e.g. for a partition source column."""
        try:
            return self._name_by_id[field_id]
        except KeyError:
            raise ValidationError(f"schema {self.schema_id} has no field id {field_id}") from None

    def field_ids(self) -> frozenset[int]:
        return frozenset(self._by_id)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "struct", "schema-id": self.schema_id}
        if self.identifier_field_ids:
            out["identifier-field-ids"] = list(self.identifier_field_ids)
        out["fields"] = [f.to_json() for f in self.fields]
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Schema:
        if not isinstance(obj, dict) or obj.get("type", "struct") != "struct":
            raise ValidationError(f"a schema must be a struct, got {obj!r}")
        if "fields" not in obj:
            raise ValidationError("schema lacks 'fields'")
        return cls(
            fields=tuple(NestedField.from_json(f) for f in obj["fields"]),
            schema_id=int(obj.get("schema-id", 0)),
            identifier_field_ids=tuple(obj.get("identifier-field-ids", ())),
        )


def unsupported_columns(schema: Schema | Iterable[NestedField]) -> list[str]:
    """Dotted names of the columns whose values icecore cannot process, in schema order.

    These are the `variant`, `geometry` and `geography` columns at any depth (a list's are
    named `col.element`, a map's `col.key` / `col.value`). icecore carries them through
    metadata unchanged, but a job that reads or rewrites data files holding them would have
    to decode values it does not understand, so it checks this first and refuses, naming the
    columns. Pass a schema or just the fields a job projects.
    """
    fields = schema.fields if isinstance(schema, Schema) else tuple(schema)
    return [
        name
        for name, f in _walk(StructType(*fields))
        if not f.field_type.is_readable
        and not isinstance(f.field_type, StructType | ListType | MapType)
    ]


def stored_fields(fields: Iterable[NestedField]) -> tuple[NestedField, ...]:
    """`fields` as data files hold them: without the `unknown` columns, at every struct depth.

    The spec stores no `unknown` column in data files ("Omit from data files"), and readers
    return nulls for them; a writer builds its file schema from this. Lists and maps of
    unknown keep their (always null) elements and values: there is nothing to omit them from.
    """
    return tuple(
        replace(f, field_type=StructType(*stored_fields(f.field_type.fields)))
        if isinstance(f.field_type, StructType)
        else f
        for f in fields
        if not isinstance(f.field_type, UnknownType)
    )
