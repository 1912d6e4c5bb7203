"""A small writer of real format-v2 tables on local disk, for tests.

It does what an engine's commit does, with icecore's own building blocks and none of a
catalog's concurrency control: Parquet files with Iceberg field ids, their metrics from the
footer, manifests for the new files, carried-over (or rewritten) manifests of the parent,
a manifest list, a summary, and a new `NNNNN-<uuid>.metadata.json` with its logs and refs.
Engines nobody here wrote then read these tables, which is what makes the tests worth having.

    table = LocalTable.create(tmp_path / "t", schema)
    a = table.write_data([{"id": 1, "data": "X"}])
    table.commit(add=[a])
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from icecore.io import FileIO
from icecore.scan import snapshot_manifests
from icecore.spec.manifest import DataFile, FileContent, FileFormat, ManifestEntry, ManifestWriter
from icecore.spec.manifest import read_manifest as _read_manifest
from icecore.spec.manifest_list import ManifestContent, ManifestFile, ManifestListWriter
from icecore.spec.metadata import TableMetadata, read_table_metadata, write_table_metadata
from icecore.spec.partitioning import UNPARTITIONED, PartitionField, PartitionSpec
from icecore.spec.refs import MAIN_BRANCH, SnapshotRef, SnapshotRefType
from icecore.spec.schema import Schema
from icecore.spec.snapshots import (
    MetadataLogEntry,
    Operation,
    Snapshot,
    SnapshotLogEntry,
    SummaryCounts,
    build_summary,
)
from icecore.spec.transforms import parse_transform
from icecore.spec.types import LongType, NestedField, StringType

from .parquet import to_arrow, write_parquet

# Reserved columns of position delete files (spec: "Position Delete Files").
DELETE_FILE_PATH = NestedField(2147483546, "file_path", StringType(), required=True)
DELETE_POS = NestedField(2147483545, "pos", LongType(), required=True)

Row = Mapping[str, Any]


def _new_id() -> int:
    """A positive 63-bit snapshot id, as Java draws them."""
    return uuid.uuid4().int & ((1 << 63) - 1)


class LocalTable:
    """A v2 table under a local directory; `metadata` is always the latest committed version."""

    def __init__(self, io: FileIO, metadata: TableMetadata) -> None:
        self.io = io
        self.metadata = metadata
        self._files: dict[str, DataFile] = {}

    @classmethod
    def create(
        cls,
        location: Path | str,
        schema: Schema,
        spec: PartitionSpec = UNPARTITIONED,
        properties: Mapping[str, str] | None = None,
    ) -> LocalTable:
        spec.validate(schema)
        metadata = TableMetadata(
            format_version=2,
            table_uuid=str(uuid.uuid4()),
            location=str(location),
            last_sequence_number=0,
            last_updated_ms=int(time.time() * 1000),
            last_column_id=schema.highest_field_id,
            schemas=(schema,),
            current_schema_id=schema.schema_id,
            partition_specs=(spec,),
            default_spec_id=spec.spec_id,
            last_partition_id=spec.last_assigned_field_id,
            properties=dict(properties or {}),
        )
        table = cls(FileIO(), metadata)
        table._write_metadata(metadata, version=0)
        return table

    @property
    def location(self) -> str:
        return self.metadata.location

    @property
    def metadata_location(self) -> str:
        assert self.metadata.metadata_location is not None
        return self.metadata.metadata_location

    @property
    def schema(self) -> Schema:
        return self.metadata.schema()

    # Files ----------------------------------------------------------------------------------

    def partition_of(self, row: Row, spec_id: int | None = None) -> tuple[Any, ...]:
        """The partition tuple of `row` under a spec, computed with icecore's transforms."""
        spec = self._spec(spec_id)
        values = []
        for f in spec.fields:
            source = self.schema.find_field(f.source_id)
            values.append(f.transform.apply(row.get(source.name), source.field_type))
        return tuple(values)

    def write_data(
        self, rows: Sequence[Row], *, spec_id: int | None = None, name: str | None = None
    ) -> DataFile:
        """A Parquet data file of `rows` (icecore in-memory values), all in one partition."""
        spec = self._spec(spec_id)
        partitions = {self.partition_of(r, spec.spec_id) for r in rows}
        if len(partitions) != 1:
            raise ValueError(f"rows span {len(partitions)} partitions; write one file each")
        fields = self.schema.fields
        return self._write(
            rows, fields, FileContent.DATA, spec.spec_id, partitions.pop(), name=name
        )

    def write_position_deletes(
        self,
        deletes: Iterable[tuple[str, int]],
        *,
        partition: tuple[Any, ...] | None = None,
        spec_id: int | None = None,
        name: str | None = None,
        referenced_data_file: str | None = None,
    ) -> DataFile:
        """A position delete file, sorted by (file_path, pos) as the spec requires.

        Without `partition`, the spec and partition are those of the data files named,
        which must have been written by this table object and agree.
        """
        ordered = sorted(deletes)
        if partition is None:
            keys = {(self._files[p].spec_id, self._files[p].partition) for p, _ in ordered}
            if len(keys) != 1:
                raise ValueError("position deletes span partitions; pass partition explicitly")
            spec_id, partition = keys.pop()
        rows = [{"file_path": path, "pos": pos} for path, pos in ordered]
        return self._write(
            rows,
            (DELETE_FILE_PATH, DELETE_POS),
            FileContent.POSITION_DELETES,
            self._spec(spec_id).spec_id,
            partition,
            name=name,
            referenced_data_file=referenced_data_file,
        )

    def write_equality_deletes(
        self,
        rows: Sequence[Row],
        columns: Sequence[str],
        *,
        partition: tuple[Any, ...] | None = None,
        spec_id: int | None = None,
        name: str | None = None,
    ) -> DataFile:
        """An equality delete file holding `columns` of `rows`; `equality_ids` are theirs.

        Without `partition`, it is computed from the rows, which then must hold every
        partition source column and share one partition.
        """
        spec = self._spec(spec_id)
        if partition is None:
            partitions = {self.partition_of(r, spec.spec_id) for r in rows}
            if len(partitions) != 1:
                raise ValueError("equality deletes span partitions; pass partition explicitly")
            partition = partitions.pop()
        fields = tuple(self.schema.find_field(c) for c in columns)
        return self._write(
            rows,
            fields,
            FileContent.EQUALITY_DELETES,
            spec.spec_id,
            partition,
            name=name,
            equality_ids=[f.field_id for f in fields],
        )

    def _write(
        self,
        rows: Sequence[Row],
        fields: Sequence[NestedField],
        content: FileContent,
        spec_id: int,
        partition: tuple[Any, ...],
        *,
        name: str | None,
        equality_ids: list[int] | None = None,
        referenced_data_file: str | None = None,
    ) -> DataFile:
        spec = self.metadata.spec_by_id(spec_id)
        directory = Path(self.location, "data")
        if spec.fields:
            directory /= spec.partition_path(partition, self.schema)
        directory.mkdir(parents=True, exist_ok=True)
        path = str(directory / f"{name or uuid.uuid4()}.parquet")
        if Path(path).exists():
            raise FileExistsError(path)
        metrics = write_parquet(path, to_arrow(fields, rows), fields)
        data_file = DataFile(
            file_path=path,
            file_format=FileFormat.PARQUET,
            partition=partition,
            record_count=metrics.record_count,
            file_size_in_bytes=Path(path).stat().st_size,
            content=content,
            column_sizes=metrics.column_sizes,
            value_counts=metrics.value_counts,
            null_value_counts=metrics.null_value_counts,
            nan_value_counts=metrics.nan_value_counts,
            lower_bounds=metrics.lower_bounds,
            upper_bounds=metrics.upper_bounds,
            equality_ids=equality_ids,
            referenced_data_file=referenced_data_file,
            spec_id=spec_id,
        )
        self._files[path] = data_file
        return data_file

    # Commits --------------------------------------------------------------------------------

    def commit(
        self,
        add: Iterable[DataFile] = (),
        remove: Iterable[DataFile] = (),
        *,
        branch: str = MAIN_BRANCH,
        operation: Operation | None = None,
    ) -> Snapshot:
        """Commit a snapshot on `branch` adding and removing files; return the snapshot.

        Parent manifests that list a removed file are rewritten with it DELETED and the
        rest EXISTING; the others are carried over as they are.
        """
        add, removed = list(add), {f.file_path for f in remove}
        metadata = self.metadata
        parent = metadata.snapshot_for_ref(branch) if branch in metadata.refs else None
        snapshot_id = _new_id()
        sequence_number = metadata.last_sequence_number + 1
        counts = SummaryCounts()
        partitions: set[tuple[int, tuple[Any, ...]]] = set()

        carried: list[ManifestFile] = []
        gone: list[DataFile] = []
        for manifest in snapshot_manifests(self.io, parent) if parent else ():
            carried.append(self._carry_over(manifest, snapshot_id, removed, gone))
        missing = removed - {f.file_path for f in gone}
        if missing:
            raise ValueError(f"cannot remove files that are not live: {sorted(missing)}")
        for f in gone:
            counts.removed_file(f.content, f.record_count, f.file_size_in_bytes)
            partitions.add((f.spec_id, f.partition))

        groups: dict[tuple[int, bool], list[DataFile]] = {}
        for f in add:
            counts.added_file(f.content, f.record_count, f.file_size_in_bytes)
            partitions.add((f.spec_id, f.partition))
            groups.setdefault((f.spec_id, f.content != FileContent.DATA), []).append(f)
        new = []
        for (spec_id, deletes), files in sorted(groups.items()):
            writer = self._manifest_writer(
                self.metadata.spec_by_id(spec_id),
                snapshot_id,
                ManifestContent.DELETES if deletes else ManifestContent.DATA,
            )
            for f in files:
                writer.add(f)
            new.append(writer.close())

        list_location = self._metadata_file(f"snap-{snapshot_id}-1-{uuid.uuid4()}.avro")
        with ManifestListWriter(
            self.io,
            list_location,
            snapshot_id,
            parent.snapshot_id if parent else None,
            sequence_number,
        ) as manifest_list:
            manifest_list.add_all(new + carried)

        summary = build_summary(
            operation or _operation(add, bool(removed)),
            counts,
            parent,
            changed_partition_count=len(partitions),
        )
        timestamp_ms = self._clock()
        snapshot = Snapshot(
            snapshot_id=snapshot_id,
            timestamp_ms=timestamp_ms,
            manifest_list=list_location,
            parent_snapshot_id=parent.snapshot_id if parent else None,
            sequence_number=sequence_number,
            summary=summary,
            schema_id=metadata.current_schema_id,
        )
        ref = metadata.refs.get(branch)
        changes: dict[str, Any] = {
            "last_sequence_number": sequence_number,
            "snapshots": (*metadata.snapshots, snapshot),
            "refs": {
                **metadata.refs,
                branch: replace(ref, snapshot_id=snapshot_id)
                if ref
                else SnapshotRef(snapshot_id, SnapshotRefType.BRANCH),
            },
        }
        if branch == MAIN_BRANCH:
            changes["current_snapshot_id"] = snapshot_id
            changes["snapshot_log"] = (
                *metadata.snapshot_log,
                SnapshotLogEntry(timestamp_ms, snapshot_id),
            )
        self._update(timestamp_ms, **changes)
        return snapshot

    def _carry_over(
        self,
        manifest: ManifestFile,
        snapshot_id: int,
        removed: set[str],
        gone: list[DataFile],
    ) -> ManifestFile:
        spec = self.metadata.spec_by_id(manifest.partition_spec_id)
        entries = list(_read_manifest(self.io, manifest, spec=spec, live_only=True))
        if not any(e.data_file.file_path in removed for e in entries):
            return manifest
        writer = self._manifest_writer(spec, snapshot_id, manifest.content)
        for entry in entries:
            if entry.data_file.file_path in removed:
                writer.delete(entry)
                gone.append(entry.data_file)
            else:
                writer.existing(entry)
        return writer.close()

    def _manifest_writer(
        self, spec: PartitionSpec, snapshot_id: int, content: ManifestContent
    ) -> ManifestWriter:
        location = self._metadata_file(f"{uuid.uuid4()}-m0.avro")
        return ManifestWriter(self.io, location, spec, self.schema, snapshot_id, content=content)

    def set_ref(
        self, name: str, snapshot_id: int, ref_type: SnapshotRefType = SnapshotRefType.TAG
    ) -> None:
        """Point a tag (or a branch) at a snapshot; `main` moves with `commit` only."""
        if name == MAIN_BRANCH:
            raise ValueError("commit to move main")
        refs = {**self.metadata.refs, name: SnapshotRef(snapshot_id, ref_type)}
        self._update(self._clock(), refs=refs)

    def add_spec(self, fields: Sequence[tuple[str, str, str]]) -> PartitionSpec:
        """Make a new spec of (source column, transform, name) fields the default one.

        Field ids continue from `last-partition-id`, as v2 requires, so that a partition
        field id never means two things in one table.
        """
        metadata = self.metadata
        first = metadata.last_partition_id + 1
        spec = PartitionSpec(
            max(s.spec_id for s in metadata.partition_specs) + 1,
            tuple(
                PartitionField(self.schema.find_field(source).field_id, first + i,
                               parse_transform(transform), name)
                for i, (source, transform, name) in enumerate(fields)
            ),
        )  # fmt: skip
        spec.validate(self.schema)
        self._update(
            self._clock(),
            partition_specs=(*metadata.partition_specs, spec),
            default_spec_id=spec.spec_id,
            last_partition_id=max(metadata.last_partition_id, spec.last_assigned_field_id),
        )
        return spec

    def live_entries(self, snapshot: Snapshot | None = None) -> list[ManifestEntry]:
        """Every live entry of a snapshot (default: current), data and deletes."""
        snapshot = snapshot or self.metadata.current_snapshot()
        assert snapshot is not None
        return [
            entry
            for manifest in snapshot_manifests(self.io, snapshot)
            for entry in _read_manifest(
                self.io, manifest, spec=self.metadata.spec_by_id(manifest.partition_spec_id)
            )
            if entry.is_live
        ]

    # Metadata files -------------------------------------------------------------------------

    def _spec(self, spec_id: int | None) -> PartitionSpec:
        return self.metadata.spec() if spec_id is None else self.metadata.spec_by_id(spec_id)

    def _clock(self) -> int:
        """Now, but never before the last update: logs must not go back in time."""
        return max(int(time.time() * 1000), self.metadata.last_updated_ms + 1)

    def _metadata_file(self, name: str) -> str:
        return str(Path(self.location, "metadata", name))

    def _update(self, timestamp_ms: int, **changes: Any) -> None:
        previous = self.metadata
        log_entry = MetadataLogEntry(previous.last_updated_ms, self.metadata_location)
        metadata = replace(
            previous,
            last_updated_ms=timestamp_ms,
            metadata_log=(*previous.metadata_log, log_entry),
            **changes,
        )
        version = int(Path(self.metadata_location).name.split("-", 1)[0]) + 1
        self._write_metadata(metadata, version)

    def _write_metadata(self, metadata: TableMetadata, version: int) -> None:
        location = self._metadata_file(f"{version:05d}-{uuid.uuid4()}.metadata.json")
        write_table_metadata(self.io, location, metadata)
        self.io.write_bytes(self._metadata_file("version-hint.text"), b"%d" % version, True)
        # Read back: every test then also checks that what we wrote parses.
        self.metadata = read_table_metadata(self.io, location)


def _operation(added: Sequence[DataFile], removes: bool) -> Operation:
    """Java's choice: append adds data only, delete only takes away, overwrite does both."""
    adds_data = any(f.content == FileContent.DATA for f in added)
    adds_deletes = any(f.content != FileContent.DATA for f in added)
    if adds_data and not (adds_deletes or removes):
        return Operation.APPEND
    if not adds_data:
        return Operation.DELETE
    return Operation.OVERWRITE
