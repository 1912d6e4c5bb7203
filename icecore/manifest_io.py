"""The Avro container under manifests and manifest lists: decoding by field id, and writing.

Reading uses a small Avro decoder of its own instead of fastavro's record reader. Planning
reads every entry of every manifest, and fastavro interprets the schema for each value
(and resolves reader schemas per value): about 40 µs per manifest entry, slower than
PyIceberg. Here a schema is compiled once into closures, fields a caller does not want are
skipped without building objects (runs of varints in one regex match), and values come out
in icecore's in-memory form directly: dates and timestamps as ints, Iceberg maps (arrays of
key/value records) as dicts, UUIDs and decimals as `uuid.UUID` and `Decimal`.

Columns are resolved by field id, never by name (spec Appendix A): names differ between
writers (old Java manifest lists say `added_data_files_count`; partition names get
sanitized), so schemas are first rewritten to our names by id (`rename_fields`).
Writing, which is not on a hot path, goes through fastavro.
"""

from __future__ import annotations

import bz2
import io as _io
import json
import lzma
import re
import struct
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from decimal import Decimal
from functools import cache
from typing import TYPE_CHECKING, Any

import fastavro

from icecore.avro_schema import FIELD_ID
from icecore.errors import FileError, ManifestError

if TYPE_CHECKING:
    from icecore.io import FileIO

AvroSchema = dict[str, Any]
Decoder = Callable[[bytes, int], tuple[Any, int]]
Skipper = Callable[[bytes, int], int]

