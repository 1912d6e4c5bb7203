"""Parquet files written by a task, with pyarrow, and described from their footers.

Iceberg's `uuid` is FIXED_LEN_BYTE_ARRAY(16) with the UUID logical type, `fixed[L]` is
FIXED_LEN_BYTE_ARRAY(L), `time` is INT64 TIME(MICROS), and every field of a list or map
(element, key, value) carries a field id: the task casts its Arrow rows to the Iceberg
physical types (`icecore.data.arrow_schema`) and writes them through the table's FileIO, so
any engine that hands a task Arrow batches (Spark's `mapInArrow`, the driver's own threads)
writes the files Java would. Position delete files always take this path: their `file_path`
and `pos` are required, as the spec says.

A task keeps the rows of each partition in files of their own. A row's partition is given
either by partition columns (the engine computes the values, the task reads them back from
their text forms, `icecore.data.partition_texts`) or by its group (one (spec, partition) the
driver chose before the write, for rows whose partition comes from the files they replace or
point at). Files are rolled at the row limit and at `write.target-file-size-bytes`, named so
that a task's files sort in the order it wrote them, and described from their footers
(`icecore.data.metrics`) by the task that wrote them, from the footer it still holds, so
nothing reads them back. The table's Parquet properties (codec and level, row group, page and
dictionary sizes) are applied.

Where a file goes is the table's location provider's to say (`icecore.location_provider`):
below the write's own directory (`WritePlan.location`), under its partition's path (Java's
`partitionToPath`, `ts_day=2024-01-07/id_bucket=3`) by default; spread over hash directories,
as `<data>/<hash>/<partition path>/<file name>`, when the table uses object storage. Either
way a task reports, with each file, the group of its rows and the partition values its
partition columns gave, as values (`icecore.data.task_reports`): the driver takes a file's
partition from those, never from the file's location.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from icecore.data.arrow_schema import arrow_schema
from icecore.data.metrics import MetricsConfig, metrics_of
from icecore.data.partition_texts import partition_values
from icecore.data.position_maps import ROW_MAPS, SOURCE_FILE, SOURCE_POS, write_row_map
from icecore.data.task_reports import Reported
from icecore.errors import ValidationError
from icecore.io import FileIO
from icecore.location_provider import LocationProvider
from icecore.spec.conversions import value_to_json
from icecore.spec.partitioning import PartitionSpec
from icecore.spec.properties import (
    PARQUET_COMPRESSION,
    PARQUET_COMPRESSION_LEVEL,
    PARQUET_DICT_SIZE_BYTES,
    PARQUET_PAGE_SIZE_BYTES,
    PARQUET_ROW_GROUP_SIZE_BYTES,
)
from icecore.spec.schema import Schema
from icecore.spec.types import DoubleType, FloatType, NestedField, StructType

_MAX_OPEN = 16
_CODECS = {
    "zstd": "zstd",
    "snappy": "snappy",
    "gzip": "gzip",
    "lz4": "lz4",
    "lz4_raw": "lz4",
    "brotli": "brotli",
    "uncompressed": "none",
    "none": "none",
}


def writer_options(properties: Mapping[str, str]) -> dict[str, Any]:
    """pyarrow ParquetWriter arguments from the table's Parquet properties (Iceberg's
    defaults: zstd, 128 MiB row groups, 1 MiB pages, 2 MiB dictionary pages)."""
    codec = str(PARQUET_COMPRESSION.read(properties)).lower()
    if codec not in _CODECS:
        raise ValidationError(f"{PARQUET_COMPRESSION.name} {codec!r} is not supported")
    level = PARQUET_COMPRESSION_LEVEL.read(properties)
    return {
        "compression": _CODECS[codec],
        "compression_level": int(level) if level else None,
        "data_page_size": PARQUET_PAGE_SIZE_BYTES.read(properties),
        "dictionary_pagesize_limit": PARQUET_DICT_SIZE_BYTES.read(properties),
        "write_statistics": True,
        "store_decimal_as_integer": True,  # INT32/INT64 for small precisions, as Spark does
    }


# What a task knows of the rows of one file: their group (None when the rows carry none) and
# their partition columns' values in their text forms (`icecore.data.partition_texts`).
FileKey = tuple[int | None, tuple[str | None, ...]]


@dataclass(frozen=True)
class FilePartitions:
    """How a task names the partition of a file and the path (Java's `partitionToPath`) the
    file goes under: from the rows' partition columns, values of `spec` for rows of `schema`;
    else, for rows of a group, the group's path in `group_paths` (its partition is the
    driver's, known before the write); else none."""

    spec: PartitionSpec
    schema: Schema
    group_paths: Mapping[int, str] = field(default_factory=dict)

    def of(self, key: FileKey) -> tuple[str, list[Any] | None]:
        """The partition path of a file of `key`'s rows, and the partition values (Iceberg's
        JSON single-value forms) its task reports, None when its partition is its group's."""
        group, texts = key
        if texts:
            values = partition_values(self.spec, self.schema, texts)
            types = [f.field_type for f in self.spec.partition_type(self.schema).fields]
            reported = [value_to_json(t, v) for t, v in zip(types, values, strict=True)]
            return self.spec.partition_path(values, self.schema), reported
        if group is not None and self.group_paths:
            return self.group_paths[group], None
        return "", None

    def to_json(self) -> dict[str, Any]:
        return {
            "spec": self.spec.to_json(),
            "schema": self.schema.to_json(),
            "group_paths": [[g, p] for g, p in self.group_paths.items()],
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> FilePartitions:
        return cls(
            PartitionSpec.from_json(obj["spec"]),
            Schema.from_json(obj["schema"]),
            {g: p for g, p in obj["group_paths"]},
        )


@dataclass
class WritePlan:
    """What every task of a write needs, sent as JSON with the task."""

    location: str
    schema: dict[str, Any]
    all_optional: bool
    metrics: dict[str, Any]
    data_columns: list[str]
    partition_names: list[str]
    io: dict[str, str]
    options: dict[str, Any]
    row_group_bytes: int
    max_records: int | None
    target_bytes: int | None
    partitions: dict[str, Any]  # `FilePartitions.to_json()`
    hashed: dict[str, Any] | None = None  # `LocationProvider.to_json()`; None: below `location`
    grouped: bool = False  # the rows carry their group (`_group` column)
    row_maps: bool = False  # the rows carry their source, a row map goes beside each file

    @classmethod
    def of(
        cls,
        *,
        location: str,
        schema: Schema,
        all_optional: bool,
        metrics: MetricsConfig,
        data_columns: Sequence[str],
        partition_names: Sequence[str],
        io_properties: Mapping[str, str],
        table_properties: Mapping[str, str],
        max_records: int | None,
        target_bytes: int | None,
        partitions: FilePartitions,
        hashed: LocationProvider | None = None,
        grouped: bool = False,
        row_maps: bool = False,
    ) -> WritePlan:
        """The plan of files below `location` (or where the object-storage provider `hashed`
        puts them), with the table's Parquet properties."""
        return cls(
            location=location,
            schema=schema.to_json(),
            all_optional=all_optional,
            metrics=metrics.to_json(),
            data_columns=list(data_columns),
            partition_names=list(partition_names),
            io=dict(io_properties),
            options=writer_options(table_properties),
            row_group_bytes=PARQUET_ROW_GROUP_SIZE_BYTES.read(table_properties),
            max_records=max_records,
            target_bytes=target_bytes,
            partitions=partitions.to_json(),
            hashed=None if hashed is None else hashed.to_json(),
            grouped=grouped,
            row_maps=row_maps,
        )

    def provider(self) -> LocationProvider | None:
        """The object-storage location provider; None: files go below `location`."""
        return None if self.hashed is None else LocationProvider.from_json(self.hashed)

    def to_json(self) -> str:
        return json.dumps(self.__dict__)

    @classmethod
    def from_json(cls, payload: str) -> WritePlan:
        return cls(**json.loads(payload))


@dataclass
class _OpenFile:
    """One file being written: row groups are buffered up to the row group size.

    NaN values are counted as they are written (`nan_counts`, by field id, for the float
    and double columns outside lists and maps): Parquet statistics leave NaN out of min and
    max and keep no count of them, and the spec wants the count in the manifest (a reader
    pruning on `isNaN` trusts it)."""

    location: str
    key: FileKey
    partition: list[Any] | None  # the values reported (`FilePartitions.of`)
    sink: Any
    writer: pq.ParquetWriter
    footers: list[pq.FileMetaData]
    float_paths: dict[int, tuple[str, ...]]
    records: int = 0
    buffered: list[pa.Table] = field(default_factory=list)
    buffered_bytes: int = 0
    nan_counts: dict[int, int] = field(default_factory=dict)
    sources: list[pa.Table] = field(default_factory=list)  # with `row_maps`: rows' sources

    def flush(self) -> None:
        if self.buffered:
            table = pa.concat_tables(self.buffered)
            for field_id, path in self.float_paths.items():
                nans = pc.sum(pc.is_nan(_leaf(table, path))).as_py() or 0
                self.nan_counts[field_id] = self.nan_counts.get(field_id, 0) + nans
            self.writer.write_table(table, row_group_size=max(1, table.num_rows))
            self.buffered, self.buffered_bytes = [], 0

    def close(self) -> int:
        """Close the file; its size."""
        self.flush()
        self.writer.close()
        size = self.sink.tell()
        self.sink.close()
        return size


def _leaf(table: pa.Table, path: tuple[str, ...]) -> pa.Array:
    """A column, or a field inside structs, with the nulls of the structs holding it."""
    array = table.column(path[0]).combine_chunks()
    for name in path[1:]:
        array = array.flatten()[array.type.get_field_index(name)]
    return array


def _float_paths(
    fields: Sequence[NestedField], prefix: tuple[str, ...] = ()
) -> dict[int, tuple[str, ...]]:
    """Field id -> path of every float or double field reached through structs only."""
    out: dict[int, tuple[str, ...]] = {}
    for f in fields:
        if isinstance(f.field_type, FloatType | DoubleType):
            out[f.field_id] = (*prefix, f.name)
        elif isinstance(f.field_type, StructType):
            out.update(_float_paths(f.field_type.fields, (*prefix, f.name)))
    return out


class TaskWriter:
    """The files of one task: one open file per group and partition, rolled when full.

    Memory stays bounded whatever the input order: the rows buffered across all open files
    never exceed one row group (all buffers are flushed when they do), and at most
    `_MAX_OPEN` files are open (the least recently written one is closed for a new one).
    Input sorted by partition, as the jobs give it, thus has one file open at a time in
    effect, like Spark's writer.
    """

    def __init__(self, plan: WritePlan, io: FileIO, task: int = 0) -> None:
        """The writer of task number `task` (it starts the files' names), writing through
        `io` (a FileIO of `plan.io`'s properties)."""
        self.plan = plan
        self.io = io
        self.iceberg_schema = Schema.from_json(plan.schema)
        self.metrics = MetricsConfig.from_json(plan.metrics)
        self.schema = arrow_schema(self.iceberg_schema.fields, all_optional=plan.all_optional)
        self.float_paths = _float_paths(self.iceberg_schema.fields)
        self.prefix = f"part-{task:05d}-{uuid.uuid4()}"
        self.sequence = 0
        self.partitions = FilePartitions.from_json(plan.partitions)
        self.provider = plan.provider()
        self.open: dict[FileKey, _OpenFile] = {}
        self.done: list[Reported] = []

    def add(
        self,
        rows: pa.Table,
        *,
        group: int | None = None,
        values: Sequence[str | None] = (),
        sources: pa.Table | None = None,
    ) -> None:
        """Write `rows`, all of `group` (if the write has groups) and of the partition whose
        partition columns' values are `values` (their text forms, if it has such columns);
        with the plan's `row_maps`, `sources` are the rows' sources, row for row."""
        key = (group, tuple(values))
        start = 0
        while start < rows.num_rows:
            current = self.open.pop(key, None) or self._start(key)
            self.open[key] = current  # most recently written last
            room = rows.num_rows - start
            if self.plan.max_records:
                room = min(room, self.plan.max_records - current.records)
            part = rows.slice(start, room)
            if sources is not None:
                current.sources.append(sources.slice(start, room))
            start += room
            current.buffered.append(part)
            current.buffered_bytes += part.nbytes
            current.records += room
            if sum(f.buffered_bytes for f in self.open.values()) >= self.plan.row_group_bytes:
                for opened in self.open.values():
                    opened.flush()
            full = self.plan.max_records and current.records >= self.plan.max_records
            large = self.plan.target_bytes and current.sink.tell() >= self.plan.target_bytes
            if full or large:
                self._finish(key)

    def add_batch(self, batch: pa.Table, key_columns: Sequence[str]) -> None:
        """Write the rows of a batch holding the plan's `data_columns` and the `key_columns`:
        the partition columns' text values (one per `partition_names`), then, in a grouped
        write, the group. Each combination of their values goes to files of its own."""
        rows = batch.select(self.plan.data_columns).rename_columns(self.schema.names)
        rows = rows.cast(self.schema)
        sources = batch.select([SOURCE_FILE, SOURCE_POS]) if self.plan.row_maps else None
        which, keys = _keys(batch, key_columns)
        for index, key in enumerate(keys):
            chosen = None if len(keys) == 1 else np.nonzero(which == index)[0]
            part = rows if chosen is None else rows.take(chosen)
            came = sources if sources is None or chosen is None else sources.take(chosen)
            group, values = (key[-1], key[:-1]) if self.plan.grouped else (None, key)
            self.add(part, group=group, values=values, sources=came)

    def _start(self, key: FileKey) -> _OpenFile:
        if len(self.open) >= _MAX_OPEN:
            self._finish(next(iter(self.open)))
        # Zero-padded sequence: a task's files sort in the order it wrote them.
        codec = self.plan.options["compression"]
        suffix = "parquet" if codec == "none" else f"{codec}.parquet"
        name = f"{self.prefix}-c{self.sequence:06d}.{suffix}"
        self.sequence += 1
        path, partition = self.partitions.of(key)
        if self.provider is not None:
            location = self.provider.new_data_location(name, path)
        else:
            location = f"{self.plan.location}/{f'{path}/{name}' if path else name}"
        sink = self.io.open_output(location, overwrite=True)
        footers: list[pq.FileMetaData] = []
        writer = pq.ParquetWriter(
            sink, self.schema, metadata_collector=footers, **self.plan.options
        )
        return _OpenFile(location, key, partition, sink, writer, footers, self.float_paths)

    def _finish(self, key: FileKey) -> None:
        opened = self.open.pop(key)
        size = opened.close()
        metrics = metrics_of(
            opened.footers[0], size, self.iceberg_schema, self.metrics, opened.nan_counts
        )
        partition = None if opened.partition is None else json.dumps(opened.partition)
        moved = None
        if self.plan.row_maps:
            row_map = f"{self.plan.location}/{ROW_MAPS}/{opened.location.rsplit('/', 1)[-1]}"
            write_row_map(self.io, row_map, opened.sources)
            moved = json.dumps({"row_map": row_map})
        self.done.append((opened.location, key[0], partition, json.dumps(metrics), moved))

    def close(self) -> list[Reported]:
        for key in list(self.open):
            self._finish(key)
        return self.done

    def abort(self) -> None:
        """Close the open files' sinks (an object store's upload is aborted, not completed)."""
        for opened in self.open.values():
            opened.sink.close()


def _keys(table: pa.Table, columns: Sequence[str]) -> tuple[np.ndarray, list[tuple[Any, ...]]]:
    """Per row, the index of its combination of `columns`' values in the returned list
    (first-seen order)."""
    if not columns:
        return np.zeros(table.num_rows, dtype=np.int64), [()]
    key = np.zeros(table.num_rows, dtype=np.int64)
    dictionaries = []
    for name in columns:
        encoded = table.column(name).combine_chunks().dictionary_encode("encode")
        indices = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        values = encoded.dictionary.to_pylist()
        dictionaries.append(values)
        key = key * len(values) + indices
    unique, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    order = np.argsort(first)  # the keys in the order their first row comes
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    combinations = []
    for combined in unique[order]:
        parts = []
        rest = int(combined)
        for values in reversed(dictionaries):
            parts.append(values[rest % len(values)])
            rest //= len(values)
        combinations.append(tuple(reversed(parts)))
    return rank[inverse.reshape(-1)], combinations
