"""The benchmark table's schema and spec, how many of everything it holds, and its files.

Files are described as Spark's Iceberg writers describe them (Parquet, full column metrics,
Spark's file naming), because what a planner pays per manifest entry depends on how much
each entry carries. The files themselves are never written: planning reads metadata only.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from icecore.spec.conversions import to_bytes
from icecore.spec.manifest import DataFile, FileContent, FileFormat
from icecore.spec.metadata_columns import DELETE_FILE_PATH, DELETE_FILE_POS
from icecore.spec.partitioning import PartitionField, PartitionSpec
from icecore.spec.schema import Schema
from icecore.spec.transforms import parse_transform
from icecore.spec.types import (
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestamptzType,
    UUIDType,
)

SNAPSHOTS = 10
BUCKETS = 16
FIRST_DAY = 19_723  # 2024-01-01
MICROS_PER_DAY = 86_400_000_000
ROW_GROUP_BYTES = 134_217_728


SCHEMA = Schema(
    (
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "ts", TimestamptzType(), required=True),
        NestedField(3, "customer", StringType()),
        NestedField(4, "category", StringType()),
        NestedField(5, "amount", DecimalType(18, 2)),
        NestedField(6, "price", DoubleType()),
        NestedField(7, "quantity", IntegerType()),
        NestedField(8, "active", BooleanType()),
        NestedField(9, "event_date", DateType()),
        NestedField(10, "session", UUIDType()),
    ),
    schema_id=0,
    identifier_field_ids=(1,),
)
# Spark's `PARTITIONED BY (days(ts), bucket(16, id))`.
SPEC = PartitionSpec(
    0,
    (
        PartitionField(2, 1000, parse_transform("day"), "ts_day"),
        PartitionField(1, 1001, parse_transform(f"bucket[{BUCKETS}]"), "id_bucket"),
    ),
)
UNPARTITIONED_SPEC = PartitionSpec(1, ())  # only the global equality delete uses it
CATEGORIES = ("books", "electronics", "garden", "grocery", "music", "sports", "toys")


@dataclass(frozen=True)
class Layout:
    """How many of everything at a given scale; 1.0 is the issue's table."""

    scale: float

    def _n(self, full: int, minimum: int) -> int:
        return max(minimum, round(full * self.scale))

    @property
    def data_files(self) -> int:
        return self._n(500_000, SNAPSHOTS)

    @property
    def delete_files(self) -> int:
        return self._n(50_000, SNAPSHOTS)

    @property
    def data_manifests(self) -> int:
        return self._n(1_800, SNAPSHOTS)

    @property
    def delete_manifests(self) -> int:
        return self._n(200, SNAPSHOTS)

    @property
    def partition_scoped_deletes(self) -> int:
        return self._n(250, SNAPSHOTS)

    @property
    def rewritten_manifests(self) -> int:
        return self._n(18, 1)

    @property
    def removed_per_rewritten_manifest(self) -> int:
        return 10

    @property
    def cdc_data_files(self) -> int:
        return self._n(1_000, 20)

    @property
    def cdc_equality_deletes(self) -> int:
        return self._n(200, 20)


def split(total: int, parts: int) -> list[int]:
    """`total` as `parts` near-equal counts."""
    q, r = divmod(total, parts)
    return [q + (1 if i < r else 0) for i in range(parts)]


