"""Puffin files: blobs (statistics, deletion vectors) with a JSON footer (Puffin spec).

Layout: `Magic Blob1 ... BlobN Footer`, the footer being
`Magic FooterPayload FooterPayloadSize Flags Magic`, where `Magic` is `PFA1`, the payload is
the UTF-8 JSON `FileMetadata`, its size a little-endian int32 and `Flags` four bytes of
which only bit 0 of byte 0 is defined (the payload is an LZ4 frame).

Readers locate blobs two ways: table metadata (a DV's `content_offset` and
`content_size_in_bytes`) lets them read one blob by its byte range and never look at the
footer, which is why `read_range` exists apart from the reader; tools that list a file's
blobs read the footer, with two ranged reads at most (the file's tail, then the rest of a
footer too large for it), never the whole file.

Codecs: `zstd` is written and read through pyarrow; `lz4` is read only (Iceberg Java does
neither): pyarrow's LZ4 frames carry no content size, which the spec requires of a writer.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from icecore.errors import FileError, ValidationError
from icecore.spec.jsonfields import get_int, get_str, get_string_map, require_list, require_object

if TYPE_CHECKING:
    from icecore.io import FileIO
    from icecore.io.output import OutputFile

MAGIC = b"PFA1"  # Puffin Fratercula arctica, version 1
# FooterPayloadSize (int32 LE) + Flags (4 bytes) + Magic: the fixed end of every file.
FOOTER_STRUCT_LENGTH = 12
# Leading magic + footer magic + empty payload + footer struct: the smallest possible file.
MIN_FILE_SIZE = 2 * len(MAGIC) + FOOTER_STRUCT_LENGTH
FLAG_FOOTER_COMPRESSED = 0x01  # byte 0, bit 0: FooterPayload is an LZ4 frame
# One read of this much from the end usually holds the whole footer (a DV's entry is ~250 B).
TAIL_READ_BYTES = 64 * 1024

CODEC_ZSTD = "zstd"
CODEC_LZ4 = "lz4"
CREATED_BY = "icefloe icecore"  # the `created-by` file property written by default

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_LZ4_MAGIC = b"\x04\x22\x4d\x18"


class PuffinError(FileError):
    """A Puffin file is malformed, truncated or uses something icecore cannot read."""


@dataclass(frozen=True)
class BlobMetadata:
    """One blob as the footer lists it (spec: `BlobMetadata`)."""

    type: str  # "type", e.g. "deletion-vector-v1"
    fields: tuple[int, ...]  # "fields": field ids the blob was computed for
    snapshot_id: int  # "snapshot-id"; -1 where not known when written (DVs)
    sequence_number: int  # "sequence-number"; likewise -1
    offset: int  # "offset": where the (compressed) blob starts in the file
    length: int  # "length": its size in the file, after compression
    compression_codec: str | None = None  # "compression-codec"; absent: uncompressed
    properties: Mapping[str, str] = field(default_factory=dict)  # "properties"

    def to_json(self) -> dict[str, Any]:
        """Fields in Iceberg Java's order, optional ones only when set, as Java writes them."""
        out: dict[str, Any] = {
            "type": self.type,
            "fields": list(self.fields),
            "snapshot-id": self.snapshot_id,
            "sequence-number": self.sequence_number,
            "offset": self.offset,
            "length": self.length,
        }
        if self.compression_codec is not None:
            out["compression-codec"] = self.compression_codec
        if self.properties:
            out["properties"] = dict(self.properties)
        return out

    @classmethod
    def from_json(cls, obj: Any) -> BlobMetadata:
        obj = require_object(obj, "blob metadata")
        fields = require_list(obj.get("fields"), "'fields'")
        if any(isinstance(f, bool) or not isinstance(f, int) for f in fields):
            raise ValidationError(f"'fields' must be a list of integers, got {fields!r}")
        return cls(
            type=get_str(obj, "type"),
            fields=tuple(fields),
            snapshot_id=get_int(obj, "snapshot-id"),
            sequence_number=get_int(obj, "sequence-number"),
            offset=get_int(obj, "offset"),
            length=get_int(obj, "length"),
            compression_codec=get_str(obj, "compression-codec", None),
            properties=get_string_map(obj, "properties"),
        )


