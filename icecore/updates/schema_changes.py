"""Pending changes to one schema, applied as Iceberg Java's `SchemaUpdate` applies them.

Columns are addressed by dotted name but changed by field id, which is what makes evolution
safe: a renamed column keeps its id, so readers still find it in files written before the
rename, and an added column gets an id no file has ever used (`last-column-id + 1`, then its
nested fields breadth-first, as Java assigns them), so old files read it as null.

This module knows nothing of tables: `icecore.updates.schema.UpdateSchema` feeds it the
table's current schema and commits what `apply()` returns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from icecore.errors import ValidationError
from icecore.spec.schema import Schema
from icecore.spec.types import (
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StructType,
)

ROOT = -1  # the parent id of top-level columns


def promotion_allowed(old: IcebergType, new: IcebergType) -> bool:
    """The spec's safe type promotions: readers of old files widen values losslessly."""
    if isinstance(old, IntegerType):
        return isinstance(new, LongType)
    if isinstance(old, FloatType):
        return isinstance(new, DoubleType)
    if isinstance(old, DecimalType) and isinstance(new, DecimalType):
        return new.scale == old.scale and new.precision > old.precision
    return False


def assign_fresh_ids(t: IcebergType, next_id: Callable[[], int]) -> IcebergType:
    """`t` with new ids: a struct's fields first, then their children (Java's order)."""
    if isinstance(t, StructType):
        ids = [next_id() for _ in t.fields]
        return StructType(
            *(
                replace(f, field_id=i, field_type=assign_fresh_ids(f.field_type, next_id))
                for i, f in zip(ids, t.fields, strict=True)
            )
        )
    if isinstance(t, ListType):
        element_id = next_id()
        return ListType(element_id, assign_fresh_ids(t.element_type, next_id), t.element_required)
    if isinstance(t, MapType):
        key_id, value_id = next_id(), next_id()
        return MapType(
            key_id,
            assign_fresh_ids(t.key_type, next_id),
            value_id,
            assign_fresh_ids(t.value_type, next_id),
            t.value_required,
        )
    return t


def _index_parents(struct: StructType) -> tuple[dict[int, int], dict[int, NestedField]]:
    """Each field's parent id (absent at top level) and every list element / map key / value.

    Fields of a struct inside a list have the element as parent, as in Java's `indexParents`.
    """
    parents: dict[int, int] = {}
    collection_children: dict[int, NestedField] = {}

    def visit(t: IcebergType, owner: int) -> None:
        if isinstance(t, StructType):
            for f in t.fields:
                if owner != ROOT:
                    parents[f.field_id] = owner
                visit(f.field_type, f.field_id)
            return
        if isinstance(t, ListType):
            children = [t.element_field]
        elif isinstance(t, MapType):
            children = [t.key_field, t.value_field]
        else:
            return
        for child in children:
            parents[child.field_id] = owner
            collection_children[child.field_id] = child
            visit(child.field_type, child.field_id)

    visit(struct, ROOT)
    return parents, collection_children


@dataclass(frozen=True)
class _Move:
    field_id: int
    kind: str  # "first", "before" or "after"
    reference_id: int = ROOT


