"""A small Avro binary decoder, compiled per schema, for manifests and manifest lists.

Planning decodes every entry of every manifest: half a million for a large table. fastavro
interprets the schema for each value (and resolves reader schemas per value), which costs
about 40 µs per manifest entry, slower than PyIceberg's Cython reader. This module compiles
a writer schema once instead:
- each record becomes one generated function in which ints, longs and strings, optional or
  not, are decoded inline (no call per value) and which returns a tuple in the reader's
  field order, ready to unpack into a model;
- fields the reader does not want are skipped without building objects; runs of varints
  (Iceberg's `id -> count` maps) are skipped by a single regex match;
- values come out in icecore's in-memory form: dates, times and timestamps as ints,
  Iceberg's int-keyed maps (arrays of key/value records) as dicts, `uuid` as `uuid.UUID`,
  `decimal` as `Decimal`.

Generated code contains only fixed templates and integer indices; names and types taken
from a file never become source text, so a hostile schema cannot inject code.
"""

from __future__ import annotations

import re
import struct
import uuid
from collections.abc import Callable
from decimal import Decimal
from functools import cache
from typing import Any

Decoder = Callable[[bytes, int], tuple[Any, int]]
Skipper = Callable[[bytes, int], int]

_FLOAT = struct.Struct("<f")
_DOUBLE = struct.Struct("<d")
_FIXED_WIDTH = {"null": 0, "boolean": 1, "float": 4, "double": 8}
_VARINT_TYPES = ("int", "long")


def compile_decoder(writer: Any, reader: Any) -> Decoder:
    """A decoder for values written with the Avro schema `writer`, shaped by `reader`.

    Records decode to tuples in `reader`'s field order, fields matched by name (rename
    fields by id first); writer fields the reader lacks are skipped, reader fields the
    writer lacks decode as None, and so do reader fields of type "null" (that is how a
    reader asks to skip a field). Apart from records, `reader` must equal `writer`.
    Bad schemas raise ValueError, KeyError or TypeError.
    """
    return _Compiler().decoder(writer, reader)


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


def read_bytes(buf: bytes, pos: int) -> tuple[bytes, int]:
    n, pos = read_long(buf, pos)
    end = pos + n
    if n < 0 or end > len(buf):
        raise ValueError(f"a value of {n} bytes runs past the end of its block")
    return buf[pos:end], end


def _read_string(buf: bytes, pos: int) -> tuple[str, int]:
    data, pos = read_bytes(buf, pos)
    return data.decode("utf-8"), pos


def _read_boolean(buf: bytes, pos: int) -> tuple[bool, int]:
    return buf[pos] != 0, pos + 1


def _read_float(buf: bytes, pos: int) -> tuple[float, int]:
    return _FLOAT.unpack_from(buf, pos)[0], pos + 4


def _read_double(buf: bytes, pos: int) -> tuple[float, int]:
    return _DOUBLE.unpack_from(buf, pos)[0], pos + 8


def _read_null(buf: bytes, pos: int) -> tuple[None, int]:
    return None, pos


_PRIMITIVES: dict[str, Decoder] = {
    "null": _read_null,
    "boolean": _read_boolean,
    "int": read_long,
    "long": read_long,
    "float": _read_float,
    "double": _read_double,
    "bytes": read_bytes,
    "string": _read_string,
}

# Templates of generated record code; `{t}` is the target local, `{i}` the indent.
_LONG = """\
{i}b = buf[pos]
{i}if b < 0x80:
{i}    {t} = (b >> 1) ^ -(b & 1)
{i}    pos += 1
{i}else:
{i}    {t}, pos = read_long(buf, pos)
"""
_STRING = """\
{i}b = buf[pos]
{i}if b < 0x80 and not b & 1:
{i}    end = pos + 1 + (b >> 1)
{i}    {t} = buf[pos + 1 : end].decode()
{i}else:
{i}    n, pos = read_long(buf, pos)
{i}    if n < 0:
{i}        raise ValueError(f"negative string length {{n}}")
{i}    end = pos + n
{i}    {t} = buf[pos:end].decode()
{i}pos = end
"""
_CALL = "{i}{t}, pos = {f}(buf, pos)\n"
_SKIP_LONG = """\
{i}while buf[pos] & 0x80:
{i}    pos += 1
{i}pos += 1
"""
_SKIP_CALL = "{i}pos = {f}(buf, pos)\n"
_SKIP_OPTIONAL = """\
{i}if buf[pos] == {null}:
{i}    pos += 1
{i}else:
{i}    pos += 1
"""
_OPTIONAL = """\
{i}if buf[pos] == {null}:
{i}    {t} = None
{i}    pos += 1
{i}else:
{i}    pos += 1
"""


