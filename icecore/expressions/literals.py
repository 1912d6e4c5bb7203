"""Turning user literals (Python values or filter-string text) into a column's in-memory value.

A filter literal decides which files a scan or a compaction touches, so it is converted
exactly or not at all: a decimal is never rounded to the column's scale, a timestamp string
with more than microsecond precision is refused, and a timestamptz string must carry its
offset rather than silently taking a time zone. The one deliberate rounding is a `float`
column's literal, rounded to single precision as Iceberg Java does, so both agree on which
rows `f = 1.1` selects.
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
    TimestampType,
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
    with_zone = isinstance(t, TimestamptzType)
    if isinstance(value, str):
        value = _parse(t, value, dt.datetime.fromisoformat)
    elif isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        value = dt.datetime.combine(value, dt.time())
    if isinstance(value, dt.datetime):
        if with_zone and value.tzinfo is None:
            raise _refuse(t, value, "timestamptz needs an explicit offset such as +00:00")
        if not with_zone and value.tzinfo is not None:
            raise _refuse(t, value, "a timestamp without time zone cannot take an offset")
        delta = value - (_EPOCH_TZ if with_zone else _EPOCH)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if _is_int(value) and -(2**63) <= value < 2**63:
        return value
    raise _refuse(t, value, "expected microseconds since the epoch or an ISO timestamp")


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
    StringType: _string,
    UUIDType: _uuid,
    FixedType: _binary,
    BinaryType: _binary,
}
