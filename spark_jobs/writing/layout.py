"""The partition columns a write's rows carry, computed by Spark.

Iceberg keeps source columns in the files and records partition tuples in manifests, so the
rows to write get extra columns holding the partition values (named after the partition
fields, `ts_day`, `id_bucket_16`, ..., or `<name>_partition` when that name is a table
column, as identity fields are). The writing task keeps each combination of their values in
files of its own, and reads the values back from Spark's string cast of these columns
(`icecore.data.partition_texts`, which also says in which forms they are rendered so that
they cast back exactly) for the tuple it reports and the partition path its files go under.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from icecore.spec.partitioning import PartitionField, PartitionSpec
from icecore.spec.schema import Schema
from icecore.spec.transforms import IdentityTransform
from icecore.spec.types import (
    BinaryType,
    FixedType,
    IcebergType,
    TimestampType,
    TimestamptzType,
    UUIDType,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


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
