"""Turning user literals (Python values or filter-string text) into a column's in-memory value.

A filter literal decides which files a scan or a compaction touches, so it is converted
exactly or not at all: a decimal is never rounded to the column's scale, a timestamp string
with more than microsecond precision is refused (more than nanosecond for the v3
`timestamp_ns` / `timestamptz_ns` columns, whose literals are nanoseconds), and a timestamptz
string must carry its offset rather than silently taking a time zone. The one deliberate
rounding is a `float` column's literal, rounded to single precision as Iceberg Java does, so
both agree on which rows `f = 1.1` selects.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import struct
import uuid
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from icecore.errors import ValidationError
from icecore.spec.conversions import decimal_to_unscaled, unscaled_to_decimal
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
    UUIDType,
)

_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_TZ = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_EPOCH_DATE = dt.date(1970, 1, 1)
_MICROS_PER_DAY = 86_400_000_000
_FLOAT_MAX = struct.unpack("<f", b"\xff\xff\x7f\x7f")[0]
_SUB_MICRO = re.compile(r"[.,]\d{7,}")
# The fraction of a time's seconds (`HH:MM:SS.fffffffff`); Python's parser drops digits past
# the sixth, so a nanosecond literal takes its fraction from here.
_FRACTION = re.compile(r"(?<=\d\d:\d\d:\d\d)[.,](\d+)")
_INT_RANGES = {IntegerType: 32, LongType: 64, DateType: 32}


def to_literal(t: IcebergType, value: Any) -> Any:
    """`value` as the in-memory value of a `t` column; a lossy or unparseable one is refused."""
    if value is None:
        raise ValidationError("a literal cannot be null; use is_null / not_null")
    convert = _CONVERTERS.get(type(t))
    if convert is None:
        raise ValidationError(f"cannot compare a {t} column with a literal")
    return convert(t, value)


def _refuse(t: IcebergType, value: Any, why: str = "") -> ValidationError:
    reason = f": {why}" if why else ""
    return ValidationError(f"{value!r} ({type(value).__name__}) is not a valid {t} literal{reason}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _boolean(t: IcebergType, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise _refuse(t, value)


def _integer(t: IcebergType, value: Any) -> int:
    if not _is_int(value):
        raise _refuse(t, value)
    bits = _INT_RANGES[type(t)]
    if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise _refuse(t, value, f"out of the {bits}-bit range")
    return value


def _number(t: IcebergType, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise _refuse(t, value)
    try:
        result = float(value)
    except OverflowError:
        raise _refuse(t, value, "out of range") from None
    if math.isnan(result):
        raise _refuse(t, value, "NaN never compares equal; use is_nan / not_nan")
    if _is_int(value) and result != value:
        raise _refuse(t, value, "not exactly representable as a floating-point number")
    if isinstance(t, FloatType):
        if math.isfinite(result) and abs(result) > _FLOAT_MAX:
            raise _refuse(t, value, "out of the single-precision range")
        result = struct.unpack("<f", struct.pack("<f", result))[0]
    return result


def _decimal(t: IcebergType, value: Any) -> Decimal:
    assert isinstance(t, DecimalType)
    if _is_int(value) or isinstance(value, Decimal):
        number = Decimal(value)
    elif isinstance(value, float):
        number = Decimal(repr(value))  # the shortest text that reads back as this float
    elif isinstance(value, str):
        try:
            number = Decimal(value.strip())
        except InvalidOperation:
            raise _refuse(t, value) from None
    else:
        raise _refuse(t, value)
    try:
        return unscaled_to_decimal(t, decimal_to_unscaled(t, number))
    except ValidationError as exc:
        raise _refuse(t, value, str(exc)) from None


def _date(t: IcebergType, value: Any) -> int:
    if isinstance(value, dt.datetime):
        raise _refuse(t, value, "a datetime is not a date")
    if isinstance(value, dt.date):
        return (value - _EPOCH_DATE).days
    if isinstance(value, str):
        return (_parse(t, value, dt.date.fromisoformat) - _EPOCH_DATE).days
    return _integer(t, value)


def _time(t: IcebergType, value: Any) -> int:
    if isinstance(value, str):
        value = _parse(t, value, dt.time.fromisoformat)
    if isinstance(value, dt.time):
        if value.tzinfo is not None:
            raise _refuse(t, value, "a time column has no time zone")
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + (
            value.microsecond
        )
    if _is_int(value) and 0 <= value < _MICROS_PER_DAY:
        return value
    raise _refuse(t, value, "expected microseconds since midnight or an ISO time")


def _timestamp(t: IcebergType, value: Any) -> int:
    if isinstance(value, str):
        value = _parse(t, value, dt.datetime.fromisoformat)
    if isinstance(value, dt.date):
        return _datetime_micros(t, value)
    if _is_int(value) and -(2**63) <= value < 2**63:
        return value
    raise _refuse(t, value, "expected microseconds since the epoch or an ISO timestamp")


def _datetime_micros(t: IcebergType, value: dt.date) -> int:
    """Microseconds since the epoch of a datetime (a date is its midnight); the zone rules of
    timestamp vs timestamptz columns apply."""
    with_zone = isinstance(t, TimestamptzType | TimestamptzNanoType)
    if not isinstance(value, dt.datetime):
        value = dt.datetime.combine(value, dt.time())
    if with_zone and value.tzinfo is None:
        raise _refuse(t, value, "timestamptz needs an explicit offset such as +00:00")
    if not with_zone and value.tzinfo is not None:
        raise _refuse(t, value, "a timestamp without time zone cannot take an offset")
    delta = value - (_EPOCH_TZ if with_zone else _EPOCH)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _timestamp_ns(t: IcebergType, value: Any) -> int:
    """Nanoseconds since the epoch: an int as is, a datetime (microseconds at most), or ISO
    text with up to 9 fractional digits; timestamptz_ns needs an offset, timestamp_ns none."""
    nanos_of_second = 0
    if isinstance(value, str):
        text = value.strip()
        fractions = _FRACTION.findall(text)
        if fractions:
            digits = fractions[0]
            if len(digits) > 9:
                raise _refuse(t, value, "finer than nanoseconds")
            nanos_of_second = int(digits.ljust(9, "0"))
            text = _FRACTION.sub("", text, count=1)
        try:
            value = dt.datetime.fromisoformat(text)
        except ValueError as exc:
            raise _refuse(t, value, str(exc)) from None
    if isinstance(value, dt.date):
        return _in_long_range(t, value, _datetime_micros(t, value) * 1000 + nanos_of_second)
    if _is_int(value):
        return _in_long_range(t, value, value)
    raise _refuse(t, value, "expected nanoseconds since the epoch or an ISO timestamp")


def _in_long_range(t: IcebergType, value: Any, nanos: int) -> int:
    if not -(2**63) <= nanos < 2**63:
        raise _refuse(t, value, "out of the range of nanosecond timestamps (1677..2262)")
    return nanos


def _parse(t: IcebergType, text: str, parse: Callable[[str], Any]) -> Any:
    if _SUB_MICRO.search(text):
        raise _refuse(t, text, "finer than microseconds")
    try:
        return parse(text.strip())
    except ValueError as exc:
        raise _refuse(t, text, str(exc)) from None


def _string(t: IcebergType, value: Any) -> str:
    if isinstance(value, str):
        return value
    raise _refuse(t, value)


def _uuid(t: IcebergType, value: Any) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, str):
        try:
            return uuid.UUID(value)
        except ValueError:
            raise _refuse(t, value) from None
    raise _refuse(t, value)


def _binary(t: IcebergType, value: Any) -> bytes:
    if not isinstance(value, bytes | bytearray):
        raise _refuse(t, value)
    if isinstance(t, FixedType) and len(value) != t.length:
        raise _refuse(t, value, f"needs exactly {t.length} bytes")
    return bytes(value)


_CONVERTERS: dict[type, Callable[[Any, Any], Any]] = {
    BooleanType: _boolean,
    IntegerType: _integer,
    LongType: _integer,
    FloatType: _number,
    DoubleType: _number,
    DecimalType: _decimal,
    DateType: _date,
    TimeType: _time,
    TimestampType: _timestamp,
    TimestamptzType: _timestamp,
    TimestampNanoType: _timestamp_ns,
    TimestamptzNanoType: _timestamp_ns,
    StringType: _string,
    UUIDType: _uuid,
    FixedType: _binary,
    BinaryType: _binary,
}
