"""The Avro container under manifests and manifest lists: reading by field id, and writing.

Reading parses the container (header, blocks, codecs) here and decodes records with
`icecore.avro.decoder`, which is several times faster than fastavro's record reader on
manifests; writing, which is not on a hot path, goes through fastavro.

Columns are resolved by field id, never by name (spec Appendix A): names differ between
writers (old Java manifest lists say `added_data_files_count`; partition names get
sanitized), so a file's schema is first rewritten to our names by id (`rename_fields`),
and the reader schema (`select`) lists the fields we want, in the order we want them.
"""

from __future__ import annotations

import bz2
import io as _io
import json
import lzma
import struct
import zlib
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import fastavro
import fastavro.write

from icecore.avro.decoder import Decoder, compile_decoder, read_bytes, read_long
from icecore.avro.schema import FIELD_ID
from icecore.errors import FileError, ManifestError

if TYPE_CHECKING:
    from icecore.io import FileIO

AvroSchema = dict[str, Any]

_MAGIC = b"Obj\x01"
_DECODERS: dict[Hashable, Decoder] = {}
_MAX_DECODERS = 256
_SYNC_SIZE = 16
_DECOMPRESS: dict[str, Callable[[bytes], bytes]] = {
    "null": lambda block: block,
    "deflate": lambda block: zlib.decompress(block, -15),
    "bzip2": bz2.decompress,
    "xz": lzma.decompress,
}


class AvroFile:
    """One Avro container file held in memory: its key-value metadata and writer schema."""

    __slots__ = ("_blocks_at", "_data", "_sync", "kind", "location", "metadata", "schema")

    def __init__(self, io: FileIO, location: str, kind: str) -> None:
        self.location = location
        self.kind = kind
        try:
            self._data = io.read_bytes(location)
        except FileError as exc:
            raise ManifestError(location, f"cannot read {kind}: {exc.problem}") from None
        if self._data[:4] != _MAGIC:
            raise self.error("is not an Avro file (bad magic bytes)")
        try:
            meta, pos = read_metadata(self._data, 4)
            self.metadata = {k: v.decode("utf-8") for k, v in meta.items()}
            self.schema: AvroSchema = json.loads(self.metadata["avro.schema"])
        except (IndexError, KeyError, ValueError) as exc:  # ValueError: bad UTF-8, JSON, sizes
            raise self.error(f"has no readable Avro header ({type(exc).__name__}: {exc})") from None
        self._sync = self._data[pos : pos + _SYNC_SIZE]
        self._blocks_at = pos + _SYNC_SIZE
        if len(self._sync) != _SYNC_SIZE:
            raise self.error("is truncated in its header")
        if not isinstance(self.schema, dict) or self.schema.get("type") != "record":
            raise self.error("Avro schema is not a record")

    @property
    def size(self) -> int:
        return len(self._data)

    def error(self, problem: str) -> ManifestError:
        return ManifestError(self.location, f"{self.kind} {problem}")

    def decoder(self, key: Hashable, writer: AvroSchema, reader: AvroSchema) -> Decoder:
        """The decoder of `writer` shaped by `reader` (see `compile_decoder`), compiled once
        per `key`: tables have thousands of manifests written with a handful of schemas,
        and compiling costs a millisecond or two."""
        decode = _DECODERS.get(key)
        if decode is None:
            try:
                decode = compile_decoder(writer, reader)
            except (KeyError, TypeError, ValueError) as exc:
                raise self.error(f"has an unsupported Avro schema ({exc})") from None
            if len(_DECODERS) >= _MAX_DECODERS:
                _DECODERS.clear()
            _DECODERS[key] = decode
        return decode

    def records(self, decode: Decoder) -> Iterator[Any]:
        """Every record, decoded by `decode` (see `decoder`)."""
        try:
            for count, block in self._blocks():
                pos = 0
                for _ in range(count):
                    value, pos = decode(block, pos)
                    yield value
                if pos != len(block):
                    raise ValueError(
                        f"a block of {count} records has {len(block) - pos} bytes left"
                    )
        except (IndexError, ValueError, struct.error, zlib.error, OSError) as exc:
            raise self.error(f"is corrupt ({type(exc).__name__}: {exc})") from None

    def _blocks(self) -> Iterator[tuple[int, bytes]]:
        codec = self.metadata.get("avro.codec", "null")
        decompress = _DECOMPRESS.get(codec)
        if decompress is None:
            # Rare codecs (snappy, zstandard) through fastavro, when their libraries exist.
            for block in fastavro.block_reader(_io.BytesIO(self._data)):
                yield block.num_records, block.bytes_.getvalue()
            return
        data, pos, end, sync = self._data, self._blocks_at, len(self._data), self._sync
        while pos < end:
            count, pos = read_long(data, pos)
            size, pos = read_long(data, pos)
            block_end = pos + size
            if block_end > end or data[block_end : block_end + _SYNC_SIZE] != sync:
                raise ValueError("block sync marker mismatch (truncated or corrupt file)")
            yield count, decompress(data[pos:block_end])
            pos = block_end + _SYNC_SIZE


