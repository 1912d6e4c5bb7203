"""The files one job run writes, and the DataFiles a commit adds for them.

Each job run writes below its own directory, `<data path>/<job>-<uuid>/<file set>/`, with
the partition directories under it: a failed or abandoned run is removed by deleting it.
Nothing in the table references these files until the commit, so a job killed at any point
before it leaves the table as it was.

Every file is written by the Spark tasks with pyarrow through the table's FileIO
(`arrow_files`), never through a Hadoop FileSystem: an `s3://`, `gs://` or `abfss://` table
needs no Hadoop connector, and the files get Iceberg's own Parquet types (uuid, fixed, time,
field ids on list and map fields). The tasks describe their files (footer metrics) as they
close them. The table's Parquet properties (codec and level, row group, page and dictionary
sizes) apply, and `write.target-file-size-bytes` rolls files.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame

from icecore.data.metrics import MetricsConfig
from icecore.errors import FileError
from icecore.io import FileIO
from icecore.spec.delete_targets import single_path
from icecore.spec.manifest import DataFile, FileContent, FileFormat
from icecore.spec.metadata import TableMetadata
from icecore.spec.metadata_columns import POSITION_DELETE_SCHEMA
from icecore.spec.partitioning import PartitionSpec
from icecore.spec.properties import WRITE_TARGET_FILE_SIZE_BYTES
from icecore.spec.schema import Schema
from icecore.spec.types import NestedField
from spark_jobs.common.errors import JobError
from spark_jobs.schema import invalid_value
from spark_jobs.writing.arrow_files import write_with_arrow
from spark_jobs.writing.layout import PartitionLayout

DATA_PATH = "write.data.path"


@dataclass(frozen=True)
class FileSet:
    """One kind of file a write produces, and how its manifest entries are described."""

    name: str
    content: FileContent
    schema: Schema
    spec: PartitionSpec
    layout: PartitionLayout | None
    metrics: MetricsConfig
    equality_ids: list[int] | None = None
    sort_order_id: int | None = None

    @classmethod
    def position_deletes(
        cls, spec: PartitionSpec, layout: PartitionLayout | None, name: str = "position-deletes"
    ) -> FileSet:
        """Position delete files: the spec's reserved schema, every metric kept (readers
        bound `file_path` to find the data files a delete file can touch)."""
        return cls(
            name,
            FileContent.POSITION_DELETES,
            POSITION_DELETE_SCHEMA,
            spec,
            layout,
            MetricsConfig.full(),
        )

    @classmethod
    def equality_deletes(
        cls,
        name: str,
        key_fields: Sequence[NestedField],
        spec: PartitionSpec,
        layout: PartitionLayout | None,
        metrics: MetricsConfig,
    ) -> FileSet:
        """Equality delete files of `key_fields`, which are also their equality ids."""
        return cls(
            name,
            FileContent.EQUALITY_DELETES,
            Schema(tuple(key_fields)),
            spec,
            layout,
            metrics,
            equality_ids=[f.field_id for f in key_fields],
        )


def data_location(metadata: TableMetadata) -> str:
    return (metadata.property(DATA_PATH) or f"{metadata.location}/data").rstrip("/")


def rows_per_file(metadata: TableMetadata) -> int | None:
    """Rows per file that reach `write.target-file-size-bytes` at the table's average bytes
    per row so far; None (no limit) for a table without data yet."""
    target = WRITE_TARGET_FILE_SIZE_BYTES.read(metadata.properties)
    snapshot = metadata.current_snapshot()
    summary = snapshot.summary if snapshot is not None else None
    if summary is None:
        return None
    try:
        size = int(summary.get("total-files-size") or 0)
        records = int(summary.get("total-records") or 0)
    except ValueError:
        return None
    if size <= 0 or records <= 0:
        return None
    return max(1, int(target / (size / records)))


class RunFiles:
    """The files one job run writes for one table, below one directory of its own."""

    def __init__(
        self,
        io: FileIO,
        metadata: TableMetadata,
        job: str,
        io_properties: Mapping[str, str] | None = None,
    ) -> None:
        self.io = io
        self.metadata = metadata
        self.location = f"{data_location(metadata)}/{job}-{uuid.uuid4()}"
        self.io_properties = dict(io_properties or io.properties)
        self._written: list[tuple[str, FileSet]] = []
        self._described: dict[str, dict[str, Any]] = {}  # metrics the writing tasks reported

    def write(
        self, frame: DataFrame, file_set: FileSet, max_records: int | None = None
    ) -> list[str]:
        """Write `frame` (the file set's columns, then its partition columns); the locations
        of the files it became (`files()` turns them into DataFiles).

        A source value the table's type cannot hold (a malformed uuid, a fixed value of the
        wrong length, ...) fails the write with a JobError naming the column."""
        try:
            return self._write(frame, file_set, max_records)
        except Exception as exc:
            message = invalid_value(exc)
            if message is None:
                raise
            raise JobError(message) from None

    def _write(self, frame: DataFrame, file_set: FileSet, max_records: int | None) -> list[str]:
        positions = file_set.content == FileContent.POSITION_DELETES
        described = write_with_arrow(
            frame,
            location=self.location_of(file_set),
            schema=file_set.schema,
            all_optional=not positions,
            metrics=file_set.metrics,
            partition_names=file_set.layout.names if file_set.layout is not None else [],
            io=self.io,
            io_properties=self.io_properties,
            table_properties=self.metadata.properties,
            max_records=max_records,
            target_bytes=None
            if positions
            else WRITE_TARGET_FILE_SIZE_BYTES.read(self.metadata.properties),
        )
        self.add(file_set, described)
        return list(described)

    def add(self, file_set: FileSet, described: Mapping[str, dict[str, Any]]) -> None:
        """Files of `file_set` written by tasks of the caller's own (location -> metrics as
        `DataFile` keyword values, as `arrow_files.kept_files` gives them)."""
        self._described.update(described)
        self._written.extend((path, file_set) for path in described)

    def location_of(self, file_set: FileSet) -> str:
        return f"{self.location}/{file_set.name}"

    def files(self) -> list[DataFile]:
        """Every file written so far as a DataFile, with the metrics its task reported."""
        out = []
        for path, file_set in self._written:
            relative = path[len(self.location_of(file_set)) + 1 :]
            out.append(_data_file(path, relative, file_set, self._described))
        return out

    def discard(self) -> None:
        """Delete everything this run wrote (best effort: what stays is only an orphan)."""
        filesystem, path = self.io.resolve(self.location)
        try:
            filesystem.delete_dir(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise FileError(self.location, f"cannot delete the run's files: {exc}") from exc


def _data_file(
    location: str, relative: str, file_set: FileSet, metrics: Mapping[str, dict[str, Any]]
) -> DataFile:
    layout = file_set.layout
    if layout is not None and layout.is_partitioned:
        partition = layout.partition_of(relative)
    else:
        partition = tuple(None for _ in file_set.spec.fields)
    described = metrics[location]
    referenced = None
    if file_set.content == FileContent.POSITION_DELETES:
        referenced = single_path(described["lower_bounds"], described["upper_bounds"])
    return DataFile(
        file_path=location,
        file_format=FileFormat.PARQUET,
        partition=partition,
        content=file_set.content,
        equality_ids=file_set.equality_ids,
        sort_order_id=file_set.sort_order_id,
        referenced_data_file=referenced,
        spec_id=file_set.spec.spec_id,
        **described,
    )
