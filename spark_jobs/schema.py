"""Iceberg schemas as Spark schemas and back, and how a source's columns meet a table's.

Table files are read and written by Parquet field id, never by name (a renamed column keeps
its id, a dropped and re-added one gets a new id); every Spark field carries its Iceberg id in
the StructField metadata key `parquet.field.id`.

Inside Spark, Iceberg types Spark lacks travel as the nearest Spark type: `uuid` and
`fixed[L]` as binary, `time` as microseconds since midnight in a long, lists and maps as
arrays and maps. The writers (`icecore.data.parquet_writer`) turn them back into Iceberg's
physical types (FIXED_LEN_BYTE_ARRAY(16) with the UUID logical type, FIXED_LEN_BYTE_ARRAY(L),
INT64 TIME(MICROS), field ids on element, key and value fields).

Spark cannot even infer the schema of a Parquet source holding uuid or time columns, so such
sources are read with a schema built from their footer (`arrow_source_schema`); the Iceberg
type of each column travels in the StructField metadata key `icefloe.iceberg.type`, so a table
created from the source gets `uuid`, `fixed[L]` and `time` columns, not binary and long.

Format v3 types: `unknown` travels as Spark's null type (its values are always null).
`timestamp_ns` / `timestamptz_ns` have no Spark type: Spark's timestamps are microseconds,
so carrying the values as Spark timestamps would truncate them, and carrying them as longs
would make every Spark-side timestamp operation (partition transforms, sort orders, filters,
casts) wrong by a factor of 1000 without any error. Jobs that read or write the data of such
a column therefore stop with `TypeNotSupported`, naming the column and the type; jobs that
only touch metadata (snapshot expiry, orphan files) never ask for a Spark type and are
unaffected. `variant`, `geometry` and `geography` columns are refused the same way: icecore
keeps them in metadata but does not process their values (`unsupported_columns`).
`check_spark_readable` refuses all of them at once, before a job plans anything.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from icecore.jobs.errors import JobError
from icecore.spec.schema import Schema
from icecore.spec.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
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
    type_from_json,
)
from icecore.updates.schema_changes import assign_fresh_ids

FIELD_ID_KEY = "parquet.field.id"
ICEBERG_TYPE_KEY = "icefloe.iceberg.type"
MICROS_PER_DAY = 86_400_000_000

_TO_SPARK: dict[type[IcebergType], T.DataType] = {
    BooleanType: T.BooleanType(),
    IntegerType: T.IntegerType(),
    LongType: T.LongType(),
    FloatType: T.FloatType(),
    DoubleType: T.DoubleType(),
    DateType: T.DateType(),
    TimestampType: T.TimestampNTZType(),
    TimestamptzType: T.TimestampType(),
    StringType: T.StringType(),
    BinaryType: T.BinaryType(),
    UUIDType: T.BinaryType(),  # the 16 bytes, big-endian (Iceberg's and Parquet's form)
    FixedType: T.BinaryType(),
    TimeType: T.LongType(),  # microseconds since midnight
    UnknownType: T.NullType(),  # always null
}
# Types whose Parquet form Spark's writer cannot produce: files holding them are written
# with pyarrow (see the module docstring).
_ARROW_ONLY = (UUIDType, FixedType, TimeType, ListType, MapType)


class TypeNotSupported(JobError):
    """Columns whose values the Spark jobs cannot carry (see the module docstring)."""

    def __init__(self, columns: Sequence[tuple[str, IcebergType]]) -> None:
        self.columns = list(columns)
        problems = "; ".join(
            f"column {name or '?'} has type {t}, {_unsupported_reason(t)}" for name, t in columns
        )
        super().__init__(
            f"{problems}. This job would have to read or write those values, so it stops "
            "(jobs that only touch metadata, such as expire_snapshots, still work)"
        )


def _unsupported_reason(t: IcebergType) -> str:
    if isinstance(t, TimestampNanoType | TimestamptzNanoType):
        return (
            "and Spark has no nanosecond timestamps (as microseconds the values would be "
            "truncated, as longs Spark's time functions would get them wrong)"
        )
    return "whose values icecore keeps in metadata but does not process"


def _spark_refuses(t: IcebergType) -> bool:
    """timestamp_ns / timestamptz_ns, variant, geometry, geography (not their containers)."""
    if isinstance(t, StructType | ListType | MapType):
        return False
    return isinstance(t, TimestampNanoType | TimestamptzNanoType) or not t.is_readable


def check_spark_readable(fields: Iterable[NestedField]) -> None:
    """Raise `TypeNotSupported` naming every column of `fields` (at any depth) the Spark jobs
    cannot carry: timestamp_ns / timestamptz_ns, and the variant, geometry and geography
    columns `icecore.spec.schema.unsupported_columns` names. A job calls it with the fields
    it will read or write before it plans anything, so it fails at once, not in a task."""
    bad = [(name, f.field_type) for name, f in _walk_fields(fields) if _spark_refuses(f.field_type)]
    if bad:
        raise TypeNotSupported(bad)


def _walk_fields(
    fields: Iterable[NestedField], prefix: str = ""
) -> Iterator[tuple[str, NestedField]]:
    """Every field at every depth with its dotted name (`col.element`, `col.key`, ...)."""
    for f in fields:
        name = f"{prefix}{f.name}"
        yield name, f
        t = f.field_type
        if isinstance(t, StructType):
            yield from _walk_fields(t.fields, name + ".")
        elif isinstance(t, ListType):
            yield from _walk_fields([t.element_field], name + ".")
        elif isinstance(t, MapType):
            yield from _walk_fields([t.key_field, t.value_field], name + ".")


def spark_type(t: IcebergType, where: str = "") -> T.DataType:
    """The Spark type a column of type `t` travels as.

    For the types Spark writes itself it is the type whose Parquet form is the Iceberg
    type's (timestamptz is Spark's TIMESTAMP, written as INT64 micros adjusted to UTC;
    timestamp is TIMESTAMP_NTZ); uuid, fixed and time travel as binary and long, unknown as
    Spark's null type. timestamp_ns, timestamptz_ns, variant, geometry and geography raise
    `TypeNotSupported` naming the column `where`.
    """
    if _spark_refuses(t):
        raise TypeNotSupported([(where, t)])
    if isinstance(t, DecimalType):
        return T.DecimalType(t.precision, t.scale)
    if isinstance(t, StructType):
        return T.StructType([spark_field(f, where) for f in t.fields])
    if isinstance(t, ListType):
        return T.ArrayType(spark_type(t.element_type, f"{where}.element"), not t.element_required)
    if isinstance(t, MapType):
        return T.MapType(
            spark_type(t.key_type, f"{where}.key"),
            spark_type(t.value_type, f"{where}.value"),
            not t.value_required,
        )
    found = _TO_SPARK.get(type(t))
    if found is None:
        raise JobError(f"column {where or '?'} has type {t}, which the Spark jobs cannot write")
    return found


def _spark_lacks(fields: Sequence[NestedField]) -> bool:
    """Whether some field, at any depth, is a uuid, fixed, time, list or map: types Spark
    cannot infer from a Parquet file or writes differently."""

    def arrow_only(t: IcebergType) -> bool:
        if isinstance(t, _ARROW_ONLY):
            return True
        return isinstance(t, StructType) and any(arrow_only(f.field_type) for f in t.fields)

    return any(arrow_only(f.field_type) for f in fields)


def spark_field(f: NestedField, prefix: str = "") -> T.StructField:
    name = f"{prefix}.{f.name}" if prefix else f.name
    return T.StructField(
        f.name, spark_type(f.field_type, name), not f.required, {FIELD_ID_KEY: f.field_id}
    )


def spark_schema(fields: Sequence[NestedField]) -> T.StructType:
    """A Spark schema of Iceberg fields, every field (nested ones too) carrying its id."""
    return T.StructType([spark_field(f) for f in fields])


def iceberg_type(dt: T.DataType, where: str) -> IcebergType:
    """The Iceberg type a Spark source type becomes in a new table or a merged column.

    Nested fields get placeholder id 0; `fresh_schema` and `UpdateSchema` assign real ones.
    """
    if isinstance(dt, T.BooleanType):
        return BooleanType()
    if isinstance(dt, T.ByteType | T.ShortType | T.IntegerType):
        return IntegerType()
    if isinstance(dt, T.LongType):
        return LongType()
    if isinstance(dt, T.FloatType):
        return FloatType()
    if isinstance(dt, T.DoubleType):
        return DoubleType()
    if isinstance(dt, T.DecimalType):
        return DecimalType(dt.precision, dt.scale)
    if isinstance(dt, T.DateType):
        return DateType()
    if isinstance(dt, T.TimestampNTZType):
        return TimestampType()
    if isinstance(dt, T.TimestampType):
        return TimestamptzType()
    if isinstance(dt, T.StringType | T.VarcharType | T.CharType):
        return StringType()
    if isinstance(dt, T.BinaryType):
        return BinaryType()
    if isinstance(dt, T.StructType):
        return StructType(
            *(NestedField(0, f.name, field_iceberg_type(f, f"{where}.{f.name}")) for f in dt.fields)
        )
    if isinstance(dt, T.ArrayType):
        element = iceberg_type(dt.elementType, f"{where}.element")
        return ListType(0, element, element_required=not dt.containsNull)
    if isinstance(dt, T.MapType):
        key = iceberg_type(dt.keyType, f"{where}.key")
        value = iceberg_type(dt.valueType, f"{where}.value")
        return MapType(0, key, 0, value, value_required=not dt.valueContainsNull)
    if isinstance(dt, T.NullType):
        raise JobError(f"cannot tell the type of source column {where}: every value is null")
    raise JobError(
        f"source column {where} has Spark type {dt.simpleString()}, which the Spark jobs "
        "cannot write to Iceberg"
    )


def field_iceberg_type(f: T.StructField, where: str) -> IcebergType:
    """The Iceberg type of a source field: the one its metadata names (a Parquet source's
    uuid, fixed or time column, see `arrow_source_schema`), else the one its Spark type
    becomes."""
    named = f.metadata.get(ICEBERG_TYPE_KEY) if f.metadata else None
    if named is not None:
        return type_from_json(json.loads(named))
    return iceberg_type(f.dataType, where)


def arrow_iceberg_type(t: pa.DataType, where: str) -> IcebergType:
    """The Iceberg type of a column of a Parquet file as pyarrow reads it (ids 0)."""
    if isinstance(t, pa.BaseExtensionType):
        if t.extension_name == "arrow.uuid":
            return UUIDType()
        t = t.storage_type
    simple: list[tuple[Callable[[pa.DataType], bool], IcebergType]] = [
        (pa.types.is_boolean, BooleanType()),
        (lambda x: pa.types.is_int8(x) or pa.types.is_int16(x) or pa.types.is_int32(x),
         IntegerType()),
        (lambda x: pa.types.is_uint8(x) or pa.types.is_uint16(x), IntegerType()),
        (lambda x: pa.types.is_int64(x) or pa.types.is_uint32(x), LongType()),
        (pa.types.is_float32, FloatType()),
        (pa.types.is_float64, DoubleType()),
        (pa.types.is_date, DateType()),
        (pa.types.is_time, TimeType()),
        (lambda x: pa.types.is_string(x) or pa.types.is_large_string(x), StringType()),
        (lambda x: pa.types.is_binary(x) or pa.types.is_large_binary(x), BinaryType()),
    ]  # fmt: skip
    for test, iceberg in simple:
        if test(t):
            return iceberg
    if pa.types.is_fixed_size_binary(t):
        return FixedType(t.byte_width)
    if pa.types.is_decimal(t):
        return DecimalType(t.precision, t.scale)
    if pa.types.is_timestamp(t):
        return TimestamptzType() if t.tz is not None else TimestampType()
    if pa.types.is_struct(t):
        return StructType(
            *(
                NestedField(0, t.field(i).name, arrow_iceberg_type(t.field(i).type, where))
                for i in range(t.num_fields)
            )
        )
    if pa.types.is_map(t):
        return MapType(
            0,
            arrow_iceberg_type(t.key_type, f"{where}.key"),
            0,
            arrow_iceberg_type(t.item_type, f"{where}.value"),
            value_required=not t.item_field.nullable,
        )
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        element = arrow_iceberg_type(t.value_type, f"{where}.element")
        return ListType(0, element, element_required=not t.value_field.nullable)
    raise JobError(f"source column {where} has Parquet type {t}, which Iceberg has no type for")


def arrow_source_schema(schema: pa.Schema, *, always: bool = False) -> T.StructType | None:
    """The Spark schema to read a Parquet source with when Spark cannot infer it (a uuid or
    time column) or would lose a type (fixed becomes binary): each column as the Spark type
    it travels as, its Iceberg type in the metadata. None when Spark's own inference is right,
    unless `always` (a source read without Spark's reader has no inference to fall back on).
    """
    types = [(f, arrow_iceberg_type(f.type, f.name)) for f in schema]
    if not always and not _spark_lacks([NestedField(0, f.name, t) for f, t in types]):
        return None
    return T.StructType(
        [
            T.StructField(
                f.name,
                _without_ids(spark_type(t, f.name)),
                True,
                {ICEBERG_TYPE_KEY: json.dumps(t.to_json())},
            )
            for f, t in types
        ]
    )


def _without_ids(dt: T.DataType) -> T.DataType:
    """`dt` without field ids: the source's files have none (or others), and Spark reading
    with field ids on would match nothing and return nulls."""
    if isinstance(dt, T.StructType):
        return T.StructType(
            [T.StructField(f.name, _without_ids(f.dataType), f.nullable) for f in dt.fields]
        )
    if isinstance(dt, T.ArrayType):
        return T.ArrayType(_without_ids(dt.elementType), dt.containsNull)
    if isinstance(dt, T.MapType):
        return T.MapType(_without_ids(dt.keyType), _without_ids(dt.valueType), dt.valueContainsNull)
    return dt


def fresh_schema(source: T.StructType, identifier_names: Sequence[str] = ()) -> Schema:
    """A new table's schema from a source schema: every column optional, ids assigned as
    Iceberg does (top-level columns 1..n, then nested fields breadth-first).

    Identifier fields are set from `identifier_names` only when the source declares those
    columns non-nullable: Iceberg requires identifier fields to be required, and a source
    that may hold null keys cannot promise that.
    """
    placeholder = StructType(
        *(
            NestedField(0, f.name, field_iceberg_type(f, f.name), required=False)
            for f in source.fields
        )
    )
    counter = iter(range(1, 1 << 31))
    struct = assign_fresh_ids(placeholder, lambda: next(counter))
    assert isinstance(struct, StructType)
    by_name = {f.name: f for f in source.fields}
    identifiers: tuple[int, ...] = ()
    if identifier_names and all(n in by_name and not by_name[n].nullable for n in identifier_names):
        fields = []
        for f in struct.fields:
            required = f.name in identifier_names
            fields.append(NestedField(f.field_id, f.name, f.field_type, required, f.doc))
        struct = StructType(*fields)
        identifiers = tuple(struct.field_by_name(n).field_id for n in identifier_names)  # type: ignore[union-attr]
    return Schema(struct.fields, 0, identifiers)


# How a source's columns meet the table's ---------------------------------------------------


@dataclass
class ColumnPlan:
    """The outcome of matching a source schema against a table schema.

    `additions` are the (dotted path, type) pairs `--merge-schema` adds, parents first;
    `problems` are the reasons the source cannot be written (type conflicts, missing
    required columns, unknown columns without `--merge-schema`).
    """

    additions: list[tuple[str, IcebergType]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def raise_problems(self, table_name: str) -> None:
        if self.problems:
            raise JobError(f"source does not fit table {table_name}: " + "; ".join(self.problems))


def _match(name: str, candidates: dict[str, T.StructField]) -> T.StructField | None:
    """The source field for a table column: the exact name, else the one case-insensitive
    match (Spark resolves names case-insensitively by default)."""
    if name in candidates:
        return candidates[name]
    folded = [f for n, f in candidates.items() if n.lower() == name.lower()]
    return folded[0] if len(folded) == 1 else None


def _compatible(source: T.DataType, target: IcebergType) -> bool:
    """Whether a source value can be written to the column without loss: the same type, or
    a widening Iceberg itself allows (int to long, float to double, wider decimal)."""
    if isinstance(source, T.NullType):
        return True
    if isinstance(target, LongType):
        return isinstance(source, T.ByteType | T.ShortType | T.IntegerType | T.LongType)
    if isinstance(target, IntegerType):
        return isinstance(source, T.ByteType | T.ShortType | T.IntegerType)
    if isinstance(target, DoubleType):
        return isinstance(source, T.FloatType | T.DoubleType)
    if isinstance(target, DecimalType):
        return (
            isinstance(source, T.DecimalType)
            and source.scale == target.scale
            and source.precision <= target.precision
        )
    if isinstance(target, StructType):
        return isinstance(source, T.StructType)
    if isinstance(target, UUIDType):
        return isinstance(source, T.BinaryType | T.StringType)
    if isinstance(target, FixedType):
        return isinstance(source, T.BinaryType)
    if isinstance(target, TimeType):
        return isinstance(source, T.LongType | T.StringType)
    if isinstance(target, ListType):
        return isinstance(source, T.ArrayType) and _compatible(
            source.elementType, target.element_type
        )
    if isinstance(target, MapType):
        return (
            isinstance(source, T.MapType)
            and _compatible(source.keyType, target.key_type)
            and _compatible(source.valueType, target.value_type)
        )
    try:
        return type(iceberg_type(source, "")) is type(target)
    except JobError:
        return False


def plan_columns(
    source: T.StructType, table: Schema, *, merge_schema: bool, ignore: Sequence[str] = ()
) -> ColumnPlan:
    """Match `source` against `table` (columns in `ignore`, such as the op column, aside)."""
    plan = ColumnPlan()
    fields = [f for f in source.fields if f.name not in ignore]
    _plan_struct(plan, fields, table.fields, "", merge_schema)
    return plan


def _plan_struct(
    plan: ColumnPlan,
    source_fields: Sequence[T.StructField],
    table_fields: Sequence[NestedField],
    prefix: str,
    merge_schema: bool,
) -> None:
    by_name = {f.name: f for f in source_fields}
    used: set[str] = set()
    for column in table_fields:
        path = f"{prefix}{column.name}"
        match = _match(column.name, by_name)
        if match is None:
            if column.required:
                plan.problems.append(f"required column {path!r} is missing from the source")
            continue
        used.add(match.name)
        if not _compatible(match.dataType, column.field_type):
            plan.problems.append(
                f"column {path!r} is {column.field_type} in the table but "
                f"{match.dataType.simpleString()} in the source"
            )
        elif isinstance(column.field_type, StructType) and isinstance(match.dataType, T.StructType):
            _plan_struct(
                plan, match.dataType.fields, column.field_type.fields, f"{path}.", merge_schema
            )
    for extra in source_fields:
        if extra.name in used:
            continue
        path = f"{prefix}{extra.name}"
        if not merge_schema:
            plan.problems.append(
                f"source column {path!r} is not in the table (--merge-schema adds it)"
            )
            continue
        try:
            plan.additions.append((path, field_iceberg_type(extra, path)))
        except JobError as exc:
            plan.problems.append(str(exc))


def conform(source: T.StructType, table_fields: Sequence[NestedField]) -> list[Column]:
    """Columns of the source cast and ordered as the table's fields, with field ids.

    Table columns the source lacks are null; struct columns are rebuilt field by field so
    every nested field gets its id, and source fields unknown to the table are left out.
    """
    by_name = {f.name: f for f in source.fields}
    columns = []
    for f in table_fields:
        match = _match(f.name, by_name)
        column = F.col(quote_name(match.name)) if match is not None else F.lit(None)
        columns.append(_conform_field(f, match, column))
    return columns


def _conform_field(target: NestedField, source: T.StructField | None, column: Column) -> Column:
    metadata = {FIELD_ID_KEY: target.field_id}
    if source is None:
        value = F.lit(None).cast(spark_type(target.field_type, target.name))
    else:
        value = _conform_value(target.field_type, source.dataType, column, target.name)
    return value.alias(target.name, metadata=metadata)


def _conform_value(target: IcebergType, source: T.DataType, column: Column, where: str) -> Column:
    """`column` (of Spark type `source`) as the Spark form of Iceberg type `target`: structs
    rebuilt field by field, list elements and map entries converted one by one, uuid, fixed
    and time checked or parsed (a value that cannot be one fails the job, naming the column),
    anything else cast."""
    if isinstance(target, StructType) and isinstance(source, T.StructType):
        children = {f.name: f for f in source.fields}
        parts = [
            _conform_field(child, match, column.getField(match.name) if match else F.lit(None))
            for child in target.fields
            for match in (_match(child.name, children),)
        ]
        return F.when(column.isNull(), F.lit(None)).otherwise(F.struct(*parts))
    if isinstance(target, ListType) and isinstance(source, T.ArrayType):
        element, element_source = target.element_type, source.elementType
        return F.transform(
            column, lambda x: _conform_value(element, element_source, x, f"{where}.element")
        )
    if isinstance(target, MapType) and isinstance(source, T.MapType):
        key_type, value_type = target.key_type, target.value_type
        keyed = F.transform_keys(
            column, lambda k, _: _conform_value(key_type, source.keyType, k, f"{where}.key")
        )
        return F.transform_values(
            keyed, lambda _, v: _conform_value(value_type, source.valueType, v, f"{where}.value")
        )
    if isinstance(target, UUIDType):
        return _uuid_value(source, column, where)
    if isinstance(target, FixedType):
        return checked(
            column,
            column.cast("binary"),
            F.octet_length(column) == target.length,
            f"column {where} is {target}: a value is not {target.length} bytes long",
        )
    if isinstance(target, TimeType):
        return _time_value(source, column, where)
    return column.cast(spark_type(target, where))


_INVALID = "icefloe invalid value: "
_INVALID_MESSAGE = re.compile(re.escape(_INVALID) + r"(.*?)(?:\s+SQLSTATE|\n|$)")


def checked(source: Column, value: Column, valid: Column, message: str | Column) -> Column:
    """`value` where `valid`, null where the `source` value is null, and a task failure
    with `message` (text, or a column when it quotes the value) elsewhere."""
    text = F.lit(message) if isinstance(message, str) else message
    return (
        F.when(source.isNull(), F.lit(None))
        .when(valid, value)
        .otherwise(F.raise_error(F.concat(F.lit(_INVALID), text)))
    )


def invalid_value(error: BaseException) -> str | None:
    """The message of a `checked` failure inside a Spark error, if it is one: what the
    job reports instead of a JVM stack trace."""
    found = _INVALID_MESSAGE.search(str(error))
    return found.group(1) if found else None


_UUID_TEXT = "^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"
_TIME_TEXT = r"^(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?$"


def _uuid_value(source: T.DataType, column: Column, where: str) -> Column:
    """16 bytes from a binary source, or from the text form (hyphens optional, any case)."""
    if isinstance(source, T.StringType):
        text = F.trim(column)
        return checked(
            column,
            F.unhex(F.regexp_replace(text, "-", "")),
            text.rlike(_UUID_TEXT),
            f"column {where} is uuid: a value is not a UUID (8-4-4-4-12 hex digits)",
        )
    return checked(
        column,
        column.cast("binary"),
        F.octet_length(column) == 16,
        f"column {where} is uuid: a binary value is not 16 bytes long",
    )


def _time_value(source: T.DataType, column: Column, where: str) -> Column:
    """Microseconds since midnight from a long, or from `HH:MM:SS[.ffffff]` text."""
    if isinstance(source, T.StringType):
        text = F.trim(column)

        def part(i: int) -> Column:
            return F.regexp_extract(text, _TIME_TEXT, i).cast("long")

        fraction = F.rpad(F.regexp_extract(text, _TIME_TEXT, 4), 6, "0").cast("long")
        micros = ((part(1) * 60 + part(2)) * 60 + part(3)) * 1_000_000 + fraction
        valid = text.rlike(_TIME_TEXT) & (part(1) < 24) & (part(2) < 60) & (part(3) < 60)
        message = f"column {where} is time: a value is not a time of day HH:MM:SS[.ffffff]"
        return checked(column, micros, valid, message)
    value = column.cast("long")
    return checked(
        column,
        value,
        (value >= 0) & (value < MICROS_PER_DAY),
        f"column {where} is time: a value is not between 0 and 86399999999 microseconds",
    )


def quote_name(name: str) -> str:
    """One column name as Spark SQL text (back-quoted: it may hold dots or spaces)."""
    return "`" + name.replace("`", "``") + "`"


def quoted(path: str) -> str:
    """A dotted column path (`a.b` is field b of struct a) as Spark SQL text."""
    return ".".join(quote_name(part) for part in path.split("."))
