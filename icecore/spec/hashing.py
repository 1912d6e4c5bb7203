"""The 32-bit hash behind the bucket transform (spec: Appendix B, "32-bit Hash Requirements").

Every engine must put a value in the same bucket, otherwise a query that prunes on a bucket
partition silently skips rows another engine wrote. So the hash is exactly Murmur3 x86 32-bit
with seed 0, fed the byte form the spec fixes for each type.
"""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

from icecore.errors import ValidationError
from icecore.spec.conversions import decimal_to_unscaled
from icecore.spec.types import (
    BinaryType,
    DateType,
    DecimalType,
    FixedType,
    IcebergType,
    IntegerType,
    LongType,
    StringType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

_MASK32 = 0xFFFFFFFF
_C1 = 0xCC9E2D51
_C2 = 0x1B873593

# Types whose values the spec hashes as an 8-byte little-endian long (int and date widened;
# nanosecond timestamps as microseconds, see `bucket_hash`).
_NANO_TYPES = (TimestampNanoType, TimestamptzNanoType)
_LONG_HASHED = (
    IntegerType,
    LongType,
    DateType,
    TimeType,
    TimestampType,
    TimestamptzType,
    *_NANO_TYPES,
)
BUCKETABLE_TYPES: tuple[type[IcebergType], ...] = (
    *_LONG_HASHED,
    DecimalType,
    StringType,
    UUIDType,
    FixedType,
    BinaryType,
)

_VALUE_CLASSES: dict[type[IcebergType], type | tuple[type, ...]] = {
    **dict.fromkeys(_LONG_HASHED, int),
    DecimalType: Decimal,
    StringType: str,
    UUIDType: uuid.UUID,
    FixedType: (bytes, bytearray, memoryview),
    BinaryType: (bytes, bytearray, memoryview),
}


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK32


def murmur3_x86_32(data: bytes, seed: int = 0) -> int:
    """Murmur3 x86 32-bit of `data`, as a signed 32-bit int (Java's `int`)."""
    h = seed & _MASK32
    n_blocks = len(data) // 4
    for i in range(n_blocks):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * _C1) & _MASK32
        k = _rotl32(k, 15)
        k = (k * _C2) & _MASK32
        h ^= k
        h = _rotl32(h, 13)
        h = (h * 5 + 0xE6546B64) & _MASK32

    tail = data[4 * n_blocks :]
    if tail:
        k = int.from_bytes(tail, "little")
        k = (k * _C1) & _MASK32
        k = _rotl32(k, 15)
        k = (k * _C2) & _MASK32
        h ^= k

    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK32
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


def _min_twos_complement(n: int) -> bytes:
    """Java's `BigInteger.toByteArray`: the fewest big-endian bytes that keep the sign bit."""
    length = (n if n >= 0 else ~n).bit_length() // 8 + 1
    return n.to_bytes(length, "big", signed=True)


def _hash_bytes(value: Any, source_type: IcebergType | None) -> bytes:
    """The bytes the spec hashes for `value`; without a type, the Python type decides.

    A decimal needs its column type: the hash is of the unscaled value at the column's scale,
    so 14.2 and 14.20 in a decimal(9, 2) column must land in the same bucket.
    """
    if source_type is not None:
        expected = next(
            (py for t, py in _VALUE_CLASSES.items() if isinstance(source_type, t)), None
        )
        if expected is None:
            raise ValidationError(f"cannot bucket values of type {source_type}")
        if not isinstance(value, expected) or isinstance(value, bool):
            raise ValidationError(
                f"cannot bucket {type(value).__name__} value {value!r} as type {source_type}"
            )
    if isinstance(value, bool):
        raise ValidationError(f"cannot bucket boolean value {value!r}")
    if isinstance(value, int):
        if not -(1 << 63) <= value < (1 << 63):
            raise ValidationError(f"cannot bucket {value}: it does not fit a 64-bit long")
        return value.to_bytes(8, "little", signed=True)
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, uuid.UUID):
        return value.bytes
    if isinstance(value, Decimal):
        if not isinstance(source_type, DecimalType):
            raise ValidationError(
                f"cannot bucket decimal {value} without its column type: the scale decides"
            )
        return _min_twos_complement(decimal_to_unscaled(source_type, value))
    raise ValidationError(f"cannot bucket {type(value).__name__} value {value!r}")


def bucket_hash(value: Any, source_type: IcebergType | None = None) -> int:
    """The spec's 32-bit hash of one value (Appendix B); decimals and nanosecond timestamps
    need `source_type`.

    A timestamp_ns / timestamptz_ns value is hashed as its microseconds, floored (Appendix B
    note 3, Java's `DateTimeUtil.nanosToMicros`), so that a value lands in the same bucket
    whether the column holds it in micro- or nanoseconds.
    """
    if (
        isinstance(source_type, _NANO_TYPES)
        and isinstance(value, int)
        and not isinstance(value, bool)
    ):
        value //= 1000
    return murmur3_x86_32(_hash_bytes(value, source_type))
