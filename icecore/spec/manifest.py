"""Manifests: the Avro files listing a snapshot's data and delete files (spec: "Manifests").

`DataFile` and `ManifestEntry` are created once per file on every scan plan (500,000 times
for a large table), so they are plain slotted dataclasses: a frozen dataclass costs about
seven times as much to build. Treat them as values all the same; nothing in icecore mutates
one after it is built.

Reading applies the spec's inheritance rules, so callers never see a null snapshot id or
data sequence number for a committed manifest:
- `snapshot_id` null -> the manifest's `added_snapshot_id`;
- `sequence_number` / `file_sequence_number` null on an ADDED entry -> the manifest's
  `sequence_number` (left None while the manifest is not committed yet);
- v1 manifests, which have no sequence number columns -> 0;
- EXISTING and DELETED entries keep the numbers they carry.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from enum import IntEnum, StrEnum
from types import TracebackType
from typing import TYPE_CHECKING, Any

from icecore.avro.container import (
    AvroFile,
    AvroStream,
    field_type,
    rename_fields,
    select,
    with_field_type,
)
from icecore.avro.schema import (
    DATA_FILE_ID,
    FIELD_ID,
    METRICS_FIELD_IDS,
    PARTITION_ID,
    data_file_type,
    make_compatible_name,
    manifest_entry_avro_schema,
    manifest_entry_type,
)
from icecore.errors import ValidationError
from icecore.spec.manifest_list import (
    UNASSIGNED_SEQ,
    ManifestContent,
    ManifestFile,
    PartitionFieldStats,
)
from icecore.spec.types import StructType

if TYPE_CHECKING:
    from icecore.io import FileIO
    from icecore.spec.partitioning import PartitionSpec
    from icecore.spec.schema import Schema

FORMAT_VERSION = 2  # the version written unless the table is v3


class FileContent(IntEnum):
    DATA = 0
    POSITION_DELETES = 1
    EQUALITY_DELETES = 2


class EntryStatus(IntEnum):
    EXISTING = 0
    ADDED = 1
    DELETED = 2


class FileFormat(StrEnum):
    """Written upper-case, as Java does; read case-insensitively (the spec shows lower)."""

    AVRO = "AVRO"
    ORC = "ORC"
    PARQUET = "PARQUET"
    PUFFIN = "PUFFIN"


@dataclass(slots=True)
class DataFile:
    """A data or delete file as a manifest records it.

    `partition` holds the partition values in the order of the spec's fields, in icecore's
    in-memory representation. Metrics maps are keyed by column field id; bounds are
    single-value serialized bytes. `spec_id` is not stored in the file: it is the
    partition spec of the manifest that lists the file.
    """

    file_path: str
    file_format: FileFormat
    partition: tuple[Any, ...]
    record_count: int
    file_size_in_bytes: int
    content: FileContent = FileContent.DATA
    column_sizes: dict[int, int] | None = None
    value_counts: dict[int, int] | None = None
    null_value_counts: dict[int, int] | None = None
    nan_value_counts: dict[int, int] | None = None
    lower_bounds: dict[int, bytes] | None = None
    upper_bounds: dict[int, bytes] | None = None
    key_metadata: bytes | None = None
    split_offsets: list[int] | None = None
    equality_ids: list[int] | None = None
    sort_order_id: int | None = None
    referenced_data_file: str | None = None
    # v3: the row id of the file's first row (inherited from the manifest when null), and a
    # deletion vector's byte range within its Puffin file.
    first_row_id: int | None = None
    content_offset: int | None = None
    content_size_in_bytes: int | None = None
    spec_id: int = 0

    @property
    def is_deletion_vector(self) -> bool:
        return (
            self.file_format == FileFormat.PUFFIN and self.content == FileContent.POSITION_DELETES
        )


def content_key(content_file: DataFile) -> str:
    """What tells content files apart: the location, and for a deletion vector also its
    offset, since one Puffin file holds the DVs of many data files (Java's `DeleteFileSet`)."""
    if content_file.content_offset is not None and content_file.is_deletion_vector:
        return f"{content_file.file_path}#{content_file.content_offset}"
    return content_file.file_path


@dataclass(slots=True)
class ManifestEntry:
    """A file's status in one manifest, and the snapshot and sequence numbers tracking it.

    After reading, `snapshot_id` and `sequence_number` are always set for committed
    manifests. `file_sequence_number` is None only for EXISTING/DELETED entries written by
    Iceberg versions that predate it (before Java 1.2); it is informational only.
    """

    status: EntryStatus
    snapshot_id: int | None
    sequence_number: int | None
    file_sequence_number: int | None
    data_file: DataFile

    @property
    def is_live(self) -> bool:
        return self.status != EntryStatus.DELETED


class ManifestWriter:
    """Writes one v2 manifest of `content` for files of `spec`, added by `snapshot_id`.

    Entries are encoded in memory as they come (`length()` says how far it got) and the file
    is written in one piece by `close()`, which returns the
    `ManifestFile` to put in the manifest list. Its `sequence_number` (and its
    `min_sequence_number` when no entry carries one) are `UNASSIGNED_SEQ` until
    `ManifestListWriter` assigns the committing snapshot's number.
    """

    def __init__(
        self,
        io: FileIO,
        location: str,
        spec: PartitionSpec,
        schema: Schema,
        snapshot_id: int,
        *,
        content: ManifestContent = ManifestContent.DATA,
        codec: str = "deflate",
        format_version: int = FORMAT_VERSION,
    ) -> None:
        self._io = io
        self.format_version = max(format_version, FORMAT_VERSION)
        self.location = location
        self.spec = spec
        self.schema = schema
        self.snapshot_id = snapshot_id
        self.content = ManifestContent(content)
        self._codec = codec
        partition_type = spec.partition_type(schema)
        self._avro_schema = manifest_entry_avro_schema(partition_type, self.format_version)
        self._partition_names = [make_compatible_name(f.name) for f in partition_type.fields]
        self._partition_stats = [PartitionFieldStats(f.field_type) for f in partition_type.fields]
        self._stream = AvroStream(self._avro_schema, metadata=self._metadata(), codec=codec)
        self._counts = {status: [0, 0] for status in EntryStatus}  # [files, rows]
        self._min_sequence_number: int | None = None
        self._result: ManifestFile | None = None

    def add(self, data_file: DataFile, data_sequence_number: int | None = None) -> None:
        """Add a file new in this snapshot.

        Its sequence numbers are left null, to be inherited from the manifest list at
        commit, unless `data_sequence_number` says its data is older (e.g. compaction of
        files whose equality deletes must keep applying): then that number is written.
        """
        self._write(EntryStatus.ADDED, self.snapshot_id, data_sequence_number, None, data_file)

    def existing(self, entry: ManifestEntry) -> None:
        """Carry a live file over from another manifest, keeping its snapshot and numbers."""
        self._require_sequence_number(entry)
        self._write(
            EntryStatus.EXISTING,
            entry.snapshot_id,
            entry.sequence_number,
            entry.file_sequence_number,
            entry.data_file,
        )

    def delete(self, entry: ManifestEntry) -> None:
        """Record that this snapshot removes a file, keeping its sequence numbers."""
        self._require_sequence_number(entry)
        self._write(
            EntryStatus.DELETED,
            self.snapshot_id,
            entry.sequence_number,
            entry.file_sequence_number,
            entry.data_file,
        )

    def _metadata(self) -> dict[str, str]:
        return {
            "schema": json.dumps(self.schema.to_json()),
            "schema-id": str(self.schema.schema_id),
            "partition-spec": json.dumps(self.spec.fields_json()),
            "partition-spec-id": str(self.spec.spec_id),
            "format-version": str(self.format_version),
            "content": "data" if self.content == ManifestContent.DATA else "deletes",
        }

    def length(self, *, flush: bool = False) -> int:
        """The manifest's bytes so far (Java's `length()`: the entries of the block being
        filled are not counted unless `flush` ends it): what rolls a writer to a new file."""
        return self._stream.length(flush=flush)

    def close(self) -> ManifestFile:
        """Write the manifest (once) and return its manifest list entry."""
        if self._result is None:
            data = self._stream.finish()
            self._io.write_bytes(self.location, data)
            length = len(data)
            counts = self._counts
            self._result = ManifestFile(
                manifest_path=self.location,
                manifest_length=length,
                partition_spec_id=self.spec.spec_id,
                content=self.content,
                sequence_number=UNASSIGNED_SEQ,
                min_sequence_number=UNASSIGNED_SEQ
                if self._min_sequence_number is None
                else self._min_sequence_number,
                added_snapshot_id=self.snapshot_id,
                added_files_count=counts[EntryStatus.ADDED][0],
                existing_files_count=counts[EntryStatus.EXISTING][0],
                deleted_files_count=counts[EntryStatus.DELETED][0],
                added_rows_count=counts[EntryStatus.ADDED][1],
                existing_rows_count=counts[EntryStatus.EXISTING][1],
                deleted_rows_count=counts[EntryStatus.DELETED][1],
                partitions=[stats.summary() for stats in self._partition_stats],
            )
        return self._result

    def to_manifest_file(self) -> ManifestFile:
        """The manifest list entry; closes the writer first if needed (PyIceberg's name)."""
        return self.close()

    def __enter__(self) -> ManifestWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()

    def _require_sequence_number(self, entry: ManifestEntry) -> None:
        # Spec: entries that are not ADDED must carry their numbers, or a reader would
        # inherit the wrong (newer) one and apply deletes to data they never saw.
        if entry.sequence_number is None:
            raise ValidationError(
                f"{self.location}: {entry.data_file.file_path} needs its data sequence "
                "number to be written as existing or deleted"
            )

    def _write(
        self,
        status: EntryStatus,
        snapshot_id: int | None,
        sequence_number: int | None,
        file_sequence_number: int | None,
        data_file: DataFile,
    ) -> None:
        if self._result is not None:
            raise ValidationError(f"{self.location}: manifest writer is closed")
        self._check(data_file)
        partition = {}
        for name, stats, value in zip(
            self._partition_names, self._partition_stats, data_file.partition, strict=True
        ):
            partition[name] = stats.update(value, data_file.file_path)
        self._stream.write(
            {
                "status": int(status),
                "snapshot_id": snapshot_id,
                "sequence_number": sequence_number,
                "file_sequence_number": file_sequence_number,
                "data_file": _data_file_record(data_file, partition, self.format_version),
            }
        )
        counts = self._counts[status]
        counts[0] += 1
        counts[1] += data_file.record_count
        if (
            status != EntryStatus.DELETED
            and sequence_number is not None
            and (self._min_sequence_number is None or sequence_number < self._min_sequence_number)
        ):
            self._min_sequence_number = sequence_number

    def _check(self, data_file: DataFile) -> None:
        path = data_file.file_path
        if str(data_file.file_format).upper() not in FileFormat.__members__:
            raise ValidationError(
                f"{self.location}: {path} has unknown format {data_file.file_format!r}"
            )
        is_data = data_file.content == FileContent.DATA
        if is_data != (self.content == ManifestContent.DATA):
            raise ValidationError(
                f"{self.location}: cannot add {FileContent(data_file.content).name} file {path} "
                f"to a {self.content.name} manifest"
            )
        if data_file.content == FileContent.EQUALITY_DELETES and not data_file.equality_ids:
            raise ValidationError(
                f"{self.location}: equality delete file {path} lacks equality_ids"
            )
        if data_file.spec_id != self.spec.spec_id:
            raise ValidationError(
                f"{self.location}: {path} belongs to partition spec {data_file.spec_id}, "
                f"not to this manifest's spec {self.spec.spec_id}"
            )
        if len(data_file.partition) != len(self._partition_names):
            raise ValidationError(
                f"{self.location}: {path} has {len(data_file.partition)} partition values; "
                f"spec {self.spec.spec_id} has {len(self._partition_names)} fields"
            )
        if data_file.record_count < 0 or data_file.file_size_in_bytes < 0:
            raise ValidationError(f"{self.location}: {path} has a negative count or size")


def _kv(values: dict[int, Any] | None) -> list[dict[str, Any]] | None:
    return None if values is None else [{"key": k, "value": v} for k, v in values.items()]


def _data_file_record(f: DataFile, partition: dict[str, Any], version: int) -> dict[str, Any]:
    record = {
        "content": int(f.content),
        "file_path": f.file_path,
        "file_format": str(f.file_format).upper(),
        "partition": partition,
        "record_count": f.record_count,
        "file_size_in_bytes": f.file_size_in_bytes,
        "column_sizes": _kv(f.column_sizes),
        "value_counts": _kv(f.value_counts),
        "null_value_counts": _kv(f.null_value_counts),
        "nan_value_counts": _kv(f.nan_value_counts),
        "lower_bounds": _kv(f.lower_bounds),
        "upper_bounds": _kv(f.upper_bounds),
        "key_metadata": f.key_metadata,
        "split_offsets": f.split_offsets,
        "equality_ids": f.equality_ids,
        "sort_order_id": f.sort_order_id,
        "referenced_data_file": f.referenced_data_file,
    }
    if version >= 3:
        record["first_row_id"] = f.first_row_id
        record["content_offset"] = f.content_offset
        record["content_size_in_bytes"] = f.content_size_in_bytes
    return record


# Reading ------------------------------------------------------------------------------------

_ENTRY_NAMES = {f.field_id: f.name for f in manifest_entry_type(StructType()).fields}
_DATA_FILE_NAMES = {f.field_id: f.name for f in data_file_type(StructType(), 3).fields}
_METRICS_NAMES = frozenset(_DATA_FILE_NAMES[i] for i in METRICS_FIELD_IDS)
_ENTRY_REQUIRED = (0, DATA_FILE_ID)  # snapshot_id is required in v1 only, and inherited
_DATA_FILE_REQUIRED = (100, 101, PARTITION_ID, 103, 104)
# Decoded tuples come in these orders; the data file's is DataFile's own (without spec_id).
_ENTRY_READ = ("status", "snapshot_id", "sequence_number", "file_sequence_number", "data_file")
_DATA_FILE_READ = tuple(f.name for f in fields(DataFile) if f.name != "spec_id")
_FIRST_ROW_ID = _DATA_FILE_READ.index("first_row_id")
_STATUSES = {s.value: s for s in EntryStatus}
_CONTENTS = {None: FileContent.DATA} | {c.value: c for c in FileContent}  # v1: all data
_FORMATS = {name: f for f in FileFormat for name in (f.value, f.value.lower())}


def read_manifest(
    io: FileIO,
    manifest: ManifestFile,
    *,
    spec: PartitionSpec | None = None,
    include_metrics: bool = True,
    live_only: bool = False,
) -> Iterator[ManifestEntry]:
    """Stream the entries of a v1, v2 or v3 manifest, with inherited values filled in.

    Partition tuples follow the field order of `spec` (default: the spec stored in the
    manifest), matched to the file's partition struct by field id. Without
    `include_metrics`, column metrics (sizes, counts, bounds, split offsets) are skipped
    while decoding and read as None: planning without a row filter needs none of them, and
    skipping them is what makes reading half a million entries fast.
    `live_only` drops DELETED entries, which scans never use.
    """
    avro_file = AvroFile(io, manifest.manifest_path, "manifest")
    try:
        layout = _Layout(avro_file, spec, include_metrics)
    except (KeyError, TypeError, AttributeError, StopIteration) as exc:
        raise avro_file.error(
            f"has a malformed Avro schema ({type(exc).__name__}: {exc})"
        ) from None
    # The layout depends on the file's schema and on which partition fields, in which order.
    key = (avro_file.metadata["avro.schema"], tuple(layout.partition_ids), include_metrics)
    decode = avro_file.decoder(key, layout.writer, layout.reader)
    spec_id = manifest.partition_spec_id
    added_snapshot_id = manifest.added_snapshot_id
    # An uncommitted manifest (UNASSIGNED_SEQ) has nothing to give yet.
    inherited = manifest.sequence_number if manifest.sequence_number >= 0 else None
    data_seq = _SequenceNumbers(avro_file, layout.has_sequence_number, inherited, manifest)
    file_seq = _SequenceNumbers(avro_file, layout.has_file_sequence_number, inherited, manifest)
    statuses, contents, formats, deleted = _STATUSES, _CONTENTS, _FORMATS, EntryStatus.DELETED
    # v3 row lineage: data files without a first_row_id take the next ids of the manifest's
    # range, in file order (spec: "First Row ID Inheritance").
    next_row_id = manifest.first_row_id
    for code, snapshot_id, seq, fseq, df in avro_file.records(decode):
        status = statuses.get(code)
        if status is None:
            raise avro_file.error(f"has an entry with unknown status {code}")
        first_row_id = None
        if next_row_id is not None and df[_FIRST_ROW_ID] is None:
            first_row_id, next_row_id = next_row_id, next_row_id + df[3]
        if live_only and status is deleted:
            continue
        # `rest`: column_sizes .. referenced_data_file, decoded in DataFile's field order.
        path, raw_format, partition, record_count, file_size, raw_content, *rest = df
        file_format = formats.get(raw_format) or formats.get(raw_format.upper())
        content = contents.get(raw_content)
        if file_format is None or content is None:
            raise avro_file.error(
                f"lists {path} with unknown format {raw_format!r} or content {raw_content!r}"
            )
        data_file = DataFile(
            path, file_format, partition, record_count, file_size, content, *rest, spec_id
        )
        if first_row_id is not None:
            data_file.first_row_id = first_row_id
        yield ManifestEntry(
            status,
            added_snapshot_id if snapshot_id is None else snapshot_id,
            data_seq.resolve(status, path) if seq is None else seq,
            file_seq.resolve(status, path) if fseq is None else fseq,
            data_file,
        )


def manifest_file_from_path(io: FileIO, location: str, snapshot_id: int) -> ManifestFile:
    """The manifest list entry for a manifest that a v1 snapshot names inline.

    Such snapshots have no manifest list, so only the file itself is known, as in Java:
    counts and partition summaries stay None (the spec reads a null count as "non-zero"),
    sequence numbers are 0 (v1), and the spec id is the one the manifest records.
    """
    avro_file = AvroFile(io, location, "manifest")
    try:
        spec_id = int(avro_file.metadata.get("partition-spec-id", "0"))
    except ValueError:
        raise avro_file.error("has a malformed partition-spec-id") from None
    counts = (None,) * 6
    return ManifestFile(
        location, avro_file.size, spec_id, ManifestContent.DATA, 0, 0, snapshot_id, *counts
    )


class _SequenceNumbers:
    """Fills in a null sequence number of one manifest per the spec's inheritance rules."""

    __slots__ = ("_avro_file", "_has_column", "_inherited", "_manifest")

    def __init__(
        self, avro_file: AvroFile, has_column: bool, inherited: int | None, manifest: ManifestFile
    ) -> None:
        self._avro_file = avro_file
        self._has_column = has_column
        self._inherited = inherited
        self._manifest = manifest

    def resolve(self, status: EntryStatus, file_path: str) -> int | None:
        if status is EntryStatus.ADDED:
            return self._inherited
        if self._manifest.sequence_number == 0:
            return 0  # v1 metadata, or a table's very first commit: nothing can be older
        if not self._has_column:
            # v1 manifests have no sequence numbers (0, above); a v2 manifest from before
            # file_sequence_number existed (Java < 1.2) leaves it unknown, as Java does.
            return None
        raise self._avro_file.error(
            f"has a {status.name} entry for {file_path} without a sequence number"
        )


class _Layout:
    """How to decode one manifest: its schema renamed by field id, and what to read."""

    def __init__(
        self, avro_file: AvroFile, spec: PartitionSpec | None, include_metrics: bool
    ) -> None:
        entry = rename_fields(
            avro_file, avro_file.schema, _ENTRY_NAMES, _ENTRY_REQUIRED, "manifest_entry"
        )
        data_file = _record(avro_file, field_type(entry, "data_file"), "data_file")
        data_file = rename_fields(
            avro_file, data_file, _DATA_FILE_NAMES, _DATA_FILE_REQUIRED, "data_file"
        )
        partition = _record(avro_file, field_type(data_file, "partition"), "partition")
        self.partition_ids = partition_ids = _partition_ids(avro_file, spec)
        if not any(FIELD_ID in f for f in partition["fields"]):
            partition = _positional_ids(avro_file, partition, partition_ids)
        keys = [f"p{i}" for i in partition_ids]
        names = dict(zip(partition_ids, keys, strict=True))
        partition = rename_fields(avro_file, partition, names, partition_ids, "partition")
        data_file = with_field_type(data_file, "partition", partition)
        self.writer = with_field_type(entry, "data_file", data_file)
        present = {f["name"] for f in entry["fields"]}
        self.has_sequence_number = "sequence_number" in present
        self.has_file_sequence_number = "file_sequence_number" in present

        skip = () if include_metrics else _METRICS_NAMES
        data_file_reader = select(data_file, _DATA_FILE_READ, skip=skip)
        data_file_reader = with_field_type(data_file_reader, "partition", select(partition, keys))
        self.reader = with_field_type(
            select(self.writer, _ENTRY_READ), "data_file", data_file_reader
        )


def _record(avro_file: AvroFile, avro_type: Any, name: str) -> dict[str, Any]:
    if not isinstance(avro_type, dict) or avro_type.get("type") != "record":
        raise avro_file.error(f"field {name} is not a struct")
    return avro_type


def _positional_ids(
    avro_file: AvroFile, partition: dict[str, Any], partition_ids: Sequence[int]
) -> dict[str, Any]:
    """Very old v1 writers left partition fields without ids: they follow the spec's order."""
    fields = partition["fields"]
    if len(fields) != len(partition_ids):
        raise avro_file.error(
            f"partition struct has {len(fields)} fields without ids; the spec has "
            f"{len(partition_ids)}"
        )
    ids = zip(fields, partition_ids, strict=True)
    return {**partition, "fields": [{**f, FIELD_ID: i} for f, i in ids]}


def _partition_ids(avro_file: AvroFile, spec: PartitionSpec | None) -> list[int]:
    if spec is not None:
        return [f.field_id for f in spec.fields]
    raw = avro_file.metadata.get("partition-spec")
    if raw is None:
        raise avro_file.error("has no partition-spec metadata; pass the partition spec")
    try:
        fields = json.loads(raw)
        if isinstance(fields, dict):  # some writers stored the whole spec object
            fields = fields["fields"]
        # v1 specs may omit field ids: they are 1000, 1001, ... by position.
        return [int(f.get("field-id", 1000 + i)) for i, f in enumerate(fields)]
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise avro_file.error(f"has malformed partition-spec metadata: {exc}") from None