@dataclass(frozen=True)
class FileMetadata:
    """The footer payload (spec: `FileMetadata`)."""

    blobs: tuple[BlobMetadata, ...]  # "blobs"
    properties: Mapping[str, str] = field(default_factory=dict)  # "properties", e.g. created-by

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"blobs": [b.to_json() for b in self.blobs]}
        if self.properties:
            out["properties"] = dict(self.properties)
        return out

    @classmethod
    def from_json(cls, obj: Any) -> FileMetadata:
        obj = require_object(obj, "footer payload")
        blobs = require_list(obj.get("blobs"), "'blobs'")
        parsed = []
        for index, blob in enumerate(blobs):
            try:
                parsed.append(BlobMetadata.from_json(blob))
            except ValidationError as exc:
                raise ValidationError(f"blob {index}: {exc}") from None
        return cls(tuple(parsed), get_string_map(obj, "properties"))


@dataclass(frozen=True)
class PuffinFile:
    """A written or read Puffin file: where it is, how large, and its footer."""

    location: str
    file_size: int  # bytes; a DV's delete-file entry records it as file_size_in_bytes
    footer_size: int  # bytes from the footer's first magic to the end
    metadata: FileMetadata

    @property
    def blobs(self) -> tuple[BlobMetadata, ...]:
        return self.metadata.blobs


@dataclass(frozen=True)
class Blob:
    """A blob to write; `PuffinWriter.write` assigns its offset and length."""

    type: str
    data: bytes
    fields: Sequence[int] = ()
    snapshot_id: int = -1
    sequence_number: int = -1
    properties: Mapping[str, str] = field(default_factory=dict)
    compression_codec: str | None = None  # None (uncompressed) or "zstd"


