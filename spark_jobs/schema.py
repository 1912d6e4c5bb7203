"""Iceberg schemas as Spark schemas and back, and how a source's columns meet a table's.

Data files are read by Parquet field id, never by name (a renamed column keeps its id, a
dropped and re-added one gets a new id), so every Spark field we write carries its Iceberg id
in the StructField metadata key `parquet.field.id`, which Spark writes into the Parquet schema
when `spark.sql.parquet.fieldId.write.enabled` is on (Spark 3.3+).

Spark's Parquet writer fixes the physical types, so some Iceberg types cannot be written by
it: `uuid` (needs FIXED_LEN_BYTE_ARRAY(16)), `fixed`, `time`, and lists and maps (Spark gives
their element, key and value fields no field ids). Tables with such columns are refused with
a clear error rather than written with files other engines would misread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from icecore.schema import Schema
from icecore.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)
from icecore.updates.schema_changes import assign_fresh_ids
from spark_jobs.common.errors import JobError

FIELD_ID_KEY = "parquet.field.id"

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
}


def spark_type(t: IcebergType, where: str = "") -> T.DataType:
    """The Spark type whose Parquet form is the Iceberg type's (timestamptz is Spark's
    TIMESTAMP, written as INT64 micros adjusted to UTC; timestamp is TIMESTAMP_NTZ)."""
    if isinstance(t, DecimalType):
        return T.DecimalType(t.precision, t.scale)
    if isinstance(t, StructType):
        return T.StructType([spark_field(f, where) for f in t.fields])
    found = _TO_SPARK.get(type(t))
    if found is None:
        raise JobError(
            f"column {where or '?'} has type {t}, which Spark's Parquet writer cannot write "
            "with Iceberg's physical types and field ids (uuid, fixed, time, list and map "
            "columns are not supported by the Spark jobs)"
        )
    return found


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
            *(
                NestedField(0, f.name, iceberg_type(f.dataType, f"{where}.{f.name}"))
                for f in dt.fields
            )
        )
    if isinstance(dt, T.NullType):
        raise JobError(f"cannot tell the type of source column {where}: every value is null")
    raise JobError(
        f"source column {where} has Spark type {dt.simpleString()}, which the Spark jobs "
        "cannot write to Iceberg (lists, maps and other types are not supported)"
    )


def fresh_schema(source: T.StructType, identifier_names: Sequence[str] = ()) -> Schema:
    """A new table's schema from a source schema: every column optional, ids assigned as
    Iceberg does (top-level columns 1..n, then nested fields breadth-first).

    Identifier fields are set from `identifier_names` only when the source declares those
    columns non-nullable: Iceberg requires identifier fields to be required, and a source
    that may hold null keys cannot promise that.
    """
    placeholder = StructType(
        *(
            NestedField(0, f.name, iceberg_type(f.dataType, f.name), required=False)
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
            plan.additions.append((path, iceberg_type(extra.dataType, path)))
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
    elif isinstance(target.field_type, StructType) and isinstance(source.dataType, T.StructType):
        children = {f.name: f for f in source.dataType.fields}
        parts = [
            _conform_field(child, match, column.getField(match.name) if match else F.lit(None))
            for child in target.field_type.fields
            for match in (_match(child.name, children),)
        ]
        value = F.when(column.isNull(), F.lit(None)).otherwise(F.struct(*parts))
    else:
        value = column.cast(spark_type(target.field_type, target.name))
    return value.alias(target.name, metadata=metadata)


def quote_name(name: str) -> str:
    """One column name as Spark SQL text (back-quoted: it may hold dots or spaces)."""
    return "`" + name.replace("`", "``") + "`"


def quoted(path: str) -> str:
    """A dotted column path (`a.b` is field b of struct a) as Spark SQL text."""
    return ".".join(quote_name(part) for part in path.split("."))
