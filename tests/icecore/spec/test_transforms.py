"""Partition transforms: spec vectors, Java's human strings, and agreement with PyIceberg."""

from __future__ import annotations

import datetime as dt
import random
import struct
import uuid
from decimal import Context, Decimal

import mmh3
import pytest
from pyiceberg import transforms as pyt
from pyiceberg import types as pyty

from icecore.errors import ValidationError
from icecore.spec.hashing import bucket_hash, murmur3_x86_32
from icecore.spec.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    TimeTransform,
    Transform,
    TruncateTransform,
    VoidTransform,
    YearTransform,
    parse_transform,
)
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
    ListType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_CTX = Context(prec=60)  # exact scaling of 38-digit test decimals
ALL_STRINGS = ["identity", "bucket[16]", "truncate[4]", "year", "month", "day", "hour", "void"]


def micros(text: str) -> int:
    """Microseconds since the epoch of an ISO timestamp (naive means UTC)."""
    value = dt.datetime.fromisoformat(text)
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    delta = value - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def days(text: str) -> int:
    return (dt.date.fromisoformat(text) - dt.date(1970, 1, 1)).days


def time_micros(text: str) -> int:
    t = dt.time.fromisoformat(text)
    return ((t.hour * 60 + t.minute) * 60 + t.second) * 1_000_000 + t.microsecond


# --- Appendix B: the 32-bit hash ---------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "source_type", "expected"),
    [
        (34, IntegerType(), 2017239379),
        (34, LongType(), 2017239379),
        (Decimal("14.20"), DecimalType(9, 2), -500754589),
        (days("2017-11-16"), DateType(), -653330422),
        (time_micros("22:31:08"), TimeType(), -662762989),
        (micros("2017-11-16T22:31:08"), TimestampType(), -2047944441),
        (micros("2017-11-16T22:31:08.000001"), TimestampType(), -1207196810),
        (micros("2017-11-16T14:31:08-08:00"), TimestamptzType(), -2047944441),
        (micros("2017-11-16T14:31:08.000001-08:00"), TimestamptzType(), -1207196810),
        ("iceberg", StringType(), 1210000089),
        (uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7"), UUIDType(), 1488055340),
        (bytes([0, 1, 2, 3]), FixedType(4), -188683207),
        (bytes([0, 1, 2, 3]), BinaryType(), -188683207),
    ],
)
def test_appendix_b_hash_vectors(value: object, source_type: IcebergType, expected: int) -> None:
    assert bucket_hash(value, source_type) == expected
    if not isinstance(value, Decimal):  # the Python type alone picks the same bytes
        assert bucket_hash(value) == expected


def test_appendix_b_vectors_of_types_that_are_not_bucketed() -> None:
    """boolean/float/double are not bucketable, but the hash itself must match their vectors."""
    assert murmur3_x86_32((1).to_bytes(8, "little")) == 1392991556  # true -> hashInt(1)
    assert murmur3_x86_32(struct.pack("<d", 1.0)) == -142385009
    assert murmur3_x86_32(struct.pack("<d", 0.0)) == 1669671676


def test_murmur3_matches_reference_implementation_for_every_tail_length() -> None:
    rng = random.Random(7)
    for length in range(40):
        data = rng.randbytes(length)
        assert murmur3_x86_32(data) == mmh3.hash(data, 0, signed=True), data.hex()
    assert murmur3_x86_32(b"") == 0


def test_uuid_is_hashed_big_endian() -> None:
    value = uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7")
    assert bucket_hash(value) == murmur3_x86_32(bytes.fromhex("F79C3E09677C4BBDA4793F349CB785E7"))