class SchemaChanges:
    """Changes to `schema`; `apply()` returns the evolved schema (ids unchanged, adds fresh).

    Calls are validated as they are made, as Java validates them. Required columns can only
    be added, and optional ones only made required, with `allow_incompatible_changes`:
    existing files have no values for them, so readers would fail.
    """

    def __init__(
        self, schema: Schema, last_column_id: int, *, allow_incompatible_changes: bool = False
    ) -> None:
        self._schema = schema
        self._last_column_id = max(last_column_id, schema.highest_field_id)
        self._allow_incompatible = allow_incompatible_changes
        self._parents, self._collection_children = _index_parents(schema.struct)
        self._deletes: set[int] = set()
        self._updates: dict[int, NestedField] = {}
        self._added: dict[int, list[int]] = {}
        self._added_names: dict[str, int] = {}
        self._moves: dict[int, list[_Move]] = {}
        self._identifier_names: tuple[str, ...] | None = None
        # (name, id) of every existing column a call named: a replay on a newer schema must
        # resolve the same names to the same ids, or a concurrent change got in between.
        self.resolved: list[tuple[str, int]] = []

    @property
    def last_column_id(self) -> int:
        return self._last_column_id

    @property
    def deleted_ids(self) -> frozenset[int]:
        return frozenset(self._deletes)

    @property
    def updated_ids(self) -> frozenset[int]:
        """Existing columns renamed, retyped, re-documented or with changed nullability."""
        return frozenset(self._updates.keys() - self._added_names.values())

    # Calls ----------------------------------------------------------------------------------

    def add_column(
        self,
        path: str | Sequence[str],
        field_type: IcebergType,
        *,
        doc: str | None = None,
        required: bool = False,
    ) -> None:
        """Add a column; `path` is `name` or `parent.name` (a struct, list or map column)."""
        names = path.split(".") if isinstance(path, str) else list(path)
        name = names[-1]
        if not name:
            raise ValidationError(f"cannot add a column with an empty name: {path!r}")
        if names[:-1]:
            parent = self._existing(".".join(names[:-1]), "add a column to")
            container = parent
            if isinstance(parent.field_type, MapType):
                container = parent.field_type.value_field
            elif isinstance(parent.field_type, ListType):
                container = parent.field_type.element_field
            if not isinstance(container.field_type, StructType):
                raise ValidationError(
                    f"cannot add column {name!r} to non-struct column {parent.name!r} "
                    f"of type {container.field_type}"
                )
            if {parent.field_id, container.field_id} & self._deletes:
                raise ValidationError(
                    f"cannot add to a column that will be deleted: {'.'.join(names[:-1])}"
                )
            parent_id, siblings = container.field_id, container.field_type
            full_name = f"{self._schema.column_name(parent_id)}.{name}"
        else:
            parent_id, siblings, full_name = ROOT, self._schema.struct, name
        clash = siblings.field_by_name(name)
        if clash is not None and (
            clash.field_id in self._deletes or self._updates.get(clash.field_id, clash).name != name
        ):
            clash = None  # deleted, or renamed away, in this update (Java refuses the latter)
        if clash is not None or full_name in self._added_names:
            raise ValidationError(f"cannot add column {full_name!r}: the name already exists")
        if required and not self._allow_incompatible:
            raise ValidationError(
                f"incompatible change: cannot add required column {full_name!r} (existing "
                "rows have no value for it; allow incompatible changes to force it)"
            )
        new_id = self._next_id()
        field = NestedField(
            new_id, name, assign_fresh_ids(field_type, self._next_id), required, doc
        )
        self._updates[new_id] = field
        self._added.setdefault(parent_id, []).append(new_id)
        self._added_names[full_name] = new_id
        if parent_id != ROOT:
            self._parents[new_id] = parent_id

    def delete_column(self, name: str) -> None:
        field = self._existing(name, "delete")
        if field.field_id in self._collection_children:
            raise ValidationError(f"cannot delete {name!r}: lists and maps need their children")
        if field.field_id in self._added:
            raise ValidationError(f"cannot delete a column that has additions: {name!r}")
        if field.field_id in self._updates:
            raise ValidationError(f"cannot delete a column that has updates: {name!r}")
        self._deletes.add(field.field_id)

    def rename_column(self, name: str, new_name: str) -> None:
        field = self._existing(name, "rename")
        if not new_name:
            raise ValidationError(f"cannot rename {name!r} to an empty name")
        if field.field_id in self._collection_children:
            raise ValidationError(f"cannot rename {name!r}: list and map children have fixed names")
        if field.field_id in self._deletes:
            raise ValidationError(f"cannot rename a column that will be deleted: {name!r}")
        self._updates[field.field_id] = replace(
            self._updates.get(field.field_id, field), name=new_name
        )

    def update_column(self, name: str, new_type: IcebergType) -> None:
        """Widen a column's type: int -> long, float -> double, decimal(P,S) -> decimal(P2,S)."""
        field = self._for_update(name, "update")
        if field.field_type == new_type:
            return
        if not promotion_allowed(field.field_type, new_type):
            raise ValidationError(
                f"cannot change column type of {name!r}: {field.field_type} -> {new_type} "
                "is not a safe promotion (int -> long, float -> double, decimal(P,S) -> "
                "decimal(P2,S) with P2 > P)"
            )
        self._updates[field.field_id] = replace(field, field_type=new_type)

    def update_column_doc(self, name: str, doc: str | None) -> None:
        field = self._for_update(name, "document")
        if field.doc != doc:
            self._updates[field.field_id] = replace(field, doc=doc)

    def make_column_optional(self, name: str) -> None:
        self._set_required(name, False)

    def require_column(self, name: str) -> None:
        self._set_required(name, True)

    def set_identifier_fields(self, names: Iterable[str]) -> None:
        """Replace the row key; names are resolved in the evolved schema (added columns too)."""
        self._identifier_names = tuple(names)

    def move_first(self, name: str) -> None:
        self._move(name, _Move(self._move_id(name), "first"))

    def move_before(self, name: str, before: str) -> None:
        self._move(name, _Move(self._move_id(name), "before", self._move_id(before)))

    def move_after(self, name: str, after: str) -> None:
        self._move(name, _Move(self._move_id(name), "after", self._move_id(after)))

    # Result ---------------------------------------------------------------------------------

    def apply(self) -> Schema:
        """The evolved schema; raises if the changes together break a rule (names, row key)."""
        schema = self._schema
        if self._identifier_names is None:
            for field_id in schema.identifier_field_ids:
                chain = [field_id, *self._ancestors(field_id)]
                if any(i in self._deletes for i in chain):
                    raise ValidationError(
                        f"cannot delete identifier field {schema.column_name(field_id)!r} (or "
                        "its parent): set the identifier fields without it first"
                    )
        struct = StructType(*self._rebuild_fields(schema.fields, ROOT))
        _check_unique_names(struct, "")
        evolved = Schema(struct.fields, schema.schema_id)
        if self._identifier_names is None:
            identifier_ids = schema.identifier_field_ids
        else:
            identifier_ids = tuple(
                self._identifier_id(evolved, name) for name in self._identifier_names
            )
            if set(identifier_ids) == set(schema.identifier_field_ids):
                identifier_ids = schema.identifier_field_ids  # keep the order, reuse the schema
        for field_id in identifier_ids:
            _validate_identifier(evolved, field_id)
        return Schema(struct.fields, schema.schema_id, tuple(identifier_ids))

    # Internals ------------------------------------------------------------------------------

    def _next_id(self) -> int:
        self._last_column_id += 1
        return self._last_column_id

    def _existing(self, name: str, action: str) -> NestedField:
        try:
            field = self._schema.find_field(name)
        except ValidationError:
            raise ValidationError(f"cannot {action} missing column {name!r}") from None
        self.resolved.append((name, field.field_id))
        return field

    def _for_update(self, name: str, action: str) -> NestedField:
        """The column as updated so far: an added one by its full name, else an existing one."""
        if name in self._added_names:
            return self._updates[self._added_names[name]]
        field = self._existing(name, action)
        if field.field_id in self._deletes:
            raise ValidationError(f"cannot {action} a column that will be deleted: {name!r}")
        child = self._collection_children.get(field.field_id)
        if child is not None and child.name == "key":
            raise ValidationError(f"cannot {action} map keys: {name!r}")
        return self._updates.get(field.field_id, field)

    def _set_required(self, name: str, required: bool) -> None:
        field = self._for_update(name, "update")
        if field.required == required:
            return
        if required and not self._allow_incompatible:
            raise ValidationError(
                f"cannot change column nullability of {name!r}: optional -> required "
                "(allow incompatible changes to force it)"
            )
        self._updates[field.field_id] = replace(field, required=required)

    def _move_id(self, name: str) -> int:
        if name in self._added_names:
            return self._added_names[name]
        return self._existing(name, "move").field_id

    def _move(self, name: str, move: _Move) -> None:
        if move.field_id == move.reference_id:
            raise ValidationError(f"cannot move {name!r} {move.kind} itself")
        parent = self._parents.get(move.field_id, ROOT)
        if move.field_id in self._collection_children:
            raise ValidationError(f"cannot move {name!r}: it is not a struct field")
        if move.kind != "first" and self._parents.get(move.reference_id, ROOT) != parent:
            raise ValidationError(f"cannot move {name!r} to a different struct")
        self._moves.setdefault(parent, []).append(move)

    def _ancestors(self, field_id: int) -> list[int]:
        chain = []
        while (field_id := self._parents.get(field_id, ROOT)) != ROOT:
            chain.append(field_id)
        return chain

    def _rebuild_fields(self, fields: Iterable[NestedField], owner: int) -> list[NestedField]:
        out = [self._rebuild(f) for f in fields if f.field_id not in self._deletes]
        out.extend(self._updates[i] for i in self._added.get(owner, ()))
        for move in self._moves.get(owner, ()):
            ids = [f.field_id for f in out]
            if move.field_id not in ids or (move.kind != "first" and move.reference_id not in ids):
                raise ValidationError(f"cannot move a deleted column (field id {move.field_id})")
            moving = out.pop(ids.index(move.field_id))
            ids.remove(move.field_id)
            if move.kind == "first":
                out.insert(0, moving)
            else:
                at = ids.index(move.reference_id)
                out.insert(at if move.kind == "before" else at + 1, moving)
        return out

    def _rebuild(self, field: NestedField) -> NestedField:
        updated = self._updates.get(field.field_id, field)
        return replace(updated, field_type=self._rebuild_type(updated.field_type, field.field_id))

    def _rebuild_type(self, t: IcebergType, owner: int) -> IcebergType:
        if isinstance(t, StructType):
            return StructType(*self._rebuild_fields(t.fields, owner))
        if isinstance(t, ListType):
            element = self._rebuild(t.element_field)
            return ListType(element.field_id, element.field_type, element.required)
        if isinstance(t, MapType):
            value = self._rebuild(t.value_field)
            return MapType(t.key_id, t.key_type, value.field_id, value.field_type, value.required)
        return t

    def _identifier_id(self, schema: Schema, name: str) -> int:
        try:
            return schema.find_field(name).field_id
        except ValidationError:
            raise ValidationError(
                f"cannot make {name!r} an identifier field: no such column in the new schema"
            ) from None


