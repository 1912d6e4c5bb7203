"""Partition specs: how a row's partition tuple is derived (spec: "Partitioning").

Partition field ids start at 1000. In v2 they are unique across every spec of a table
(the next one is `last-partition-id + 1`), which is what lets a manifest's partition tuple be
read without knowing the spec that wrote it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from icecore.errors import ValidationError
from icecore.spec.schema import Schema
from icecore.spec.transforms import (
    BucketTransform,
    IdentityTransform,
    TimeTransform,
    Transform,
    TruncateTransform,
    VoidTransform,
    parse_transform,
)
from icecore.spec.types import IcebergType, ListType, MapType, NestedField, StructType

PARTITION_FIELD_ID_START = 1000


@dataclass(frozen=True)
class PartitionField:
    source_id: int
    field_id: int
    transform: Transform
    name: str

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "transform": str(self.transform),
            "source-id": self.source_id,
            "field-id": self.field_id,
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any], default_field_id: int) -> PartitionField:
        """`default_field_id` serves v1 specs, which may omit field ids (1000, 1001, ...)."""
        try:
            return cls(
                source_id=int(obj["source-id"]),
                field_id=int(obj.get("field-id", default_field_id)),
                transform=parse_transform(obj["transform"]),
                name=str(obj["name"]),
            )
        except KeyError as exc:
            raise ValidationError(f"partition field {obj!r} lacks {exc.args[0]!r}") from None

    def describe(self) -> str:
        return f"{self.name!r} ({self.transform} of source id {self.source_id})"


@dataclass(frozen=True)
class PartitionSpec:
    spec_id: int = 0
    fields: tuple[PartitionField, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        ids = [f.field_id for f in self.fields]
        if len(ids) != len(set(ids)):
            raise ValidationError(f"partition spec {self.spec_id} repeats a field id: {ids}")
        names = [f.name for f in self.fields]
        if len(names) != len(set(names)):
            raise ValidationError(f"partition spec {self.spec_id} repeats a field name: {names}")
        if "" in names:
            raise ValidationError(f"partition spec {self.spec_id} has a field with an empty name")

    @property
    def is_unpartitioned(self) -> bool:
        """True when no field partitions data (void fields, v1's soft delete, do not)."""
        return all(f.transform.is_void for f in self.fields)

    @property
    def last_assigned_field_id(self) -> int:
        return max((f.field_id for f in self.fields), default=PARTITION_FIELD_ID_START - 1)

    def compatible_with(self, other: PartitionSpec) -> bool:
        """Equivalent in the spec's sense: same sources, transforms and names, in order.

        Field ids are ignored. Writers must reuse an existing compatible spec rather than
        add a new one.
        """
        return len(self.fields) == len(other.fields) and all(
            (a.source_id, a.transform, a.name) == (b.source_id, b.transform, b.name)
            for a, b in zip(self.fields, other.fields, strict=True)
        )

    def validate(self, schema: Schema) -> None:
        """Check every field against `schema` as the spec requires; the error names the field.

        A source must exist, be primitive, be a type its transform accepts, and sit in structs
        only (a value inside a list or map has no single partition value). Void fields are
        skipped: their source may be long gone.
        """
        in_collections = _ids_inside_lists_and_maps(schema.struct)
        for f in self.fields:
            if f.transform.is_void:
                continue
            where = f"partition spec {self.spec_id} field {f.describe()}"
            if f.source_id not in schema.field_ids():
                raise ValidationError(
                    f"{where}: source id {f.source_id} is not in schema {schema.schema_id}"
                )
            source = schema.find_field(f.source_id)
            if not source.field_type.is_primitive:
                raise ValidationError(f"{where}: source {source.name!r} is not a primitive type")
            if not f.transform.can_transform(source.field_type):
                raise ValidationError(
                    f"{where}: {f.transform} cannot be applied to type {source.field_type}"
                )
            if f.source_id in in_collections:
                raise ValidationError(f"{where}: source is inside a list or map")

    def partition_type(self, schema: Schema) -> StructType:
        """The struct of partition tuples in manifests: field ids, names, optional result types.

        A field whose source column was dropped keeps its type when the transform fixes it
        (bucket, year, ...), as in Iceberg Java, so manifests of old specs stay readable.
        """
        ids = schema.field_ids()
        fields = []
        for f in self.fields:
            source = schema.find_type(f.source_id) if f.source_id in ids else None
            try:
                result = f.transform.result_type(source)
            except ValidationError as exc:
                raise ValidationError(
                    f"partition spec {self.spec_id} field {f.describe()}: source id "
                    f"{f.source_id} is not in schema {schema.schema_id} ({exc})"
                ) from None
            fields.append(NestedField(f.field_id, f.name, result, required=False))
        return StructType(*fields)

    def partition_path(self, values: Sequence[Any], schema: Schema) -> str:
        """The directory of a partition, as Java's `PartitionSpec.partitionToPath` writes it.

        `values` are partition values (already transformed), e.g. `ts_day=2024-01-07/id_bucket=3`.
        """
        if len(values) != len(self.fields):
            raise ValidationError(
                f"partition spec {self.spec_id} has {len(self.fields)} fields, "
                f"got {len(values)} partition values"
            )
        result_types = [f.field_type for f in self.partition_type(schema).fields]
        return "/".join(
            f"{java_url_encode(f.name)}="
            f"{java_url_encode(f.transform.to_human_string(value, result_type))}"
            for f, value, result_type in zip(self.fields, values, result_types, strict=True)
        )

    def fields_json(self) -> list[dict[str, Any]]:
        return [f.to_json() for f in self.fields]

    def to_json(self) -> dict[str, Any]:
        return {"spec-id": self.spec_id, "fields": self.fields_json()}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> PartitionSpec:
        if "fields" not in obj:
            raise ValidationError(f"partition spec {obj!r} lacks 'fields'")
        return cls(int(obj.get("spec-id", 0)), fields_from_json(obj["fields"]))


def fields_from_json(fields: list[dict[str, Any]]) -> tuple[PartitionField, ...]:
    return tuple(
        PartitionField.from_json(f, PARTITION_FIELD_ID_START + i) for i, f in enumerate(fields)
    )


UNPARTITIONED = PartitionSpec()


def default_partition_name(source_name: str, transform: Transform) -> str:
    """The name Iceberg Java's spec update gives a field added without one.

    `id` for identity, `id_bucket_16`, `name_trunc_4`, `ts_day` (`ts_year`, ...), `x_null`.
    """
    if isinstance(transform, IdentityTransform):
        return source_name
    if isinstance(transform, BucketTransform):
        return f"{source_name}_bucket_{transform.num_buckets}"
    if isinstance(transform, TruncateTransform):
        return f"{source_name}_trunc_{transform.width}"
    if isinstance(transform, VoidTransform):
        return f"{source_name}_null"
    return f"{source_name}_{transform}"


class PartitionSpecUpdate:
    """Evolves a table's partition spec (spec: "Partition Evolution"), as Iceberg Java does.

    v2: removed fields are dropped and new fields take ids after `last_partition_id`, unless
    an earlier spec of the table (pass them as `historical_specs`) has the same source and
    transform (and name, if one is given): then that field's id is reused, as the spec requires.
    v1: ids were positional, so a removed field stays in place with a `void` transform (renamed
    `<name>_<id>` if a new field takes its name) and new fields only go at the end.

    The result is validated against `schema`; give it to table metadata, which must reuse an
    existing spec that is `compatible_with` it rather than add a copy.
    """

    def __init__(
        self,
        spec: PartitionSpec,
        schema: Schema,
        format_version: int,
        last_partition_id: int | None = None,
        historical_specs: Iterable[PartitionSpec] = (),
    ) -> None:
        if format_version not in (1, 2):
            raise ValidationError(
                f"cannot evolve partition specs of format version {format_version}"
            )
        history = [spec, *historical_specs]
        self._spec = spec
        self._schema = schema
        self._format_version = format_version
        self._historical_fields = [f for s in history for f in s.fields]
        self._last_partition_id = max(
            last_partition_id if last_partition_id is not None else PARTITION_FIELD_ID_START - 1,
            *(s.last_assigned_field_id for s in history),
        )
        self._by_name = {f.name: f for f in spec.fields}
        self._by_transform = {(f.source_id, str(f.transform)): f for f in spec.fields}
        self._adds: list[PartitionField] = []
        self._added_by_name: dict[str, PartitionField] = {}
        self._added_by_transform: dict[tuple[int, str], PartitionField] = {}
        self._added_time_sources: dict[int, PartitionField] = {}
        self._deletes: set[int] = set()
        self._renames: dict[str, str] = {}

    @property
    def last_partition_id(self) -> int:
        """The table's new `last-partition-id` once this update is committed."""
        return self._last_partition_id

    def add_field(
        self, source_name: str, transform: Transform | str = "identity", name: str | None = None
    ) -> PartitionSpecUpdate:
        """Partition by `transform` of the column `source_name` (a dotted name for nested ones)."""
        if isinstance(transform, str):
            transform = parse_transform(transform)
        source = self._schema.find_field(source_name)
        if not transform.can_transform(source.field_type):
            raise ValidationError(
                f"cannot partition by {transform} of {source_name!r}: "
                f"it does not apply to type {source.field_type}"
            )
        key = (source.field_id, str(transform))
        existing = self._by_transform.get(key)
        if existing is not None and existing.field_id in self._deletes:
            # Removed and re-added in one update: keep the field as it was (maybe renamed).
            self._deletes.discard(existing.field_id)
            if name is None or name == existing.name:
                return self
            return self.rename_field(existing.name, name)
        if existing is not None:
            raise ValidationError(
                f"cannot add duplicate partition field {transform}({source_name}): "
                f"it conflicts with {existing.describe()}"
            )
        if key in self._added_by_transform:
            raise ValidationError(
                f"cannot add duplicate partition field {transform}({source_name}): already added"
            )
        if isinstance(transform, TimeTransform) and source.field_id in self._added_time_sources:
            raise ValidationError(
                f"cannot add redundant partition field {transform}({source_name}): it conflicts "
                f"with {self._added_time_sources[source.field_id].describe()}"
            )

        recycled = self._recycled_field(source.field_id, transform, name)
        if name is None:
            name = (
                recycled.name
                if recycled is not None
                else default_partition_name(self._schema.column_name(source.field_id), transform)
            )
        clash = self._by_name.get(name)
        if (
            clash is not None
            and clash.field_id not in self._deletes
            and not clash.transform.is_void
        ):
            raise ValidationError(f"cannot add duplicate partition field name {name!r}")
        if name in self._added_by_name:
            raise ValidationError(f"cannot add duplicate partition field {name!r}: already added")

        if clash is not None:
            # A void (v1 dropped) or removed field gives its name up to the new field.
            self._renames[clash.name] = f"{clash.name}_{clash.field_id}"
        if recycled is not None:
            new_field = replace(recycled, name=name)
        else:
            self._last_partition_id += 1
            new_field = PartitionField(source.field_id, self._last_partition_id, transform, name)
        if isinstance(transform, TimeTransform):
            self._added_time_sources[source.field_id] = new_field
        self._added_by_transform[key] = new_field
        self._added_by_name[name] = new_field
        self._adds.append(new_field)
        return self

    def remove_field(self, name: str) -> PartitionSpecUpdate:
        if name in self._added_by_name:
            raise ValidationError(f"cannot remove partition field {name!r}: it was just added")
        if name in self._renames:
            raise ValidationError(f"cannot rename and remove partition field {name!r}")
        existing = self._by_name.get(name)
        if existing is None:
            raise ValidationError(f"cannot find partition field to remove: {name!r}")
        self._deletes.add(existing.field_id)
        return self

    def rename_field(self, name: str, new_name: str) -> PartitionSpecUpdate:
        if name in self._added_by_name:
            raise ValidationError(f"cannot rename newly added partition field {name!r}")
        existing = self._by_name.get(name)
        if existing is None:
            raise ValidationError(f"cannot find partition field to rename: {name!r}")
        if existing.field_id in self._deletes:
            raise ValidationError(f"cannot remove and rename partition field {name!r}")
        if not new_name:
            raise ValidationError(f"cannot rename partition field {name!r} to an empty name")
        taker = self._by_name.get(new_name)
        if taker is not None and taker.transform.is_void and taker is not existing:
            self._renames[taker.name] = f"{taker.name}_{taker.field_id}"
        self._renames[name] = new_name
        return self

    def apply(self, spec_id: int) -> PartitionSpec:
        """The evolved spec, with id `spec_id`; raises if it breaks a rule of the spec."""
        fields: list[PartitionField] = []
        for f in self._spec.fields:
            new_name = self._renames.get(f.name, f.name)
            if f.field_id not in self._deletes:
                fields.append(replace(f, name=new_name))
            elif self._format_version == 1:
                fields.append(replace(f, name=new_name, transform=VoidTransform()))
        fields.extend(self._adds)
        for f in fields:
            self._check_name_against_schema(f)
        spec = PartitionSpec(spec_id, tuple(fields))
        spec.validate(self._schema)
        return spec

    def _recycled_field(
        self, source_id: int, transform: Transform, name: str | None
    ) -> PartitionField | None:
        """A v2 field of an earlier spec to reuse: same source, transform and (if given) name."""
        if self._format_version < 2:
            return None
        return next(
            (
                f
                for f in self._historical_fields
                if f.source_id == source_id
                and f.transform == transform
                and (name is None or f.name == name)
            ),
            None,
        )

    def _check_name_against_schema(self, f: PartitionField) -> None:
        """A partition name may equal a column name only if that column is its own source.

        Otherwise a filter on the column could be mistaken for one on the partition field.
        """
        if f.source_id not in self._schema.field_ids():
            return
        try:
            column = self._schema.find_field(f.name)
        except ValidationError:
            return
        if column.field_id != f.source_id:
            raise ValidationError(
                f"partition field {f.describe()} is named like column {f.name!r} "
                f"(id {column.field_id}), which is not its source"
            )


def _ids_inside_lists_and_maps(struct: StructType) -> set[int]:
    return {fid for f in struct.fields for fid in _ids_below(f.field_type, inside=False)}


def _ids_below(t: IcebergType, inside: bool) -> Iterator[int]:
    """Ids of the fields nested in `t`, keeping only those with a list or map above them."""
    if isinstance(t, StructType):
        children = [(f, inside) for f in t.fields]
    elif isinstance(t, ListType):
        children = [(t.element_field, True)]
    elif isinstance(t, MapType):
        children = [(t.key_field, True), (t.value_field, True)]
    else:
        return
    for child, child_inside in children:
        if child_inside:
            yield child.field_id
        yield from _ids_below(child.field_type, child_inside)


_URL_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-*_")


def java_url_encode(text: str) -> str:
    """`java.net.URLEncoder.encode(text, UTF_8)`: space is `+`, `~` is escaped, hex is upper."""
    return "".join(
        chr(b) if b in _URL_SAFE else "+" if b == 0x20 else f"%{b:02X}"
        for b in text.encode("utf-8", errors="replace")
    )