def test_decimal_hash_uses_minimal_twos_complement_of_unscaled_value() -> None:
    # 1420 = 0x058C (two bytes); -128 = 0x80 (one byte); 128 = 0x0080 (sign byte kept)
    assert bucket_hash(Decimal("14.20"), DecimalType(9, 2)) == murmur3_x86_32(bytes([0x05, 0x8C]))
    assert bucket_hash(Decimal("-1.28"), DecimalType(5, 2)) == murmur3_x86_32(bytes([0x80]))
    assert bucket_hash(Decimal("1.28"), DecimalType(5, 2)) == murmur3_x86_32(bytes([0x00, 0x80]))
    assert bucket_hash(Decimal("0.00"), DecimalType(5, 2)) == murmur3_x86_32(bytes([0x00]))


def test_decimal_hash_depends_on_column_scale_not_value_exponent() -> None:
    assert bucket_hash(Decimal("14.2"), DecimalType(9, 2)) == -500754589
    assert bucket_hash(Decimal("1.42E+1"), DecimalType(9, 2)) == -500754589
    with pytest.raises(ValidationError, match="more than 2 fractional digits"):
        bucket_hash(Decimal("14.201"), DecimalType(9, 2))
    with pytest.raises(ValidationError, match="more than 3 digits"):
        bucket_hash(Decimal("14.20"), DecimalType(3, 2))
    with pytest.raises(ValidationError, match="without its column type"):
        bucket_hash(Decimal("14.20"))
    with pytest.raises(ValidationError, match="without its column type"):
        TruncateTransform(10).apply(Decimal("14.20"))


@pytest.mark.parametrize(
    ("value", "source_type"),
    [
        (True, IntegerType()),
        (1.0, DoubleType()),
        ("34", IntegerType()),
        (34, StringType()),
        (Decimal("1"), LongType()),
        (b"\x00", StringType()),
        (1 << 63, LongType()),
        (dt.date(2024, 1, 1), DateType()),
    ],
)
def test_bucket_rejects_values_of_the_wrong_kind(value: object, source_type: IcebergType) -> None:
    with pytest.raises(ValidationError):
        BucketTransform(16).apply(value, source_type)


# --- bucket[N] ---------------------------------------------------------------------------


def test_bucket_is_hash_without_sign_bit_mod_n() -> None:
    assert BucketTransform(100).apply(34, IntegerType()) == 2017239379 % 100
    # negative hash: the sign bit is dropped, not the absolute value taken
    assert BucketTransform(16).apply(Decimal("14.20"), DecimalType(9, 2)) == 1646729059 % 16 == 3
    assert BucketTransform(10).apply(1, IntegerType()) == 6
    assert BucketTransform(16).apply(None, IntegerType()) is None


def test_bucket_int_and_long_agree_so_type_promotion_keeps_buckets() -> None:
    for v in (-(2**31), -1, 0, 1, 2**31 - 1):
        assert BucketTransform(7).apply(v, IntegerType()) == BucketTransform(7).apply(v, LongType())


BUCKET_SOURCES: list[tuple[IcebergType, pyty.IcebergType, object]] = [
    (IntegerType(), pyty.IntegerType(), lambda r: r.randint(-(2**31), 2**31 - 1)),
    (LongType(), pyty.LongType(), lambda r: r.randint(-(2**63), 2**63 - 1)),
    (DateType(), pyty.DateType(), lambda r: r.randint(-800_000, 800_000)),
    (TimeType(), pyty.TimeType(), lambda r: r.randint(0, 86_400 * 10**6 - 1)),
    (TimestampType(), pyty.TimestampType(), lambda r: r.randint(-(10**17), 10**17)),
    (TimestamptzType(), pyty.TimestamptzType(), lambda r: r.randint(-(10**17), 10**17)),
    (StringType(), pyty.StringType(), lambda r: "".join(map(chr, r.sample(range(32, 0x2FFF), 9)))),
    (UUIDType(), pyty.UUIDType(), lambda r: uuid.UUID(int=r.getrandbits(128))),
    (BinaryType(), pyty.BinaryType(), lambda r: r.randbytes(r.randint(0, 20))),
    (FixedType(5), pyty.FixedType(5), lambda r: r.randbytes(5)),
    (
        DecimalType(38, 4),
        pyty.DecimalType(38, 4),
        lambda r: Decimal(r.randint(-(10**38) + 1, 10**38 - 1)).scaleb(-4, _CTX),
    ),
]


