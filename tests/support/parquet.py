"""Parquet files carrying Iceberg field ids, and the metrics a writer records for them.

Files are written with pyarrow and their metrics read back from the Parquet footer, the way
Iceberg Java's `ParquetMetrics` does it, so that a manifest's bounds describe the bytes on
disk and not what a test believed it wrote.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from icecore.data.arrow_schema import arrow_schema, arrow_type
from icecore.spec.conversions import to_bytes, unscaled_to_decimal
from icecore.spec.types import (
    BinaryType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    ListType,
    MapType,
    NestedField,
    StringType,
    StructType,
    UUIDType,
)


def _arrow_value(t: IcebergType, value: Any) -> Any:
    """An icecore in-memory value as pyarrow builds it (uuids as bytes, maps as pairs)."""
    if value is None:
        return None
    if isinstance(t, UUIDType):
        return value.bytes
    if isinstance(t, StructType):
        return {f.name: _arrow_value(f.field_type, value.get(f.name)) for f in t.fields}
    if isinstance(t, ListType):
        return [_arrow_value(t.element_type, v) for v in value]
    if isinstance(t, MapType):
        return [
            (_arrow_value(t.key_type, k), _arrow_value(t.value_type, v)) for k, v in value.items()
        ]
    return value


def to_arrow(fields: Sequence[NestedField], rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """Rows of icecore in-memory values (keyed by column name) as a table with field ids."""
    columns = [
        pa.array(
            [_arrow_value(f.field_type, row.get(f.name)) for row in rows], arrow_type(f.field_type)
        )
        for f in fields
    ]
    return pa.Table.from_arrays(columns, schema=arrow_schema(fields))


@dataclass
class Metrics:
    """A data file's column metrics, keyed by field id, bounds in single-value form."""

    record_count: int
    column_sizes: dict[int, int]
    value_counts: dict[int, int]
    null_value_counts: dict[int, int]
    nan_value_counts: dict[int, int]
    lower_bounds: dict[int, bytes]
    upper_bounds: dict[int, bytes]


def _leaves(fields: Iterable[NestedField], prefix: str = "") -> Iterator[tuple[str, NestedField]]:
    """Parquet column paths of the primitive fields reached through structs only.

    Columns inside lists and maps get no metrics here: one value per row does not hold for
    them, so their counts and bounds would need Java's repeated-column rules.
    """
    for f in fields:
        if isinstance(f.field_type, StructType):
            yield from _leaves(f.field_type.fields, f"{prefix}{f.name}.")
        elif f.field_type.is_primitive:
            yield prefix + f.name, f


def _from_physical(t: IcebergType, raw: Any) -> Any:
    """A Parquet statistics value (physical form) as icecore's in-memory value."""
    if isinstance(t, DecimalType):
        unscaled = raw if isinstance(raw, int) else int.from_bytes(raw, "big", signed=True)
        return unscaled_to_decimal(t, unscaled)
    if isinstance(t, StringType):
        return bytes(raw).decode("utf-8")
    if isinstance(t, UUIDType):
        return uuid.UUID(bytes=bytes(raw))
    if isinstance(t, FixedType | BinaryType):
        return bytes(raw)
    return raw


def _nan_count(column: pa.ChunkedArray) -> int:
    return int(pc.sum(pc.is_nan(column.drop_null())).as_py() or 0)


def _column(table: pa.Table, path: str) -> pa.ChunkedArray:
    name, *rest = path.split(".")
    column = table.column(name)
    for child in rest:
        column = pc.struct_field(column, child)
    return column


def write_parquet(path: str, table: pa.Table, fields: Sequence[NestedField]) -> Metrics:
    """Write `table` to the local file `path` and return its metrics, read from the footer."""
    pq.write_table(table, path)
    footer = pq.ParquetFile(path).metadata
    by_path = dict(_leaves(fields))
    types = {f.field_id: f.field_type for f in by_path.values()}
    sizes: dict[int, int] = {}
    values: dict[int, int] = {}
    nulls: dict[int, int] = {}
    lower: dict[int, Any] = {}
    upper: dict[int, Any] = {}
    for g in range(footer.num_row_groups):
        group = footer.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            f = by_path.get(chunk.path_in_schema)
            if f is None:
                continue
            fid = f.field_id
            sizes[fid] = sizes.get(fid, 0) + chunk.total_compressed_size
            values[fid] = values.get(fid, 0) + chunk.num_values
            stats = chunk.statistics
            if stats is None or not stats.has_null_count:
                continue
            nulls[fid] = nulls.get(fid, 0) + stats.null_count
            if stats.has_min_max:
                low = _from_physical(f.field_type, stats.min_raw)
                high = _from_physical(f.field_type, stats.max_raw)
                lower[fid] = low if fid not in lower else min(lower[fid], low)
                upper[fid] = high if fid not in upper else max(upper[fid], high)
    nans = {
        f.field_id: _nan_count(_column(table, p))
        for p, f in by_path.items()
        if isinstance(f.field_type, FloatType | DoubleType)
    }
    return Metrics(
        record_count=footer.num_rows,
        column_sizes=sizes,
        value_counts=values,
        null_value_counts=nulls,
        nan_value_counts=nans,
        lower_bounds={fid: to_bytes(types[fid], v) for fid, v in lower.items()},
        upper_bounds={fid: to_bytes(types[fid], v) for fid, v in upper.items()},
    )
