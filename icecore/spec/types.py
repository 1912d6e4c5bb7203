"""Iceberg data types and their JSON form (spec: "Schemas and Data Types", Appendix C).

Types are immutable values: two `DecimalType(10, 2)` compare equal and hash alike, so they
can key caches (e.g. per-type serializers) used on hot planning paths.

In-memory values follow the spec's physical representation, which keeps hashing,
serialization and comparisons exact: date = days since epoch (int), time / timestamp /
timestamptz = microseconds (int), decimal = `decimal.Decimal`, uuid = `uuid.UUID`,
fixed / binary = `bytes`, string = `str`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

from icecore.errors import ValidationError


class IcebergType:
    """Base of every Iceberg type."""

    is_primitive: ClassVar[bool] = False

    def to_json(self) -> Any:
        raise NotImplementedError

    def __str__(self) -> str:
        return str(self.to_json())


class PrimitiveType(IcebergType):
    """A type with a single value and a fixed JSON name."""

    is_primitive: ClassVar[bool] = True
    json_name: ClassVar[str] = ""

    def to_json(self) -> str:
        return self.json_name

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.to_json() == other.to_json()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self.to_json())

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class BooleanType(PrimitiveType):
    json_name = "boolean"


class IntegerType(PrimitiveType):
    json_name = "int"


class LongType(PrimitiveType):
    json_name = "long"


class FloatType(PrimitiveType):
    json_name = "float"


class DoubleType(PrimitiveType):
    json_name = "double"


class DateType(PrimitiveType):
    json_name = "date"


class TimeType(PrimitiveType):
    json_name = "time"


class TimestampType(PrimitiveType):
    json_name = "timestamp"


class TimestamptzType(PrimitiveType):
    json_name = "timestamptz"


class StringType(PrimitiveType):
    json_name = "string"


class UUIDType(PrimitiveType):
    json_name = "uuid"


class BinaryType(PrimitiveType):
    json_name = "binary"


class DecimalType(PrimitiveType):
    """decimal(P,S): precision at most 38, scale fixed at creation."""

    def __init__(self, precision: int, scale: int) -> None:
        if not 0 < precision <= 38:
            raise ValidationError(f"decimal precision must be in 1..38, got {precision}")
        self.precision = precision
        self.scale = scale

    def to_json(self) -> str:
        return f"decimal({self.precision}, {self.scale})"

    def __repr__(self) -> str:
        return f"DecimalType({self.precision}, {self.scale})"


class FixedType(PrimitiveType):
    """fixed[L]: exactly L bytes."""

    def __init__(self, length: int) -> None:
        if length <= 0:
            raise ValidationError(f"fixed length must be positive, got {length}")
        self.length = length

    def to_json(self) -> str:
        return f"fixed[{self.length}]"

    def __repr__(self) -> str:
        return f"FixedType({self.length})"


@dataclass(frozen=True)
class NestedField:
    """A struct field, list element or map key/value: the id is what engines resolve by."""

    field_id: int
    name: str
    field_type: IcebergType
    required: bool = False
    doc: str | None = None
    initial_default: Any = None
    write_default: Any = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.field_id,
            "name": self.name,
            "required": self.required,
            "type": self.field_type.to_json(),
        }
        if self.doc is not None:
            out["doc"] = self.doc
        if self.initial_default is not None:
            out["initial-default"] = self.initial_default
        if self.write_default is not None:
            out["write-default"] = self.write_default
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> NestedField:
        try:
            return cls(
                field_id=int(obj["id"]),
                name=str(obj["name"]),
                field_type=type_from_json(obj["type"]),
                required=bool(obj["required"]),
                doc=obj.get("doc"),
                initial_default=obj.get("initial-default"),
                write_default=obj.get("write-default"),
            )
        except KeyError as exc:
            raise ValidationError(f"struct field {obj!r} lacks {exc.args[0]!r}") from None


@dataclass(frozen=True)
class StructType(IcebergType):
    fields: tuple[NestedField, ...] = field(default_factory=tuple)

    def __init__(self, *fields: NestedField) -> None:
        object.__setattr__(self, "fields", tuple(fields))

    def to_json(self) -> dict[str, Any]:
        return {"type": "struct", "fields": [f.to_json() for f in self.fields]}

    def field_by_id(self, field_id: int) -> NestedField | None:
        return next((f for f in self.fields if f.field_id == field_id), None)

    def field_by_name(self, name: str) -> NestedField | None:
        return next((f for f in self.fields if f.name == name), None)


@dataclass(frozen=True)
class ListType(IcebergType):
    element_id: int
    element_type: IcebergType
    element_required: bool = True

    @property
    def element_field(self) -> NestedField:
        return NestedField(self.element_id, "element", self.element_type, self.element_required)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "list",
            "element-id": self.element_id,
            "element": self.element_type.to_json(),
            "element-required": self.element_required,
        }


@dataclass(frozen=True)
class MapType(IcebergType):
    key_id: int
    key_type: IcebergType
    value_id: int
    value_type: IcebergType
    value_required: bool = True

    @property
    def key_field(self) -> NestedField:
        return NestedField(self.key_id, "key", self.key_type, True)

    @property
    def value_field(self) -> NestedField:
        return NestedField(self.value_id, "value", self.value_type, self.value_required)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "map",
            "key-id": self.key_id,
            "key": self.key_type.to_json(),
            "value-id": self.value_id,
            "value": self.value_type.to_json(),
            "value-required": self.value_required,
        }


_PRIMITIVES: dict[str, PrimitiveType] = {
    t.json_name: t()
    for t in (
        BooleanType,
        IntegerType,
        LongType,
        FloatType,
        DoubleType,
        DateType,
        TimeType,
        TimestampType,
        TimestamptzType,
        StringType,
        UUIDType,
        BinaryType,
    )
}
_DECIMAL = re.compile(r"decimal\(\s*(\d+)\s*,\s*(-?\d+)\s*\)")
_FIXED = re.compile(r"fixed\[\s*(\d+)\s*\]")


def type_from_json(obj: Any) -> IcebergType:
    """Parse a type from its JSON form; unknown names are an error, never a guess."""
    if isinstance(obj, str):
        if obj in _PRIMITIVES:
            return _PRIMITIVES[obj]
        if m := _DECIMAL.fullmatch(obj):
            return DecimalType(int(m.group(1)), int(m.group(2)))
        if m := _FIXED.fullmatch(obj):
            return FixedType(int(m.group(1)))
        raise ValidationError(f"unknown Iceberg type {obj!r}")
    if isinstance(obj, dict):
        kind = obj.get("type")
        try:
            if kind == "struct":
                return StructType(*(NestedField.from_json(f) for f in obj["fields"]))
            if kind == "list":
                return ListType(
                    int(obj["element-id"]),
                    type_from_json(obj["element"]),
                    bool(obj["element-required"]),
                )
            if kind == "map":
                return MapType(
                    int(obj["key-id"]),
                    type_from_json(obj["key"]),
                    int(obj["value-id"]),
                    type_from_json(obj["value"]),
                    bool(obj["value-required"]),
                )
        except KeyError as exc:
            raise ValidationError(f"{kind} type {obj!r} lacks {exc.args[0]!r}") from None
    raise ValidationError(f"unknown Iceberg type {obj!r}")