@pytest.mark.parametrize(("ours", "theirs", "gen"), BUCKET_SOURCES, ids=lambda x: str(x)[:20])
def test_bucket_agrees_with_pyiceberg(ours: IcebergType, theirs: object, gen: object) -> None:
    rng = random.Random(str(ours))
    reference = pyt.BucketTransform(1_000_003).transform(theirs)
    for _ in range(300):
        value = gen(rng)
        assert BucketTransform(1_000_003).apply(value, ours) == reference(value), value


@pytest.mark.parametrize(
    ("source_type", "allowed"),
    [
        (IntegerType(), True),
        (LongType(), True),
        (DecimalType(9, 2), True),
        (DateType(), True),
        (TimeType(), True),
        (TimestampType(), True),
        (TimestamptzType(), True),
        (StringType(), True),
        (UUIDType(), True),
        (FixedType(3), True),
        (BinaryType(), True),
        (BooleanType(), False),
        (FloatType(), False),
        (DoubleType(), False),
        (ListType(3, IntegerType()), False),
    ],
)
def test_bucket_source_types_follow_the_spec_table(source_type: IcebergType, allowed: bool) -> None:
    assert BucketTransform(4).can_transform(source_type) is allowed
    if not allowed:
        with pytest.raises(ValidationError, match="cannot be applied"):
            BucketTransform(4).apply(1, source_type)


# --- truncate[W] -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("width", "value", "source_type", "expected"),
    [
        (10, 1, IntegerType(), 0),
        (10, -1, IntegerType(), -10),
        (10, 0, IntegerType(), 0),
        (10, 10, IntegerType(), 10),
        (10, -10, IntegerType(), -10),
        (10, -11, IntegerType(), -20),
        (10, 1, LongType(), 0),
        (10, -1, LongType(), -10),
        (7, -(2**63), LongType(), -(2**63) - (-(2**63)) % 7),
        (50, Decimal("10.65"), DecimalType(9, 2), Decimal("10.50")),
        (10, Decimal("-0.05"), DecimalType(9, 2), Decimal("-0.10")),
        (10, Decimal("12.3"), DecimalType(9, 2), Decimal("12.30")),
        (3, "iceberg", StringType(), "ice"),
        (10, "ice", StringType(), "ice"),
        (3, bytes([1, 2, 3, 4, 5]), BinaryType(), bytes([1, 2, 3])),
        (10, b"\x01", BinaryType(), b"\x01"),
    ],
)
def test_truncate_spec_examples_and_negatives(
    width: int, value: object, source_type: IcebergType, expected: object
) -> None:
    result = TruncateTransform(width).apply(value, source_type)
    assert result == expected
    assert type(result) is type(expected)
    if isinstance(expected, Decimal):
        # the column's scale is kept: 10.50, not 10.5
        assert result.as_tuple() == expected.as_tuple()


def test_truncate_strings_by_code_points_never_splitting_characters() -> None:
    t = TruncateTransform(2)
    assert t.apply("😀😁😂", StringType()) == "😀😁"  # 4-byte UTF-8, surrogate pairs in Java
    assert t.apply("éa€", StringType()) == "éa"
    assert TruncateTransform(1).apply("\U0001f600x", StringType()) == "\U0001f600"
    # binary counts bytes: a UTF-8 encoded emoji is cut in the middle
    assert t.apply("😀".encode(), BinaryType()) == b"\xf0\x9f"


def test_truncate_null_and_invalid() -> None:
    assert TruncateTransform(3).apply(None, StringType()) is None
    with pytest.raises(ValidationError, match="cannot be applied"):
        TruncateTransform(3).apply(b"abcd", FixedType(4))
    with pytest.raises(ValidationError):
        TruncateTransform(3).apply(1.5, DoubleType())
    with pytest.raises(ValidationError):
        TruncateTransform(3).apply(True)
    with pytest.raises(ValidationError, match="must be positive"):
        TruncateTransform(0)


