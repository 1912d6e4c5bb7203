"""Iceberg data types and their JSON form (spec: "Schemas and Data Types", Appendix C).

Types are immutable values: two `DecimalType(10, 2)` compare equal and hash alike, so they
can key caches (e.g. per-type serializers) used on hot planning paths.

In-memory values follow the spec's physical representation, which keeps hashing,
serialization and comparisons exact: date = days since epoch (int), time / timestamp /
timestamptz = microseconds (int), timestamp_ns / timestamptz_ns = nanoseconds (int),
decimal = `decimal.Decimal`, uuid = `uuid.UUID`, fixed / binary = `bytes`, string = `str`,
unknown = always `None`; struct = dict by field name, list = list, map = dict.

Format v3 adds `unknown`, `timestamp_ns`, `timestamptz_ns`, `variant`, `geometry(C)` and
`geography(C, A)`. icecore handles the values of the first three (Spark cannot carry
nanosecond timestamps, so the Spark jobs refuse those: `spark_jobs.schema`); `variant`,
`geometry` and `geography` columns are only carried through metadata unchanged (`is_readable`
is False, see `icecore.spec.schema.unsupported_columns`), so a job that would have to read or
write their values refuses with a message instead of corrupting them.

Struct fields carry the v3 default values (`initial-default`, `write-default`) as the JSON of
Appendix D, exactly as the metadata spelled it, so rewriting metadata reproduces it byte for
byte; `icecore.spec.defaults` gives the in-memory value a reader fills in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from icecore.errors import ValidationError

DEFAULT_CRS: Final = "OGC:CRS84"
DEFAULT_EDGE_ALGORITHM: Final = "spherical"
# Spec "Edge-Interpolation Algorithm": the values a geography's A may take.
EDGE_ALGORITHMS: Final = ("spherical", "vincenty", "thomas", "andoyer", "karney")


class IcebergType:
    """Base of every Iceberg type."""

    is_primitive: ClassVar[bool] = False

    @property
    def is_readable(self) -> bool:
        """Whether icecore can process values of this type (at every depth, for nested types).

        False for `variant`, `geometry` and `geography`: icecore keeps them intact in metadata
        but has no reader or writer for their values, so a job touching such data must stop.
        """
        return True

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


class TimestampNanoType(PrimitiveType):
    """timestamp_ns (v3): nanoseconds since 1970-01-01 00:00, without time zone."""

    json_name = "timestamp_ns"


class TimestamptzNanoType(PrimitiveType):
    """timestamptz_ns (v3): nanoseconds since 1970-01-01 00:00 UTC."""

    json_name = "timestamptz_ns"


class UnknownType(PrimitiveType):
    """unknown (v3): a column whose type is not known yet; every value is null.

    Such a column is always optional with null defaults and is not stored in data files, so
    it reads as nulls. Any type can later replace it (the spec's `unknown` promotion).
    """

    json_name = "unknown"


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


def _unquote(text: str) -> str:
    """A type parameter without the quotes PyIceberg 0.12 writes (`geometry('EPSG:4326')`)."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _check_crs(crs: str | None, kind: str) -> None:
    if crs is not None and not crs.strip():
        raise ValidationError(f"{kind} CRS cannot be empty")


class GeometryType(PrimitiveType):
    """geometry(C) (v3): OGC simple features as WKB, planar edges, in CRS C (default OGC:CRS84).

    icecore keeps geometry columns intact in metadata but does not process their values
    (`is_readable` is False). The JSON text is kept exactly as read (`geometry`,
    `geometry(srid:4326)`, PyIceberg's `geometry('EPSG:4326')`), so rewriting metadata never
    changes it; equality compares the effective CRS case-insensitively, as Iceberg Java does.
    """

    json_name = "geometry"

    def __init__(self, crs: str | None = None, *, text: str | None = None) -> None:
        _check_crs(crs, "geometry")
        self._crs = crs
        self._text = text

    @property
    def crs(self) -> str:
        """The CRS, `OGC:CRS84` when the type names none."""
        return self._crs if self._crs is not None else DEFAULT_CRS

    @property
    def is_readable(self) -> bool:
        return False

    def to_json(self) -> str:
        if self._text is not None:
            return self._text
        return "geometry" if self._crs is None else f"geometry({self._crs})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GeometryType) and self.crs.casefold() == other.crs.casefold()

    def __hash__(self) -> int:
        return hash(("geometry", self.crs.casefold()))

    def __repr__(self) -> str:
        return "GeometryType()" if self._crs is None else f"GeometryType({self._crs!r})"


class GeographyType(PrimitiveType):
    """geography(C, A) (v3): OGC simple features as WKB in CRS C (default OGC:CRS84) with edge
    interpolation A (default spherical).

    Kept intact in metadata, values not processed (`is_readable` is False); the JSON text is
    kept exactly as read, and equality compares the effective CRS (case-insensitively) and
    algorithm, as Iceberg Java does.
    """

    json_name = "geography"

    def __init__(
        self, crs: str | None = None, algorithm: str | None = None, *, text: str | None = None
    ) -> None:
        _check_crs(crs, "geography")
        # Types read from metadata keep whatever algorithm it names (PyIceberg 0.12 accepts
        # e.g. `planar`): icecore never interprets it, and refusing would make the whole
        # table unmaintainable. Types built here must use the spec's names.
        if text is None and algorithm is not None and algorithm.lower() not in EDGE_ALGORITHMS:
            raise ValidationError(
                f"unknown geography edge algorithm {algorithm!r}; the spec allows "
                + ", ".join(EDGE_ALGORITHMS)
            )
        self._crs = crs
        self._algorithm = algorithm
        self._text = text

    @property
    def crs(self) -> str:
        return self._crs if self._crs is not None else DEFAULT_CRS

    @property
    def algorithm(self) -> str:
        """The edge-interpolation algorithm, lower case; `spherical` when the type names none."""
        return self._algorithm.lower() if self._algorithm is not None else DEFAULT_EDGE_ALGORITHM

    @property
    def is_readable(self) -> bool:
        return False

    def to_json(self) -> str:
        if self._text is not None:
            return self._text
        if self._crs is None and self._algorithm is None:
            return "geography"
        return f"geography({self.crs}, {self.algorithm})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, GeographyType)
            and self.crs.casefold() == other.crs.casefold()
            and self.algorithm == other.algorithm
        )

    def __hash__(self) -> int:
        return hash(("geography", self.crs.casefold(), self.algorithm))

    def __repr__(self) -> str:
        if self._crs is None and self._algorithm is None:
            return "GeographyType()"
        return f"GeographyType({self.crs!r}, {self.algorithm!r})"


