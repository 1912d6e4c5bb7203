"""A manifest list that carries its parent's entries as raw Avro blocks.

A fast append lists its new manifests, then every manifest of the parent snapshot exactly as
the parent listed them. Decoding and re-encoding a parent list of 10,000 manifests costs about
half a second in Python, which would make every append slower the more the table has been
appended to. An Avro container is a header (schema, codec, metadata, a 16-byte sync marker)
followed by self-contained blocks (record count, byte size, compressed records, sync marker),
so a list written with the parent's schema and codec, under the parent's sync marker, can take
the parent's blocks verbatim after its own: the cost is a copy of bytes.

Only lists whose schema and codec are byte-identical to the ones icecore writes qualify (lists
written by icecore); for any other (Java's, v1) `splice_parent_list` returns None and the
caller decodes and re-encodes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

from icecore.avro.container import read_metadata
from icecore.avro.decoder import read_long
from icecore.errors import ManifestError
from icecore.io import FileIO
from icecore.spec.manifest_list import ManifestFile, ManifestListWriter

_MAGIC = b"Obj\x01"
_SYNC_SIZE = 16


@dataclass(frozen=True)
class _Container:
    data: bytes
    metadata: dict[str, bytes]
    blocks_at: int  # offset of the first block, just past the header's sync marker

    @property
    def sync(self) -> bytes:
        return self.data[self.blocks_at - _SYNC_SIZE : self.blocks_at]

    @property
    def codec(self) -> bytes:
        return self.metadata.get("avro.codec", b"null")


def _parse(data: bytes, location: str) -> _Container:
    if data[:4] != _MAGIC:
        raise ManifestError(location, "manifest list is not an Avro file (bad magic bytes)")
    try:
        metadata, pos = read_metadata(data, 4)
    except (IndexError, ValueError, UnicodeDecodeError) as exc:
        raise ManifestError(location, f"manifest list header is corrupt: {exc}") from None
    return _Container(data, metadata, pos + _SYNC_SIZE)


def _blocks(container: _Container, location: str) -> Iterator[tuple[int, bytes]]:
    """(record count, the block's bytes without its sync marker), checking every marker."""
    data, pos, sync = container.data, container.blocks_at, container.sync
    try:
        while pos < len(data):
            start = pos
            count, pos = read_long(data, pos)
            size, pos = read_long(data, pos)
            pos += size
            if data[pos : pos + _SYNC_SIZE] != sync:
                raise ValueError("block sync marker mismatch")
            yield count, data[start:pos]
            pos += _SYNC_SIZE
    except (IndexError, ValueError) as exc:
        raise ManifestError(location, f"manifest list is truncated or corrupt: {exc}") from None


class _Captured:
    """Stands in for a FileIO so that a ManifestListWriter encodes into memory."""

    data = b""

    def write_bytes(self, location: str, data: bytes, overwrite: bool = False) -> None:
        self.data = data


def splice_parent_list(
    io: FileIO,
    location: str,
    *,
    snapshot: tuple[int, int, int],
    manifests: list[ManifestFile],
    parent_list: str,
    codec: str,
    format_version: int = 2,
    next_row_id: int | None = None,
) -> tuple[list[ManifestFile], int, int | None] | None:
    """Write the list of `snapshot` (id, parent id, sequence number) at `location`: the
    `manifests` first, then every entry of `parent_list`, copied as raw blocks.

    Returns the manifests as listed (sequence numbers assigned), the number of carried
    entries and (v3) the row ids assigned to the new manifests, or None, having written
    nothing, when the parent list is not of our format (a v3 list of ours has given every
    data manifest its row ids, so carried entries need none).
    """
    snapshot_id, parent_id, sequence_number = snapshot
    captured = _Captured()
    writer = ManifestListWriter(
        cast(FileIO, captured),
        location,
        snapshot_id,
        parent_id,
        sequence_number,
        codec=codec,
        format_version=format_version,
        next_row_id=next_row_id,
    )
    writer.add_all(manifests)
    listed = writer.close()
    ours = _parse(captured.data, location)
    parent = _parse(io.read_bytes(parent_list), parent_list)
    if (ours.metadata.get("avro.schema"), ours.codec) != (
        parent.metadata.get("avro.schema"),
        parent.codec,
    ):
        return None
    parts = [ours.data[: ours.blocks_at - _SYNC_SIZE], parent.sync]
    for _, block in _blocks(ours, location):
        parts += (block, parent.sync)
    carried = sum(count for count, _ in _blocks(parent, parent_list))
    parts.append(parent.data[parent.blocks_at :])
    io.write_bytes(location, b"".join(parts))
    added_rows = None
    if next_row_id is not None and writer.next_row_id is not None:
        added_rows = writer.next_row_id - next_row_id
    return listed, carried, added_rows
