"""Single-value serialization (spec Appendix D), binary and JSON, and metrics bound truncation.

These bytes are what manifests store as column lower/upper bounds and partition summary
bounds, so they must be byte-exact with Java and PyIceberg: a bound that decodes to a
slightly different value makes planning skip files that hold matching rows.

Decoding is lenient in exactly the ways the spec allows for type promotion: an `int` bound
read for a column since promoted to `long` is 4 bytes, a `float` bound read as `double` is 4
bytes, and decimal bounds do not depend on precision. Anything else of the wrong length is
an error rather than a guess.

`unknown` values are always null and have no binary form; `variant`, `geometry` and
`geography` bounds (spec "Bound serialization") are neither produced nor read: icecore does
not process those columns' values.

The JSON single-value form (`value_to_json` / `value_from_json`) is what schemas store as
field defaults (`initial-default`, `write-default`): ISO-8601 text for dates, times and
timestamps (nanoseconds for the `_ns` types), decimals and uuids as strings, binary as hex,
structs as objects keyed by field id, maps as `{"keys": [...], "values": [...]}`.
"""

from __future__ import annotations

import math
import re
import struct
import uuid
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
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
    GeographyType,
    GeometryType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UnknownType,
    UUIDType,
    VariantType,
)

Encoder = Callable[[Any], bytes]
Decoder = Callable[[bytes], Any]

_INT = struct.Struct("<i")
_LONG = struct.Struct("<q")
_FLOAT = struct.Struct("<f")
_DOUBLE = struct.Struct("<d")

_MICROS_PER_SECOND = 1_000_000
_NANOS_PER_SECOND = 1_000_000_000
_SECONDS_PER_DAY = 86_400
_NANO_TYPES = (TimestampNanoType, TimestamptzNanoType)
_NOT_PROCESSED = (VariantType, GeometryType, GeographyType)

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
    if isinstance(
        t,
        LongType
        | TimeType
        | TimestampType
        | TimestamptzType
        | TimestampNanoType
        | TimestamptzNanoType,
    ):
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
    if isinstance(t, UnknownType):
        # Built without complaint (an identity partition of an unknown column summarizes
        # only nulls), but no value can be serialized.
        return _always_null(t)
    _refuse_unprocessed(t)
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
    if isinstance(
        t,
        TimeType | TimestampType | TimestamptzType | TimestampNanoType | TimestamptzNanoType,
    ):
        # The spec reads a 4-byte timestamp / timestamp_ns bound as a date written before a v3
        # date promotion; icecore does not offer that promotion yet, so 4 bytes are refused.
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
    if isinstance(t, UnknownType):
        return _always_null(t)
    _refuse_unprocessed(t)
    raise ValidationError(f"type {t} has no single-value binary serialization")


def _always_null(t: IcebergType) -> Callable[[Any], Any]:
    def refuse(value: Any) -> Any:
        raise ValidationError(f"an {t} value is always null and has no binary form: {value!r}")

    return refuse


def _refuse_unprocessed(t: IcebergType) -> None:
    if isinstance(t, _NOT_PROCESSED):
        raise ValidationError(
            f"icecore neither writes nor reads {t} bounds: it does not process {t} values"
        )


def _units_per_second(t: IcebergType) -> int:
    return _NANOS_PER_SECOND if isinstance(t, _NANO_TYPES) else _MICROS_PER_SECOND


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


# JSON single-value serialization (Appendix D) ---------------------------------------------


def value_to_json(t: IcebergType, value: Any) -> Any:
    """The JSON form of one in-memory value of type `t`, as Iceberg Java writes it; None is
    JSON null. Used to write field defaults."""
    if value is None:
        return None
    if isinstance(t, UnknownType | VariantType | GeometryType | GeographyType):
        raise ValidationError(f"a {t} value has no JSON form here: {value!r}")
    if isinstance(t, StructType):
        if not isinstance(value, dict):
            raise _not_a(t, value)
        names = {f.name for f in t.fields}
        if extra := set(value) - names:
            raise ValidationError(f"struct {t} has no field {sorted(extra)[0]!r}")
        # Java writes no entry for a null field value.
        return {
            str(f.field_id): value_to_json(f.field_type, value[f.name])
            for f in t.fields
            if value.get(f.name) is not None
        }
    if isinstance(t, ListType):
        if not isinstance(value, list | tuple):
            raise _not_a(t, value)
        return [value_to_json(t.element_type, v) for v in value]
    if isinstance(t, MapType):
        if not isinstance(value, dict):
            raise _not_a(t, value)
        return {
            "keys": [value_to_json(t.key_type, k) for k in value],
            "values": [value_to_json(t.value_type, v) for v in value.values()],
        }
    to_bytes(t, value)  # the binary encoder's type and range checks apply as they are
    if isinstance(t, BooleanType | IntegerType | LongType | StringType):
        return value
    if isinstance(t, FloatType | DoubleType):
        return float(value)
    if isinstance(t, DecimalType):
        exact = unscaled_to_decimal(t, decimal_to_unscaled(t, value))
        # BigDecimal: toPlainString for a scale >= 0, scientific notation for a negative one.
        return format(exact, "f") if t.scale >= 0 else str(exact)
    if isinstance(t, UUIDType):
        return str(value)
    if isinstance(t, FixedType | BinaryType):
        return bytes(value).hex()
    if isinstance(t, DateType):
        return iso_date(value)
    if isinstance(t, TimeType):
        if not 0 <= value < _SECONDS_PER_DAY * _MICROS_PER_SECOND:
            raise ValidationError(f"{value} is not a time of day in microseconds")
        return iso_time_of_day(value * 1000)
    if isinstance(t, TimestampType | TimestamptzType | TimestampNanoType | TimestamptzNanoType):
        text = iso_timestamp(value, _units_per_second(t))
        return text + "+00:00" if isinstance(t, TimestamptzType | TimestamptzNanoType) else text
    raise ValidationError(f"type {t} has no JSON single-value form")


