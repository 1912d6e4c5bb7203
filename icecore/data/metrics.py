"""Manifest metrics of a Parquet file from its footer, as Iceberg writers record them.

Runs in the task that wrote the file (`icecore.data.parquet_writer`), from the footer it
still holds: record count, size, split offsets and, per column field id, the column size,
value, null and NaN counts and the lower and upper bounds, in the manifest's single-value
binary form. The driver never reads data to describe a file.

Metrics modes follow Iceberg's table properties: `write.metadata.metrics.default`
(`truncate(16)` unless set), `write.metadata.metrics.column.<name>` per column, and, without
an explicit default, only the first `write.metadata.metrics.max-inferred-column-defaults`
(100) leaf columns get metrics. `none` records nothing, `counts` no bounds, `truncate(N)`
shortens string and binary bounds to N characters or bytes (the upper bound rounded up, or
dropped when it cannot be), `full` keeps them whole.

Columns inside a list or a map get counts (value counts include null and empty-collection
slots, as the column chunk reports them) but no bounds and no NaN count, as Java's
`ParquetUtil.footerMetrics` does: a bound of repeated values says nothing about a row.

What a footer cannot tell is left out, as "unknown" in the spec's sense: Parquet statistics
hold no NaN count, but parquet-java orders NaN above every number, so a float column whose
maximum is not NaN has none (count 0, bounds kept) while one whose maximum is NaN gets
neither a NaN count nor bounds. Columns without statistics (e.g. values over 4 KiB) get no
null count and no bounds.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from icecore.errors import ValidationError
from icecore.io import FileIO
from icecore.spec.conversions import (
    to_bytes,
    truncate_lower_bound,
    truncate_upper_bound,
    unscaled_to_decimal,
)
from icecore.spec.properties import (
    DEFAULT_WRITE_METRICS_MODE,
    METRICS_MAX_INFERRED_COLUMN_DEFAULTS,
    METRICS_MODE_COLUMN_CONF_PREFIX,
)
from icecore.spec.schema import Schema
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

FIELD_ID = b"PARQUET:field_id"
_TRUNCATE = re.compile(r"truncate\((\d+)\)")


@dataclass(frozen=True)
class MetricsConfig:
    """Metrics mode per field id: "none", "counts", "full" or "truncate(N)"."""

    default: str = str(DEFAULT_WRITE_METRICS_MODE.default)
    columns: Mapping[int, str] = field(default_factory=dict)

    def mode(self, field_id: int) -> str:
        return self.columns.get(field_id, self.default)

    @classmethod
    def for_table(cls, properties: Mapping[str, str], schema: Schema) -> MetricsConfig:
        explicit = properties.get(DEFAULT_WRITE_METRICS_MODE.name)
        default = _check_mode(
            str(DEFAULT_WRITE_METRICS_MODE.read(properties)), DEFAULT_WRITE_METRICS_MODE.name
        )
        columns: dict[int, str] = {}
        if explicit is None:
            limit = METRICS_MAX_INFERRED_COLUMN_DEFAULTS.read(properties)
            for _, leaf in _leaves(schema.fields)[limit:]:
                columns[leaf.field_id] = "none"
        for key, value in properties.items():
            if key.startswith(METRICS_MODE_COLUMN_CONF_PREFIX):
                name = key[len(METRICS_MODE_COLUMN_CONF_PREFIX) :]
                try:
                    field_id = schema.find_field(name).field_id
                except Exception:
                    continue  # a setting for a column since dropped
                columns[field_id] = _check_mode(value, key)
        return cls(default, columns)

    @classmethod
    def full(cls) -> MetricsConfig:
        """Position delete files: Java keeps `file_path` and `pos` bounds whole, which lets
        readers tell which data file a delete file is for."""
        return cls("full")

    def to_json(self) -> dict[str, Any]:
        return {"default": self.default, "columns": {str(k): v for k, v in self.columns.items()}}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> MetricsConfig:
        return cls(obj["default"], {int(k): v for k, v in obj["columns"].items()})


def _check_mode(value: str, key: str) -> str:
    mode = value.strip().lower()
    if mode in ("none", "counts", "full") or _TRUNCATE.fullmatch(mode):
        return mode
    raise ValidationError(
        f"table property {key} must be none, counts, full or truncate(N): {value!r}"
    )


def _leaves(fields: Iterable[NestedField], prefix: str = "") -> list[tuple[str, NestedField]]:
    """(Parquet column path, field) of the primitive fields reached through structs."""
    out: list[tuple[str, NestedField]] = []
    for f in fields:
        if isinstance(f.field_type, StructType):
            out.extend(_leaves(f.field_type.fields, f"{prefix}{f.name}."))
        elif f.field_type.is_primitive:
            out.append((prefix + f.name, f))
    return out


def _typed_leaves(
    fields: Iterable[NestedField], repeated: bool = False
) -> list[tuple[NestedField, bool]]:
    """Every primitive field (through structs, lists and maps) and whether it is inside a
    list or map."""
    out: list[tuple[NestedField, bool]] = []
    for f in fields:
        t = f.field_type
        if isinstance(t, StructType):
            out.extend(_typed_leaves(t.fields, repeated))
        elif isinstance(t, ListType):
            out.extend(_typed_leaves([t.element_field], True))
        elif isinstance(t, MapType):
            out.extend(_typed_leaves([t.key_field, t.value_field], True))
        else:
            out.append((f, repeated))
    return out


# Reading one footer -----------------------------------------------------------------------


@dataclass
class _Column:
    """Running totals of one column over a file's row groups."""

    iceberg_type: IcebergType
    size: int = 0
    values: int = 0
    nulls: int | None = 0
    lower: Any = None
    upper: Any = None
    bounds_known: bool = True
    nan_free: bool = True

    def add(self, chunk: pq.ColumnChunkMetaData) -> None:
        self.size += chunk.total_compressed_size
        self.values += chunk.num_values
        stats = chunk.statistics
        if stats is None or not stats.has_null_count:
            self.nulls = None
            self.bounds_known = False
            return
        if self.nulls is not None:
            self.nulls += stats.null_count
        if stats.null_count == chunk.num_values:
            return  # only nulls: nothing to bound
        if not stats.has_min_max:
            self.bounds_known = False
            return
        low = _value(self.iceberg_type, stats.min_raw)
        high = _value(self.iceberg_type, stats.max_raw)
        if _is_nan(low) or _is_nan(high):
            self.nan_free = False
            self.bounds_known = False
            return
        self.lower = low if self.lower is None or low < self.lower else self.lower
        self.upper = high if self.upper is None or high > self.upper else self.upper


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _value(t: IcebergType, raw: Any) -> Any:
    """A statistics value (Parquet physical form) as icecore's in-memory value."""
    if isinstance(t, DecimalType):
        unscaled = raw if isinstance(raw, int) else int.from_bytes(raw, "big", signed=True)
        return unscaled_to_decimal(t, unscaled)
    if isinstance(t, StringType):
        return bytes(raw).decode("utf-8")
    if isinstance(t, UUIDType):
        return uuid.UUID(bytes=bytes(raw))
    if isinstance(t, BinaryType | FixedType):
        return bytes(raw)
    if isinstance(t, FloatType | DoubleType):
        return float(raw)
    return raw