def read_metadata(data: bytes, pos: int) -> tuple[dict[str, bytes], int]:
    """The key-value metadata map of an Avro container header, and the position after it."""
    meta: dict[str, bytes] = {}
    while True:
        count, pos = read_long(data, pos)
        if count == 0:
            return meta, pos
        if count < 0:
            count = -count
            _, pos = read_long(data, pos)
        for _ in range(count):
            key, pos = read_bytes(data, pos)
            meta[key.decode("utf-8")], pos = read_bytes(data, pos)


def write_avro(
    io: FileIO,
    location: str,
    schema: AvroSchema,
    records: Iterable[dict[str, Any]],
    *,
    metadata: Mapping[str, str],
    codec: str,
) -> int:
    """Write an Avro container in one piece and return its length in bytes.

    Manifests are small and immutable, so they are built in memory: nothing partial is
    ever visible at `location`, and the exact length the manifest list records is known.
    """
    buffer = _io.BytesIO()
    fastavro.writer(buffer, fastavro.parse_schema(schema), records, codec, metadata=dict(metadata))
    data = buffer.getvalue()
    io.write_bytes(location, data)
    return len(data)


class AvroStream:
    """An Avro container encoded in memory as its records come: what a writer that starts a
    new file at a size needs to know is the bytes so far (`length`)."""

    def __init__(self, schema: AvroSchema, *, metadata: Mapping[str, str], codec: str) -> None:
        self._buffer = _io.BytesIO()
        self._writer = fastavro.write.Writer(
            self._buffer, fastavro.parse_schema(schema), codec, metadata=dict(metadata)
        )

    def write(self, record: dict[str, Any]) -> None:
        self._writer.write(record)

    def length(self, *, flush: bool = False) -> int:
        """The header and the blocks encoded so far (records of the block being filled are
        not counted, as in Java's `length()`); `flush` ends that block first."""
        if flush:
            self._writer.flush()
        return self._buffer.tell()

    def finish(self) -> bytes:
        """The whole container; nothing may be written afterwards."""
        self._writer.flush()
        return self._buffer.getvalue()


# Schema rewriting --------------------------------------------------------------------------


def non_null(avro_type: Any) -> Any:
    """The branch of an optional (`["null", T]`) type that holds values."""
    if isinstance(avro_type, list):
        branches = [t for t in avro_type if t != "null"]
        return branches[0] if len(branches) == 1 else avro_type
    return avro_type


def replace_non_null(avro_type: Any, new_type: Any) -> Any:
    """`avro_type` with its value branch replaced by `new_type`, keeping its optionality."""
    if isinstance(avro_type, list):
        return [t if t == "null" else new_type for t in avro_type]
    return new_type


def rename_fields(
    avro_file: AvroFile,
    record: AvroSchema,
    names: Mapping[int, str],
    required: Iterable[int],
    where: str,
) -> AvroSchema:
    """A copy of `record` whose fields known by field id are named as in `names`.

    Fields of `required` ids must be present, or the file is not what its role says it is.
    Other fields get names no reader asks for, so they are skipped: a stray field that
    happens to be called `file_path` must not be read as the real one.
    """
    fields = []
    seen = set()
    for i, f in enumerate(record.get("fields", ())):
        field_id = f.get(FIELD_ID)
        if not isinstance(field_id, int) or field_id not in names:
            fields.append({**f, "name": f"__unknown_{i}"})
            continue
        if field_id in seen:
            raise avro_file.error(f"has field id {field_id} twice in {where}")
        seen.add(field_id)
        fields.append({**f, "name": names[field_id]})
    for field_id in required:
        if field_id not in seen:
            raise avro_file.error(f"lacks required field {field_id} {names[field_id]} in {where}")
    return {**record, "fields": fields}


def field_type(record: AvroSchema, name: str) -> Any:
    """The (non-null) type of the field named `name` in a renamed record."""
    return non_null(next(f["type"] for f in record["fields"] if f["name"] == name))


def with_field_type(record: AvroSchema, name: str, new_type: Any) -> AvroSchema:
    """A copy of `record` with the (non-null) type of field `name` replaced."""
    fields = [
        {**f, "type": replace_non_null(f["type"], new_type)} if f["name"] == name else f
        for f in record["fields"]
    ]
    return {**record, "fields": fields}


def select(record: AvroSchema, names: Iterable[str], *, skip: Iterable[str] = ()) -> AvroSchema:
    """A reader schema: the fields `names` of `record`, in that order.

    Names in `skip`, and names `record` lacks (fields an older format version did not
    have), get the type "null": the decoder skips such fields and reads them as None.
    Fields of `record` not named are skipped too.
    """
    by_name = {f["name"]: f for f in record["fields"]}
    skipped = frozenset(skip)
    fields = [
        by_name[name] if name in by_name and name not in skipped else {"name": name, "type": "null"}
        for name in names
    ]
    return {**record, "fields": fields}
