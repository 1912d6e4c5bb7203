"""Manifest lists: the per-snapshot Avro file naming its manifests (spec: "Manifest Lists").

A manifest's sequence numbers are only known when its snapshot commits, so manifests are
written with placeholders (`UNASSIGNED_SEQ`) and the manifest list writer, which runs once
per commit attempt, fills them in. A retried commit rewrites only the list.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from enum import IntEnum
from types import TracebackType
from typing import TYPE_CHECKING, Any

from icecore.avro.container import (
    AvroFile,
    field_type,
    non_null,
    rename_fields,
    replace_non_null,
    select,
    with_field_type,
    write_avro,
)
from icecore.avro.schema import MANIFEST_FILE_V3, manifest_list_avro_schema
from icecore.errors import ValidationError
from icecore.spec.conversions import encoder
from icecore.spec.types import DoubleType, FloatType, IcebergType, UUIDType

if TYPE_CHECKING:
    from icecore.io import FileIO

# Java's ManifestWriter/ManifestListWriter use -1 for "assigned when the snapshot commits".
UNASSIGNED_SEQ = -1
FORMAT_VERSION = 2


class ManifestContent(IntEnum):
    DATA = 0
    DELETES = 1


@dataclass(frozen=True, slots=True)
class PartitionFieldSummary:
    """What one partition field holds across a manifest; bounds are single-value bytes.

    `contains_nan` is None when the writer did not say (v1 lists, old writers); bounds
    exclude nulls and NaNs and are None when every value was one of those.
    """

    contains_null: bool
    contains_nan: bool | None = None
    lower_bound: bytes | None = None
    upper_bound: bytes | None = None


@dataclass(frozen=True, slots=True)
class ManifestFile:
    """One manifest list entry. Counts are None only in v1 lists that omitted them."""

    manifest_path: str
    manifest_length: int
    partition_spec_id: int
    content: ManifestContent
    sequence_number: int
    min_sequence_number: int
    added_snapshot_id: int
    added_files_count: int | None
    existing_files_count: int | None
    deleted_files_count: int | None
    added_rows_count: int | None
    existing_rows_count: int | None
    deleted_rows_count: int | None
    partitions: list[PartitionFieldSummary] | None = None
    key_metadata: bytes | None = None
    # v3: the first row id of the manifest's data files (assigned when a list is written).
    first_row_id: int | None = None

    # The spec: "when null this is assumed to be non-zero".
    @property
    def has_added_files(self) -> bool:
        return self.added_files_count is None or self.added_files_count > 0

    @property
    def has_existing_files(self) -> bool:
        return self.existing_files_count is None or self.existing_files_count > 0

    @property
    def has_deleted_files(self) -> bool:
        return self.deleted_files_count is None or self.deleted_files_count > 0


class PartitionFieldStats:
    """Accumulates one partition field's `PartitionFieldSummary` as a manifest is written."""

    __slots__ = ("_encode", "_is_float", "_is_uuid", "contains_nan", "contains_null", "max", "min")

    def __init__(self, t: IcebergType) -> None:
        self._encode = encoder(t)
        self._is_float = isinstance(t, FloatType | DoubleType)
        self._is_uuid = isinstance(t, UUIDType)
        self.contains_null = False
        self.contains_nan = False
        self.min: Any = None
        self.max: Any = None

    def update(self, value: Any, file_path: str) -> Any:
        """Account for `value` and return it as Avro writes it."""
        if value is None:
            self.contains_null = True
            return None
        try:
            self._encode(value)  # rejects values of the wrong type before they are written
        except ValidationError as exc:
            raise ValidationError(f"{file_path}: bad partition value: {exc}") from None
        if self._is_float and math.isnan(value):
            self.contains_nan = True
            return value
        if self.min is None or self._before(value, self.min):
            self.min = value
        if self.max is None or self._before(self.max, value):
            self.max = value
        return value.bytes if self._is_uuid else value

    def _before(self, a: Any, b: Any) -> bool:
        if self._is_float:  # the spec orders -0.0 before 0.0
            return (a, math.copysign(1.0, a)) < (b, math.copysign(1.0, b))
        return bool(a < b)

    def summary(self) -> PartitionFieldSummary:
        return PartitionFieldSummary(
            contains_null=self.contains_null,
            contains_nan=self.contains_nan,
            lower_bound=None if self.min is None else self._encode(self.min),
            upper_bound=None if self.max is None else self._encode(self.max),
        )