class FileFactory:
    """Builds the `DataFile` descriptions of data, position delete and equality delete files."""

    def __init__(self, location: str, rng: random.Random) -> None:
        self.location = location
        self.rng = rng

    def path(self, partition: tuple, query_id: str, suffix: str = "") -> str:
        """Spark's `{partition id}-{task id}-{query id}-{file count}.parquet`, under the
        partition's directory. The random partition id interleaves the names of different
        commits in sort order, so a path range can cover files of several commits."""
        rng = self.rng
        name = (
            f"{rng.randrange(200):05d}-{rng.randrange(10_000)}-{query_id}-"
            f"{rng.randrange(1, 100):05d}{suffix}.parquet"
        )
        directory = SPEC.partition_path(partition, SCHEMA) if partition else None
        return "/".join(p for p in (self.location, "data", directory, name) if p)

    def data_file(self, partition: tuple, query_id: str) -> DataFile:
        rng = self.rng
        day = partition[0]
        rows = rng.randrange(50_000, 2_000_000)
        size = rows * rng.randrange(40, 60)
        id_lo = rng.randrange(1, 1 << 40)
        ts_lo = day * MICROS_PER_DAY + rng.randrange(MICROS_PER_DAY // 2)

        def pair(values: list[Any]) -> tuple[Any, Any]:
            values.sort()
            return values[0], values[-1]

        bounds: dict[int, tuple[Any, Any]] = {
            1: (id_lo, id_lo + rng.randrange(1, 1 << 30)),
            2: (ts_lo, ts_lo + rng.randrange(MICROS_PER_DAY // 2)),
            3: pair([f"customer{rng.randrange(10_000_000):08d}" for _ in range(2)]),
            4: pair(rng.sample(CATEGORIES, 2)),
            5: pair([Decimal(rng.randrange(-10_000, 10_000_000)).scaleb(-2) for _ in range(2)]),
            6: pair([rng.uniform(0.01, 5_000.0) for _ in range(2)]),
            7: pair([rng.randrange(1, 500) for _ in range(2)]),
            8: (False, True),
            9: (day - 1, day),
            10: pair([uuid.UUID(int=rng.getrandbits(128)) for _ in range(2)]),
        }
        fields = SCHEMA.fields
        sizes = split(size - 4 - rng.randrange(1_000, 10_000), len(fields))
        return DataFile(
            file_path=self.path(partition, query_id),
            file_format=FileFormat.PARQUET,
            partition=partition,
            record_count=rows,
            file_size_in_bytes=size,
            column_sizes={f.field_id: s for f, s in zip(fields, sizes, strict=True)},
            value_counts={f.field_id: rows for f in fields},
            null_value_counts={
                f.field_id: 0 if f.required else rng.randrange(rows // 100) for f in fields
            },
            nan_value_counts={6: 0},
            lower_bounds={
                f.field_id: to_bytes(f.field_type, bounds[f.field_id][0]) for f in fields
            },
            upper_bounds={
                f.field_id: to_bytes(f.field_type, bounds[f.field_id][1]) for f in fields
            },
            split_offsets=list(range(4, size, ROW_GROUP_BYTES)),
            sort_order_id=0,
        )

    def position_delete(self, partition: tuple, lower: str, upper: str, query_id: str) -> DataFile:
        """Deletes in the files whose paths lie in [lower, upper]; one file when equal."""
        rng = self.rng
        rows = rng.randrange(1, 2_000)
        first = rng.randrange(1_000_000)
        return DataFile(
            file_path=self.path(partition, query_id, "-deletes"),
            file_format=FileFormat.PARQUET,
            partition=partition,
            record_count=rows,
            file_size_in_bytes=1_500 + rows * 3,
            content=FileContent.POSITION_DELETES,
            column_sizes={
                DELETE_FILE_PATH.field_id: 200 + rows // 50,
                DELETE_FILE_POS.field_id: 50 + rows * 2,
            },
            value_counts={DELETE_FILE_PATH.field_id: rows, DELETE_FILE_POS.field_id: rows},
            null_value_counts={DELETE_FILE_PATH.field_id: 0, DELETE_FILE_POS.field_id: 0},
            lower_bounds={
                DELETE_FILE_PATH.field_id: to_bytes(StringType(), lower),
                DELETE_FILE_POS.field_id: to_bytes(LongType(), first),
            },
            upper_bounds={
                DELETE_FILE_PATH.field_id: to_bytes(StringType(), upper),
                DELETE_FILE_POS.field_id: to_bytes(
                    LongType(), first + rng.randrange(rows, 100_000)
                ),
            },
            split_offsets=[4],
        )

    def equality_delete(self, partition: tuple, spec_id: int, query_id: str) -> DataFile:
        """Deletes rows by `id`, the table's identifier field."""
        rng = self.rng
        rows = rng.randrange(1, 500)
        lo = rng.randrange(1, 1 << 40)
        return DataFile(
            file_path=self.path(partition, query_id, "-eq-deletes"),
            file_format=FileFormat.PARQUET,
            partition=partition,
            record_count=rows,
            file_size_in_bytes=800 + rows * 8,
            content=FileContent.EQUALITY_DELETES,
            column_sizes={1: rows * 8},
            value_counts={1: rows},
            null_value_counts={1: 0},
            lower_bounds={1: to_bytes(LongType(), lo)},
            upper_bounds={1: to_bytes(LongType(), lo + rng.randrange(1, 1 << 30))},
            split_offsets=[4],
            equality_ids=[1],
            spec_id=spec_id,
        )