TRUNCATE_SOURCES = [
    (IntegerType(), pyty.IntegerType(), lambda r: r.randint(-(2**31), 2**31 - 1)),
    (LongType(), pyty.LongType(), lambda r: r.randint(-(2**63), 2**63 - 1)),
    (StringType(), pyty.StringType(), lambda r: "".join(map(chr, r.sample(range(32, 0x2FFF), 9)))),
    (BinaryType(), pyty.BinaryType(), lambda r: r.randbytes(r.randint(0, 20))),
    (
        DecimalType(20, 3),
        pyty.DecimalType(20, 3),
        lambda r: Decimal(r.randint(-(10**20) + 1, 10**20 - 1)).scaleb(-3, _CTX),
    ),
]


@pytest.mark.parametrize(("ours", "theirs", "gen"), TRUNCATE_SOURCES, ids=lambda x: str(x)[:20])
@pytest.mark.parametrize("width", [1, 3, 10, 97])
def test_truncate_agrees_with_pyiceberg(
    ours: object, theirs: object, gen: object, width: int
) -> None:
    rng = random.Random(f"{ours}{width}")
    reference = pyt.TruncateTransform(width).transform(theirs)
    for _ in range(200):
        value = gen(rng)
        assert TruncateTransform(width).apply(value, ours) == reference(value), value


# --- year / month / day / hour -----------------------------------------------------------


@pytest.mark.parametrize("source_type", [TimestampType(), TimestamptzType()])
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2017-12-01T10:12:55.038194", (47, 575, 17501, 420034)),
        ("1970-01-01T00:00:01.000001", (0, 0, 0, 0)),
        ("1970-01-01T00:00:00", (0, 0, 0, 0)),
        ("1969-12-31T23:59:59.999999", (-1, -1, -1, -1)),
        ("1969-12-30T10:12:55.038194", (-1, -1, -2, -38)),
        ("1969-01-01T00:00:00", (-1, -12, -365, -8760)),
        ("1968-12-31T23:59:59.999999", (-2, -13, -366, -8761)),
        # Iceberg Java's DateTimeUtil gives day -2 / hour -2 here; flooring gives the right unit
        ("1969-12-31T00:00:00.999999", (-1, -1, -1, -24)),
        ("1969-12-31T23:00:00.999999", (-1, -1, -1, -1)),
        ("2000-02-29T23:59:59.999999", (30, 361, 11016, 264407)),
    ],
)
def test_time_transforms_of_timestamps(
    source_type: IcebergType, text: str, expected: tuple[int, int, int, int]
) -> None:
    """expected: (year, month, day, hour) ordinals."""
    value = micros(text)
    transforms = (YearTransform(), MonthTransform(), DayTransform(), HourTransform())
    assert tuple(t.apply(value, source_type) for t in transforms) == expected


@pytest.mark.parametrize(
    ("text", "year", "month", "day"),
    [
        ("2017-12-01", 47, 575, 17501),
        ("1970-01-01", 0, 0, 0),
        ("1969-12-31", -1, -1, -1),
        ("1969-01-01", -1, -12, -365),
        ("1968-12-31", -2, -13, -366),
        ("0001-01-01", -1969, -23628, -719162),
    ],
)
def test_time_transforms_of_dates(text: str, year: int, month: int, day: int) -> None:
    value = days(text)
    assert YearTransform().apply(value, DateType()) == year
    assert MonthTransform().apply(value, DateType()) == month
    assert DayTransform().apply(value, DateType()) == day


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (YearTransform(), pyt.YearTransform()),
        (MonthTransform(), pyt.MonthTransform()),
        (DayTransform(), pyt.DayTransform()),
        (HourTransform(), pyt.HourTransform()),
    ],
    ids=str,
)
def test_time_transforms_agree_with_pyiceberg(ours: TimeTransform, theirs: object) -> None:
    rng = random.Random(str(ours))
    sources = [(TimestampType(), pyty.TimestampType(), 10**16)]
    if not isinstance(ours, HourTransform):
        sources.append((DateType(), pyty.DateType(), 700_000))  # PyIceberg: years 1..9999
    for source, py_source, span in sources:
        reference = theirs.transform(py_source)
        for _ in range(500):
            value = rng.randint(-span, span)
            assert ours.apply(value, source) == reference(value), (source, value)