_MAGIC = b"Obj\x01"
_SYNC_SIZE = 16
_FLOAT = struct.Struct("<f")
_DOUBLE = struct.Struct("<d")
_DECOMPRESS: dict[str, Callable[[bytes], bytes]] = {
    "null": bytes,
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
            meta, pos = _read_metadata(self._data, 4)
            self.metadata = {k: v.decode("utf-8") for k, v in meta.items()}
            self.schema: AvroSchema = json.loads(self.metadata["avro.schema"])
        except (IndexError, KeyError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise self.error(f"has no readable Avro header ({type(exc).__name__}: {exc})") from None
        self._sync = self._data[pos : pos + _SYNC_SIZE]
        self._blocks_at = pos + _SYNC_SIZE
        if not isinstance(self.schema, dict) or self.schema.get("type") != "record":
            raise self.error("Avro schema is not a record")

    def error(self, problem: str) -> ManifestError:
        return ManifestError(self.location, f"{self.kind} {problem}")

    def records(self, decode: Decoder) -> Iterator[Any]:
        """Every record of the file, decoded by `decode` (see `compile_decoder`)."""
        try:
            for count, block in self._blocks():
                pos = 0
                for _ in range(count):
                    value, pos = decode(block, pos)
                    yield value
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
        data, pos, end = self._data, self._blocks_at, len(self._data)
        while pos < end:
            count, pos = read_long(data, pos)
            size, pos = read_long(data, pos)
            block = data[pos : pos + size]
            pos += size
            if len(block) != size or data[pos : pos + _SYNC_SIZE] != self._sync:
                raise self.error("is truncated or corrupt (block sync marker mismatch)")
            pos += _SYNC_SIZE
            yield count, decompress(block)


def _read_metadata(data: bytes, pos: int) -> tuple[dict[str, bytes], int]:
    meta: dict[str, bytes] = {}
    while True:
        count, pos = read_long(data, pos)
        if count == 0:
            return meta, pos
        if count < 0:
            count = -count
            _, pos = read_long(data, pos)
        for _ in range(count):
            key, pos = _read_bytes(data, pos)
            meta[key.decode("utf-8")], pos = _read_bytes(data, pos)


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
    Unknown fields keep their names; a reader schema leaves them out to skip them.
    """
    fields = []
    seen = set()
    for f in record.get("fields", ()):
        field_id = f.get(FIELD_ID)
        if field_id in names:
            seen.add(field_id)
            fields.append({**f, "name": names[field_id]})
        else:
            fields.append(f)
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


def project(record: AvroSchema, keep: Callable[[dict[str, Any]], bool]) -> AvroSchema:
    """A copy of `record` with only the fields `keep` accepts: a reader schema."""
    return {**record, "fields": [f for f in record["fields"] if keep(f)]}


# Decoding -----------------------------------------------------------------------------------


def read_long(buf: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint (Avro int and long); most are one byte, so that path comes first."""
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    n = b & 0x7F
    shift = 7
    while True:
        pos += 1
        b = buf[pos]
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return (n >> 1) ^ -(n & 1), pos + 1
        shift += 7


def _read_bytes(buf: bytes, pos: int) -> tuple[bytes, int]:
    n, pos = read_long(buf, pos)
    end = pos + n
    if n < 0 or end > len(buf):
        raise ValueError(f"bytes of length {n} run past the end of the block")
    return buf[pos:end], end


def _read_string(buf: bytes, pos: int) -> tuple[str, int]:
    data, pos = _read_bytes(buf, pos)
    return data.decode("utf-8"), pos


def _read_boolean(buf: bytes, pos: int) -> tuple[bool, int]:
    return buf[pos] != 0, pos + 1


def _read_float(buf: bytes, pos: int) -> tuple[float, int]:
    return _FLOAT.unpack_from(buf, pos)[0], pos + 4


def _read_double(buf: bytes, pos: int) -> tuple[float, int]:
    return _DOUBLE.unpack_from(buf, pos)[0], pos + 8


def _read_null(buf: bytes, pos: int) -> tuple[None, int]:
    return None, pos


def _skip_long(buf: bytes, pos: int) -> int:
    while buf[pos] & 0x80:
        pos += 1
    return pos + 1


def _skip_bytes(buf: bytes, pos: int) -> int:
    n, pos = read_long(buf, pos)
    return pos + n


@cache
def _varint_run(count: int) -> re.Pattern[bytes]:
    """Matches `count` consecutive varints: skipping an int->long map is one C-level match."""
    return re.compile(rb"(?:[\x80-\xff]*[\x00-\x7f]){%d}" % count)


def _read_decimal(scale: int, raw: Decoder) -> Decoder:
    def read(buf: bytes, pos: int) -> tuple[Decimal, int]:
        data, pos = raw(buf, pos)
        return Decimal(f"{int.from_bytes(data, 'big', signed=True)}E-{scale}"), pos

    return read


def _fixed(size: int) -> Decoder:
    def read(buf: bytes, pos: int) -> tuple[bytes, int]:
        end = pos + size
        if end > len(buf):
            raise ValueError("fixed value runs past the end of the block")
        return buf[pos:end], end

    return read


_PRIMITIVE_DECODERS: dict[str, Decoder] = {
    "null": _read_null,
    "boolean": _read_boolean,
    "int": read_long,
    "long": read_long,
    "float": _read_float,
    "double": _read_double,
    "bytes": _read_bytes,
    "string": _read_string,
}
_FIXED_WIDTH = {"null": 0, "boolean": 1, "float": 4, "double": 8}


def compile_decoder(writer: AvroSchema, reader: AvroSchema | None = None) -> Decoder:
    """A decoder for records written with `writer`, keeping only the fields of `reader`.

    `reader` must be `writer` with record fields removed (see `project`); removed fields
    are skipped. Dates, times and timestamps decode as ints (icecore's representation),
    `uuid` as `uuid.UUID`, `decimal` as `Decimal`, Iceberg's int-keyed maps as dicts.
    """
    return _Compiler().decoder(writer, writer if reader is None else reader)


class _Compiler:
    """Turns an Avro schema into nested closures, resolving named types in order."""

    def __init__(self) -> None:
        self._writer_names: dict[str, Any] = {}
        self._reader_names: dict[str, Any] = {}

    def decoder(self, writer: Any, reader: Any) -> Decoder:
        writer = self._named(writer, self._writer_names)
        reader = self._named(reader, self._reader_names)
        if isinstance(writer, list):
            return self._union(
                [self.decoder(w, r) for w, r in zip(writer, reader, strict=True)], writer
            )
        kind = writer if isinstance(writer, str) else writer["type"]
        logical = None if isinstance(writer, str) else writer.get("logicalType")
        if kind == "record":
            return self._record(writer, reader)
        if kind == "array":
            if logical == "map" or _is_key_value(writer["items"]):
                items = self._named(writer["items"], self._writer_names)
                keys = self.decoder(items["fields"][0]["type"], items["fields"][0]["type"])
                values = self.decoder(items["fields"][1]["type"], items["fields"][1]["type"])
                return _map_of(keys, values)
            return _array_of(self.decoder(writer["items"], reader["items"]))
        if kind == "map":
            return _map_of(_read_string, self.decoder(writer["values"], reader["values"]))
        if kind == "enum":
            symbols = writer["symbols"]
            return lambda buf, pos: _enum(symbols, buf, pos)
        if kind == "fixed":
            read = _fixed(writer["size"])
        elif kind in _PRIMITIVE_DECODERS:
            read = _PRIMITIVE_DECODERS[kind]
        else:
            raise ValueError(f"unknown Avro type {writer!r}")
        if logical == "decimal":
            return _read_decimal(int(writer.get("scale", 0)), read)
        if logical == "uuid":
            return _as_uuid(read, from_string=kind == "string")
        return read

    def skipper(self, writer: Any) -> Skipper:
        writer = self._named(writer, self._writer_names)
        if isinstance(writer, list):
            return _skip_union([self.skipper(w) for w in writer], writer)
        kind = writer if isinstance(writer, str) else writer["type"]
        if kind in ("int", "long", "enum"):
            return _skip_long
        if kind in ("bytes", "string"):
            return _skip_bytes
        if kind in _FIXED_WIDTH or kind == "fixed":
            width = writer["size"] if kind == "fixed" else _FIXED_WIDTH[kind]
            return lambda buf, pos: pos + width
        if kind == "record":
            steps = [self.skipper(f["type"]) for f in writer["fields"]]

            def skip_record(buf: bytes, pos: int) -> int:
                for step in steps:
                    pos = step(buf, pos)
                return pos

            return skip_record
        if kind == "array":
            return _skip_blocks(self._skip_items(writer["items"]))
        if kind == "map":
            values = self.skipper(writer["values"])
            return _skip_blocks(_each(lambda buf, pos: values(buf, _skip_bytes(buf, pos))))
        raise ValueError(f"unknown Avro type {writer!r}")

    def _record(self, writer: AvroSchema, reader: AvroSchema) -> Decoder:
        wanted = {f["name"]: f["type"] for f in reader["fields"]}
        steps: list[tuple[str | None, Any]] = []
        for f in writer["fields"]:
            name = f["name"]
            if name in wanted:
                steps.append((name, self.decoder(f["type"], wanted[name])))
            elif steps and steps[-1][0] is None:  # one step for a run of skipped fields
                steps[-1] = (None, _skip_both(steps[-1][1], self.skipper(f["type"])))
            else:
                steps.append((None, self.skipper(f["type"])))

        def read_record(buf: bytes, pos: int) -> tuple[dict[str, Any], int]:
            out = {}
            for name, step in steps:
                if name is None:
                    pos = step(buf, pos)
                else:
                    out[name], pos = step(buf, pos)
            return out, pos

        return read_record

    def _union(self, branches: list[Decoder], writer: list[Any]) -> Decoder:
        if len(writer) == 2 and "null" in writer:
            value = branches[1 - writer.index("null")]
            null_byte = writer.index("null") * 2  # the zig-zag encoding of its branch index

            if value is read_long:

                def read_optional_long(buf: bytes, pos: int) -> tuple[int | None, int]:
                    b = buf[pos]
                    if b == null_byte:
                        return None, pos + 1
                    b = buf[pos + 1]
                    if b < 0x80:
                        return (b >> 1) ^ -(b & 1), pos + 2
                    return read_long(buf, pos + 1)

                return read_optional_long

            def read_optional(buf: bytes, pos: int) -> tuple[Any, int]:
                if buf[pos] == null_byte:
                    return None, pos + 1
                return value(buf, pos + 1)

            return read_optional

        def read_union(buf: bytes, pos: int) -> tuple[Any, int]:
            index, pos = read_long(buf, pos)
            return branches[index](buf, pos)

        return read_union

    def _skip_items(self, items: Any) -> _ItemsSkipper:
        """Skips `count` array items; the shapes of Iceberg's metrics maps get fast paths."""
        items = self._named(items, self._writer_names)
        if items in ("int", "long"):
            return _varint_items(1)
        if isinstance(items, dict) and items.get("type") == "record":
            shape = [self._named(f["type"], self._writer_names) for f in items["fields"]]
            if all(t in ("int", "long") for t in shape):
                return _varint_items(len(shape))  # counts: int -> long
            if len(shape) == 2 and shape[0] in ("int", "long") and shape[1] in ("bytes", "string"):
                return _skip_varint_bytes_items  # bounds: int -> binary
        return _each(self.skipper(items))

    def _named(self, schema: Any, names: dict[str, Any]) -> Any:
        """Register a named type on definition; resolve a reference to its definition."""
        if isinstance(schema, str):
            return names.get(schema, schema)
        if isinstance(schema, dict) and schema.get("type") in ("record", "fixed", "enum"):
            name = schema["name"]
            names[name] = schema
            if "namespace" in schema and "." not in name:
                names[f"{schema['namespace']}.{name}"] = schema
        return schema


def _is_key_value(items: Any) -> bool:
    return (
        isinstance(items, dict)
        and items.get("type") == "record"
        and [f["name"] for f in items.get("fields", ())] == ["key", "value"]
    )


_ItemsSkipper = Callable[[bytes, int, int], int]


def _skip_both(first: Skipper, second: Skipper) -> Skipper:
    return lambda buf, pos: second(buf, first(buf, pos))


def _skip_union(branches: list[Skipper], writer: list[Any]) -> Skipper:
    if len(writer) == 2 and "null" in writer:
        value = branches[1 - writer.index("null")]
        null_byte = writer.index("null") * 2  # the zig-zag encoding of its branch index

        def skip_optional(buf: bytes, pos: int) -> int:
            return pos + 1 if buf[pos] == null_byte else value(buf, pos + 1)

        return skip_optional

    def skip_union(buf: bytes, pos: int) -> int:
        index, pos = read_long(buf, pos)
        return branches[index](buf, pos)

    return skip_union


def _varint_items(per_item: int) -> _ItemsSkipper:
    def skip(buf: bytes, pos: int, count: int) -> int:
        match = _varint_run(count * per_item).match(buf, pos)
        if match is None:
            raise ValueError("varints run past the end of the block")
        return match.end()

    return skip


def _skip_varint_bytes_items(buf: bytes, pos: int, count: int) -> int:
    for _ in range(count):
        while buf[pos] & 0x80:
            pos += 1
        b = buf[pos + 1]
        if b < 0x80:  # a one-byte length, as bounds nearly always have
            pos += 2 + (b >> 1)
        else:
            n, pos = read_long(buf, pos + 1)
            pos += n
    return pos


def _each(item: Skipper) -> _ItemsSkipper:
    def skip(buf: bytes, pos: int, count: int) -> int:
        for _ in range(count):
            pos = item(buf, pos)
        return pos

    return skip


def _skip_blocks(skip_items: _ItemsSkipper) -> Skipper:
    def skip(buf: bytes, pos: int) -> int:
        while True:
            b = buf[pos]
            if b == 0:
                return pos + 1
            if b < 0x80 and not b & 1:  # a small positive item count, the usual case
                pos = skip_items(buf, pos + 1, b >> 1)
                continue
            count, pos = read_long(buf, pos)
            if count < 0:  # the writer gave the block's byte size: jump over it
                size, pos = read_long(buf, pos)
                pos += size
            else:
                pos = skip_items(buf, pos, count)

    return skip


def _array_of(item: Decoder) -> Decoder:
    def read_array(buf: bytes, pos: int) -> tuple[list[Any], int]:
        out = []
        while True:
            count, pos = read_long(buf, pos)
            if count == 0:
                return out, pos
            if count < 0:
                count = -count
                _, pos = read_long(buf, pos)
            for _ in range(count):
                value, pos = item(buf, pos)
                out.append(value)

    return read_array


def _map_of(key: Decoder, value: Decoder) -> Decoder:
    if key is read_long and value is read_long:
        return _read_long_long_map
    if key is read_long and value is _read_bytes:
        return _read_long_bytes_map

    def read_map(buf: bytes, pos: int) -> tuple[dict[Any, Any], int]:
        out = {}
        while True:
            count, pos = read_long(buf, pos)
            if count == 0:
                return out, pos
            if count < 0:
                count = -count
                _, pos = read_long(buf, pos)
            for _ in range(count):
                k, pos = key(buf, pos)
                out[k], pos = value(buf, pos)

    return read_map


def _read_long_long_map(buf: bytes, pos: int) -> tuple[dict[int, int], int]:
    """Iceberg's column counts (id -> count), with one-byte varints decoded inline."""
    out = {}
    while True:
        count, pos = read_long(buf, pos)
        if count == 0:
            return out, pos
        if count < 0:
            count = -count
            _, pos = read_long(buf, pos)
        for _ in range(count):
            b = buf[pos]
            if b < 0x80:
                k = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                k, pos = read_long(buf, pos)
            b = buf[pos]
            if b < 0x80:
                out[k] = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                out[k], pos = read_long(buf, pos)


def _read_long_bytes_map(buf: bytes, pos: int) -> tuple[dict[int, bytes], int]:
    """Iceberg's column bounds (id -> serialized value), with short lengths inline."""
    out = {}
    while True:
        count, pos = read_long(buf, pos)
        if count == 0:
            return out, pos
        if count < 0:
            count = -count
            _, pos = read_long(buf, pos)
        for _ in range(count):
            b = buf[pos]
            if b < 0x80:
                k = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                k, pos = read_long(buf, pos)
            b = buf[pos]
            if b < 0x80 and not b & 1:
                end = pos + 1 + (b >> 1)
                out[k] = buf[pos + 1 : end]
                pos = end
            else:
                out[k], pos = _read_bytes(buf, pos)


def _enum(symbols: list[str], buf: bytes, pos: int) -> tuple[str, int]:
    index, pos = read_long(buf, pos)
    return symbols[index], pos


def _as_uuid(read: Decoder, from_string: bool) -> Decoder:
    def read_uuid(buf: bytes, pos: int) -> tuple[uuid.UUID, int]:
        raw, pos = read(buf, pos)
        return (uuid.UUID(raw) if from_string else uuid.UUID(bytes=raw)), pos

    return read_uuid
