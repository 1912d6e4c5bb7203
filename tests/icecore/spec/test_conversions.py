import math
import re
import struct
import uuid
from decimal import Decimal

import pytest

from icecore.errors import ValidationError
from icecore.spec.conversions import (
    decimal_to_unscaled,
    from_bytes,
    to_bytes,
    truncate_lower_bound,
    truncate_upper_bound,
    unscaled_to_decimal,
)
from icecore.spec.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    ListType,
    LongType,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

UUID = uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7")

# Byte-exact vectors: spec Appendix D plus values cross-checked against Java / PyIceberg.
VECTORS = [
    (BooleanType(), False, b"\x00"),
    (BooleanType(), True, b"\x01"),
    (IntegerType(), 1234, b"\xd2\x04\x00\x00"),
    (IntegerType(), -1, b"\xff\xff\xff\xff"),
    (IntegerType(), 2**31 - 1, b"\xff\xff\xff\x7f"),
    (IntegerType(), -(2**31), b"\x00\x00\x00\x80"),
    (LongType(), 1234, b"\xd2\x04\x00\x00\x00\x00\x00\x00"),
    (LongType(), 2**63 - 1, b"\xff\xff\xff\xff\xff\xff\xff\x7f"),
    (LongType(), -(2**63), b"\x00\x00\x00\x00\x00\x00\x00\x80"),
    (FloatType(), -4.5, b"\x00\x00\x90\xc0"),
    (DoubleType(), 6.0, b"\x00\x00\x00\x00\x00\x00\x18@"),
    (DoubleType(), 1.2345, b"\x8d\x97n\x12\x83\xc0\xf3?"),
    (DoubleType(), -0.0, b"\x00\x00\x00\x00\x00\x00\x00\x80"),
    (DateType(), 1000, b"\xe8\x03\x00\x00"),
    (DateType(), -1, b"\xff\xff\xff\xff"),
    (TimeType(), 10000, b"\x10'\x00\x00\x00\x00\x00\x00"),
    (TimestampType(), 400000, b"\x80\x1a\x06\x00\x00\x00\x00\x00"),
    (TimestamptzType(), 100000000000, b"\x00\xe8vH\x17\x00\x00\x00"),
    (TimestampType(), -1, b"\xff" * 8),
    (StringType(), "ABC", b"ABC"),
    (StringType(), "", b""),
    (StringType(), "é\U0001f600", "é\U0001f600".encode()),
    (UUIDType(), UUID, b"\xf7\x9c>\tg|K\xbd\xa4y?4\x9c\xb7\x85\xe7"),
    (FixedType(3), b"foo", b"foo"),
    (BinaryType(), b"\x00\xff", b"\x00\xff"),
    (BinaryType(), b"", b""),
    (DecimalType(4, 2), Decimal("14.20"), b"\x05\x8c"),
    (DecimalType(4, 2), Decimal("-0.01"), b"\xff"),
    (DecimalType(4, 2), Decimal("0.00"), b"\x00"),
    (DecimalType(5, 2), Decimal("123.45"), b"\x30\x39"),
    (DecimalType(7, 4), Decimal("123.4567"), b"\x12\xd6\x87"),
    (DecimalType(7, 4), Decimal("-123.4567"), b"\xed)y"),
    (DecimalType(10, 3), Decimal("0.011"), b"\x0b"),
    (DecimalType(9, 2), Decimal("1.27"), b"\x7f"),
    (DecimalType(9, 2), Decimal("1.28"), b"\x00\x80"),
    (DecimalType(9, 2), Decimal("-1.28"), b"\x80"),
    (DecimalType(9, 2), Decimal("-1.29"), b"\xff\x7f"),
    (
        DecimalType(38, 22),
        Decimal("1234567891234567.1234567891234567891234"),
        b'\tI\xb0\xf7\x13\xe9\x16\xbb\x01/L\xc3+B)"',
    ),
]


@pytest.mark.parametrize(("t", "value", "data"), VECTORS)
def test_vectors_both_ways(t, value, data):
    assert to_bytes(t, value) == data
    decoded = from_bytes(t, data)
    assert decoded == value
    assert type(decoded) is type(value)


def test_negative_zero_keeps_its_sign():
    assert math.copysign(1.0, from_bytes(DoubleType(), to_bytes(DoubleType(), -0.0))) == -1.0


@pytest.mark.parametrize("t", [FloatType(), DoubleType()])
@pytest.mark.parametrize("value", [math.inf, -math.inf])
def test_infinities_round_trip(t, value):
    assert from_bytes(t, to_bytes(t, value)) == value


@pytest.mark.parametrize("t", [FloatType(), DoubleType()])
def test_nan_round_trips(t):
    assert math.isnan(from_bytes(t, to_bytes(t, math.nan)))