class _Compiler:
    """Turns Avro schemas into decoders, resolving named types in definition order."""

    def __init__(self) -> None:
        self._writer_names: dict[str, Any] = {}
        self._reader_names: dict[str, Any] = {}

    def decoder(self, writer: Any, reader: Any) -> Decoder:
        writer = self._named(writer, self._writer_names)
        reader = self._named(reader, self._reader_names, self._writer_names)
        if isinstance(writer, list):
            branches = [self.decoder(w, r) for w, r in zip(writer, reader, strict=True)]
            return _union(branches, writer)
        kind = writer if isinstance(writer, str) else writer["type"]
        logical = None if isinstance(writer, str) else writer.get("logicalType")
        if kind == "record":
            return self._record(writer, reader)
        if kind == "array":
            items = self._named(writer["items"], self._writer_names)
            if logical == "map" or _is_key_value(items):
                key, value = (f["type"] for f in items["fields"])
                return _map_of(self.decoder(key, key), self.decoder(value, value))
            return _array_of(self.decoder(items, reader["items"]))
        if kind == "map":
            return _map_of(_read_string, self.decoder(writer["values"], reader["values"]))
        if kind == "enum":
            return _enum(writer["symbols"])
        if kind == "fixed":
            read = _fixed(writer["size"])
        elif kind in _PRIMITIVES:
            read = _PRIMITIVES[kind]
        else:
            raise ValueError(f"unknown Avro type {writer!r}")
        # Other logical types (date, time-micros, timestamp-micros) keep their raw ints.
        if logical == "decimal":
            return _decimal(int(writer.get("scale", 0)), read)
        if logical == "uuid":
            return _uuid(read, from_string=kind == "string")
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
            return _skip_all([self.skipper(f["type"]) for f in writer["fields"]])
        if kind == "array":
            return self._skip_array(writer["items"])
        if kind == "map":
            values = self.skipper(writer["values"])
            return _skip_blocks(lambda buf, pos: values(buf, _skip_bytes(buf, pos)))
        raise ValueError(f"unknown Avro type {writer!r}")

    def _record(self, writer: dict[str, Any], reader: dict[str, Any]) -> Decoder:
        """Generate one function that decodes the record into a tuple in reader order."""
        positions = {f["name"]: i for i, f in enumerate(reader["fields"])}
        reader_types = [f["type"] for f in reader["fields"]]
        outputs = ["None"] * len(positions)
        namespace: dict[str, Any] = {"read_long": read_long}
        source = ["def read_record(buf, pos):\n"]
        for f in writer["fields"]:
            index = positions.get(f["name"])
            if index is None or reader_types[index] == "null":
                source.append(self._inline_skip(f["type"], "    ", namespace))
                continue
            outputs[index] = f"v{index}"
            target = f"v{index}"
            source.append(self._inline(f["type"], reader_types[index], target, "    ", namespace))
        trailing = "," if len(outputs) == 1 else ""
        source.append(f"    return ({', '.join(outputs)}{trailing}), pos\n")
        exec(compile("".join(source), "<icecore avro record decoder>", "exec"), namespace)
        return namespace["read_record"]

    def _inline_skip(self, writer: Any, indent: str, namespace: dict[str, Any]) -> str:
        """Source skipping one value; optional values and varints need no function call."""
        writer = self._named(writer, self._writer_names)
        if isinstance(writer, list) and len(writer) == 2 and "null" in writer:
            head = _SKIP_OPTIONAL.format(i=indent, null=2 * writer.index("null"))
            value = writer[1 - writer.index("null")]
            return head + self._inline_skip(value, indent + "    ", namespace)
        if writer in _VARINT_TYPES or (
            isinstance(writer, dict) and writer.get("type") in _VARINT_TYPES
        ):
            return _SKIP_LONG.format(i=indent)
        name = f"f{len(namespace)}"
        namespace[name] = self.skipper(writer)
        return _SKIP_CALL.format(i=indent, f=name)

    def _inline(
        self, writer: Any, reader: Any, target: str, indent: str, namespace: dict[str, Any]
    ) -> str:
        """Source decoding one value into `target`; common shapes need no function call."""
        writer = self._named(writer, self._writer_names)
        if isinstance(writer, list) and len(writer) == 2 and "null" in writer:
            value_index = 1 - writer.index("null")
            branch = reader[value_index] if isinstance(reader, list) else reader
            head = _OPTIONAL.format(i=indent, t=target, null=2 * writer.index("null"))
            return head + self._inline(
                writer[value_index], branch, target, indent + "    ", namespace
            )
        kind = writer.get("type") if isinstance(writer, dict) else writer
        if kind in _VARINT_TYPES:  # dates, times and timestamps too: they stay ints
            return _LONG.format(i=indent, t=target)
        if kind == "string" and (isinstance(writer, str) or "logicalType" not in writer):
            return _STRING.format(i=indent, t=target)
        name = f"f{len(namespace)}"
        namespace[name] = self.decoder(writer, reader)
        return _CALL.format(i=indent, t=target, f=name)

    def _skip_array(self, items: Any) -> Skipper:
        """Skips an array; the shapes of Iceberg's metrics maps get fast paths."""
        items = self._named(items, self._writer_names)
        if items in _VARINT_TYPES:
            return _skip_varint_blocks(1)
        if isinstance(items, dict) and items.get("type") == "record":
            shape = [self._named(f["type"], self._writer_names) for f in items["fields"]]
            if all(t in _VARINT_TYPES for t in shape):
                return _skip_varint_blocks(len(shape))  # column counts: id -> long
            if len(shape) == 2 and shape[0] in _VARINT_TYPES and shape[1] in ("bytes", "string"):
                return _skip_varint_bytes_blocks  # column bounds: id -> binary
        return _skip_blocks(self.skipper(items))

    @staticmethod
    def _named(schema: Any, names: dict[str, Any], fallback: dict[str, Any] | None = None) -> Any:
        """Register a named type where it is defined; resolve a reference to it."""
        if isinstance(schema, str):
            found = names.get(schema)
            if found is None and fallback is not None:
                found = fallback.get(schema)
            return schema if found is None else found
        if isinstance(schema, dict) and schema.get("type") in ("record", "fixed", "enum"):
            names[schema["name"]] = schema
            if "namespace" in schema and "." not in schema["name"]:
                names[f"{schema['namespace']}.{schema['name']}"] = schema
        return schema