class VariantType(IcebergType):
    """variant (v3): semi-structured values in Parquet's Variant encoding.

    Neither primitive nor nested (spec "Semi-structured Types"): it cannot be a partition
    source or an identifier field, and icecore keeps it intact in metadata without processing
    its values (`is_readable` is False).
    """

    def to_json(self) -> str:
        return "variant"

    @property
    def is_readable(self) -> bool:
        return False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VariantType)

    def __hash__(self) -> int:
        return hash("variant")

    def __repr__(self) -> str:
        return "VariantType()"


class _JsonNull:
    """The value of a default written as an explicit JSON `null` (see `NestedField`)."""

    def __repr__(self) -> str:
        return "JSON_NULL"

    def __reduce__(self) -> str:
        return "JSON_NULL"  # unpickles as the module's one instance


JSON_NULL: Final = _JsonNull()
# Types whose defaults the spec requires to be null ("Default values").
NULL_DEFAULT_ONLY: tuple[type[IcebergType], ...] = (
    UnknownType,
    VariantType,
    GeometryType,
    GeographyType,
)


@dataclass(frozen=True)
class NestedField:
    """A struct field, list element or map key/value: the id is what engines resolve by.

    `initial_default` and `write_default` (spec "Default values", v3) hold the JSON
    single-value form of Appendix D exactly as the metadata spelled it, because rewriting
    metadata must not change it (`"000102FF"` stays upper case, `1.0` stays a float): None
    means no default, `JSON_NULL` an explicit `null`. `icecore.spec.defaults` reads and builds
    them, and a `Schema` checks them against their types when it is built.
    """

    field_id: int
    name: str
    field_type: IcebergType
    required: bool = False
    doc: str | None = None
    # Excluded from the hash (they may be JSON objects or arrays); still compared by ==.
    initial_default: Any = field(default=None, hash=False)
    write_default: Any = field(default=None, hash=False)

    def __post_init__(self) -> None:
        if isinstance(self.field_type, UnknownType) and self.required:
            raise ValidationError(
                f"field {self.name!r} (id {self.field_id}) has type unknown and so must be "
                "optional: its values are always null"
            )

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
            out["initial-default"] = _raw_json(self.initial_default)
        if self.write_default is not None:
            out["write-default"] = _raw_json(self.write_default)
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
                initial_default=_default_from_json(obj, "initial-default"),
                write_default=_default_from_json(obj, "write-default"),
            )
        except KeyError as exc:
            raise ValidationError(f"struct field {obj!r} lacks {exc.args[0]!r}") from None