def test_time_transforms_need_the_source_type_and_a_fitting_one() -> None:
    with pytest.raises(ValidationError, match="needs the source type"):
        DayTransform().apply(17501)
    with pytest.raises(ValidationError, match="cannot be applied"):
        HourTransform().apply(17501, DateType())
    with pytest.raises(ValidationError, match="cannot be applied"):
        YearTransform().apply(1, TimeType())
    with pytest.raises(ValidationError, match="expects an int"):
        DayTransform().apply(dt.date(2024, 1, 1), DateType())
    assert MonthTransform().apply(None, DateType()) is None


# --- result types, order, names ----------------------------------------------------------


def test_result_types() -> None:
    assert BucketTransform(8).result_type(StringType()) == IntegerType()
    assert YearTransform().result_type(TimestampType()) == IntegerType()
    assert MonthTransform().result_type(DateType()) == IntegerType()
    assert HourTransform().result_type(TimestamptzType()) == IntegerType()
    assert DayTransform().result_type(TimestampType()) == DateType()  # spec note [1], Java
    assert TruncateTransform(4).result_type(DecimalType(9, 2)) == DecimalType(9, 2)
    assert IdentityTransform().result_type(UUIDType()) == UUIDType()
    assert VoidTransform().result_type(StringType()) == StringType()
    # a dropped source column: only transforms with a fixed result type still have one
    assert BucketTransform(8).result_type(None) == IntegerType()
    assert HourTransform().result_type(None) == IntegerType()
    assert DayTransform().result_type(None) == DateType()
    for transform in (IdentityTransform(), TruncateTransform(2), VoidTransform()):
        with pytest.raises(ValidationError, match="unknown without its source"):
            transform.result_type(None)


def test_identity_and_void() -> None:
    assert IdentityTransform().apply("x", StringType()) == "x"
    assert IdentityTransform().can_transform(DoubleType())
    assert not IdentityTransform().can_transform(ListType(3, IntegerType()))
    with pytest.raises(ValidationError):
        IdentityTransform().apply([1], ListType(3, IntegerType()))
    assert VoidTransform().apply("x", StringType()) is None
    assert VoidTransform().can_transform(ListType(3, IntegerType()))
    assert VoidTransform().is_void
    assert not IdentityTransform().is_void


def test_order_and_dedup_names() -> None:
    assert [t.preserves_order for t in map(parse_transform, ALL_STRINGS)] == [
        True,  # identity
        False,  # bucket
        True,  # truncate
        True,  # year
        True,  # month
        True,  # day
        True,  # hour
        False,  # void
    ]
    assert {t.dedup_name for t in (YearTransform(), MonthTransform(), DayTransform())} == {"time"}
    assert HourTransform().dedup_name == "time"
    assert BucketTransform(16).dedup_name == "bucket[16]"
    assert BucketTransform(16).dedup_name != BucketTransform(8).dedup_name


# --- parse / str ---------------------------------------------------------------------------


@pytest.mark.parametrize("text", ALL_STRINGS)
def test_parse_and_str_round_trip(text: str) -> None:
    t = parse_transform(text)
    assert isinstance(t, Transform)
    assert str(t) == text
    assert parse_transform(str(t)) == t
    assert hash(parse_transform(text)) == hash(t)
    assert repr(t) == f"parse_transform({text!r})"


