"""Partition tuples as bytes that sort like the tuples: the clustering key of a manifest
rewrite, the same whether entries are sorted by Python in the driver or by Spark (which
compares binary values as unsigned bytes, as Python compares `bytes`).

Each value is a null marker (0x00 null, 0x01 a value: nulls first, as Spark sorts ascending)
and then, for a value:
- integers (int, long, date, time, timestamps): 8 bytes big-endian, sign bit flipped;
- float and double: the double's bits, all flipped for negatives, the sign bit flipped for
  the rest (-0.0 before 0.0, NaN last);
- decimals: the unscaled integer (the scale is the type's) as 16 bytes, sign bit flipped;
- strings (UTF-8, whose byte order is code point order), binary and fixed: the bytes with
  every 0x00 escaped as 0x00 0xFF and a 0x00 0x00 terminator, so that no key is a prefix of
  another and concatenated tuples compare field by field;
- booleans: one byte; uuids: their 16 bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from icecore.errors import ValidationError
from icecore.spec.conversions import decimal_to_unscaled
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
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UnknownType,
    UUIDType,
)

ValueKey = Callable[[Any], bytes]

NULL = b"\x00"
_VALUE = b"\x01"
_SIGN_64 = 1 << 63
_SIGN_128 = 1 << 127
_DOUBLE = struct.Struct(">d")
_U64 = struct.Struct(">Q")
_INTEGERS = (
    IntegerType,
    LongType,
    DateType,
    TimeType,
    TimestampType,
    TimestamptzType,
    TimestampNanoType,
    TimestamptzNanoType,
)


def value_key(t: IcebergType) -> ValueKey:
    """The order-preserving bytes of one non-null value of type `t`."""
    if isinstance(t, BooleanType):
        return lambda v: b"\x01" if v else b"\x00"
    if isinstance(t, _INTEGERS):
        return lambda v: _U64.pack(int(v) + _SIGN_64)
    if isinstance(t, FloatType | DoubleType):
        return _float_key
    if isinstance(t, DecimalType):
        return lambda v: _decimal_key(t, v)
    if isinstance(t, StringType):
        return lambda v: _escaped(v.encode("utf-8"))
    if isinstance(t, BinaryType | FixedType):
        return lambda v: _escaped(bytes(v))
    if isinstance(t, UUIDType):
        return lambda v: v.bytes
    if isinstance(t, UnknownType):
        return lambda v: b""  # always null: never called with a value
    raise ValidationError(f"partition values of type {t} cannot be ordered")


def tuple_key(types: Sequence[IcebergType], positions: Sequence[int]) -> Callable[[tuple], bytes]:
    """The key of a partition tuple: the values at `positions` (of a tuple whose fields have
    `types`), in that order."""
    keys = [(p, value_key(types[p])) for p in positions]

    def key(partition: tuple) -> bytes:
        parts = []
        for position, encode in keys:
            value = partition[position]
            parts.append(NULL if value is None else _VALUE + encode(value))
        return b"".join(parts)

    return key


def nullable_key(t: IcebergType) -> Callable[[Any], bytes]:
    """One field's key, null included (as `tuple_key` writes it)."""
    encode = value_key(t)
    return lambda v: NULL if v is None else _VALUE + encode(v)


def _float_key(value: float) -> bytes:
    (bits,) = _U64.unpack(_DOUBLE.pack(value))
    return _U64.pack(bits ^ 0xFFFF_FFFF_FFFF_FFFF if bits & _SIGN_64 else bits | _SIGN_64)


def _decimal_key(t: DecimalType, value: Decimal) -> bytes:
    return (decimal_to_unscaled(t, value) + _SIGN_128).to_bytes(16, "big")


def _escaped(data: bytes) -> bytes:
    return data.replace(b"\x00", b"\x00\xff") + b"\x00\x00"