class ManifestListWriter:
    """Writes a v2 manifest list for the snapshot `snapshot_id` committing at `sequence_number`.

    Manifests written by this commit carry `UNASSIGNED_SEQ` and get `sequence_number`;
    manifests carried over from earlier snapshots keep the numbers they already have.
    Nothing is written until `close()`, which returns the manifests as they were listed.
    """

    def __init__(
        self,
        io: FileIO,
        location: str,
        snapshot_id: int,
        parent_snapshot_id: int | None,
        sequence_number: int,
        *,
        codec: str = "deflate",
        format_version: int = FORMAT_VERSION,
        next_row_id: int | None = None,
    ) -> None:
        if sequence_number < 0:
            raise ValidationError(
                f"{location}: sequence number must be >= 0, got {sequence_number}"
            )
        self._io = io
        self.location = location
        self.snapshot_id = snapshot_id
        self.parent_snapshot_id = parent_snapshot_id
        self.sequence_number = sequence_number
        self._codec = codec
        self.format_version = max(format_version, FORMAT_VERSION)
        if self.format_version >= 3 and next_row_id is None:
            raise ValidationError(f"{location}: a v3 manifest list needs the table's next-row-id")
        # v3: where row ids continue; after close(), minus the start = the snapshot's added-rows.
        self.next_row_id = next_row_id
        self._first_row_id = next_row_id
        self._manifests: list[ManifestFile] = []
        self._closed = False

    def add(self, manifest: ManifestFile, rows_to_assign: int | None = None) -> ManifestFile:
        """List `manifest`, assigning this commit's sequence number where it is unassigned.

        v3: a data manifest without a `first_row_id` takes the next range of row ids, as
        large as `rows_to_assign`: the rows of its data files that have no `first_row_id` of
        their own. By default every row it lists, the spec's estimate; a writer that knows
        all its files carry their ids (a rewritten manifest of a v3 snapshot) passes 0."""
        if self._closed:
            raise ValidationError(f"{self.location}: manifest list writer is closed")
        seq, min_seq = manifest.sequence_number, manifest.min_sequence_number
        if UNASSIGNED_SEQ in (seq, min_seq):
            if manifest.added_snapshot_id != self.snapshot_id:
                # Only this commit's own manifests may take its sequence number; any other
                # lost its number somewhere, and guessing would reorder deletes.
                raise ValidationError(
                    f"{manifest.manifest_path}: unassigned sequence number in a manifest added "
                    f"by snapshot {manifest.added_snapshot_id}, not by committing snapshot "
                    f"{self.snapshot_id}"
                )
            manifest = replace(
                manifest,
                sequence_number=self.sequence_number if seq == UNASSIGNED_SEQ else seq,
                min_sequence_number=self.sequence_number if min_seq == UNASSIGNED_SEQ else min_seq,
            )
        if (
            self.format_version >= 3
            and manifest.content == ManifestContent.DATA
            and manifest.first_row_id is None
        ):
            # Java's V3 writer: every data manifest without ids (new, or carried over from
            # before an upgrade) takes a range as large as the rows it may hold, unless the
            # caller knows fewer of its rows need one.
            assert self.next_row_id is not None
            rows = rows_to_assign
            if rows is None:
                rows = (manifest.existing_rows_count or 0) + (manifest.added_rows_count or 0)
            manifest = replace(manifest, first_row_id=self.next_row_id)
            self.next_row_id += rows
        self._manifests.append(manifest)
        return manifest

    def add_all(self, manifests: Iterable[ManifestFile]) -> None:
        for manifest in manifests:
            self.add(manifest)

    def close(self) -> list[ManifestFile]:
        if not self._closed:
            metadata = {
                "snapshot-id": str(self.snapshot_id),
                # Java writes String.valueOf(null) for a snapshot without parent.
                "parent-snapshot-id": str(self.parent_snapshot_id)
                if self.parent_snapshot_id is not None
                else "null",
                "sequence-number": str(self.sequence_number),
                "format-version": str(self.format_version),
            }
            if self.format_version >= 3:
                metadata["first-row-id"] = str(self._first_row_id)
            records = [_to_record(m) for m in self._manifests]
            write_avro(
                self._io,
                self.location,
                manifest_list_avro_schema(self.format_version),
                records,
                metadata=metadata,
                codec=self._codec,
            )
            self._closed = True
        return list(self._manifests)

    def __enter__(self) -> ManifestListWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()