class PuffinWriter:
    """Writes one Puffin file through `FileIO`, visible at `location` only once closed.

    `write` returns each blob's metadata, offset and length included (what a DV's manifest
    entry needs); `close` writes the footer and returns the `PuffinFile` with its size.
    Leaving a `with` block by an exception abandons the file: nothing is left behind.
    """

    def __init__(
        self,
        io: FileIO,
        location: str,
        *,
        properties: Mapping[str, str] | None = None,
        created_by: str | None = CREATED_BY,
        overwrite: bool = False,
    ) -> None:
        self.location = location
        self._properties = dict(properties or {})
        if created_by is not None:
            self._properties.setdefault("created-by", created_by)
        self._blobs: list[BlobMetadata] = []
        self._result: PuffinFile | None = None
        self._out: OutputFile = io.open_output(location, overwrite=overwrite)
        self._out.write(MAGIC)

    def write(self, blob: Blob) -> BlobMetadata:
        if self._result is not None or self._out.closed:
            raise ValidationError(f"{self.location}: Puffin writer is closed")
        data = compress(blob.compression_codec, blob.data, self.location)
        metadata = BlobMetadata(
            type=blob.type,
            fields=tuple(blob.fields),
            snapshot_id=blob.snapshot_id,
            sequence_number=blob.sequence_number,
            offset=self._out.tell(),
            length=len(data),
            compression_codec=blob.compression_codec,
            properties=dict(blob.properties),
        )
        self._out.write(data)
        self._blobs.append(metadata)
        return metadata

    def close(self) -> PuffinFile:
        """Write the footer and commit the file (once); its size is known from here on."""
        if self._result is None:
            metadata = FileMetadata(tuple(self._blobs), dict(self._properties))
            payload = json.dumps(
                metadata.to_json(), separators=(",", ":"), ensure_ascii=False
            ).encode("utf-8")
            footer = MAGIC + payload + struct.pack("<i", len(payload)) + bytes(4) + MAGIC
            self._out.write(footer)
            self._out.close()
            self._result = PuffinFile(self.location, self._out.tell(), len(footer), metadata)
        return self._result

    def abort(self) -> None:
        """Give up on the file: nothing becomes visible at `location`."""
        self._out.abort()

    def __enter__(self) -> PuffinWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class PuffinReader:
    """Reads a Puffin file's footer and blobs with ranged reads.

    `file_size` (the manifest's `file_size_in_bytes`, or a listing's) is checked against the
    file, not trusted: a mismatch means the file was replaced or truncated.
    """

    def __init__(self, io: FileIO, location: str, *, file_size: int | None = None) -> None:
        self.location = location
        self._file = io.open_input(location)
        self.file_size = int(self._file.size())
        if file_size is not None and file_size != self.file_size:
            self.close()
            raise PuffinError(location, f"is {self.file_size} bytes, but {file_size} were expected")
        self._puffin: PuffinFile | None = None

    def read_footer(self) -> PuffinFile:
        """The footer, checked: both magics, known flags, a payload size within the file,
        blobs within the file's body."""
        if self._puffin is None:
            self._puffin = self._parse_footer()
        return self._puffin

    def read_blob(self, blob: BlobMetadata) -> bytes:
        """The blob's bytes, decompressed."""
        return decompress(
            blob.compression_codec, self.read_range(blob.offset, blob.length), self.location
        )

    def read_range(self, offset: int, length: int) -> bytes:
        if offset < 0 or length < 0 or offset + length > self.file_size:
            raise PuffinError(
                self.location,
                f"byte range [{offset}, {offset + length}) lies outside the file "
                f"of {self.file_size} bytes (truncated, or wrong offset/length)",
            )
        data = self._file.read_at(length, offset)
        if len(data) != length:
            raise PuffinError(self.location, f"short read at {offset}: truncated")
        return bytes(data)

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> PuffinReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _parse_footer(self) -> PuffinFile:
        size = self.file_size

        def fail(problem: str) -> PuffinError:
            return PuffinError(self.location, problem)

        if size < MIN_FILE_SIZE:
            raise fail(f"truncated: {size} bytes, a Puffin file has at least {MIN_FILE_SIZE}")
        tail_start = max(0, size - TAIL_READ_BYTES)
        tail = self.read_range(tail_start, size - tail_start)
        if tail[-4:] != MAGIC:
            raise fail(f"bad magic {tail[-4:].hex()} at the end, expected {MAGIC.hex()} "
                       "(not a Puffin file, or truncated)")  # fmt: skip
        (payload_size,) = struct.unpack_from("<i", tail, len(tail) - FOOTER_STRUCT_LENGTH)
        footer_size = len(MAGIC) + payload_size + FOOTER_STRUCT_LENGTH
        if payload_size < 0 or footer_size > size - len(MAGIC):
            raise fail(f"footer payload size {payload_size} is out of range for a file of "
                       f"{size} bytes")  # fmt: skip
        flags = tail[-8:-4]
        if flags[0] & ~FLAG_FOOTER_COMPRESSED or any(flags[1:]):
            raise fail(f"unknown footer flags {flags.hex()}")
        footer_start = size - footer_size
        if footer_start >= tail_start:
            footer = tail[footer_start - tail_start :]
        else:
            footer = self.read_range(footer_start, footer_size)
        if footer[:4] != MAGIC:
            raise fail(f"bad magic {footer[:4].hex()} at the footer's start (offset "
                       f"{footer_start}), expected {MAGIC.hex()}")  # fmt: skip
        if tail_start == 0 and tail[:4] != MAGIC:
            raise fail(f"bad magic {tail[:4].hex()} at the start of the file")
        payload = footer[4 : 4 + payload_size]
        if flags[0] & FLAG_FOOTER_COMPRESSED:
            payload = decompress(CODEC_LZ4, payload, self.location, what="footer payload")
        try:
            metadata = FileMetadata.from_json(json.loads(payload.decode("utf-8")))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise fail(f"footer payload is not UTF-8 JSON: {exc}") from None
        except ValidationError as exc:
            raise fail(f"footer: {exc}") from None
        for index, blob in enumerate(metadata.blobs):
            end = blob.offset + blob.length
            if blob.offset < len(MAGIC) or blob.length < 0 or end > footer_start:
                raise fail(f"blob {index} ({blob.type}) at [{blob.offset}, {end}) lies "
                           f"outside the blobs' area [4, {footer_start})")  # fmt: skip
        return PuffinFile(self.location, size, footer_size, metadata)