def _is_key_value(items: Any) -> bool:
    return (
        isinstance(items, dict)
        and items.get("type") == "record"
        and [f["name"] for f in items.get("fields", ())] == ["key", "value"]
    )


def _union(branches: list[Decoder], writer: list[Any]) -> Decoder:
    if len(writer) == 2 and "null" in writer:
        value = branches[1 - writer.index("null")]
        null_byte = 2 * writer.index("null")  # the zig-zag encoding of its branch index

        def read_optional(buf: bytes, pos: int) -> tuple[Any, int]:
            if buf[pos] == null_byte:
                return None, pos + 1
            return value(buf, pos + 1)

        return read_optional

    def read_union(buf: bytes, pos: int) -> tuple[Any, int]:
        index, pos = read_long(buf, pos)
        return branches[index](buf, pos)

    return read_union


def _fixed(size: int) -> Decoder:
    def read_fixed(buf: bytes, pos: int) -> tuple[bytes, int]:
        end = pos + size
        if end > len(buf):
            raise ValueError("a fixed value runs past the end of its block")
        return buf[pos:end], end

    return read_fixed


def _decimal(scale: int, raw: Decoder) -> Decoder:
    def read_decimal(buf: bytes, pos: int) -> tuple[Decimal, int]:
        data, pos = raw(buf, pos)
        return Decimal(f"{int.from_bytes(data, 'big', signed=True)}E-{scale}"), pos

    return read_decimal


def _uuid(raw: Decoder, from_string: bool) -> Decoder:
    def read_uuid(buf: bytes, pos: int) -> tuple[uuid.UUID, int]:
        data, pos = raw(buf, pos)
        return (uuid.UUID(data) if from_string else uuid.UUID(bytes=data)), pos

    return read_uuid


def _enum(symbols: list[str]) -> Decoder:
    def read_enum(buf: bytes, pos: int) -> tuple[str, int]:
        index, pos = read_long(buf, pos)
        return symbols[index], pos

    return read_enum


