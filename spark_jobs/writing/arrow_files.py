"""Writing files Spark's Parquet writer cannot produce, with pyarrow on the executors.

Iceberg's `uuid` is FIXED_LEN_BYTE_ARRAY(16) with the UUID logical type, `fixed[L]` is
FIXED_LEN_BYTE_ARRAY(L), `time` is INT64 TIME(MICROS), and every field of a list or map
(element, key, value) carries a field id. Spark's writer produces none of these, so for file
sets with such columns each Spark task converts its Arrow batches to the Iceberg physical
types (`icecore.data.arrow_schema`: a plain Arrow cast does it, from the Spark forms in
`spark_jobs.schema`) and writes them with pyarrow.

Everything around the writer stays what Spark's writer does, so the rest of the pipeline
cannot tell the difference: the partition values are the same Spark columns
(`PartitionLayout`), rendered into the same `name=value` directories (Spark's own string cast
and path escaping, so `PartitionLayout.partition_of` and Spark's partition discovery read them
back), files are rolled at the row limit and at `write.target-file-size-bytes`, named so that
a task's files sort in the order it wrote them (`superseded_positions` relies on that), and
described from their footers like any other file -- by the task that wrote them, from the
footer it still holds, so no Spark job reads them back. The table's Parquet properties (codec
and level, row group, page and dictionary sizes) are applied.

Position delete files always take this path: their `file_path` and `pos` are required, as
the spec says, and a job whose only output is delete files then runs no footer job at all.

Where a file goes is the table's location provider's to say (`icecore.location_provider`):
below the write's own directory (`WritePlan.location`, the run's file set) by default; spread
over hash directories, as `<data>/<hash>/<partition path>/<file name>`, when the table uses
object storage (`Placement`). Either way a task reports, with each file, the partition
directory it wrote the file for: the driver reads a file's partition from that, never from
the file's location.

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
from icecore.io import FileIO
from icecore.location_provider import LocationProvider
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
from spark_jobs.writing.layout import DEFAULT_PARTITION, partition_values

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_MAX_OPEN = 16
# Characters Spark escapes in partition directory names (ExternalCatalogUtils.escapePathName).
_ESCAPED = frozenset([chr(c) for c in range(1, 32)] + list("\"#%'*/:=?\\\x7f{[]^"))
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


def escape_path_name(text: str) -> str:
    """Spark's escaping of a partition directory name or value (`%XX` for a few characters)."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in text)


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