def value_from_json(t: IcebergType, obj: Any) -> Any:
    """The in-memory value of the JSON form `obj` of a `t` value; JSON null is None.

    Accepts what Iceberg Java writes and what the spec allows (upper- or lower-case hex, any
    zero UTC offset); refuses anything it would have to round or guess. A struct field absent
    from the object is null.
    """
    if obj is None:
        return None
    if isinstance(t, UnknownType | VariantType | GeometryType | GeographyType):
        raise ValidationError(f"a {t} value must be null, got {obj!r}")
    if isinstance(t, StructType):
        if not isinstance(obj, dict):
            raise _not_json(t, obj)
        known = {str(f.field_id) for f in t.fields}
        if extra := set(obj) - known:
            raise ValidationError(f"struct {t} has no field id {sorted(extra)[0]}")
        return {f.name: value_from_json(f.field_type, obj.get(str(f.field_id))) for f in t.fields}
    if isinstance(t, ListType):
        if not isinstance(obj, list):
            raise _not_json(t, obj)
        return [value_from_json(t.element_type, v) for v in obj]
    if isinstance(t, MapType):
        keys, values = (obj.get(k) if isinstance(obj, dict) else None for k in ("keys", "values"))
        if not isinstance(keys, list) or not isinstance(values, list) or len(keys) != len(values):
            raise _not_json(t, obj)
        out = {}
        for k, v in zip(keys, values, strict=True):
            key = value_from_json(t.key_type, k)
            try:
                out[key] = value_from_json(t.value_type, v)
            except TypeError:
                raise ValidationError(f"map {t}: key {k!r} cannot be a Python dict key") from None
        return out
    value = _primitive_from_json(t, obj)
    to_bytes(t, value)  # range checks: an int column's 2**40 is refused here
    return value


def _primitive_from_json(t: IcebergType, obj: Any) -> Any:
    if isinstance(t, BooleanType):
        if isinstance(obj, bool):
            return obj
    elif isinstance(t, IntegerType | LongType):
        if isinstance(obj, int) and not isinstance(obj, bool):
            return obj
    elif isinstance(t, FloatType | DoubleType):
        if isinstance(obj, int | float) and not isinstance(obj, bool):
            number = float(obj)
            if isinstance(t, FloatType) and math.isfinite(number):
                return _round_to_float32(t, number)
            return number
    elif isinstance(obj, str):
        return _text_value(t, obj)
    raise _not_json(t, obj)


def _text_value(t: IcebergType, text: str) -> Any:
    if isinstance(t, StringType):
        return text
    if isinstance(t, DecimalType):
        try:
            number = Decimal(text)
        except InvalidOperation:
            raise _not_json(t, text) from None
        exponent = number.as_tuple().exponent
        if not isinstance(exponent, int) or -exponent != t.scale:
            raise ValidationError(f"{text!r} does not have the scale of {t}")
        return unscaled_to_decimal(t, decimal_to_unscaled(t, number))
    if isinstance(t, UUIDType):
        if len(text) == 36:
            try:
                return uuid.UUID(text)
            except ValueError:
                pass
    elif isinstance(t, FixedType | BinaryType):
        if _HEX.fullmatch(text):
            return bytes.fromhex(text)
    elif isinstance(t, DateType):
        if m := _ISO_DATE.fullmatch(text):
            return _days(t, text, m)
    elif isinstance(t, TimeType):
        if m := _ISO_TIME.fullmatch(text):
            return _nanos_of_day(t, text, m.groups()) // 1000
    elif isinstance(t, TimestampType | TimestamptzType | TimestampNanoType | TimestamptzNanoType):
        return _timestamp_from_json(t, text)
    raise _not_json(t, text)


_HEX = re.compile(r"(?:[0-9a-fA-F]{2})*")
_DATE = r"([+-]?\d{4,})-(\d{2})-(\d{2})"
_TIME = r"(\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?"
_ISO_DATE = re.compile(_DATE)
_ISO_TIME = re.compile(_TIME)
_ISO_TIMESTAMP = re.compile(
    _DATE + "[Tt]" + _TIME + r"(?:([Zz])|([+-])(\d{2}):(\d{2})(?::(\d{2}))?)?"
)


