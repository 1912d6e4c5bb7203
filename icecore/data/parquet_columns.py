"""Reading Iceberg columns out of Parquet files by field id, into the Arrow types wanted.

    columns = match_columns(parquet.schema_arrow, fields)
    for group in range(meta.num_row_groups):  # the groups whose midpoint a split holds
        for raw in row_group_batches(parquet, group, names, rows):
            array = project_column(raw, columns.get(f.field_id), f, target)

Columns are matched by Parquet field id at every depth (a renamed column keeps its id), by
name only in files that carry no ids; a column the file lacks reads as its `initial-default`
(v3) or null. Engine-neutral: the Spark reader (`spark_jobs.reading.parquet_files`) and the
in-task compaction (`icecore.data.live_batches`) both read files this way.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from icecore.data.arrow_schema import FIELD_ID_KEY
from icecore.spec.defaults import initial_default_value
from icecore.spec.metadata_columns import ROW_LINEAGE
from icecore.spec.types import IcebergType, ListType, MapType, NestedField, StructType

BATCH_ROWS = 64 * 1024
_LINEAGE_IDS = frozenset(f.field_id for f in ROW_LINEAGE)


def row_group_batches(
    parquet: pq.ParquetFile, group: int, names: list[str], rows: int
) -> Iterator[pa.RecordBatch]:
    if not names:  # only positions wanted: no column chunk needs reading
        for offset in range(0, rows, BATCH_ROWS):
            yield pa.RecordBatch.from_pydict({}, num_rows=min(BATCH_ROWS, rows - offset))
        return
    yield from parquet.iter_batches(batch_size=BATCH_ROWS, row_groups=[group], columns=names)


def row_group_midpoint(meta: pq.FileMetaData, group: int) -> int:
    """Where the row group's bytes are centred: the split holding that byte reads it."""
    row_group = meta.row_group(group)
    if not row_group.num_columns:
        return 0
    chunks = [row_group.column(i) for i in range(row_group.num_columns)]
    first = min(
        c.dictionary_page_offset if c.has_dictionary_page else c.data_page_offset for c in chunks
    )
    return first + sum(c.total_compressed_size for c in chunks) // 2


def _field_id(field: pa.Field) -> int | None:
    raw = (field.metadata or {}).get(FIELD_ID_KEY)
    return int(raw) if raw is not None else None


def match_columns(schema: pa.Schema, fields: Sequence[NestedField]) -> dict[int, pa.Field]:
    """The file's top-level field for each wanted id: by id, or by name in a file of no ids.

    Row lineage columns are matched by id only: a file without ids was not written by an
    Iceberg writer, so a `_row_id` column in it is some other data, not the row's lineage."""
    by_id = {_field_id(f): f for f in schema if _field_id(f) is not None}
    if by_id:
        return {f.field_id: by_id[f.field_id] for f in fields if f.field_id in by_id}
    by_name = {f.name: f for f in schema}
    return {
        f.field_id: by_name[f.name]
        for f in fields
        if f.name in by_name and f.field_id not in _LINEAGE_IDS
    }


def project_column(
    batch: pa.RecordBatch, source: pa.Field | None, field: NestedField, target: pa.Field
) -> pa.Array:
    if source is None:
        return _missing(field, target.type, batch.num_rows)
    return _project(batch.column(source.name), source, field.field_type, target.type)


def _missing(field: NestedField, target: pa.DataType, rows: int) -> pa.Array:
    """A column the file lacks: its `initial-default` (v3; spec "Column Projection"), else
    null, in every row."""
    value = initial_default_value(field)
    if value is None:
        return pa.nulls(rows, target)
    return pa.repeat(pa.scalar(_arrow_value(value, target), target), rows)


def _arrow_value(value: Any, target: pa.DataType) -> Any:
    """An in-memory Iceberg value as the Arrow scalar of Spark's type for it."""
    if isinstance(value, uuid.UUID):
        return value.bytes if pa.types.is_binary(target) else str(value)
    if pa.types.is_struct(target) and isinstance(value, dict):
        return {f.name: _arrow_value(value.get(f.name), f.type) for f in target}
    return value


def _project(array: pa.Array, source: pa.Field, kind: IcebergType, target: pa.DataType) -> pa.Array:
    """`array` (the file's `source` field) as the Spark form of Iceberg type `kind`."""
    mask = array.is_null() if array.null_count else None
    if isinstance(kind, StructType):
        children = {(_field_id(f) or f.name): f for f in source.type}
        arrays = []
        for i, child in enumerate(kind.fields):
            found = children.get(child.field_id) or children.get(child.name)
            wanted = target.field(i)
            if found is None:
                arrays.append(_missing(child, wanted.type, len(array)))
            else:
                value = array.field(source.type.get_field_index(found.name))
                arrays.append(_project(value, found, child.field_type, wanted.type))
        return pa.StructArray.from_arrays(arrays, fields=list(target), mask=mask)
    if isinstance(kind, ListType):
        element = _project(
            array.values, source.type.value_field, kind.element_type, target.value_type
        )
        return pa.ListArray.from_arrays(array.offsets, element, type=target, mask=mask)
    if isinstance(kind, MapType):
        keys = _project(array.keys, source.type.key_field, kind.key_type, target.key_type)
        items = _project(array.items, source.type.item_field, kind.value_type, target.item_type)
        return pa.MapArray.from_arrays(array.offsets, keys, items, type=target, mask=mask)
    return array if array.type == target else array.cast(target)