def _field_ids(schema: pa.Schema) -> dict[str, int]:
    """Parquet column path -> field id, from the ids written in the file itself."""
    out: dict[str, int] = {}

    def visit(f: pa.Field, prefix: str) -> None:
        path = prefix + f.name
        if pa.types.is_struct(f.type):
            for i in range(f.type.num_fields):
                visit(f.type.field(i), path + ".")
        elif pa.types.is_map(f.type):  # Parquet's map: <name>.key_value.{key,value}
            visit(f.type.key_field, path + ".key_value.")
            visit(f.type.item_field, path + ".key_value.")
        elif pa.types.is_list(f.type) or pa.types.is_large_list(f.type):
            visit(f.type.value_field, path + ".list.")  # <name>.list.element
        elif f.metadata and FIELD_ID in f.metadata:
            out[path] = int(f.metadata[FIELD_ID])

    for f in schema:
        visit(f, "")
    return out


def footer_metrics(
    io: FileIO, location: str, schema: Schema, config: MetricsConfig
) -> dict[str, Any]:
    """The metrics of one file, JSON-ready (bounds as hex)."""
    with io.open_input(location) as handle:
        size = handle.size()
        footer = pq.ParquetFile(handle).metadata
    return metrics_of(footer, size, schema, config)


def metrics_of(
    footer: pq.FileMetaData,
    size: int,
    schema: Schema,
    config: MetricsConfig,
    nan_counts: Mapping[int, int] | None = None,
) -> dict[str, Any]:
    """The metrics of a file from its footer and size, JSON-ready: a writer that still holds
    the footer of the file it just closed describes it without reading it back. A writer
    that counted the NaN values it wrote (`nan_counts`, by field id) gives exact counts for
    those columns; their bounds are the statistics', which leave NaN out."""
    ids = _field_ids(footer.schema.to_arrow_schema())
    leaves = _typed_leaves(schema.fields)
    types = {f.field_id: f.field_type for f, _ in leaves}
    repeated = {f.field_id for f, inside in leaves if inside}
    columns: dict[int, _Column] = {}
    offsets = []
    for g in range(footer.num_row_groups):
        group = footer.row_group(g)
        if group.num_columns:
            first = group.column(0)
            start = first.data_page_offset
            if first.has_dictionary_page and first.dictionary_page_offset:
                start = min(start, first.dictionary_page_offset)
            offsets.append(start)
        for c in range(group.num_columns):
            chunk = group.column(c)
            field_id = ids.get(chunk.path_in_schema)
            if field_id is None or field_id not in types or config.mode(field_id) == "none":
                continue
            columns.setdefault(field_id, _Column(types[field_id])).add(chunk)
    result: dict[str, Any] = {
        "record_count": footer.num_rows,
        "file_size": size,
        "split_offsets": sorted(offsets),
        "column_sizes": {},
        "value_counts": {},
        "null_value_counts": {},
        "nan_value_counts": {},
        "lower_bounds": {},
        "upper_bounds": {},
    }
    for field_id, column in columns.items():
        key = str(field_id)
        result["column_sizes"][key] = column.size
        result["value_counts"][key] = column.values
        if column.nulls is not None:
            result["null_value_counts"][key] = column.nulls
        t = column.iceberg_type
        if field_id in repeated:
            continue  # counts only (see the module docstring)
        counted = nan_counts is not None and field_id in nan_counts
        if counted:
            result["nan_value_counts"][key] = nan_counts[field_id]
        elif isinstance(t, FloatType | DoubleType) and column.nulls is not None and column.nan_free:
            result["nan_value_counts"][key] = 0
        mode = config.mode(field_id)
        if mode == "counts" or not column.bounds_known or column.lower is None:
            continue
        lower, upper = column.lower, column.upper
        if match := _TRUNCATE.fullmatch(mode):
            width = int(match.group(1))
            lower = truncate_lower_bound(t, lower, width)
            upper = truncate_upper_bound(t, upper, width)
        result["lower_bounds"][key] = to_bytes(t, lower).hex()
        if upper is not None:
            result["upper_bounds"][key] = to_bytes(t, upper).hex()
    return result


def decode(obj: dict[str, Any]) -> dict[str, Any]:
    """The JSON form back as DataFile keyword values (int keys, bytes bounds)."""
    out: dict[str, Any] = {
        "record_count": obj["record_count"],
        "file_size_in_bytes": obj["file_size"],
        "split_offsets": obj["split_offsets"] or None,
    }
    for name in ("column_sizes", "value_counts", "null_value_counts", "nan_value_counts"):
        out[name] = {int(k): v for k, v in obj[name].items()}
    for name in ("lower_bounds", "upper_bounds"):
        out[name] = {int(k): bytes.fromhex(v) for k, v in obj[name].items()}
    return out