def test_double_values_are_exact():
    value = 0.1 + 0.2
    assert from_bytes(DoubleType(), to_bytes(DoubleType(), value)) == value


def test_float_stores_single_precision():
    single = struct.unpack("<f", b"\xcd\xcc\x8c?")[0]
    assert to_bytes(FloatType(), 1.1) == b"\xcd\xcc\x8c?"
    assert from_bytes(FloatType(), to_bytes(FloatType(), 1.1)) == single != 1.1


def test_decimal_38_digits_is_exact_beyond_default_context():
    t = DecimalType(38, 10)
    for value in (Decimal("-9999999999999999999999999999.9999999999"), Decimal("1E-10")):
        assert from_bytes(t, to_bytes(t, value)) == value
    assert to_bytes(t, Decimal(f"{10**38 - 1}E-10")) == (10**38 - 1).to_bytes(16, "big")


def test_decimal_rescales_without_loss():
    t = DecimalType(9, 3)
    assert to_bytes(t, Decimal("14.2")) == to_bytes(t, Decimal("14.200"))
    assert to_bytes(t, Decimal("1E+2")) == (100_000).to_bytes(3, "big", signed=True)
    assert to_bytes(t, Decimal("14.2000")) == to_bytes(t, Decimal("14.200"))
    assert from_bytes(t, to_bytes(t, Decimal("14.2"))).as_tuple().exponent == -3


def test_decimal_decoding_accepts_non_minimal_encodings():
    assert from_bytes(DecimalType(7, 4), b"\xff\xed\x29\x79") == Decimal("-123.4567")
    assert from_bytes(DecimalType(7, 4), b"\x00\x00\x12\xd6\x87") == Decimal("123.4567")


def test_decimal_bounds_do_not_depend_on_precision():
    # Precision widening (decimal(P,S) -> decimal(P',S)) keeps bounds readable as-is.
    assert from_bytes(DecimalType(38, 2), to_bytes(DecimalType(4, 2), Decimal("-14.20"))) == (
        Decimal("-14.20")
    )


def test_unscaled_helpers():
    assert decimal_to_unscaled(DecimalType(5, 2), Decimal("-1.5")) == -150
    assert unscaled_to_decimal(DecimalType(5, 2), -150) == Decimal("-1.50")
    assert str(unscaled_to_decimal(DecimalType(5, 2), 7)) == "0.07"


@pytest.mark.parametrize(
    "value",
    [Decimal("1.005"), Decimal("1000.00"), Decimal("NaN"), Decimal("Infinity")],
)
def test_decimal_refuses_to_round_or_overflow(value):
    with pytest.raises(ValidationError, match=r"decimal\(5, 2\)"):
        to_bytes(DecimalType(5, 2), value)


def test_promoted_int_bound_reads_as_long():
    assert from_bytes(LongType(), to_bytes(IntegerType(), -(2**31))) == -(2**31)
    assert from_bytes(LongType(), to_bytes(IntegerType(), 7)) == 7


def test_promoted_float_bound_reads_as_double():
    stored = to_bytes(FloatType(), -4.5)
    assert from_bytes(DoubleType(), stored) == -4.5
    assert math.isnan(from_bytes(DoubleType(), to_bytes(FloatType(), math.nan)))


def test_boolean_nonzero_is_true():
    assert from_bytes(BooleanType(), b"\x02") is True


def test_extreme_dates_and_timestamps_round_trip():
    for t, value in [
        (DateType(), -719162),  # 0001-01-01
        (DateType(), 2932896),  # 9999-12-31
        (TimestamptzType(), -62135596800000000),
        (TimeType(), 86_399_999_999),
    ]:
        assert from_bytes(t, to_bytes(t, value)) == value


@pytest.mark.parametrize(
    ("t", "data"),
    [
        (BooleanType(), b""),
        (BooleanType(), b"\x00\x00"),
        (IntegerType(), b"\x00\x00\x00"),
        (IntegerType(), b"\x00" * 8),
        (LongType(), b"\x00" * 5),
        (TimestampType(), b"\x00" * 4),
        (DateType(), b"\x00" * 8),
        (FloatType(), b"\x00" * 8),
        (DoubleType(), b"\x00" * 2),
        (UUIDType(), b"\x00" * 15),
        (FixedType(4), b"abc"),
        (DecimalType(4, 2), b""),
    ],
)
def test_wrong_length_is_rejected(t, data):
    with pytest.raises(ValidationError, match=str(len(data))):
        from_bytes(t, data)


def test_invalid_utf8_is_rejected():
    with pytest.raises(ValidationError, match="UTF-8"):
        from_bytes(StringType(), b"\xff\xfe")