def test_parse_builds_the_right_classes_and_values() -> None:
    assert parse_transform("bucket[16]") == BucketTransform(16)
    assert parse_transform("bucket[16]").num_buckets == 16  # type: ignore[attr-defined]
    assert parse_transform("truncate[3]") == TruncateTransform(3)
    assert parse_transform("Day") == DayTransform()
    assert parse_transform(" BUCKET[ 8 ] ") == BucketTransform(8)
    assert BucketTransform(16) != BucketTransform(8)
    assert BucketTransform(4) != TruncateTransform(4)
    assert YearTransform() != MonthTransform()
    assert len({BucketTransform(16), parse_transform("bucket[16]"), DayTransform()}) == 2


@pytest.mark.parametrize(
    "text",
    ["", "bucket", "bucket[]", "bucket[0]", "truncate[-1]", "truncate[x]", "zorder", "days", 3],
)
def test_parse_rejects_unknown_transforms(text: object) -> None:
    with pytest.raises(ValidationError):
        parse_transform(text)  # type: ignore[arg-type]


# --- human strings, checked against JDK 17 output of Iceberg's TransformUtil ---------------


@pytest.mark.parametrize(
    ("transform", "value", "expected"),
    [
        (YearTransform(), 47, "2017"),
        (YearTransform(), -1, "1969"),
        (YearTransform(), -1970, "0000"),
        (YearTransform(), -1971, "-001"),
        (YearTransform(), 8030, "10000"),
        (MonthTransform(), 575, "2017-12"),
        (MonthTransform(), 0, "1970-01"),
        (MonthTransform(), -1, "1969-12"),
        (MonthTransform(), -13, "1968-12"),
        (MonthTransform(), -23641, "-001-12"),
        (DayTransform(), 17501, "2017-12-01"),
        (DayTransform(), -1, "1969-12-31"),
        (DayTransform(), -366, "1968-12-31"),
        (DayTransform(), -719529, "-001-12-31"),
        (DayTransform(), 2932897, "10000-01-01"),
        (DayTransform(), -1000000, "-768-02-04"),
        (HourTransform(), 420034, "2017-12-01-10"),
        (HourTransform(), -1, "1969-12-31-23"),
        (HourTransform(), -25, "1969-12-30-23"),
        (HourTransform(), -24, "1969-12-31-00"),
        (HourTransform(), 100000000, "13377-12-11-16"),
        (HourTransform(), -100000000, "-9438-01-20-08"),
        (BucketTransform(16), 3, "3"),
        (TruncateTransform(3), "a/b", "a/b"),
        (TruncateTransform(3), b"\x01\x02\x03", "AQID"),
        (TruncateTransform(50), Decimal("10.50"), "10.50"),
        (VoidTransform(), "anything", "null"),
    ],
)
def test_human_strings_of_transform_results(
    transform: Transform, value: object, expected: str
) -> None:
    assert transform.to_human_string(value, transform.result_type(StringType())) == expected
    assert transform.to_human_string(None) == "null"