@dataclass(frozen=True)
class Placement:
    """Where files go in an object-storage table: the table's location provider, and the
    partition path (Java's `partitionToPath`, `ts_hour=2024-01-07-10`) of each partition
    directory a task makes: given in `paths` for the directories known before the write (a
    group's, `_group=7`), else read back from the directories of `spec`'s values. Directory
    levels named in `hidden` group rows but are no partition (`_group`): they are no part of
    a path."""

    provider: LocationProvider
    spec: PartitionSpec
    schema: Schema
    paths: Mapping[str, str] = field(default_factory=dict)
    hidden: tuple[str, ...] = ()

    def location(self, directory: str, name: str) -> str:
        path = self.paths.get(directory)
        if path is None:
            parts = [p for p in directory.split("/") if p and p.split("=")[0] not in self.hidden]
            values = partition_values(self.spec, self.schema, parts) if parts else None
            path = self.spec.partition_path(values, self.schema) if values is not None else ""
        return self.provider.new_data_location(name, path)

    def to_json(self) -> dict[str, Any]:
        return {
            "provider": self.provider.to_json(),
            "spec": self.spec.to_json(),
            "schema": self.schema.to_json(),
            "paths": dict(self.paths),
            "hidden": list(self.hidden),
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Placement:
        return cls(
            LocationProvider.from_json(obj["provider"]),
            PartitionSpec.from_json(obj["spec"]),
            Schema.from_json(obj["schema"]),
            obj["paths"],
            tuple(obj["hidden"]),
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
    placement: dict[str, Any] | None = None  # `Placement.to_json()`; None: below `location`

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
        placement: Placement | None = None,
    ) -> WritePlan:
        """The plan of files below `location` (or placed by `placement`), with the table's
        Parquet properties."""
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
            placement=None if placement is None else placement.to_json(),
        )

    def placed(self) -> Placement | None:
        return None if self.placement is None else Placement.from_json(self.placement)

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
    directory: str
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
    """The files of one task: one open file per partition directory, rolled when full.

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
        self.placement = plan.placed()
        self.open: dict[str, _OpenFile] = {}
        self.done: list[tuple[str, str, str]] = []  # (location, directory, metrics as JSON)

    def add(self, directory: str, rows: pa.Table) -> None:
        start = 0
        while start < rows.num_rows:
            current = self.open.pop(directory, None) or self._start(directory)
            self.open[directory] = current  # most recently written last
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
                self._finish(directory)

    def _start(self, directory: str) -> _OpenFile:
        if len(self.open) >= _MAX_OPEN:
            self._finish(next(iter(self.open)))
        # Zero-padded sequence: a task's files sort in the order it wrote them.
        codec = self.plan.options["compression"]
        suffix = "parquet" if codec == "none" else f"{codec}.parquet"
        name = f"{self.prefix}-c{self.sequence:06d}.{suffix}"
        self.sequence += 1
        if self.placement is not None:
            location = self.placement.location(directory, name)
        else:
            relative = f"{directory}/{name}" if directory else name
            location = f"{self.plan.location}/{relative}"
        sink = self.io.open_output(location, overwrite=True)
        footers: list[pq.FileMetaData] = []
        writer = pq.ParquetWriter(
            sink, self.schema, metadata_collector=footers, **self.plan.options
        )
        return _OpenFile(location, directory, sink, writer, footers, self.float_paths)

    def _finish(self, directory: str) -> None:
        opened = self.open.pop(directory)
        size = opened.close()
        metrics = metrics_of(
            opened.footers[0], size, self.iceberg_schema, self.metrics, opened.nan_counts
        )
        self.done.append((opened.location, opened.directory, json.dumps(metrics)))

    def close(self) -> list[tuple[str, str, str]]:
        for directory in list(self.open):
            self._finish(directory)
        return self.done

    def abort(self) -> None:
        """Close the open files' sinks (an object store's upload is aborted, not completed)."""
        for opened in self.open.values():
            opened.sink.close()


def _directories(table: pa.Table, names: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """Per row, the index of its partition directory in the returned list (first-seen order)."""
    if not names:
        return np.zeros(table.num_rows, dtype=np.int64), [""]
    key = np.zeros(table.num_rows, dtype=np.int64)
    dictionaries = []
    for i, name in enumerate(names):
        encoded = table.column(f"_dir{i}").combine_chunks().dictionary_encode("encode")
        indices = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        values = encoded.dictionary.to_pylist()
        dictionaries.append((name, values))
        key = key * len(values) + indices
    unique, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    order = np.argsort(first)  # the keys in the order their first row comes
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    directories = []
    for combined in unique[order]:
        parts = []
        rest = int(combined)
        for name, values in reversed(dictionaries):
            value = values[rest % len(values)]
            rest //= len(values)
            text = DEFAULT_PARTITION if value is None else escape_path_name(value)
            parts.append(f"{escape_path_name(name)}={text}")
        directories.append("/".join(reversed(parts)))
    return rank[inverse.reshape(-1)], directories


def _write_batches(batches: Iterator[pa.RecordBatch], payload: str) -> Iterator[pa.RecordBatch]:
    cheap_cache_invalidation()
    plan = WritePlan.from_json(payload)
    writer = TaskWriter(plan)
    try:
        for batch in batches:
            table = pa.Table.from_batches([batch])
            rows = table.select(plan.data_columns).rename_columns(writer.schema.names)
            rows = rows.cast(writer.schema)
            which, directories = _directories(table, plan.partition_names)
            if len(directories) == 1:
                writer.add(directories[0], rows)
                continue
            for index, directory in enumerate(directories):
                writer.add(directory, rows.take(np.nonzero(which == index)[0]))
        written = writer.close()
    except BaseException:
        writer.abort()
        raise
    yield written_batch(written)


WRITTEN = "location string, directory string, metrics string"  # `written_batch`, for Spark


def written_batch(written: Sequence[tuple[str, str, str]]) -> pa.RecordBatch:
    """What a writing task reports: each file's location, the partition directory it was
    written for, and its metrics as JSON."""
    columns = list(zip(*written, strict=True)) or [(), (), ()]
    return pa.RecordBatch.from_arrays(
        [pa.array(column, pa.string()) for column in columns],
        names=["location", "directory", "metrics"],
    )


@dataclass(frozen=True)
class Written:
    """A file a task wrote: the partition directory it was written for ("" when none) and
    its metrics as `DataFile` keyword values."""

    directory: str
    metrics: dict[str, Any]


def write_with_arrow(
    frame: DataFrame,
    *,
    location: str,
    schema: Schema,
    all_optional: bool,
    metrics: MetricsConfig,
    partition_names: Sequence[str],
    io: FileIO,
    io_properties: Mapping[str, str],
    table_properties: Mapping[str, str],
    max_records: int | None,
    target_bytes: int | None,
    placement: Placement | None = None,
) -> dict[str, Written]:
    """Write `frame` (the schema's columns, then the partition columns) below `location`, or
    where `placement` puts them; the files written (sorted by location).

    `all_optional` writes every column optional whatever the schema says, as Spark's writer
    does with data files."""
    from pyspark.sql import functions as F  # noqa: PLC0415 (Spark work only)

    from spark_jobs.schema import quote_name  # noqa: PLC0415 (Spark work only)

    data_columns = [c for c in frame.columns if c not in set(partition_names)]
    if len(data_columns) != len(schema.fields):
        raise JobError(
            f"expected the {len(schema.fields)} columns of the file set, got {data_columns}"
        )
    directory_columns = [
        F.col(quote_name(n)).cast("string").alias(f"_dir{i}") for i, n in enumerate(partition_names)
    ]
    prepared = frame.select(*(F.col(quote_name(c)) for c in data_columns), *directory_columns)
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
        placement=placement,
    ).to_json()
    reported = prepared.mapInArrow(partial(_write_batches, payload=payload), WRITTEN).collect()
    return kept_files(io, location, reported)


def kept_files(io: FileIO, location: str, reported: Sequence[Any]) -> dict[str, Written]:
    """The files the successful task attempts reported (`written_batch` rows), sorted by
    location; every other file below `location` (failed or duplicate attempts) is deleted."""
    rows = sorted(reported, key=lambda row: row["location"])
    kept = {
        row["location"]: Written(row["directory"], decode(json.loads(row["metrics"])))
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
