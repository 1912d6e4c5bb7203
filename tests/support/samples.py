"""Schemas, rows and tables that several test modules build the same way."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from icecore.spec.manifest import DataFile
from icecore.spec.partitioning import PartitionField, PartitionSpec
from icecore.spec.schema import Schema
from icecore.spec.snapshots import Snapshot
from icecore.spec.transforms import parse_transform
from icecore.spec.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

from .tables import LocalTable

# The spec's row-level delete example ------------------------------------------------------

EXAMPLE_SCHEMA = Schema(
    (NestedField(1, "id", IntegerType(), required=True), NestedField(2, "data", StringType()))
)

# Which deletes each snapshot plans with which data file, and the rows a reader then returns.
EXAMPLE_PLANS = [
    {"a": []},
    {"a": ["b"], "c": []},
    {"a": ["b"], "c": ["d"], "e": []},
]
EXAMPLE_ROWS = [
    {(1, "X"), (2, "A")},
    {(1, "X"), (3, "Q"), (2, "B")},
    {(1, "X"), (2, "B"), (4, "Y")},
]


@dataclass
class WorkedExample:
    table: LocalTable
    files: dict[str, DataFile]
    snapshots: list[Snapshot]


def worked_example(location: Path) -> WorkedExample:
    """Snapshot 1 adds a; 2 adds equality delete b (id = 2) and c; 3 adds position delete d
    (c's first row) and e. Files are named by their letter."""
    table = LocalTable.create(location, EXAMPLE_SCHEMA)
    a = table.write_data([{"id": 1, "data": "X"}, {"id": 2, "data": "A"}], name="a")
    s1 = table.commit(add=[a])
    b = table.write_equality_deletes([{"id": 2}], ["id"], name="b")
    c = table.write_data([{"id": 3, "data": "Q"}, {"id": 2, "data": "B"}], name="c")
    s2 = table.commit(add=[b, c])
    d = table.write_position_deletes([(c.file_path, 0)], name="d")
    e = table.write_data([{"id": 4, "data": "Y"}], name="e")
    s3 = table.commit(add=[d, e])
    return WorkedExample(table, {"a": a, "b": b, "c": c, "d": d, "e": e}, [s1, s2, s3])


# A table for partitioning tests ------------------------------------------------------------

PSCHEMA = Schema(
    (
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "category", StringType()),
        NestedField(3, "ts", TimestamptzType()),
    )
)


def spec_of(*fields: tuple[str, str, str], spec_id: int = 0) -> PartitionSpec:
    """A spec on PSCHEMA from (source column, transform, name) triples."""
    return PartitionSpec(
        spec_id,
        tuple(
            PartitionField(PSCHEMA.find_field(source).field_id, 1000 + i, parse_transform(t), name)
            for i, (source, t, name) in enumerate(fields)
        ),
    )


# Every primitive type, and a struct --------------------------------------------------------

ALL_TYPES = Schema(
    (
        NestedField(1, "b", BooleanType()),
        NestedField(2, "i", IntegerType()),
        NestedField(3, "l", LongType(), required=True),
        NestedField(4, "f", FloatType()),
        NestedField(5, "d", DoubleType()),
        NestedField(6, "dec", DecimalType(10, 2)),
        NestedField(7, "big", DecimalType(38, 10)),
        NestedField(8, "dt", DateType()),
        NestedField(9, "t", TimeType()),
        NestedField(10, "ts", TimestampType()),
        NestedField(11, "tstz", TimestamptzType()),
        NestedField(12, "s", StringType()),
        NestedField(13, "u", UUIDType()),
        NestedField(14, "fx", FixedType(4)),
        NestedField(15, "bin", BinaryType()),
        NestedField(
            16,
            "st",
            StructType(NestedField(17, "x", IntegerType()), NestedField(18, "y", StringType())),
        ),
    )
)

# Extremes and edge cases per type, in icecore's in-memory representation, ordered by `l`.
ALL_TYPES_ROWS: list[dict[str, Any]] = [
    {
        "b": False,
        "i": 2**31 - 1,
        "l": -(2**63),
        "f": float("-inf"),
        "d": 1e300,
        "dec": Decimal("-0.01"),
        "big": Decimal("99999999999999999999999999.9999999999"),
        "dt": 19_000,
        "t": 0,
        "ts": 1_700_000_000_000_001,
        "tstz": -86_400_000_000,
        "s": "",
        "u": uuid.UUID(int=0),
        "fx": b"abcd",
        "bin": b"\x00\x01",
        "st": {"x": None, "y": None},
    },
    {"l": 0, "st": None},
    {
        "b": True,
        "i": -(2**31),
        "l": 2**63 - 1,
        "f": 1.5,
        "d": -2.25,
        "dec": Decimal("12345678.90"),
        "big": Decimal("-1234567890123456789012345678.0123456789"),
        "dt": -1,
        "t": 86_399_999_999,
        "ts": -1,
        "tstz": 1_700_000_000_123_456,
        "s": "héllo ✓ 𝄞",
        "u": uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7"),
        "fx": b"\x00\xff\x10\x01",
        "bin": b"",
        "st": {"x": 7, "y": "in"},
    },
]


def all_types_table(location: Path) -> LocalTable:
    """ALL_TYPES_ROWS, one row per file, so that file skipping on bounds decides what a
    filtered read returns."""
    table = LocalTable.create(location, ALL_TYPES)
    files = [table.write_data([row], name=f"row{n}") for n, row in enumerate(ALL_TYPES_ROWS)]
    table.commit(add=files)
    return table
