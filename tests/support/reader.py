"""A deliberately naive reader: applies a scan task's deletes to its data file, row by row.

It exists to check planning (and other engines) against the spec's delete semantics, so it
is written for obviousness, not speed: columns are matched by field id, a position delete
removes the row at that position of the file it names, and an equality delete removes every
row whose equality columns equal a delete row's (null equal to null, as the spec says).
Values come back in icecore's in-memory representation.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from icecore.data.arrow_schema import FIELD_ID_KEY
from icecore.io import FileIO
from icecore.scan import FileScanTask, TableScan
from icecore.spec.deletion_vectors import read_dv
from icecore.spec.manifest import DataFile
from icecore.spec.metadata import TableMetadata
from icecore.spec.schema import Schema
from icecore.spec.types import IcebergType, NestedField, StructType, UUIDType

from .tables import DELETE_FILE_PATH, DELETE_POS

Row = dict[str, Any]


def arrow_values(array: pa.Array | pa.ChunkedArray, t: IcebergType) -> list[Any]:
    """Arrow values as icecore values: temporal types as their integer counts."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if isinstance(t, StructType):
        children = {f.name: arrow_values(array.field(f.name), f.field_type) for f in t.fields}
        valid = array.is_valid().to_pylist()
        return [
            {name: column[i] for name, column in children.items()} if valid[i] else None
            for i in range(len(array))
        ]
    if isinstance(t, UUIDType):
        if isinstance(array, pa.ExtensionArray):
            array = array.storage
        return [None if b is None else uuid.UUID(bytes=b) for b in array.to_pylist()]
    if pa.types.is_date32(array.type):
        return array.cast(pa.int32()).to_pylist()
    if pa.types.is_time64(array.type) or pa.types.is_timestamp(array.type):
        return array.cast(pa.int64()).to_pylist()
    return array.to_pylist()


def read_columns(io: FileIO, data_file: DataFile, fields: tuple[NestedField, ...]) -> list[Row]:
    """The rows of a Parquet file, projected to `fields` by field id (absent ids read null)."""
    with io.open_input(data_file.file_path) as f:
        table = pq.read_table(f)
    by_id = {
        int(field.metadata[FIELD_ID_KEY]): field.name
        for field in table.schema
        if field.metadata and FIELD_ID_KEY in field.metadata
    }
    columns = {
        f.name: arrow_values(table.column(by_id[f.field_id]), f.field_type)
        if f.field_id in by_id
        else [None] * table.num_rows
        for f in fields
    }
    return [{name: values[i] for name, values in columns.items()} for i in range(table.num_rows)]


def _key(row: Row, names: list[str]) -> tuple[Any, ...]:
    return tuple(row[n] for n in names)


def apply_deletes(io: FileIO, task: FileScanTask, schema: Schema) -> list[Row]:
    """The rows of the task's data file that none of its delete files removes."""
    rows = read_columns(io, task.file, schema.fields)
    deleted_positions = {
        d["pos"]
        for delete_file in task.position_deletes
        if not delete_file.is_deletion_vector
        for d in read_columns(io, delete_file, (DELETE_FILE_PATH, DELETE_POS))
        if d["file_path"] == task.file.file_path
    }
    for dv in task.position_deletes:
        if dv.is_deletion_vector:
            assert dv.content_offset is not None and dv.content_size_in_bytes is not None
            vector = read_dv(io, dv.file_path, dv.content_offset, dv.content_size_in_bytes)
            deleted_positions.update(vector.to_numpy().tolist())
    keep = [row for pos, row in enumerate(rows) if pos not in deleted_positions]
    for delete_file in task.equality_deletes:
        fields = tuple(schema.find_field(i) for i in delete_file.equality_ids or ())
        names = [f.name for f in fields]
        deleted = {_key(r, names) for r in read_columns(io, delete_file, fields)}
        keep = [row for row in keep if _key(row, names) not in deleted]
    return keep


def scan_rows(io: FileIO, metadata: TableMetadata, **scan_options: Any) -> Iterator[Row]:
    """Every row of a table version: `TableScan` plans, this module reads."""
    for task in TableScan(io, metadata, **scan_options).plan_files():
        yield from apply_deletes(io, task, metadata.schema())
