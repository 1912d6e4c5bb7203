"""Single-value binary serialization (spec Appendix D) and metrics bound truncation.

These bytes are what manifests store as column lower/upper bounds and partition summary
bounds, so they must be byte-exact with Java and PyIceberg: a bound that decodes to a
slightly different value makes planning skip files that hold matching rows.

Decoding is lenient in exactly the ways the spec allows for type promotion: an `int` bound
read for a column since promoted to `long` is 4 bytes, a `float` bound read as `double` is 4
bytes, and decimal bounds do not depend on precision. Anything else of the wrong length is
an error rather than a guess.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from decimal import Decimal
from functools import cache
from typing import Any

from icecore.errors import ValidationError
from icecore.spec.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

Encoder = Callable[[Any], bytes]
Decoder = Callable[[bytes], Any]

_INT = struct.Struct("<i")
_LONG = struct.Struct("<q")
_FLOAT = struct.Struct("<f")
_DOUBLE = struct.Struct("<d")

_MAX_CODE_POINT = 0x10FFFF
_MIN_SURROGATE = 0xD800
_MAX_SURROGATE = 0xDFFF


def to_bytes(t: IcebergType, value: Any) -> bytes:
    """Serialize one in-memory value of primitive type `t`; bad values raise ValidationError."""
    return encoder(t)(value)


def from_bytes(t: IcebergType, data: bytes) -> Any:
    """Deserialize one value of primitive type `t` to its in-memory representation."""
    return decoder(t)(data)


@cache
def encoder(t: IcebergType) -> Encoder:
    """The serializer for `t`, built once per type so hot loops skip the dispatch."""
    if isinstance(t, BooleanType):
        return _checked(t, bool, lambda v: b"\x01" if v else b"\x00")
    if isinstance(t, IntegerType | DateType):
        return _checked(t, int, _packer(t, _INT))
    if isinstance(t, LongType | TimeType | TimestampType | TimestamptzType):
        return _checked(t, int, _packer(t, _LONG))
    if isinstance(t, FloatType):
        return _checked(t, float, _packer(t, _FLOAT))
    if isinstance(t, DoubleType):
        return _checked(t, float, _DOUBLE.pack)
    if isinstance(t, StringType):
        return _checked(t, str, _encode_utf8)
    if isinstance(t, UUIDType):
        return _checked(t, uuid.UUID, lambda v: v.bytes)
    if isinstance(t, FixedType):
        return _checked(t, bytes, _fixed_encoder(t))
    if isinstance(t, BinaryType):
        return _checked(t, bytes, bytes)
    if isinstance(t, DecimalType):
        return _checked(t, Decimal, lambda v: _unscaled_to_bytes(decimal_to_unscaled(t, v)))
    raise ValidationError(f"type {t} has no single-value binary serialization")


@cache
def decoder(t: IcebergType) -> Decoder:
    """The deserializer for `t`, built once per type (bound decoding runs per data file)."""
    if isinstance(t, BooleanType):
        return _sized(t, (1,), lambda b: b != b"\x00")
    if isinstance(t, IntegerType | DateType):
        return _sized(t, (4,), lambda b: _INT.unpack(b)[0])
    if isinstance(t, LongType):
        # Bounds written before an int -> long promotion keep their 4-byte form.
        return _sized(t, (8, 4), lambda b: (_LONG if len(b) == 8 else _INT).unpack(b)[0])
    if isinstance(t, TimeType | TimestampType | TimestamptzType):
        return _sized(t, (8,), lambda b: _LONG.unpack(b)[0])
    if isinstance(t, FloatType):
        return _sized(t, (4,), lambda b: _FLOAT.unpack(b)[0])
    if isinstance(t, DoubleType):
        # Bounds written before a float -> double promotion keep their 4-byte form.
        return _sized(t, (8, 4), lambda b: (_DOUBLE if len(b) == 8 else _FLOAT).unpack(b)[0])
    if isinstance(t, StringType):
        return _decode_utf8
    if isinstance(t, UUIDType):
        return _sized(t, (16,), lambda b: uuid.UUID(bytes=bytes(b)))
    if isinstance(t, FixedType):
        return _sized(t, (t.length,), bytes)
    if isinstance(t, BinaryType):
        return bytes
    if isinstance(t, DecimalType):
        return lambda b: _decimal_from_bytes(t, b)
    raise ValidationError(f"type {t} has no single-value binary serialization")


def decimal_to_unscaled(t: DecimalType, value: Decimal) -> int:
    """The unscaled integer of `value` at the scale of `t`, refusing to round or overflow.

    Rounding here would write a bound that excludes the value it was computed from.
    """
    sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        raise ValidationError(f"{t} cannot hold the non-finite value {value}")
    unscaled = int("".join(map(str, digits)) or "0")
    shift = exponent + t.scale
    if shift >= 0:
        unscaled *= 10**shift
    else:
        unscaled, rest = divmod(unscaled, 10**-shift)
        if rest:
            raise ValidationError(f"{value} has more than {t.scale} fractional digits for {t}")
    if len(str(unscaled)) > t.precision:
        raise ValidationError(f"{value} has more than {t.precision} digits for {t}")
    return -unscaled if sign else unscaled


def unscaled_to_decimal(t: DecimalType, unscaled: int) -> Decimal:
    """Exact, whatever the decimal context precision (38 digits exceed the default 28)."""
    digits = tuple(int(c) for c in str(abs(unscaled)))
    return Decimal((1 if unscaled < 0 else 0, digits, -t.scale))


def truncate_lower_bound(t: IcebergType, value: Any, width: int) -> Any:
    """A lower bound for `value` of at most `width` characters (string) or bytes (binary).

    Mirrors Java's `truncate(16)` metrics mode: only string and binary bounds are shortened,
    every other type is returned unchanged. A prefix always sorts at or before the value.
    """
    _check_width(width)
    if isinstance(t, StringType | BinaryType):
        return value[:width]
    return value


def truncate_upper_bound(t: IcebergType, value: Any, width: int) -> Any:
    """An upper bound for `value` of at most `width` characters or bytes, or None if none exists.

    The prefix is incremented at its last position that can be incremented (code points skip
    the surrogate range and stop at U+10FFFF; bytes stop at 0xFF), as Java's `UnicodeUtil`
    and `BinaryUtil` do. None means the writer must store no upper bound at all.
    """
    _check_width(width)
    if isinstance(t, StringType):
        return _truncate_string_max(value, width)
    if isinstance(t, BinaryType):
        return _truncate_binary_max(value, width)
    return value


def _truncate_string_max(value: str, width: int) -> str | None:
    if len(value) <= width:
        return value
    prefix = value[:width]
    for i in range(width - 1, -1, -1):
        code_point = ord(prefix[i])
        if _MIN_SURROGATE <= code_point <= _MAX_SURROGATE:
            raise ValidationError(f"string bound holds the lone surrogate U+{code_point:04X}")
        if code_point == _MAX_CODE_POINT:
            continue
        nxt = _MAX_SURROGATE + 1 if code_point == _MIN_SURROGATE - 1 else code_point + 1
        return prefix[:i] + chr(nxt)
    return None


def _truncate_binary_max(value: bytes, width: int) -> bytes | None:
    if len(value) <= width:
        return value
    prefix = value[:width]
    for i in range(width - 1, -1, -1):
        if prefix[i] != 0xFF:
            return prefix[:i] + bytes((prefix[i] + 1,))
    return None


def _check_width(width: int) -> None:
    if width <= 0:
        raise ValidationError(f"bound truncation width must be positive, got {width}")


def _checked(t: IcebergType, kind: type, encode: Encoder) -> Encoder:
    """Reject values of the wrong Python type: bool is an int and int is not a float to Python,
    but writing either as the other would store a different value than the caller meant."""

    def run(value: Any) -> bytes:
        if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
            raise ValidationError(f"cannot serialize {value!r} ({type(value).__name__}) as {t}")
        return encode(value)

    return run


def _packer(t: IcebergType, fmt: struct.Struct) -> Encoder:
    def pack(value: Any) -> bytes:
        try:
            return fmt.pack(value)
        except (struct.error, OverflowError):
            raise ValidationError(f"{value!r} is out of range for {t}") from None

    return pack


def _fixed_encoder(t: FixedType) -> Encoder:
    def encode(value: bytes) -> bytes:
        if len(value) != t.length:
            raise ValidationError(f"{t} needs exactly {t.length} bytes, got {len(value)}")
        return bytes(value)

    return encode


def _sized(t: IcebergType, lengths: tuple[int, ...], decode: Decoder) -> Decoder:
    def run(data: bytes) -> Any:
        if len(data) not in lengths:
            expected = " or ".join(map(str, lengths))
            raise ValidationError(f"a {t} value takes {expected} bytes, got {len(data)}")
        return decode(data)

    return run


def _encode_utf8(value: str) -> bytes:
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(f"string {value!r} is not valid Unicode: {exc.reason}") from None


def _decode_utf8(data: bytes) -> str:
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"string value {data!r} is not valid UTF-8: {exc.reason}") from None


def _unscaled_to_bytes(unscaled: int) -> bytes:
    """Minimal-length big-endian two's complement, like Java's `BigInteger.toByteArray()`."""
    magnitude_bits = (unscaled if unscaled >= 0 else ~unscaled).bit_length()
    return unscaled.to_bytes(magnitude_bits // 8 + 1, "big", signed=True)


def _decimal_from_bytes(t: DecimalType, data: bytes) -> Decimal:
    if not data:
        raise ValidationError(f"a {t} value needs at least one byte, got 0")
    return unscaled_to_decimal(t, int.from_bytes(data, "big", signed=True))