def _to_record(m: ManifestFile) -> dict[str, Any]:
    for name in ("added", "existing", "deleted"):
        for unit in ("files", "rows"):
            if getattr(m, f"{name}_{unit}_count") is None:
                raise ValidationError(
                    f"{m.manifest_path}: v2 manifest lists require {name}_{unit}_count"
                )
    return {
        "manifest_path": m.manifest_path,
        "manifest_length": m.manifest_length,
        "partition_spec_id": m.partition_spec_id,
        "content": int(m.content),
        "sequence_number": m.sequence_number,
        "min_sequence_number": m.min_sequence_number,
        "added_snapshot_id": m.added_snapshot_id,
        "added_files_count": m.added_files_count,
        "existing_files_count": m.existing_files_count,
        "deleted_files_count": m.deleted_files_count,
        "added_rows_count": m.added_rows_count,
        "existing_rows_count": m.existing_rows_count,
        "deleted_rows_count": m.deleted_rows_count,
        "partitions": None
        if m.partitions is None
        else [
            {
                "contains_null": s.contains_null,
                "contains_nan": s.contains_nan,
                "lower_bound": s.lower_bound,
                "upper_bound": s.upper_bound,
            }
            for s in m.partitions
        ],
        "key_metadata": m.key_metadata,
        "first_row_id": m.first_row_id,
    }


_NAMES = {f.field_id: f.name for f in MANIFEST_FILE_V3.fields}
_SUMMARY_NAMES = {509: "contains_null", 518: "contains_nan", 510: "lower_bound", 511: "upper_bound"}
# Required in v1 and v2; the v2-only fields (content, sequence numbers) default as v1 says.
_REQUIRED = (500, 501, 502, 503)
# Decoded tuples come in the order of the models' fields.
_MANIFEST_READ = tuple(f.name for f in fields(ManifestFile))
_SUMMARY_READ = tuple(f.name for f in fields(PartitionFieldSummary))


def read_manifest_list(io: FileIO, location: str) -> list[ManifestFile]:
    """Every manifest of a v1, v2 or v3 manifest list, by field id.

    v1 lists have no sequence numbers or content: they read as 0 and DATA (spec Appendix E).
    """
    avro_file = AvroFile(io, location, "manifest list")
    try:
        writer, reader = _schemas(avro_file)
    except (KeyError, TypeError, AttributeError, StopIteration) as exc:
        raise avro_file.error(
            f"has a malformed Avro schema ({type(exc).__name__}: {exc})"
        ) from None
    key = ("manifest list", avro_file.metadata["avro.schema"])
    decode = avro_file.decoder(key, writer, reader)
    return [_manifest(avro_file, r) for r in avro_file.records(decode)]


def _schemas(avro_file: AvroFile) -> tuple[dict[str, Any], dict[str, Any]]:
    """The file's schema renamed by field id, and the reader schema of our models."""
    writer = rename_fields(avro_file, avro_file.schema, _NAMES, _REQUIRED, "manifest_file")
    reader = select(writer, _MANIFEST_READ)
    if any(f["name"] == "partitions" for f in writer["fields"]):
        array = field_type(writer, "partitions")
        if not isinstance(array, dict) or array.get("type") != "array":
            raise avro_file.error("field 507 partitions is not a list")
        summary = non_null(array["items"])
        if not isinstance(summary, dict) or summary.get("type") != "record":
            raise avro_file.error("field 508 of partitions is not a field_summary struct")
        summary = rename_fields(avro_file, summary, _SUMMARY_NAMES, (509,), "field_summary")
        items = replace_non_null(array["items"], summary)
        writer = with_field_type(writer, "partitions", {**array, "items": items})
        items = replace_non_null(array["items"], select(summary, _SUMMARY_READ))
        reader = with_field_type(reader, "partitions", {**array, "items": items})
    return writer, reader


def _manifest(avro_file: AvroFile, r: tuple[Any, ...]) -> ManifestFile:
    (path, length, spec_id, content, seq, min_seq, snapshot_id, *counts, partitions, key, first) = r
    if content not in (None, 0, 1):
        raise avro_file.error(f"lists {path} with unknown content {content}")
    return ManifestFile(
        path,
        length,
        spec_id,
        ManifestContent(content or 0),
        seq or 0,
        min_seq or 0,
        snapshot_id,
        *counts,
        partitions=None if partitions is None else [PartitionFieldSummary(*s) for s in partitions],
        key_metadata=key,
        first_row_id=first,
    )
