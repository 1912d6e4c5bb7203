"""Iceberg schemas as Arrow schemas: what pyarrow then writes is Iceberg's Parquet form."""

from __future__ import annotations

import uuid
from datetime import time
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from icecore.data.arrow_schema import FIELD_ID_KEY, arrow_schema, arrow_type
from icecore.errors import ValidationError
from icecore.spec.types import (
    DecimalType,
    FixedType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimeType,
    UUIDType,
)

FIELDS = [
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "u", UUIDType()),
    NestedField(3, "fx", FixedType(3)),
    NestedField(4, "t", TimeType()),
    NestedField(5, "d", DecimalType(9, 2)),
    NestedField(
        6,
        "s",
        StructType(NestedField(7, "tags", ListType(8, StringType(), element_required=True))),
    ),
    NestedField(9, "m", MapType(10, StringType(), 11, IntegerType())),
]
ROW = {
    "id": 1,
    "u": uuid.UUID(int=7).bytes,
    "fx": b"abc",
    "t": time(12, 30, 1, 5),
    "d": Decimal("12.34"),
    "s": {"tags": ["a", "b"]},
    "m": [("k", 1)],
}


def test_written_file_has_iceberg_physical_types_and_field_ids(tmp_path: Path) -> None:
    path = tmp_path / "f.parquet"
    pq.write_table(pa.Table.from_pylist([ROW], schema=arrow_schema(FIELDS)), path)
    arrow = pq.read_schema(path)
    ids = {f.name: int(f.metadata[FIELD_ID_KEY]) for f in arrow}
    assert ids == {"id": 1, "u": 2, "fx": 3, "t": 4, "d": 5, "s": 6, "m": 9}
    nested = arrow.field("s").type.field("tags")
    assert int(nested.metadata[FIELD_ID_KEY]) == 7
    assert int(nested.type.value_field.metadata[FIELD_ID_KEY]) == 8
    map_type = arrow.field("m").type
    assert int(map_type.key_field.metadata[FIELD_ID_KEY]) == 10
    assert int(map_type.item_field.metadata[FIELD_ID_KEY]) == 11

    parquet = pq.ParquetFile(path).schema
    columns = {c.path: c for c in (parquet.column(i) for i in range(len(parquet)))}
    assert columns["u"].physical_type == "FIXED_LEN_BYTE_ARRAY" and columns["u"].length == 16
    assert str(columns["u"].logical_type) == "UUID"
    assert columns["fx"].physical_type == "FIXED_LEN_BYTE_ARRAY" and columns["fx"].length == 3
    assert columns["t"].physical_type == "INT64"
    assert "timeUnit=microseconds" in str(columns["t"].logical_type)
    assert pq.read_table(path).to_pylist()[0]["fx"] == b"abc"


def test_required_fields_stay_required_unless_all_optional() -> None:
    strict = arrow_schema(FIELDS)
    assert not strict.field("id").nullable and strict.field("u").nullable
    assert not strict.field("s").type.field("tags").type.value_field.nullable
    loose = arrow_schema(FIELDS, all_optional=True)
    assert loose.field("id").nullable
    assert loose.field("s").type.field("tags").type.value_field.nullable
    # Parquet map keys are required whatever the writer's choice.
    assert not loose.field("m").type.key_field.nullable


def test_a_type_without_parquet_form_is_named() -> None:
    class Odd(IcebergType):
        def __str__(self) -> str:
            return "odd"

    with pytest.raises(ValidationError, match="type odd has no Parquet form"):
        arrow_type(Odd())
