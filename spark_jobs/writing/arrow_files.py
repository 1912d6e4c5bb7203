"""Writing files Spark's Parquet writer cannot produce, with pyarrow on the executors.

Iceberg's `uuid` is FIXED_LEN_BYTE_ARRAY(16) with the UUID logical type, `fixed[L]` is
FIXED_LEN_BYTE_ARRAY(L), `time` is INT64 TIME(MICROS), and every field of a list or map
(element, key, value) carries a field id. Spark's writer produces none of these, so for file
sets with such columns each Spark task converts its Arrow batches to the Iceberg physical
types (`icecore.data.arrow_schema`: a plain Arrow cast does it, from the Spark forms in
`spark_jobs.schema`) and writes them with pyarrow.

A task keeps the rows of each partition in files of their own. A row's partition is given
either by partition columns (`PartitionLayout`: Spark computes the values, the task reads them
back with `partition_values`) or by its group (`_group`, an integer column of the rows: one
(spec, partition) the driver chose before the write, for rows whose partition comes from the
files they replace or point at). Files are rolled at the row limit and at
`write.target-file-size-bytes`, named so that a task's files sort in the order it wrote them
(`superseded_positions` relies on that), and described from their footers -- by the task that
wrote them, from the footer it still holds, so no Spark job reads them back. The table's
Parquet properties (codec and level, row group, page and dictionary sizes) are applied.

Position delete files always take this path: their `file_path` and `pos` are required, as
the spec says, and a job whose only output is delete files then runs no footer job at all.

Where a file goes is the table's location provider's to say (`icecore.location_provider`):
below the write's own directory (`WritePlan.location`, the run's file set), under its
partition's path (Java's `partitionToPath`, `ts_day=2024-01-07/id_bucket=3`) by default; spread
over hash directories, as `<data>/<hash>/<partition path>/<file name>`, when the table uses
object storage. Either way a task reports, with each file, the group of its rows and the
partition values its partition columns gave, as values (`written_batch`): the driver takes a
file's partition from those, never from the file's location.

A retried task writes new files under new names; only the files the successful attempts
report are kept, the others are deleted once the write is done: those below the write's
directory, that is; a failed attempt's hashed files cannot be listed apart from the table's
and are left to orphan removal.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from icecore.data.arrow_schema import arrow_schema
from icecore.data.metrics import MetricsConfig, decode, metrics_of
from icecore.data.partition_texts import partition_values
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
from spark_jobs.common.errors import JobError
from spark_jobs.common.worker import cheap_cache_invalidation, worker_io

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

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
        raise JobError(f"{PARQUET_COMPRESSION.name} {codec!r} is not supported")
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
# their partition columns' values as Spark renders them (`PartitionLayout`).
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
    """What every task needs, sent as JSON with the task closure."""

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


def _task_partition() -> int:
    """The Spark task's partition id; 0 in the driver's own threads (a conversion matched
    there never imports pyspark, which a Spark task's worker always has)."""
    if "pyspark" not in sys.modules:
        return 0
    from pyspark import TaskContext  # noqa: PLC0415 (loaded already)

    context = TaskContext.get()
    return context.partitionId() if context is not None else 0


class TaskWriter:
    """The files of one task: one open file per group and partition, rolled when full.

    Memory stays bounded whatever the input order: the rows buffered across all open files
    never exceed one row group (all buffers are flushed when they do), and at most
    `_MAX_OPEN` files are open (the least recently written one is closed for a new one).
    Input sorted by partition, as the jobs give it, thus has one file open at a time in
    effect, like Spark's writer.
    """

    def __init__(self, plan: WritePlan) -> None:
        self.plan = plan
        self.io = worker_io(plan.io)
        self.iceberg_schema = Schema.from_json(plan.schema)
        self.metrics = MetricsConfig.from_json(plan.metrics)
        self.schema = arrow_schema(self.iceberg_schema.fields, all_optional=plan.all_optional)
        self.float_paths = _float_paths(self.iceberg_schema.fields)
        self.prefix = f"part-{_task_partition():05d}-{uuid.uuid4()}"
        self.sequence = 0
        self.partitions = FilePartitions.from_json(plan.partitions)
        self.provider = plan.provider()
        self.open: dict[FileKey, _OpenFile] = {}
        self.done: list[Reported] = []

    def add(
        self, rows: pa.Table, *, group: int | None = None, values: Sequence[str | None] = ()
    ) -> None:
        """Write `rows`, all of `group` (if the write has groups) and of the partition whose
        partition columns' values are `values` (Spark's renderings, if it has such columns)."""
        key = (group, tuple(values))
        start = 0
        while start < rows.num_rows:
            current = self.open.pop(key, None) or self._start(key)
            self.open[key] = current  # most recently written last
            room = rows.num_rows - start
            if self.plan.max_records:
                room = min(room, self.plan.max_records - current.records)
            part = rows.slice(start, room)
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
        self.done.append((opened.location, key[0], partition, json.dumps(metrics)))

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


# The columns a task groups rows by: each partition column as Spark's string cast, the group.
_PARTITION_COLUMN = "_key_partition{}"
_GROUP_COLUMN = "_key_group"


def _write_batches(batches: Iterator[pa.RecordBatch], payload: str) -> Iterator[pa.RecordBatch]:
    cheap_cache_invalidation()
    plan = WritePlan.from_json(payload)
    writer = TaskWriter(plan)
    columns = [_PARTITION_COLUMN.format(i) for i in range(len(plan.partition_names))]
    if plan.grouped:
        columns.append(_GROUP_COLUMN)
    try:
        for batch in batches:
            table = pa.Table.from_batches([batch])
            rows = table.select(plan.data_columns).rename_columns(writer.schema.names)
            rows = rows.cast(writer.schema)
            which, keys = _keys(table, columns)
            for index, key in enumerate(keys):
                part = rows if len(keys) == 1 else rows.take(np.nonzero(which == index)[0])
                group, values = (key[-1], key[:-1]) if plan.grouped else (None, key)
                writer.add(part, group=group, values=values)
        written = writer.close()
    except BaseException:
        writer.abort()
        raise
    yield written_batch(written)


# What a task reports of a file: location, group, partition values as JSON, metrics as JSON.
Reported = tuple[str, int | None, str | None, str]
_REPORTED = pa.schema(
    [("location", pa.string()), ("group", pa.int32()), ("partition", pa.string()),
     ("metrics", pa.string())]
)  # fmt: skip
WRITTEN = "location string, group int, partition string, metrics string"  # for Spark
WRITTEN_NAMES = tuple(_REPORTED.names)  # a `written_batch` row's, in order


def written_batch(written: Sequence[Reported]) -> pa.RecordBatch:
    """What a writing task reports: each file's location, the group of its rows (null when
    the write has no groups), the partition values its partition columns gave (a JSON list of
    Iceberg's single-value forms; null when it has no such columns) and its metrics as JSON."""
    columns = list(zip(*written, strict=True)) or [() for _ in _REPORTED]
    return pa.RecordBatch.from_arrays(
        [pa.array(c, f.type) for c, f in zip(columns, _REPORTED, strict=True)], schema=_REPORTED
    )


@dataclass(frozen=True)
class Written:
    """A file a task wrote: the group of its rows (None when the write has none), the
    partition values its partition columns gave (JSON forms; None when it has none) and its
    metrics as `DataFile` keyword values."""

    group: int | None
    partition: list[Any] | None
    metrics: dict[str, Any]


def write_with_arrow(
    frame: DataFrame,
    *,
    location: str,
    schema: Schema,
    all_optional: bool,
    metrics: MetricsConfig,
    partition_names: Sequence[str],
    group_column: str | None,
    partitions: FilePartitions,
    io: FileIO,
    io_properties: Mapping[str, str],
    table_properties: Mapping[str, str],
    max_records: int | None,
    target_bytes: int | None,
    hashed: LocationProvider | None = None,
) -> dict[str, Written]:
    """Write `frame` (the schema's columns, then the partition columns and the integer
    `group_column`, if any) below `location`, or where `hashed` puts them; the files written
    (sorted by location).

    `all_optional` writes every column optional whatever the schema says, as Spark's writer
    does with data files."""
    from pyspark.sql import functions as F  # noqa: PLC0415 (Spark work only)

    from spark_jobs.schema import quote_name  # noqa: PLC0415 (Spark work only)

    keys = {*partition_names, *([group_column] if group_column else [])}
    data_columns = [c for c in frame.columns if c not in keys]
    if len(data_columns) != len(schema.fields):
        raise JobError(
            f"expected the {len(schema.fields)} columns of the file set, got {data_columns}"
        )
    key_columns = [
        F.col(quote_name(n)).cast("string").alias(_PARTITION_COLUMN.format(i))
        for i, n in enumerate(partition_names)
    ]
    if group_column:
        key_columns.append(F.col(quote_name(group_column)).cast("int").alias(_GROUP_COLUMN))
    prepared = frame.select(*(F.col(quote_name(c)) for c in data_columns), *key_columns)
    payload = WritePlan.of(
        location=location,
        schema=schema,
        all_optional=all_optional,
        metrics=metrics,
        data_columns=data_columns,
        partition_names=partition_names,
        io_properties=io_properties,
        table_properties=table_properties,
        max_records=max_records,
        target_bytes=target_bytes,
        partitions=partitions,
        hashed=hashed,
        grouped=bool(group_column),
    ).to_json()
    reported = prepared.mapInArrow(partial(_write_batches, payload=payload), WRITTEN).collect()
    return kept_files(io, location, reported)


def kept_files(io: FileIO, location: str, reported: Sequence[Any]) -> dict[str, Written]:
    """The files the successful task attempts reported (`written_batch` rows), sorted by
    location; every other file below `location` (failed or duplicate attempts) is deleted."""
    rows = sorted(reported, key=lambda row: row["location"])
    kept = {
        row["location"]: Written(
            row["group"],
            None if row["partition"] is None else json.loads(row["partition"]),
            decode(json.loads(row["metrics"])),
        )
        for row in rows
    }
    _delete_strays(io, location, list(kept))
    return kept


def _delete_strays(io: FileIO, location: str, kept: Sequence[str]) -> None:
    """Delete files of failed or duplicate task attempts (no manifest will reference them).

    File names are unique (a uuid per task attempt), so they are compared by name: the
    listing may spell the directory differently from how the tasks did."""
    names = {k.rsplit("/", 1)[-1] for k in kept}
    for listed in io.list_prefix(location):
        name = listed.location.rsplit("/", 1)[-1]
        if name.endswith(".parquet") and name not in names:
            io.delete(listed.location, missing_ok=True)