def _timestamp_from_json(t: IcebergType, text: str) -> int:
    """ISO-8601 date-time; with zone for the tz types (Appendix D: `+00:00`, or any other
    spelling of a zero offset, as Java's `isUTCTimestamptz` accepts), without otherwise."""
    m = _ISO_TIMESTAMP.fullmatch(text)
    if m is None:
        raise _not_json(t, text)
    groups = m.groups()
    zulu, sign, offset_parts = groups[7], groups[8], groups[9:]
    has_offset = zulu is not None or sign is not None
    with_zone = isinstance(t, TimestamptzType | TimestamptzNanoType)
    if with_zone and not has_offset:
        raise ValidationError(f"{t} value {text!r} lacks its offset (+00:00)")
    if not with_zone and has_offset:
        raise ValidationError(f"{t} value {text!r} cannot carry an offset")
    if sign is not None and any(int(p or 0) for p in offset_parts):
        raise ValidationError(f"{t} value {text!r} must be in UTC (+00:00)")
    nanos = _days(t, text, m) * _SECONDS_PER_DAY * _NANOS_PER_SECOND
    nanos += _nanos_of_day(t, text, groups[3:7])
    if isinstance(t, _NANO_TYPES):
        return nanos
    micros, rest = divmod(nanos, 1000)
    if rest:
        raise ValidationError(f"{t} value {text!r} is finer than microseconds")
    return micros


def _days(t: IcebergType, text: str, m: re.Match[str]) -> int:
    year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
    if not 1 <= month <= 12 or not 1 <= day <= _days_in_month(year, month):
        raise ValidationError(f"{t} value {text!r} is not a calendar date")
    return days_from_civil(year, month, day)


def _nanos_of_day(t: IcebergType, text: str, parts: tuple[str | None, ...]) -> int:
    hour, minute, second = (int(p or 0) for p in parts[:3])
    if hour > 23 or minute > 59 or second > 59:
        raise ValidationError(f"{t} value {text!r} is not a time of day")
    fraction = parts[3] or ""
    nanos = int(fraction.ljust(9, "0")) if fraction else 0
    if isinstance(t, TimeType) and nanos % 1000:
        raise ValidationError(f"{t} value {text!r} is finer than microseconds")
    return ((hour * 60 + minute) * 60 + second) * _NANOS_PER_SECOND + nanos


def _round_to_float32(t: IcebergType, number: float) -> float:
    try:
        return float(struct.unpack("<f", struct.pack("<f", number))[0])
    except OverflowError:
        raise ValidationError(f"{number} is out of range for {t}") from None


def _not_a(t: IcebergType, value: Any) -> ValidationError:
    return ValidationError(f"{value!r} ({type(value).__name__}) is not a {t} value")


def _not_json(t: IcebergType, obj: Any) -> ValidationError:
    return ValidationError(f"{obj!r} is not the JSON form of a {t} value")


# ISO-8601 text of dates, times and timestamps, as Java's `DateTimeFormatter.ISO_LOCAL_*` write
# it. Python's `datetime` stops at years 1..9999 and at microseconds; a timestamp long
# reaches far beyond both, so these are exact integer computations.


def civil_from_days(days: int) -> tuple[int, int, int]:
    """(year, month, day) of a day number in the proleptic Gregorian calendar, any year
    (Howard Hinnant's `civil_from_days`)."""
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1_460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


def days_from_civil(year: int, month: int, day: int) -> int:
    """The day number of a proleptic Gregorian date, any year (Hinnant's `days_from_civil`)."""
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146_097 + doe - 719_468


def _days_in_month(year: int, month: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def iso_date(days: int) -> str:
    """`DateTimeFormatter.ISO_LOCAL_DATE`: a `+` beyond year 9999, `-0001` for 2 BC."""
    year, month, day = civil_from_days(days)
    sign = "-" if year < 0 else "+" if year > 9999 else ""
    return f"{sign}{abs(year):04d}-{month:02d}-{day:02d}"


def iso_time_of_day(nanos_of_day: int) -> str:
    """`DateTimeFormatter.ISO_LOCAL_TIME`: seconds always, fraction without trailing zeros."""
    seconds, nanos = divmod(nanos_of_day, _NANOS_PER_SECOND)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    fraction = f".{nanos:09d}".rstrip("0") if nanos else ""
    return f"{hour:02d}:{minute:02d}:{second:02d}{fraction}"


def iso_timestamp(value: int, units_per_second: int = _MICROS_PER_SECOND) -> str:
    """`ISO_LOCAL_DATE_TIME` of a timestamp in micro- (default) or nanoseconds since epoch."""
    days, units_of_day = divmod(value, _SECONDS_PER_DAY * units_per_second)
    nanos_of_day = units_of_day * (_NANOS_PER_SECOND // units_per_second)
    return f"{iso_date(days)}T{iso_time_of_day(nanos_of_day)}"
