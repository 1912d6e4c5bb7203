"""Partition columns read back from their text forms (`icecore.data.partition_texts`): the
tuple a writing task reports is exactly the values the engine computed. The engine's side
(Spark rendering every type) is in tests/spark/test_spark_transforms.py."""

from __future__ import annotations

import base64
import datetime as dt
import uuid
from decimal import Decimal

import pytest

from icecore.data.partition_texts import partition_values
from icecore.errors import ValidationError
from icecore.spec.partitioning import UNPARTITIONED, PartitionSpec, PartitionSpecUpdate
from icecore.spec.schema import Schema
from icecore.spec.types import (
    BinaryType,
    DateType,
    DecimalType,
    FloatType,
    LongType,
    NestedField,
    StringType,
    TimestamptzType,
    UUIDType,
)

SCHEMA = Schema(
    (
        NestedField(1, "d", DateType()),
        NestedField(2, "ts", TimestamptzType()),
        NestedField(3, "s", StringType()),
        NestedField(4, "b", BinaryType()),
        NestedField(5, "u", UUIDType()),
        NestedField(6, "dec", DecimalType(9, 2)),
        NestedField(7, "f", FloatType()),
        NestedField(8, "l", LongType()),
    )
)


def _spec(*fields: tuple[str, str]) -> PartitionSpec:
    update = PartitionSpecUpdate(UNPARTITIONED, SCHEMA, 2)
    for name, transform in fields:
        update.add_field(name, transform)
    return update.apply(0)


def test_dates_parse_across_eras() -> None:
    spec = _spec(("d", "identity"))
    for days in (-719_162, -1, 0, 1, 19_723, 2_932_896):
        date = dt.date(1970, 1, 1) + dt.timedelta(days=days)
        assert partition_values(spec, SCHEMA, [date.isoformat()]) == (days,)


def test_every_form_reads_back_to_its_value() -> None:
    spec = _spec(
        ("ts", "identity"), ("s", "identity"), ("b", "identity"), ("u", "identity"),
        ("dec", "identity"), ("f", "identity"), ("l", "void"), ("l", "bucket[4]"),
    )  # fmt: skip
    key = uuid.UUID("12345678-1234-5678-1234-567812345678")
    texts = [
        "-1",
        "a b/c",
        base64.b64encode(b"\x00\xff").decode(),
        base64.b64encode(key.bytes).decode(),
        "10.65",
        "0.1",
        None,
    ]
    # The void field has no column: it reads null without a text.
    assert partition_values(spec, SCHEMA, texts) == (
        -1, "a b/c", b"\x00\xff", key, Decimal("10.65"), pytest.approx(0.1, rel=1e-7), None,
        None,
    )  # fmt: skip


def test_a_count_or_a_date_that_does_not_fit_is_refused() -> None:
    spec = _spec(("d", "identity"))
    with pytest.raises(ValidationError, match="expected 1 partition values"):
        partition_values(spec, SCHEMA, ["2024-01-01", "x"])
    with pytest.raises(ValidationError, match="not a calendar date"):
        partition_values(spec, SCHEMA, ["2024-02-30"])
