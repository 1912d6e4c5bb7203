"""Partition values as text: the forms a writing task gets them in, and the tuples they are.

An engine computes a row's partition values as columns of the rows it hands a writing task
(Spark: `spark_jobs.writing.layout.PartitionLayout`), and the task reads them back as the
engine's string cast of those columns, to name the partition tuple it reports and the
partition path its files go under. So the columns are rendered in forms that cast back
exactly: numbers and booleans as the engine renders them, dates as ISO-8601 (`yyyy-MM-dd`,
any year), timestamps and times as microseconds, binary, fixed and uuid as base64, strings
as they are. Null stays null.
"""

from __future__ import annotations

import base64
import struct
import uuid
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from icecore.errors import ValidationError
from icecore.spec.conversions import decimal_to_unscaled, unscaled_to_decimal, value_from_json
from icecore.spec.partitioning import PartitionSpec
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
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)


def partition_values(
    spec: PartitionSpec, schema: Schema, texts: Sequence[str | None]
) -> tuple[Any, ...]:
    """The partition tuple whose partition columns, one per non-void field of `spec` in
    order, are rendered as `texts` (see the module doc; None is null)."""
    fields = [
        (f, result.field_type)
        for f, result in zip(spec.fields, spec.partition_type(schema).fields, strict=True)
        if not f.transform.is_void
    ]
    if len(texts) != len(fields):
        raise ValidationError(f"{list(texts)}: expected {len(fields)} partition values")
    parsed = {
        field.field_id: None if text is None else _parser(result)(text)
        for (field, result), text in zip(fields, texts, strict=True)
    }
    return tuple(parsed.get(f.field_id) for f in spec.fields)


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
        return lambda text: value_from_json(result, text)
    if isinstance(result, DecimalType):
        return lambda text: unscaled_to_decimal(result, decimal_to_unscaled(result, Decimal(text)))
    if isinstance(result, StringType):
        return str
    if isinstance(result, BinaryType | FixedType):
        return base64.b64decode
    if isinstance(result, UUIDType):
        return lambda text: uuid.UUID(bytes=base64.b64decode(text))
    raise ValidationError(f"partition values of type {result} cannot be written")