def read_footer(io: FileIO, location: str, *, file_size: int | None = None) -> PuffinFile:
    """A Puffin file's footer: its blobs' metadata and the file properties."""
    with PuffinReader(io, location, file_size=file_size) as reader:
        return reader.read_footer()


def read_range(io: FileIO, location: str, offset: int, length: int) -> bytes:
    """Exactly `length` bytes at `offset`: one blob located by table metadata, footer unread."""
    with PuffinReader(io, location) as reader:
        return reader.read_range(offset, length)


# Codecs


def compress(codec: str | None, data: bytes, location: str) -> bytes:
    if codec is None:
        return bytes(data)
    if codec == CODEC_ZSTD:
        return bytes(pa.Codec(CODEC_ZSTD).compress(data, asbytes=True))
    if codec == CODEC_LZ4:
        raise PuffinError(
            location,
            "cannot write codec 'lz4': the spec requires LZ4 frames with their "
            "content size, which pyarrow does not write; use 'zstd'",
        )
    raise PuffinError(location, f"unknown compression codec {codec!r}")


def decompress(codec: str | None, data: bytes, location: str, what: str = "blob") -> bytes:
    """`data` decompressed. Both codecs are single frames with their content size present
    (spec), which is how the output size, which pyarrow needs, is known."""
    if codec is None:
        return data
    if codec not in (CODEC_ZSTD, CODEC_LZ4):
        raise PuffinError(location, f"{what}: unknown compression codec {codec!r}")
    if not pa.Codec.is_available(codec):
        raise PuffinError(location, f"{what}: codec {codec!r} is not available in pyarrow")
    size_of = _zstd_content_size if codec == CODEC_ZSTD else _lz4_content_size
    size = size_of(data)
    if size is None:
        raise PuffinError(
            location, f"{what}: not a single {codec} frame with its content size present"
        )
    try:
        out = bytes(pa.Codec(codec).decompress(data, decompressed_size=size, asbytes=True))
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise PuffinError(location, f"{what}: cannot decompress {codec}: {exc}") from None
    if len(out) != size:
        raise PuffinError(location, f"{what}: {codec} frame holds {len(out)} bytes, not {size}")
    return out


def _zstd_content_size(data: bytes) -> int | None:
    """Frame_Content_Size from a Zstandard frame header (RFC 8878, 3.1.1.1), or None."""
    if len(data) < 6 or data[:4] != _ZSTD_MAGIC:
        return None
    descriptor = data[4]
    single_segment = descriptor >> 5 & 1
    position = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 3]
    width = (1 if single_segment else 0, 2, 4, 8)[descriptor >> 6]
    if width == 0 or len(data) < position + width:
        return None
    size = int.from_bytes(data[position : position + width], "little")
    return size + 256 if width == 2 else size


def _lz4_content_size(data: bytes) -> int | None:
    """Content Size from an LZ4 frame descriptor (lz4_Frame_format.md), or None."""
    if len(data) < 15 or data[:4] != _LZ4_MAGIC:
        return None
    flags = data[4]
    if flags >> 6 != 1 or not flags & 0x08:  # version 01, content size flag
        return None
    return int.from_bytes(data[6:14], "little")