@pytest.mark.parametrize(
    ("value", "value_type", "expected"),
    [
        (17501, DateType(), "2017-12-01"),
        (-719528, DateType(), "0000-01-01"),
        (time_micros("10:12:55.038194"), TimeType(), "10:12:55.038194"),
        (time_micros("10:12:55.038"), TimeType(), "10:12:55.038"),
        (time_micros("10:12:55.5"), TimeType(), "10:12:55.500"),
        (time_micros("10:12:55"), TimeType(), "10:12:55"),
        (time_micros("10:12:00"), TimeType(), "10:12"),
        (time_micros("00:00:00"), TimeType(), "00:00"),
        (36775000001, TimeType(), "10:12:55.000001"),
        (micros("2017-12-01T10:12:55.038194"), TimestampType(), "2017-12-01T10:12:55.038194"),
        (micros("2017-12-01T10:12:55.5"), TimestampType(), "2017-12-01T10:12:55.5"),
        (micros("2017-12-01T10:12:00"), TimestampType(), "2017-12-01T10:12:00"),
        (-1, TimestampType(), "1969-12-31T23:59:59.999999"),
        (-62198755200000000, TimestampType(), "-0001-01-01T00:00:00"),
        (253402300800000000, TimestampType(), "+10000-01-01T00:00:00"),
        (2**63 - 1, TimestampType(), "+294247-01-10T04:00:54.775807"),
        (
            micros("2017-12-01T10:12:55.038194-08:00"),
            TimestamptzType(),
            "2017-12-01T18:12:55.038194+00:00",
        ),
        (0, TimestamptzType(), "1970-01-01T00:00:00+00:00"),
        (-1234567890000, LongType(), "-1234567890000"),
        (True, BooleanType(), "true"),
        (False, BooleanType(), "false"),
        ("a/b/c=d", StringType(), "a/b/c=d"),
        (Decimal("-1.50"), DecimalType(9, 2), "-1.50"),
        (Decimal("-1.5"), DecimalType(9, 2), "-1.50"),
        (Decimal("-0.00"), DecimalType(9, 2), "0.00"),
        (Decimal("0.00000001"), DecimalType(38, 8), "1E-8"),
        (Decimal("-1.5"), None, "-1.5"),  # without the type, the value's own scale
        (Decimal("-0.0"), None, "0.0"),
        (Decimal("0.000001"), DecimalType(38, 6), "0.000001"),
        (
            Decimal("123456789012345678901234567890.12345678"),
            DecimalType(38, 8),
            "123456789012345678901234567890.12345678",
        ),
        (
            uuid.UUID("F79C3E09-677C-4BBD-A479-3F349CB785E7"),
            UUIDType(),
            "f79c3e09-677c-4bbd-a479-3f349cb785e7",
        ),
        (bytes([1, 2, 3]), BinaryType(), "AQID"),
        (bytes([1, 2, 3]), FixedType(3), "AQID"),
        (None, LongType(), "null"),
    ],
)
def test_identity_human_strings_match_java(
    value: object, value_type: IcebergType, expected: str
) -> None:
    assert IdentityTransform().to_human_string(value, value_type) == expected


@pytest.mark.parametrize(
    ("value", "single", "expected"),
    [
        (1.0, False, "1.0"),
        (100.0, False, "100.0"),
        (123.456, False, "123.456"),
        (0.001, False, "0.001"),
        (1e-4, False, "1.0E-4"),
        (2.5e-5, False, "2.5E-5"),
        (1234567.0, False, "1234567.0"),
        (9999999.999, False, "9999999.999"),
        (1e7, False, "1.0E7"),
        (1e10, False, "1.0E10"),
        (0.1 + 0.2, False, "0.30000000000000004"),
        (1.7976931348623157e308, False, "1.7976931348623157E308"),
        (2.2250738585072014e-308, False, "2.2250738585072014E-308"),
        (5e-324, False, "4.9E-324"),
        (1.5e-323, False, "1.5E-323"),
        (1e23, False, "1.0E23"),  # JDK 19+; JDK 17 prints 9.999999999999999E22
        (-0.0, False, "-0.0"),
        (0.0, False, "0.0"),
        (float("nan"), False, "NaN"),
        (float("inf"), False, "Infinity"),
        (float("-inf"), False, "-Infinity"),
        (1.100000023841858, True, "1.1"),  # a float column's 1.1f read as a double
        (3.4028234663852886e38, True, "3.4028235E38"),
        (1e-45, True, "1.4E-45"),
        (0.1, True, "0.1"),
        (16777216.0, True, "1.6777216E7"),
        (123456.79, True, "123456.79"),
        (3.3333333, True, "3.3333333"),
    ],
)
def test_float_and_double_human_strings_match_java(
    value: float, single: bool, expected: str
) -> None:
    value_type = FloatType() if single else DoubleType()
    assert IdentityTransform().to_human_string(value, value_type) == expected


def test_float_out_of_float_range_is_an_error() -> None:
    with pytest.raises(ValidationError, match="out of range for type float"):
        IdentityTransform().to_human_string(1e300, FloatType())
