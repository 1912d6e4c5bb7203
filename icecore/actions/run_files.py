"""The files one action run writes, and the DataFiles a commit adds for them.

Files go where the table's location provider says (`icecore.location_provider`: the data
location is `write.data.path`, or `<location>/data`). By default each run writes below its
own directory there, `<data location>/<job>-<uuid>/<file set>/<partition path>/<file name>`
(the partition path Java's `partitionToPath`, `ts_day=2024-01-07/id_bucket=3`): a failed or
abandoned run is removed by deleting it. A table with `write.object-storage.enabled` has no
such directory: each file goes under hash directories,
`<data location>/<hash>/<partition path>/<file name>`, as Java writes them, and the run
deletes its files one by one. Nothing in the table references these files until the commit,
so a run killed at any point before it leaves the table as it was.

Every file is written by tasks with pyarrow through the table's FileIO
(`icecore.data.parquet_writer`), which describe their files (footer metrics) as they close
them, with the group of the file's rows and the values of its partition: a file's partition
tuple comes from those, never from its path. The engine only schedules the tasks and
collects their reports (Spark: `spark_jobs.writing.files`; the driver's threads).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from icecore.actions.live_files import PartitionKey
from icecore.data.metrics import MetricsConfig
from icecore.data.parquet_writer import FilePartitions, WritePlan
from icecore.data.position_maps import SegmentMap
from icecore.data.task_reports import Written
from icecore.errors import FileError, ValidationError
from icecore.io import FileIO
from icecore.location_provider import LocationProvider, table_locations
from icecore.spec.conversions import value_from_json
from icecore.spec.delete_targets import single_path
from icecore.spec.manifest import DataFile, FileContent, FileFormat
from icecore.spec.metadata import TableMetadata
from icecore.spec.metadata_columns import POSITION_DELETE_SCHEMA
from icecore.spec.partitioning import PartitionSpec
from icecore.spec.properties import WRITE_TARGET_FILE_SIZE_BYTES
from icecore.spec.schema import Schema
from icecore.spec.types import NestedField


@dataclass(frozen=True)
class FileSet:
    """One kind of file a write produces, and how its manifest entries are described.

    A file's partition is that of its rows' partition columns (`partition_columns`, the
    values of `spec`'s non-void fields in their text forms, `icecore.data.partition_texts`),
    else, when the rows carry their group (`groups` is not None), its group's key in
    `groups`, else none. Rows rewritten into another spec carry both: partition columns for
    the partition, the group for the caller (`RunFiles.grouped_files`)."""

    name: str
    content: FileContent
    schema: Schema
    spec: PartitionSpec
    partition_columns: Sequence[str]
    metrics: MetricsConfig
    equality_ids: list[int] | None = None
    sort_order_id: int | None = None
    groups: Mapping[int, PartitionKey] | None = None

    @classmethod
    def position_deletes(
        cls,
        spec: PartitionSpec,
        partition_columns: Sequence[str] = (),
        name: str = "position-deletes",
        *,
        groups: Mapping[int, PartitionKey] | None = None,
    ) -> FileSet:
        """Position delete files: the spec's reserved schema, every metric kept (readers
        bound `file_path` to find the data files a delete file can touch)."""
        return cls(
            name,
            FileContent.POSITION_DELETES,
            POSITION_DELETE_SCHEMA,
            spec,
            partition_columns,
            MetricsConfig.full(),
            groups=groups,
        )

    @classmethod
    def equality_deletes(
        cls,
        name: str,
        key_fields: Sequence[NestedField],
        spec: PartitionSpec,
        partition_columns: Sequence[str],
        metrics: MetricsConfig,
        *,
        groups: Mapping[int, PartitionKey] | None = None,
    ) -> FileSet:
        """Equality delete files of `key_fields`, which are also their equality ids."""
        return cls(
            name,
            FileContent.EQUALITY_DELETES,
            Schema(tuple(key_fields)),
            spec,
            partition_columns,
            metrics,
            equality_ids=[f.field_id for f in key_fields],
            groups=groups,
        )


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
    """The files one job run writes for one table: below one directory of its own (`location`),
    or, in an object-storage table, wherever the table's location provider hashes them. Each
    write is planned here (`write_plan`), done by tasks, and its files recorded (`add`) as
    the tasks reported them; `discard` deletes them all (`icecore.actions.committing`)."""

    def __init__(
        self,
        io: FileIO,
        metadata: TableMetadata,
        job: str,
        io_properties: Mapping[str, str] | None = None,
    ) -> None:
        self.io = io
        self.metadata = metadata
        self.locations: LocationProvider = table_locations(metadata)
        # The run's directory; with hashed locations no file lands below it.
        self.location = f"{self.locations.data_location}/{job}-{uuid.uuid4()}"
        self.io_properties = dict(io_properties or io.properties)
        self._written: list[tuple[str, FileSet]] = []
        self._described: dict[str, Written] = {}  # what the writing tasks reported
        self._other: list[str] = []  # files written outside file sets (deletion vectors)
        self._scratch: set[str] = set()  # files no commit ever references (row maps)

    def write_plan(
        self,
        file_set: FileSet,
        data_columns: Sequence[str] | None = None,
        max_records: int | None = None,
        *,
        location: str | None = None,
        row_maps: bool = False,
    ) -> WritePlan:
        """What the writing tasks of `file_set` need (`TaskWriter`): the rows' columns
        `data_columns` (default: the file set's names) hold the file set's columns in order,
        then come its partition columns and, when it has groups, the group. Files roll at
        `max_records` rows and, but for position deletes (which a reader wants whole, one
        per data file range), at the table's `write.target-file-size-bytes`; every column is
        written optional, as Spark's writer does, but those of position deletes, which the
        spec requires. Files go below `location` (default: the file set's directory)."""
        positions = file_set.content == FileContent.POSITION_DELETES
        names = [f.name for f in file_set.schema.fields]
        return WritePlan.of(
            location=location or self.location_of(file_set),
            schema=file_set.schema,
            all_optional=not positions,
            metrics=file_set.metrics,
            data_columns=names if data_columns is None else data_columns,
            partition_names=file_set.partition_columns,
            io_properties=self.io_properties,
            table_properties=self.metadata.properties,
            max_records=max_records,
            target_bytes=None
            if positions
            else WRITE_TARGET_FILE_SIZE_BYTES.read(self.metadata.properties),
            partitions=self.partitions(file_set),
            hashed=self.hashed,
            grouped=file_set.groups is not None,
            row_maps=row_maps,
        )

    def add(self, file_set: FileSet, described: Mapping[str, Written]) -> None:
        """Files of `file_set` its writing tasks reported (as `kept_files` keeps them)."""
        self._described.update(described)
        self._written.extend((path, file_set) for path in described)

    def position_map(self, inputs: Mapping[str, int]) -> SegmentMap:
        """Where this run's bin-packs put the rows of `inputs` (data file -> its rows), as
        their tasks reported it (`icecore.data.position_maps`)."""
        positions = SegmentMap(inputs)
        for written in self._described.values():
            if written.moved is not None and "segments" in json.loads(written.moved):
                positions.add_report(written.moved)
        return positions

    def row_maps(self) -> dict[str, str]:
        """The row map beside each file a shuffling write wrote (new file -> its map); they
        are the run's scratch files (`drop_scratch`)."""
        found = {
            path: json.loads(w.moved)["row_map"]
            for path, w in self._described.items()
            if w.moved is not None and "row_map" in json.loads(w.moved)
        }
        self._scratch.update(found.values())
        return found

    def drop_scratch(self) -> None:
        """Delete the run's scratch files (row maps): the commit, or the failure, is past."""
        self.io.delete_many(sorted(self._scratch))
        self._scratch.clear()

    def track(self, locations: Iterable[str]) -> None:
        """Other files this run wrote (deletion vectors), for `discard`."""
        self._other.extend(locations)

    def location_of(self, file_set: FileSet) -> str:
        """The file set's directory below the run's (unused with hashed locations)."""
        return f"{self.location}/{file_set.name}"

    @property
    def hashed(self) -> LocationProvider | None:
        """The table's location provider when it hashes file locations (object storage);
        None when files go below `location`."""
        return self.locations if self.locations.hashed else None

    def partitions(self, file_set: FileSet) -> FilePartitions:
        """How the tasks name the partition and partition path of files of `file_set`: the
        groups' paths are known before the write."""
        schema = self.metadata.schema()
        paths = {
            group: self.metadata.spec_by_id(spec_id).partition_path(values, schema)
            for group, (spec_id, values) in (file_set.groups or {}).items()
        }
        return FilePartitions(file_set.spec, schema, paths)

    def files(self) -> list[DataFile]:
        """Every file written so far as a DataFile, with the metrics and partition its task
        reported."""
        return [file for file, _ in self._files()]

    def grouped_files(self) -> list[tuple[DataFile, int]]:
        """Every file written so far (by writes whose rows carry groups), with its group."""
        out = []
        for file, group in self._files():
            if group is None:
                raise ValidationError(f"{file.file_path} was written without a group")
            out.append((file, group))
        return out

    def _files(self) -> list[tuple[DataFile, int | None]]:
        schema = self.metadata.schema()
        out = []
        for path, file_set in self._written:
            written = self._described[path]
            out.append((_data_file(path, file_set, written, schema), written.group))
        return out

    def discard(self) -> None:
        """Delete everything this run wrote (best effort: what stays is only an orphan)."""
        if self.locations.hashed:
            self.io.delete_many([*self._described, *self._other, *self._scratch])
            return
        filesystem, path = self.io.resolve(self.location)
        try:
            filesystem.delete_dir(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise FileError(self.location, f"cannot delete the run's files: {exc}") from exc


def _data_file(location: str, file_set: FileSet, written: Written, schema: Schema) -> DataFile:
    """The DataFile of a file a task wrote: its partition is the values its task reported,
    else its group's, else none (see `FileSet`)."""
    spec_id = file_set.spec.spec_id
    if written.partition is not None:
        types = [f.field_type for f in file_set.spec.partition_type(schema).fields]
        partition = tuple(
            value_from_json(t, v) for t, v in zip(types, written.partition, strict=True)
        )
    elif not file_set.partition_columns and file_set.groups and written.group is not None:
        spec_id, partition = file_set.groups[written.group]
    else:
        partition = tuple(None for _ in file_set.spec.fields)
    described = written.metrics
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
        spec_id=spec_id,
        **described,
    )
