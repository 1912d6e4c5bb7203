"""Iceberg's partition transforms as Spark SQL expressions.

A row's partition decides which file it goes to, and the partition tuple in the manifest
tells readers which files to skip: both must be exactly what icecore's (and Java's)
transforms give, or filtered reads miss rows. Each transform here is written against the
spec's definition and tested value for value against `icecore.spec.transforms`:

- time transforms work on Iceberg's integers (days since the epoch, microseconds), computed
  without Spark's session time zone: `timestamptz` through `unix_micros`, `timestamp`
  (Spark's TIMESTAMP_NTZ) from its calendar fields, which carry no zone;
- divisions floor (`x - pmod(x, d)` first), so 1969 goes to day -1 and hour -1 as the spec says;
- truncate counts code points for strings and bytes for binary, as Spark's `substring` does;
- bucket is Murmur3 with seed 0 over the spec's byte forms, vectorized in
  `icecore.data.bucket_hash` and called through pandas UDFs: Spark has no such hash.

The SQL text refers to columns by back-quoted name, so it can be used on any DataFrame that
holds the source columns (the data being written, or files read back).
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from icecore.data.bucket_hash import bucket_decimals, murmur3_binary, murmur3_longs, to_bucket
from icecore.jobs.errors import JobError
from icecore.spec.schema import Schema
from icecore.spec.sorting import NullOrder, SortDirection
from icecore.spec.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    TruncateTransform,
    VoidTransform,
    YearTransform,
)
from icecore.spec.types import (
    BinaryType,
    DateType,
    DecimalType,
    FixedType,
    IcebergType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)
from spark_jobs.schema import quoted, spark_type

MICROS_PER_DAY = 86_400_000_000
MICROS_PER_HOUR = 3_600_000_000


def floor_div(sql: str, divisor: int) -> str:
    """Integer division rounding down, exact for every long (no detour through doubles)."""
    return f"((({sql}) - pmod(({sql}), {divisor})) div {divisor})"


def micros_sql(sql: str, source_type: IcebergType) -> str:
    """Microseconds since the epoch of a timestamp column, independent of the session zone."""
    if isinstance(source_type, TimestamptzType):
        return f"unix_micros({sql})"
    if isinstance(source_type, TimestampType):
        # TIMESTAMP_NTZ is a wall-clock reading: its calendar fields are zone-free.
        return (
            f"(cast(unix_date(cast({sql} as date)) as bigint) * {MICROS_PER_DAY}"
            f" + cast(hour({sql}) as bigint) * {MICROS_PER_HOUR}"
            f" + cast(minute({sql}) as bigint) * 60000000"
            f" + cast(date_part('SECOND', {sql}) * 1000000 as bigint))"
        )
    raise JobError(f"type {source_type} is not a timestamp")


def days_sql(sql: str, source_type: IcebergType) -> str:
    if isinstance(source_type, DateType):
        return f"unix_date({sql})"
    return floor_div(micros_sql(sql, source_type), MICROS_PER_DAY)


def transform_sql(transform: Transform, sql: str, source_type: IcebergType) -> str | None:
    """Spark SQL for the partition value of the column `sql`; None for bucket (a UDF).

    Values are Spark's form of the Iceberg partition value: `day` gives a DATE (Iceberg's
    result type for it), every other time transform an INT.
    """
    if isinstance(transform, IdentityTransform):
        return sql
    if isinstance(transform, VoidTransform):
        return f"cast(null as {spark_type(source_type).simpleString()})"
    if isinstance(transform, BucketTransform):
        return None
    if isinstance(transform, TruncateTransform):
        return _truncate_sql(transform.width, sql, source_type)
    if isinstance(transform, DayTransform):
        return f"date_from_unix_date({days_sql(sql, source_type)})"
    if isinstance(transform, YearTransform | MonthTransform):
        date = f"date_from_unix_date({days_sql(sql, source_type)})"
        if isinstance(transform, YearTransform):
            return f"(year({date}) - 1970)"
        return f"((year({date}) - 1970) * 12 + month({date}) - 1)"
    if isinstance(transform, HourTransform):
        return f"cast({floor_div(micros_sql(sql, source_type), MICROS_PER_HOUR)} as int)"
    raise JobError(f"transform {transform} is not supported by the Spark jobs")


def _truncate_sql(width: int, sql: str, source_type: IcebergType) -> str:
    if isinstance(source_type, IntegerType | LongType):
        return f"({sql} - pmod({sql}, {width}))"
    if isinstance(source_type, DecimalType):
        # The width counts units of the last digit: truncate[50] of 10.65 is 10.50.
        step = Decimal(width).scaleb(-source_type.scale)
        p, s = source_type.precision, source_type.scale
        step_sql = f"cast('{step}' as decimal(38, {s}))"
        return f"cast({sql} - pmod({sql}, {step_sql}) as decimal({p}, {s}))"
    if isinstance(source_type, StringType | BinaryType):
        return f"substring({sql}, 1, {width})"
    raise JobError(f"truncate[{width}] cannot be applied to type {source_type}")


def transform_column(transform: Transform, sql: str, source_type: IcebergType) -> Column:
    """The partition value of column `sql` as a Spark column."""
    text = transform_sql(transform, sql, source_type)
    if text is not None:
        return F.expr(text)
    assert isinstance(transform, BucketTransform)
    return bucket_column(transform.num_buckets, sql, source_type)


# Bucket ----------------------------------------------------------------------------------------


def _bucket_longs(values: pd.Series, buckets: pd.Series) -> pd.Series:
    count = int(buckets.iloc[0]) if len(buckets) else 1
    hashes = murmur3_longs(values.to_numpy(dtype=np.int64))
    return pd.Series(to_bucket(hashes, count), dtype="int32")


def _bucket_strings(values: pd.Series, buckets: pd.Series) -> pd.Series:
    count = int(buckets.iloc[0]) if len(buckets) else 1
    array = pa.array(values.astype(object).tolist(), type=pa.large_string())
    return pd.Series(to_bucket(murmur3_binary(array), count), dtype="int32")


def _bucket_binary(values: pd.Series, buckets: pd.Series) -> pd.Series:
    count = int(buckets.iloc[0]) if len(buckets) else 1
    array = pa.array([bytes(v) for v in values], type=pa.large_binary())
    return pd.Series(to_bucket(murmur3_binary(array), count), dtype="int32")


def _bucket_decimal_udf(decimal_type: DecimalType):  # type: ignore[no-untyped-def]
    def bucket(values: pd.Series, buckets: pd.Series) -> pd.Series:
        count = int(buckets.iloc[0]) if len(buckets) else 1
        return pd.Series(bucket_decimals(values, decimal_type, count), dtype="int32")

    return bucket


def bucket_column(num_buckets: int, sql: str, source_type: IcebergType) -> Column:
    """bucket[N] of a column; null stays null (the UDF sees a placeholder instead, so that
    pandas never turns a nullable long column into floats)."""
    if isinstance(source_type, IntegerType | LongType):
        value, placeholder, udf = f"cast({sql} as bigint)", "0L", _bucket_longs
    elif isinstance(source_type, DateType):
        value, placeholder, udf = f"cast(unix_date({sql}) as bigint)", "0L", _bucket_longs
    elif isinstance(source_type, TimestampType | TimestamptzType):
        value, placeholder, udf = micros_sql(sql, source_type), "0L", _bucket_longs
    elif isinstance(source_type, TimeType):  # travels as micros since midnight already
        value, placeholder, udf = f"cast({sql} as bigint)", "0L", _bucket_longs
    elif isinstance(source_type, StringType):
        value, placeholder, udf = sql, "''", _bucket_strings
    elif isinstance(source_type, BinaryType | FixedType | UUIDType):
        # uuid travels as its 16 big-endian bytes, the form the spec hashes.
        value, placeholder, udf = sql, "X''", _bucket_binary
    elif isinstance(source_type, DecimalType):
        placeholder = f"cast(0 as decimal({source_type.precision}, {source_type.scale}))"
        value, udf = sql, _bucket_decimal_udf(source_type)
    else:
        raise JobError(f"bucket[{num_buckets}] of type {source_type} is not supported")
    # Made per call, not at import: a pandas UDF is a classic or a Spark Connect one
    # depending on the session the process has when it is made.
    bucket = F.pandas_udf(udf, T.IntegerType())  # type: ignore[call-overload]
    hashed = bucket(F.expr(f"coalesce({value}, {placeholder})"), F.lit(num_buckets))
    return F.when(F.expr(f"({sql}) is null"), F.lit(None).cast("int")).otherwise(hashed)


def sort_columns(schema: Schema, fields: Sequence[Any]) -> list[Column]:
    """Spark sort columns for Iceberg sort fields (direction and null order as declared)."""
    columns = []
    for f in fields:
        source = schema.find_field(f.source_id)
        column = transform_column(
            f.transform, quoted(schema.column_name(f.source_id)), source.field_type
        )
        ascending = f.direction == SortDirection.ASC
        nulls_first = f.null_order == NullOrder.NULLS_FIRST
        if ascending:
            column = column.asc_nulls_first() if nulls_first else column.asc_nulls_last()
        else:
            column = column.desc_nulls_first() if nulls_first else column.desc_nulls_last()
        columns.append(column)
    return columns
