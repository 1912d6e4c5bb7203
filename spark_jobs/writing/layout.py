"""How a partition spec becomes Spark's directory layout, and directories become partitions.

Spark's writer puts each partition in a `name=value` directory and leaves the partition
columns out of the files. Iceberg keeps source columns in the files and records partition
tuples in manifests, so the writer is given extra columns holding the partition values
(named after the partition fields, `ts_day`, `id_bucket_16`, ..., or `<name>_partition` when
that name is a table column, as identity fields are), and the tuple of each file is read
back from its directory.

That round trip must be exact, so values are rendered in forms Spark writes unambiguously:
numbers, booleans and dates as Spark renders them; timestamps (and times) as microseconds;
binary, fixed and uuid as base64. Spark writes an empty string as the null directory
`__HIVE_DEFAULT_PARTITION__`, so strings that are empty, equal to that name, or start with the
marker U+0001 get the marker prefixed (Spark escapes it as `%01`); everything else keeps its
plain, readable value.
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
from urllib.parse import unquote

from icecore.spec.conversions import decimal_to_unscaled, unscaled_to_decimal
from icecore.spec.metadata import TableMetadata
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

DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
MARK = "\x01"
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

    def partition_paths(self, metadata: TableMetadata) -> dict[str, str]:
        """The table's partition path (`PartitionSpec.partition_path`) of each directory
        known before the write, for hashed locations; none here: the tasks render the path of
        the directories they make (`partition_values`)."""
        return {}

    def partition_of(self, relative_path: str) -> tuple[Any, ...]:
        """The partition tuple of a file from its directories and name (as its writing task
        reported them)."""
        return partition_values(self.spec, self.schema, relative_path.split("/")[:-1])


def partition_values(
    spec: PartitionSpec, schema: Schema, directories: Sequence[str]
) -> tuple[Any, ...]:
    """The partition tuple that `name=value` directories, one per non-void field of `spec` in
    order, render (the writer's rendering, see the module doc). Needs no Spark: the writing
    tasks read their own directories back to name Java's partition path."""
    fields = [
        (f, result.field_type)
        for f, result in zip(spec.fields, spec.partition_type(schema).fields, strict=True)
        if not f.transform.is_void
    ]
    where = "/".join(directories)
    if len(directories) != len(fields):
        raise JobError(f"{where}: expected {len(fields)} partition directories")
    parsed = {}
    for (field, result), directory in zip(fields, directories, strict=True):
        _, sep, raw = directory.partition("=")
        if not sep:
            raise JobError(f"{where}: {directory!r} is not a name=value directory")
        text = unquote(raw)
        parsed[field.field_id] = None if text == DEFAULT_PARTITION else _parser(result)(text)
    return tuple(parsed.get(f.field_id) for f in spec.fields)


def _path_value(
    field: PartitionField, source_sql: str, source_type: IcebergType, result: IcebergType
) -> Column:
    """The Spark column whose directory rendering encodes the partition value exactly."""
    from pyspark.sql import functions as F  # noqa: PLC0415 (Spark work only)

    from spark_jobs.writing.transforms import micros_sql, transform_column  # noqa: PLC0415 (Spark work only)

    if isinstance(field.transform, IdentityTransform) and isinstance(
        source_type, TimestampType | TimestamptzType
    ):
        return F.expr(micros_sql(source_sql, source_type))
    value = transform_column(field.transform, source_sql, source_type)
    if isinstance(result, BinaryType | FixedType | UUIDType):
        return _marked(F.base64(value))
    if isinstance(result, StringType):
        return _marked(value)
    return value


def _marked(text: Column) -> Column:
    from pyspark.sql import functions as F  # noqa: PLC0415 (Spark work only)

    ambiguous = (text == F.lit("")) | (text == F.lit(DEFAULT_PARTITION)) | text.startswith(MARK)
    return F.when(ambiguous, F.concat(F.lit(MARK), text)).otherwise(text)


def _unmark(text: str) -> str:
    return text[1:] if text.startswith(MARK) else text


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
        return _unmark
    if isinstance(result, BinaryType | FixedType):
        return lambda text: base64.b64decode(_unmark(text))
    if isinstance(result, UUIDType):
        return lambda text: uuid.UUID(bytes=base64.b64decode(_unmark(text)))
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
