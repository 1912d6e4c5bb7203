"""Iceberg's bucket transform for whole columns, vectorized with numpy.

Spark's own `hash()` cannot place rows in Iceberg's buckets: it is Murmur3 with seed 42 (the
spec says 0) over Spark's byte layout, with a non-standard tail for strings. A row bucketed
differently from how Java, Trino or icecore compute it lands in a partition whose readers'
filters never look, so this module re-implements the spec's hash (Appendix B: Murmur3 x86
32-bit, seed 0) over numpy arrays and is tested bit for bit against `icecore.spec.hashing`,
the scalar reference. Decimals, rare as bucket sources, go through the scalar transform
value by value. An engine calls it on its columns' values (Spark: through pandas UDFs,
`spark_jobs.writing.transforms`).
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal

import numpy as np
import pyarrow as pa

from icecore.spec.transforms import BucketTransform
from icecore.spec.types import DecimalType

_C1 = np.uint32(0xCC9E2D51)
_C2 = np.uint32(0x1B873593)
_FMIX1 = np.uint32(0x85EBCA6B)
_FMIX2 = np.uint32(0xC2B2AE35)
_FIVE = np.uint32(5)
_N = np.uint32(0xE6546B64)
_LOW32 = np.uint64(0xFFFFFFFF)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _mix_k(k: np.ndarray) -> np.ndarray:
    return _rotl(k * _C1, 15) * _C2


def _mix_h(h: np.ndarray, k: np.ndarray) -> np.ndarray:
    return _rotl(h ^ _mix_k(k), 13) * _FIVE + _N


def _fmix(h: np.ndarray, length: np.ndarray | np.uint32) -> np.ndarray:
    h = h ^ length
    h = h ^ (h >> np.uint32(16))
    h = h * _FMIX1
    h = h ^ (h >> np.uint32(13))
    h = h * _FMIX2
    return h ^ (h >> np.uint32(16))


def murmur3_longs(values: np.ndarray) -> np.ndarray:
    """The spec's hash of each int64 (8 bytes, little-endian), as uint32.

    int, date, time and timestamp values are all hashed as longs, so callers widen them first.
    """
    words = np.ascontiguousarray(values, dtype=np.int64).view(np.uint64)
    low = (words & _LOW32).astype(np.uint32)
    high = (words >> np.uint64(32)).astype(np.uint32)
    h = np.zeros(len(words), dtype=np.uint32)
    return _fmix(_mix_h(_mix_h(h, low), high), np.uint32(8))


def murmur3_binary(array: pa.Array) -> np.ndarray:
    """The spec's hash of each value of a binary or string Arrow array, as uint32.

    Strings hash their UTF-8 bytes, which is what an Arrow string array stores. Null slots
    hash as empty values; callers mask them.
    """
    if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
        array = array.cast(
            pa.large_binary() if pa.types.is_large_string(array.type) else pa.binary()
        )
    large = pa.types.is_large_binary(array.type)
    _, offsets_buffer, data_buffer = array.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64 if large else np.int32)
    offsets = offsets[array.offset : array.offset + len(array) + 1].astype(np.int64)
    data = (
        np.frombuffer(data_buffer, dtype=np.uint8)
        if data_buffer is not None
        else np.zeros(0, dtype=np.uint8)
    )
    starts = offsets[:-1]
    lengths = offsets[1:] - starts
    blocks = lengths // 4
    h = np.zeros(len(array), dtype=np.uint32)
    for j in range(int(blocks.max(initial=0))):
        rows = np.nonzero(blocks > j)[0]
        h[rows] = _mix_h(h[rows], _gather(data, starts[rows] + 4 * j, 4))
    tails = lengths % 4
    rows = np.nonzero(tails)[0]
    if len(rows):
        k = np.zeros(len(rows), dtype=np.uint32)
        at = starts[rows] + 4 * blocks[rows]
        for byte in range(3):
            has = tails[rows] > byte
            shifted = data[at[has] + byte].astype(np.uint32) << np.uint32(8 * byte)
            k[has] |= shifted
        h[rows] ^= _mix_k(k)
    return _fmix(h, lengths.astype(np.uint32))


def _gather(data: np.ndarray, positions: np.ndarray, width: int) -> np.ndarray:
    """Little-endian uint32 words starting at each of `positions`."""
    word = np.zeros(len(positions), dtype=np.uint32)
    for byte in range(width):
        word |= data[positions + byte].astype(np.uint32) << np.uint32(8 * byte)
    return word


def to_bucket(hashes: np.ndarray, num_buckets: int) -> np.ndarray:
    """`(hash & Integer.MAX_VALUE) % N` as int32, the spec's bucket number."""
    return ((hashes & np.uint32(0x7FFFFFFF)) % np.uint32(num_buckets)).astype(np.int32)


def bucket_decimals(values: Iterable[Decimal], decimal_type: DecimalType, num_buckets: int) -> list:
    """Buckets of decimals through icecore's scalar transform: the hash is of the minimal
    two's-complement unscaled value, whose byte length varies per value."""
    transform = BucketTransform(num_buckets)
    return [transform.apply(v, decimal_type) for v in values]
