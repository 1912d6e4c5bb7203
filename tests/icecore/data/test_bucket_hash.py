"""The vectorized bucket hash (`icecore.data.bucket_hash`) must be the spec's, bit for bit: a
value bucketed differently from `icecore.spec.hashing` (and Java, Trino) lands where filtered
reads never look. Compared with icecore's scalar transform on edge and random values."""

from __future__ import annotations

import random
from decimal import Decimal

import numpy as np
import pyarrow as pa

from icecore.data.bucket_hash import bucket_decimals, murmur3_binary, murmur3_longs, to_bucket
from icecore.spec.transforms import BucketTransform
from icecore.spec.types import BinaryType, DecimalType, LongType, StringType

STRINGS = ["", "a", "abcd", "abcde", "iceberg", "é漢字🙂x", "\x01x", "__HIVE_DEFAULT_PARTITION__"]
N = 1 << 30


def test_longs_hash_as_the_spec_says() -> None:
    rnd = random.Random(3)
    longs = [0, 1, -1, 2**63 - 1, -(2**63), 34] + [rnd.getrandbits(64) - 2**63 for _ in range(2000)]
    got = to_bucket(murmur3_longs(np.array(longs, dtype=np.int64)), N)
    assert got.tolist() == [BucketTransform(N).apply(v, LongType()) for v in longs]


def test_strings_hash_their_utf8_bytes_at_any_offset() -> None:
    rnd = random.Random(3)
    texts = [
        *STRINGS,
        *(
            "".join(chr(rnd.randint(32, 0x2FFF)) for _ in range(rnd.randint(0, 40)))
            for _ in range(2000)
        ),
    ]
    array = pa.array(texts, pa.string()).slice(1)  # an offset into the buffers, as Arrow slices
    got = to_bucket(murmur3_binary(array), N)
    assert got.tolist() == [BucketTransform(N).apply(v, StringType()) for v in texts[1:]]
    large = pa.array(texts, pa.large_string())
    assert to_bucket(murmur3_binary(large), N).tolist() == [
        BucketTransform(N).apply(v, StringType()) for v in texts
    ]


def test_binary_and_decimals() -> None:
    values = [b"", b"\x00", b"\x00\x01\x02\x03\x04", bytes(range(256))]
    got = to_bucket(murmur3_binary(pa.array(values, pa.binary())), 16)
    assert got.tolist() == [BucketTransform(16).apply(v, BinaryType()) for v in values]
    decimal = DecimalType(9, 2)
    numbers = [Decimal("0.00"), Decimal("-0.01"), Decimal("10.65"), Decimal("-1234567.89")]
    assert bucket_decimals(numbers, decimal, 16) == [
        BucketTransform(16).apply(v, decimal) for v in numbers
    ]