def _array_of(item: Decoder) -> Decoder:
    def read_array(buf: bytes, pos: int) -> tuple[list[Any], int]:
        out = []
        while True:
            count, pos = read_long(buf, pos)
            if count == 0:
                return out, pos
            if count < 0:  # a negative count is followed by the block's byte size
                count = -count
                _, pos = read_long(buf, pos)
            for _ in range(count):
                value, pos = item(buf, pos)
                out.append(value)

    return read_array


def _map_of(key: Decoder, value: Decoder) -> Decoder:
    if key is read_long and value is read_long:
        return _read_long_long_map
    if key is read_long and value is read_bytes:
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
    """Iceberg's column counts (id -> count), one-byte varints decoded inline."""
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
    """Iceberg's column bounds (id -> serialized value), short lengths decoded inline."""
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
                out[k], pos = read_bytes(buf, pos)


# Skipping ----------------------------------------------------------------------------------


def _skip_long(buf: bytes, pos: int) -> int:
    while buf[pos] & 0x80:
        pos += 1
    return pos + 1


def _skip_bytes(buf: bytes, pos: int) -> int:
    n, pos = read_long(buf, pos)
    if n < 0:
        raise ValueError(f"negative length {n}")
    return pos + n


def _skip_all(skippers: list[Skipper]) -> Skipper:
    if len(skippers) == 1:
        return skippers[0]

    def skip_all(buf: bytes, pos: int) -> int:
        for skip in skippers:
            pos = skip(buf, pos)
        return pos

    return skip_all


def _skip_union(branches: list[Skipper], writer: list[Any]) -> Skipper:
    if len(writer) == 2 and "null" in writer:
        value = branches[1 - writer.index("null")]
        null_byte = 2 * writer.index("null")

        def skip_optional(buf: bytes, pos: int) -> int:
            return pos + 1 if buf[pos] == null_byte else value(buf, pos + 1)

        return skip_optional

    def skip_union(buf: bytes, pos: int) -> int:
        index, pos = read_long(buf, pos)
        return branches[index](buf, pos)

    return skip_union


@cache
def _varint_run(count: int) -> re.Pattern[bytes]:
    """Matches `count` consecutive varints, so skipping a map of counts is one C call."""
    return re.compile(rb"(?:[\x80-\xff]*[\x00-\x7f]){%d}" % count)


def _skip_varint_blocks(per_item: int) -> Skipper:
    """Skips blocks of items made of `per_item` varints each, one regex match per block."""

    def skip_varint_blocks(buf: bytes, pos: int) -> int:
        while True:
            b = buf[pos]
            if b < 0x80 and not b & 1:  # a small item count: the usual case
                if b == 0:
                    return pos + 1
                count = b >> 1
                pos += 1
            else:
                count, pos = read_long(buf, pos)
                if count < 0:
                    pos = _skip_sized(buf, pos)
                    continue
            match = _varint_run(count * per_item).match(buf, pos)
            if match is None:
                raise ValueError("varints run past the end of their block")
            pos = match.end()

    return skip_varint_blocks


def _skip_varint_bytes_blocks(buf: bytes, pos: int) -> int:
    """Skips blocks of (varint, bytes) items; bounds' lengths nearly always take one byte."""
    while True:
        b = buf[pos]
        if b < 0x80 and not b & 1:
            if b == 0:
                return pos + 1
            count = b >> 1
            pos += 1
        else:
            count, pos = read_long(buf, pos)
            if count < 0:
                pos = _skip_sized(buf, pos)
                continue
        for _ in range(count):
            while buf[pos] & 0x80:
                pos += 1
            b = buf[pos + 1]
            if b < 0x80 and not b & 1:
                pos += 2 + (b >> 1)
            else:
                pos = _skip_bytes(buf, pos + 1)


def _skip_blocks(item: Skipper) -> Skipper:
    def skip_blocks(buf: bytes, pos: int) -> int:
        while True:
            count, pos = read_long(buf, pos)
            if count == 0:
                return pos
            if count < 0:
                pos = _skip_sized(buf, pos)
                continue
            for _ in range(count):
                pos = item(buf, pos)

    return skip_blocks


def _skip_sized(buf: bytes, pos: int) -> int:
    """Jumps over a block whose writer gave its byte size after a negative item count."""
    size, pos = read_long(buf, pos)
    if size < 0:
        raise ValueError(f"negative block size {size}")
    return pos + size