def _raw_json(raw: Any) -> Any:
    return None if raw is JSON_NULL else raw


def _default_from_json(obj: dict[str, Any], key: str) -> Any:
    if key not in obj:
        return None
    return JSON_NULL if obj[key] is None else obj[key]


@dataclass(frozen=True)
class StructType(IcebergType):
    fields: tuple[NestedField, ...] = field(default_factory=tuple)

    def __init__(self, *fields: NestedField) -> None:
        object.__setattr__(self, "fields", tuple(fields))

    @property
    def is_readable(self) -> bool:
        return all(f.field_type.is_readable for f in self.fields)

    def to_json(self) -> dict[str, Any]:
        return {"type": "struct", "fields": [f.to_json() for f in self.fields]}

    def field_by_name(self, name: str) -> NestedField | None:
        return next((f for f in self.fields if f.name == name), None)


@dataclass(frozen=True)
class ListType(IcebergType):
    element_id: int
    element_type: IcebergType
    element_required: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.element_type, UnknownType) and self.element_required:
            raise ValidationError(
                f"list element {self.element_id} has type unknown and so must be optional"
            )

    @property
    def is_readable(self) -> bool:
        return self.element_type.is_readable

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

    def __post_init__(self) -> None:
        if isinstance(self.key_type, UnknownType):
            raise ValidationError(f"map key {self.key_id} cannot be unknown: keys are required")
        if isinstance(self.value_type, UnknownType) and self.value_required:
            raise ValidationError(
                f"map value {self.value_id} has type unknown and so must be optional"
            )

    @property
    def is_readable(self) -> bool:
        return self.key_type.is_readable and self.value_type.is_readable

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
        TimestampNanoType,
        TimestamptzNanoType,
        StringType,
        UUIDType,
        BinaryType,
        UnknownType,
    )
}
_VARIANT = VariantType()
_DECIMAL = re.compile(r"decimal\(\s*(\d+)\s*,\s*(-?\d+)\s*\)")
_FIXED = re.compile(r"fixed\[\s*(\d+)\s*\]")
# Appendix C: `geometry(<C>)`, `geography(<C>, <A>)`, the parameters optional; readers accept
# whitespace around them, and, like Java, any case in the name.
_GEOMETRY = re.compile(r"geometry\s*(?:\(\s*(.*?)\s*\))?", re.IGNORECASE | re.DOTALL)
_GEOGRAPHY = re.compile(
    r"geography\s*(?:\(\s*([^,]*?)\s*(?:,\s*(['\"]?)(\w*)\2\s*)?\))?", re.IGNORECASE | re.DOTALL
)


def type_from_json(obj: Any) -> IcebergType:
    """Parse a type from its JSON form; unknown names are an error, never a guess."""
    if isinstance(obj, str):
        if obj in _PRIMITIVES:
            return _PRIMITIVES[obj]
        if m := _DECIMAL.fullmatch(obj):
            return DecimalType(int(m.group(1)), int(m.group(2)))
        if m := _FIXED.fullmatch(obj):
            return FixedType(int(m.group(1)))
        if obj == "variant":
            return _VARIANT
        if m := _GEOMETRY.fullmatch(obj):
            crs = m.group(1)
            return GeometryType(None if crs is None else _unquote(crs), text=obj)
        if m := _GEOGRAPHY.fullmatch(obj):
            crs, algorithm = m.group(1), m.group(3)
            return GeographyType(
                None if crs is None else _unquote(crs),
                algorithm or None,
                text=obj,
            )
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
