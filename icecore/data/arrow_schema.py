"""Iceberg schemas as Arrow schemas that pyarrow writes as Iceberg's Parquet types.

Every field carries its Iceberg id in `PARQUET:field_id`, which pyarrow writes as the Parquet
field id (struct fields, list elements, map keys and values included), so readers resolve
columns by id as the spec requires. The types are the spec's Parquet mapping: uuid as
FIXED_LEN_BYTE_ARRAY(16) with the UUID logical type, fixed[L] as FIXED_LEN_BYTE_ARRAY(L), time
as INT64 TIME(MICROS), timestamps in microseconds, timestamp_ns / timestamptz_ns (v3) as INT64
TIMESTAMP(NANOS), decimals as Arrow decimal128.

The other v3 types:

- `unknown` is Arrow's null type: its values are always null. The spec keeps such columns
  out of data files, so a writer drops them first (`icecore.spec.schema.stored_fields`); a
  reader fills them with nulls (`pa.nulls(n)`).
- `geometry` and `geography` are binary: their WKB bytes are what the files hold, but
  pyarrow writes plain BINARY, without Parquet's GEOMETRY / GEOGRAPHY annotation, and icecore
  does not interpret the bytes. They are not `is_readable`: jobs refuse to rewrite them
  (`icecore.spec.schema.unsupported_columns`), and so never write such a file.
- `variant` has no Arrow form here: its Parquet form is a VARIANT-annotated group (possibly
  shredded) whose `metadata` and `value` fields carry no ids, which a plain Arrow struct
  cannot express; asking for it is an error naming the type.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

from icecore.errors import ValidationError
from icecore.spec.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    GeographyType,
    GeometryType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UnknownType,
    UUIDType,
    VariantType,
)

FIELD_ID_KEY = b"PARQUET:field_id"

_PRIMITIVES: dict[type[IcebergType], pa.DataType] = {
    BooleanType: pa.bool_(),
    IntegerType: pa.int32(),
    LongType: pa.int64(),
    FloatType: pa.float32(),
    DoubleType: pa.float64(),
    DateType: pa.date32(),
    TimeType: pa.time64("us"),
    TimestampType: pa.timestamp("us"),
    TimestamptzType: pa.timestamp("us", tz="UTC"),
    TimestampNanoType: pa.timestamp("ns"),
    TimestamptzNanoType: pa.timestamp("ns", tz="UTC"),
    StringType: pa.string(),
    BinaryType: pa.binary(),
    UUIDType: pa.uuid(),
    UnknownType: pa.null(),
    GeometryType: pa.binary(),  # WKB; see the module docstring
    GeographyType: pa.binary(),
}


def arrow_type(t: IcebergType, *, all_optional: bool = False) -> pa.DataType:
    """The Arrow type of an Iceberg type; see `arrow_field` for `all_optional`."""
    if isinstance(t, DecimalType):
        return pa.decimal128(t.precision, t.scale)
    if isinstance(t, FixedType):
        return pa.binary(t.length)
    if isinstance(t, StructType):
        return pa.struct([arrow_field(f, all_optional=all_optional) for f in t.fields])
    if isinstance(t, ListType):
        return pa.list_(arrow_field(t.element_field, all_optional=all_optional))
    if isinstance(t, MapType):
        key = arrow_field(t.key_field, all_optional=all_optional)
        return pa.map_(
            key.with_nullable(False), arrow_field(t.value_field, all_optional=all_optional)
        )
    if isinstance(t, VariantType):
        raise ValidationError(
            "type variant has no Parquet form here: icecore keeps variant columns in metadata "
            "but does not read or write their values"
        )
    found = _PRIMITIVES.get(type(t))
    if found is None:
        raise ValidationError(f"type {t} has no Parquet form here")
    return found


def arrow_field(f: NestedField, *, all_optional: bool = False) -> pa.Field:
    """The field with its id. `all_optional` writes every field optional (map keys aside,
    which Parquet requires), as Spark's writer does: readers accept an optional column for a
    required field, and a writer that never declares a column required never has to prove it."""
    nullable = all_optional or not f.required
    metadata = {FIELD_ID_KEY: str(f.field_id).encode()}
    return pa.field(f.name, arrow_type(f.field_type, all_optional=all_optional), nullable, metadata)


def arrow_schema(fields: Iterable[NestedField], *, all_optional: bool = False) -> pa.Schema:
    return pa.schema([arrow_field(f, all_optional=all_optional) for f in fields])