def _check_unique_names(struct: StructType, prefix: str) -> None:
    seen: set[str] = set()
    for f in struct.fields:
        if f.name in seen:
            raise ValidationError(f"the new schema has two columns named {prefix + f.name!r}")
        seen.add(f.name)
        t = f.field_type
        while isinstance(t, ListType | MapType):
            t = t.element_type if isinstance(t, ListType) else t.value_type
        if isinstance(t, StructType):
            _check_unique_names(t, f"{prefix}{f.name}.")


def _validate_identifier(schema: Schema, field_id: int) -> None:
    """Java's `Schema.validateIdentifierField`: a row key must be a reliable, exact value."""
    name = schema.column_name(field_id)
    field = schema.find_field(field_id)
    problem = None
    if not field.field_type.is_primitive:
        problem = "not a primitive type"
    elif not field.required:
        problem = "not a required column"
    elif isinstance(field.field_type, FloatType | DoubleType):
        problem = "float and double values cannot identify rows"
    else:
        parents, _ = _index_parents(schema.struct)
        parent = parents.get(field_id)
        while parent is not None and problem is None:
            if not isinstance(schema.find_type(parent), StructType):
                problem = "it is inside a list or map"
            elif not schema.find_field(parent).required:
                problem = f"it is nested in optional column {schema.column_name(parent)!r}"
            parent = parents.get(parent)
    if problem:
        raise ValidationError(f"cannot make {name!r} an identifier field: {problem}")