@pytest.mark.parametrize(
    ("t", "value"),
    [
        (IntegerType(), 2**31),
        (IntegerType(), -(2**31) - 1),
        (LongType(), 2**63),
        (FloatType(), 1e300),
        (IntegerType(), True),
        (IntegerType(), 1.0),
        (DoubleType(), 1),
        (BooleanType(), 1),
        (StringType(), b"a"),
        (StringType(), "\ud800"),
        (UUIDType(), str(UUID)),
        (FixedType(4), b"abc"),
        (BinaryType(), "abc"),
        (DecimalType(4, 2), 1),
    ],
)
def test_bad_values_are_rejected(t, value):
    with pytest.raises(ValidationError, match=re.escape(str(t))):
        to_bytes(t, value)


@pytest.mark.parametrize("t", [StructType(), ListType(1, IntegerType())])
def test_nested_types_have_no_single_value_form(t):
    with pytest.raises(ValidationError, match="no single-value"):
        to_bytes(t, None)
    with pytest.raises(ValidationError, match="no single-value"):
        from_bytes(t, b"")


class TestTruncation:
    def test_short_values_are_untouched(self):
        assert truncate_lower_bound(StringType(), "abc", 16) == "abc"
        assert truncate_upper_bound(StringType(), "a" * 16, 16) == "a" * 16
        assert truncate_upper_bound(BinaryType(), b"\xff" * 16, 16) == b"\xff" * 16

    def test_lower_bound_is_a_prefix_of_code_points(self):
        assert truncate_lower_bound(StringType(), "abcdef", 3) == "abc"
        assert truncate_lower_bound(StringType(), "\U0001f600\U0001f601\U0001f602", 2) == (
            "\U0001f600\U0001f601"
        )
        assert truncate_lower_bound(BinaryType(), b"\x01\x02\x03", 2) == b"\x01\x02"

    def test_upper_bound_increments_last_code_point(self):
        assert truncate_upper_bound(StringType(), "abcdef", 3) == "abd"
        assert truncate_upper_bound(StringType(), "ab\U0001f600x", 3) == "ab\U0001f601"

    def test_upper_bound_carries_past_max_code_point(self):
        value = "a\U0010ffff\U0010ffffz"
        assert truncate_upper_bound(StringType(), value, 3) == "b"
        assert truncate_upper_bound(StringType(), "\U0010ffff" * 3, 2) is None

    def test_upper_bound_skips_surrogates(self):
        assert truncate_upper_bound(StringType(), "a\ud7ffz", 2) == "a\ue000"
        # UTF-8 of the result must still be valid and sort above the original.
        result = truncate_upper_bound(StringType(), "a\ud7ffz", 2)
        assert result.encode() > "a\ud7ffz".encode()

    def test_binary_upper_bound_carries(self):
        assert truncate_upper_bound(BinaryType(), b"\x01\x02\x03", 2) == b"\x01\x03"
        assert truncate_upper_bound(BinaryType(), b"\x01\xff\xff\x00", 3) == b"\x02"
        assert truncate_upper_bound(BinaryType(), b"\xff\xff\x00", 2) is None

    def test_other_types_are_never_truncated(self):
        for t, value in [(FixedType(20), b"\xff" * 20), (LongType(), 5)]:
            assert truncate_lower_bound(t, value, 16) == value
            assert truncate_upper_bound(t, value, 16) == value

    def test_width_must_be_positive(self):
        with pytest.raises(ValidationError, match="positive"):
            truncate_upper_bound(StringType(), "abc", 0)

    def test_bounds_enclose_the_value(self):
        for value in ["zzzz\U0010ffff", "Zürich, Straße 12 — nord", "\x00\x00\x00"]:
            lower = truncate_lower_bound(StringType(), value, 4)
            upper = truncate_upper_bound(StringType(), value, 4)
            assert lower <= value <= upper
            assert len(lower) <= 4
            assert len(upper) <= 4


@pytest.mark.interop
def test_matches_pyiceberg_byte_for_byte():
    pyconv = pytest.importorskip("pyiceberg.conversions")
    pytypes = pytest.importorskip("pyiceberg.types")
    ours_theirs = {
        BooleanType(): pytypes.BooleanType(),
        IntegerType(): pytypes.IntegerType(),
        LongType(): pytypes.LongType(),
        FloatType(): pytypes.FloatType(),
        DoubleType(): pytypes.DoubleType(),
        DateType(): pytypes.DateType(),
        TimeType(): pytypes.TimeType(),
        TimestampType(): pytypes.TimestampType(),
        TimestamptzType(): pytypes.TimestamptzType(),
        StringType(): pytypes.StringType(),
        UUIDType(): pytypes.UUIDType(),
        FixedType(3): pytypes.FixedType(3),
        BinaryType(): pytypes.BinaryType(),
    }
    for t, value, _ in VECTORS:
        if isinstance(t, DecimalType):
            theirs = pytypes.DecimalType(t.precision, t.scale)
        else:
            theirs = ours_theirs[t]
        assert to_bytes(t, value) == pyconv.to_bytes(theirs, value), (t, value)
