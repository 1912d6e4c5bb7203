"""The partition columns a write's rows carry, and how their values become partition tuples.

Iceberg keeps source columns in the files and records partition tuples in manifests, so the
rows to write get extra columns holding the partition values (named after the partition
fields, `ts_day`, `id_bucket_16`, ..., or `<name>_partition` when that name is a table
column, as identity fields are). The writing task keeps each combination of their values in
files of its own, and reads the values back (`partition_values`) for the tuple it reports
and the partition path its files go under.

The values travel as Spark's string cast of these columns, so they are rendered in forms that
cast back exactly: numbers, booleans and dates as Spark renders them; timestamps (and times)
as microseconds; binary, fixed and uuid as base64; strings as they are. Null stays null.
"""

from __future__ import annotations

import base64
import re
import struct
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from icecore.spec.conversions import decimal_to_unscaled, unscaled_to_decimal
from icecore.spec.partitioning import PartitionField, PartitionSpec
from icecore.spec.schema import Schema
from icecore.spec.transforms import IdentityTransform
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
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)
from spark_jobs.common.errors import JobError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

_DATE = re.compile(r"(-?\d+)-(\d{2})-(\d{2})")


@dataclass(frozen=True)
class PartitionColumn:
    """One partitioning field as the writer sees it."""

    name: str
    field: PartitionField
    result_type: IcebergType
    value: Column


class PartitionLayout:
    """The partition columns of `spec` for rows of `schema` (void fields have none: their
    value is always null)."""

    def __init__(self, spec: PartitionSpec, schema: Schema, reserved: Iterable[str] = ()) -> None:
        self.spec = spec
        self.schema = schema
        from spark_jobs.schema import quoted  # noqa: PLC0415 (Spark work only)

        taken = {f.name.lower() for f in schema.fields} | {r.lower() for r in reserved}
        result_types = spec.partition_type(schema).fields
        self.columns: list[PartitionColumn] = []
        for f, result in zip(spec.fields, result_types, strict=True):
            if f.transform.is_void:
                continue
            name = f.name
            while name.lower() in taken:
                name = f"{name}_partition"
            taken.add(name.lower())
            source = schema.find_field(f.source_id)
            source_sql = quoted(schema.column_name(f.source_id))
            value = _path_value(f, source_sql, source.field_type, result.field_type)
            self.columns.append(PartitionColumn(name, f, result.field_type, value))

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def is_partitioned(self) -> bool:
        return bool(self.columns)

    def source_paths(self) -> set[str]:
        """Dotted names of the columns the partition values are computed from."""
        return {self.schema.column_name(c.field.source_id) for c in self.columns}

    def with_partition_columns(self, df: DataFrame) -> DataFrame:
        return df.select("*", *(c.value.alias(c.name) for c in self.columns))


def partition_values(
    spec: PartitionSpec, schema: Schema, texts: Sequence[str | None]
) -> tuple[Any, ...]:
    """The partition tuple whose partition columns, one per non-void field of `spec` in
    order, Spark renders as `texts` (the rendering, see the module doc; None is null). Needs
    no Spark: the writing tasks read their rows' values back to name Java's partition path."""
    fields = [
        (f, result.field_type)
        for f, result in zip(spec.fields, spec.partition_type(schema).fields, strict=True)
        if not f.transform.is_void
    ]
    if len(texts) != len(fields):
        raise JobError(f"{list(texts)}: expected {len(fields)} partition values")
    parsed = {
        field.field_id: None if text is None else _parser(result)(text)
        for (field, result), text in zip(fields, texts, strict=True)
    }
    return tuple(parsed.get(f.field_id) for f in spec.fields)


def _path_value(
    field: PartitionField, source_sql: str, source_type: IcebergType, result: IcebergType
) -> Column:
    """The Spark column whose string cast encodes the partition value exactly."""
    from pyspark.sql import functions as F  # noqa: PLC0415 (Spark work only)

    from spark_jobs.writing.transforms import micros_sql, transform_column  # noqa: PLC0415 (Spark work only)

    if isinstance(field.transform, IdentityTransform) and isinstance(
        source_type, TimestampType | TimestamptzType
    ):
        return F.expr(micros_sql(source_sql, source_type))
    value = transform_column(field.transform, source_sql, source_type)
    if isinstance(result, BinaryType | FixedType | UUIDType):
        return F.base64(value)
    return value


def _parser(result: IcebergType) -> Callable[[str], Any]:
    if isinstance(result, IntegerType | LongType | TimeType | TimestampType | TimestamptzType):
        return int
    if isinstance(result, BooleanType):
        return lambda text: text == "true"
    if isinstance(result, DoubleType):
        return float
    if isinstance(result, FloatType):
        return lambda text: struct.unpack("<f", struct.pack("<f", float(text)))[0]
    if isinstance(result, DateType):
        return parse_date
    if isinstance(result, DecimalType):
        return lambda text: unscaled_to_decimal(result, decimal_to_unscaled(result, Decimal(text)))
    if isinstance(result, StringType):
        return str
    if isinstance(result, BinaryType | FixedType):
        return base64.b64decode
    if isinstance(result, UUIDType):
        return lambda text: uuid.UUID(bytes=base64.b64decode(text))
    raise JobError(f"partition values of type {result} are not supported by the Spark jobs")


def parse_date(text: str) -> int:
    """Days since 1970-01-01 of `yyyy-MM-dd` (any year: Howard Hinnant's civil algorithm)."""
    match = _DATE.fullmatch(text)
    if match is None:
        raise JobError(f"cannot read partition date {text!r}")
    year, month, day = (int(g) for g in match.groups())
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146_097 + doe - 719_468
