"""Partition transforms (spec: "Partition Transforms") and their human-readable strings.

A transform turns a source value into a partition value. Writers, scan planning and
compaction all have to agree on it bit for bit: a value put in the wrong partition is a row
that a filtered query never sees. Values use icecore's in-memory representation (see
`icecore.spec.types`): dates are days since 1970-01-01, times and timestamps are microseconds,
timestamp_ns and timestamptz_ns (v3) are nanoseconds.

Because a date and a timestamp are both plain ints, time transforms need the source type to
know what an int means; pass it to `apply` (it is always at hand from the schema). Every
transform checks a given source type against the spec's table of allowed types.

Time transforms floor values before 1970 (the hour of 1969-12-31T23:59:59.999999 is -1), as
the spec and PyIceberg do. Human strings follow Iceberg Java (with JDK 19+ float printing).
"""

from __future__ import annotations

import base64
import math
import re
import struct
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, ClassVar

from icecore.errors import ValidationError
from icecore.spec.conversions import (
    civil_from_days,
    decimal_to_unscaled,
    iso_timestamp,
    unscaled_to_decimal,
)
from icecore.spec.hashing import BUCKETABLE_TYPES, bucket_hash
from icecore.spec.types import (
    BinaryType,
    DateType,
    DecimalType,
    FloatType,
    GeographyType,
    GeometryType,
    IcebergType,
    IntegerType,
    LongType,
    StringType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
)

_MICROS_PER_SECOND = 1_000_000
_MICROS_PER_HOUR = 3_600 * _MICROS_PER_SECOND
_MICROS_PER_DAY = 24 * _MICROS_PER_HOUR
_NANOS_PER_SECOND = 1_000_000_000
_NANOS_PER_HOUR = 3_600 * _NANOS_PER_SECOND
_NANOS_PER_DAY = 24 * _NANOS_PER_HOUR
_NANO_TYPES = (TimestampNanoType, TimestamptzNanoType)


class Transform(ABC):
    """A partition or sort transform: immutable, equal by value (`bucket[16] == bucket[16]`)."""

    @abstractmethod
    def __str__(self) -> str:
        """The spec's string for this transform, as stored in table metadata JSON."""

    @property
    def is_void(self) -> bool:
        return False

    @property
    def preserves_order(self) -> bool:
        """True when `a <= b` implies `apply(a) <= apply(b)`, so sorted input stays sorted."""
        return False

    @property
    def dedup_name(self) -> str:
        """Two fields of one spec with the same source and dedup name are redundant.

        All time transforms share one name: partitioning a column by both day and hour adds
        nothing the finer one does not already give, so Iceberg's spec builder rejects it.
        """
        return str(self)

    @abstractmethod
    def can_transform(self, source: IcebergType) -> bool:
        """Whether the spec allows this transform on a column of type `source`."""

    @abstractmethod
    def result_type(self, source: IcebergType | None) -> IcebergType:
        """The type of the partition values this transform produces from `source`.

        `None` stands for a source column dropped since: bucket and time transforms still
        have a type (old manifests stay readable); the others raise.
        """

    def _same_as_source(self, source: IcebergType | None) -> IcebergType:
        if source is None:
            raise ValidationError(f"the result type of {self} is unknown without its source")
        return source

    @abstractmethod
    def apply(self, value: Any, source_type: IcebergType | None = None) -> Any:
        """The partition value of one source value; null stays null."""

    def to_human_string(self, value: Any, result_type: IcebergType | None = None) -> str:
        """What Iceberg Java's `Transform.toHumanString(type, value)` returns: partition paths.

        `result_type` is the type of the partition value (for identity, the source type); it
        tells a date from an int and a float from a double, as Java's static types do.
        """
        return _java_string(value, result_type)

    def _check_source(self, source_type: IcebergType | None) -> None:
        if source_type is not None and not self.can_transform(source_type):
            raise ValidationError(f"transform {self} cannot be applied to type {source_type}")

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))

    def __repr__(self) -> str:
        return f"parse_transform({str(self)!r})"


@dataclass(frozen=True, eq=False, repr=False)
class IdentityTransform(Transform):
    """Any primitive but geometry and geography (spec table); variant is not primitive."""

    def __str__(self) -> str:
        return "identity"

    @property
    def preserves_order(self) -> bool:
        return True

    def can_transform(self, source: IcebergType) -> bool:
        return source.is_primitive and not isinstance(source, GeometryType | GeographyType)

    def result_type(self, source: IcebergType | None) -> IcebergType:
        return self._same_as_source(source)

    def apply(self, value: Any, source_type: IcebergType | None = None) -> Any:
        self._check_source(source_type)
        return value


@dataclass(frozen=True, eq=False, repr=False)
class BucketTransform(Transform):
    """bucket[N]: `(murmur3_x86_32(value) & Integer.MAX_VALUE) % N` (spec, Appendix B).

    Decimals need `source_type`: the hash is of the unscaled value at the column's scale; so
    do nanosecond timestamps, hashed as their microseconds.
    """

    num_buckets: int

    def __post_init__(self) -> None:
        if self.num_buckets <= 0:
            raise ValidationError(f"bucket count must be positive, got {self.num_buckets}")

    def __str__(self) -> str:
        return f"bucket[{self.num_buckets}]"

    def can_transform(self, source: IcebergType) -> bool:
        return isinstance(source, BUCKETABLE_TYPES)

    def result_type(self, source: IcebergType | None) -> IcebergType:
        return IntegerType()

    def apply(self, value: Any, source_type: IcebergType | None = None) -> int | None:
        self._check_source(source_type)
        if value is None:
            return None
        return (bucket_hash(value, source_type) & 0x7FFFFFFF) % self.num_buckets


@dataclass(frozen=True, eq=False, repr=False)
class TruncateTransform(Transform):
    """truncate[W]: numbers round down to a multiple of W, strings and binary keep W units."""

    width: int

    def __post_init__(self) -> None:
        if self.width <= 0:
            raise ValidationError(f"truncate width must be positive, got {self.width}")

    def __str__(self) -> str:
        return f"truncate[{self.width}]"

    @property
    def preserves_order(self) -> bool:
        return True

    def can_transform(self, source: IcebergType) -> bool:
        return isinstance(source, IntegerType | LongType | DecimalType | StringType | BinaryType)

    def result_type(self, source: IcebergType | None) -> IcebergType:
        return self._same_as_source(source)

    def apply(self, value: Any, source_type: IcebergType | None = None) -> Any:
        self._check_source(source_type)
        if value is None:
            return None
        if isinstance(value, bool):
            raise ValidationError(f"cannot truncate boolean value {value!r}")
        if isinstance(value, int):
            # Python's % floors, which is exactly the spec's `v - (((v % W) + W) % W)`.
            return value - value % self.width
        if isinstance(value, Decimal):
            # The width applies to the unscaled value at the column's scale: truncate[50] of
            # 10.65 is 10.50, so the decimal type is needed.
            if not isinstance(source_type, DecimalType):
                raise ValidationError(f"cannot truncate decimal {value} without its column type")
            unscaled = decimal_to_unscaled(source_type, value)
            return unscaled_to_decimal(source_type, unscaled - unscaled % self.width)
        if isinstance(value, str):
            # Python strings index code points, so a surrogate pair is never split.
            return value[: self.width]
        if isinstance(value, bytes | bytearray | memoryview):
            return bytes(value[: self.width])
        raise ValidationError(f"cannot truncate {type(value).__name__} value {value!r}")


class TimeTransform(Transform):
    """year, month, day and hour: whole units since 1970-01-01 00:00 UTC, floored.

    Iceberg Java's `DateTimeUtil.convertMicros` (1.x) is one unit low for a pre-1970 value one
    microsecond short of a whole second just after a unit boundary (day of
    1969-12-31T00:00:00.999999 is -2 there); we follow the spec and PyIceberg (-1). The same
    holds for nanosecond sources (`convertNanos`).
    """

    source_types: ClassVar[tuple[type[IcebergType], ...]] = (
        DateType,
        TimestampType,
        TimestamptzType,
        TimestampNanoType,
        TimestamptzNanoType,
    )

    @property
    def preserves_order(self) -> bool:
        return True

    @property
    def dedup_name(self) -> str:
        return "time"

    def can_transform(self, source: IcebergType) -> bool:
        return isinstance(source, self.source_types)

    def result_type(self, source: IcebergType | None) -> IcebergType:
        return IntegerType()

    def apply(self, value: Any, source_type: IcebergType | None = None) -> int | None:
        if source_type is None:
            raise ValidationError(
                f"transform {self} needs the source type to tell days from microseconds"
            )
        self._check_source(source_type)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValidationError(f"{self} expects an int, got {type(value).__name__} {value!r}")
        if isinstance(source_type, DateType):
            return self._from_days(value)
        if isinstance(source_type, _NANO_TYPES):
            return self._from_nanos(value)
        return self._from_micros(value)

    @abstractmethod
    def _from_days(self, days: int) -> int: ...

    def _from_micros(self, micros: int) -> int:
        return self._from_days(micros // _MICROS_PER_DAY)

    def _from_nanos(self, nanos: int) -> int:
        return self._from_days(nanos // _NANOS_PER_DAY)


@dataclass(frozen=True, eq=False, repr=False)
class YearTransform(TimeTransform):
    def __str__(self) -> str:
        return "year"

    def _from_days(self, days: int) -> int:
        return civil_from_days(days)[0] - 1970

    def to_human_string(self, value: Any, result_type: IcebergType | None = None) -> str:
        return "null" if value is None else f"{1970 + value:04d}"


@dataclass(frozen=True, eq=False, repr=False)
class MonthTransform(TimeTransform):
    def __str__(self) -> str:
        return "month"

    def _from_days(self, days: int) -> int:
        year, month, _ = civil_from_days(days)
        return (year - 1970) * 12 + month - 1

    def to_human_string(self, value: Any, result_type: IcebergType | None = None) -> str:
        if value is None:
            return "null"
        years, month = divmod(value, 12)
        return f"{1970 + years:04d}-{month + 1:02d}"


@dataclass(frozen=True, eq=False, repr=False)
class DayTransform(TimeTransform):
    """The spec's table says `int`; like Iceberg Java and PyIceberg the result type is `date`.

    Both are days since the epoch stored as an Avro int. `date` is what Java writes into
    manifest partition structs, so engines comparing partition types accept ours.
    """

    def __str__(self) -> str:
        return "day"

    def result_type(self, source: IcebergType | None) -> IcebergType:
        return DateType()

    def _from_days(self, days: int) -> int:
        return days

    def to_human_string(self, value: Any, result_type: IcebergType | None = None) -> str:
        return "null" if value is None else _human_day(value)


@dataclass(frozen=True, eq=False, repr=False)
class HourTransform(TimeTransform):
    source_types: ClassVar[tuple[type[IcebergType], ...]] = (
        TimestampType,
        TimestamptzType,
        TimestampNanoType,
        TimestamptzNanoType,
    )

    def __str__(self) -> str:
        return "hour"

    def _from_days(self, days: int) -> int:
        raise ValidationError("hour cannot be applied to a date")  # can_transform forbids it

    def _from_micros(self, micros: int) -> int:
        return micros // _MICROS_PER_HOUR

    def _from_nanos(self, nanos: int) -> int:
        return nanos // _NANOS_PER_HOUR

    def to_human_string(self, value: Any, result_type: IcebergType | None = None) -> str:
        if value is None:
            return "null"
        days, hour = divmod(value, 24)
        return f"{_human_day(days)}-{hour:02d}"


@dataclass(frozen=True, eq=False, repr=False)
class VoidTransform(Transform):
    """Always null; v1 tables use it to drop a partition field without renumbering the rest."""

    def __str__(self) -> str:
        return "void"

    @property
    def is_void(self) -> bool:
        return True

    def can_transform(self, source: IcebergType) -> bool:
        return True

    def result_type(self, source: IcebergType | None) -> IcebergType:
        return self._same_as_source(source)

    def apply(self, value: Any, source_type: IcebergType | None = None) -> None:
        return None

    def to_human_string(self, value: Any, result_type: IcebergType | None = None) -> str:
        return "null"


_SIMPLE: dict[str, Transform] = {
    str(t): t
    for t in (
        IdentityTransform(),
        YearTransform(),
        MonthTransform(),
        DayTransform(),
        HourTransform(),
        VoidTransform(),
    )
}
_PARAMETERIZED = re.compile(r"(bucket|truncate)\[\s*(\d+)\s*\]")


def parse_transform(s: str) -> Transform:
    """The transform for a spec string such as `bucket[16]`; unknown strings are an error.

    Metadata may hold a transform from a newer spec; guessing would mis-plan scans, so an
    unknown transform stops the reader with a clear message instead.
    """
    text = s.strip().lower() if isinstance(s, str) else ""
    if text in _SIMPLE:
        return _SIMPLE[text]
    if m := _PARAMETERIZED.fullmatch(text):
        if m.group(1) == "bucket":
            return BucketTransform(int(m.group(2)))
        return TruncateTransform(int(m.group(2)))
    raise ValidationError(f"unknown partition transform {s!r}")


# Java's string forms. Partition paths written by Spark use them, and ours must match so that
# operators (and tools that parse paths) see one layout whoever wrote the file.


def _human_day(days: int) -> str:
    """`TransformUtil.humanDay`: `String.format("%04d-%02d-%02d")`, so no `+` on big years."""
    year, month, day = civil_from_days(days)
    return f"{year:04d}-{month:02d}-{day:02d}"


def _local_time_string(micros_of_day: int) -> str:
    """`LocalTime.toString`: seconds only when non-zero, fraction in groups of three digits."""
    seconds, micros = divmod(micros_of_day, _MICROS_PER_SECOND)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    out = f"{hour:02d}:{minute:02d}"
    if second or micros:
        out += f":{second:02d}"
        if micros:
            out += f".{micros // 1000:03d}" if micros % 1000 == 0 else f".{micros:06d}"
    return out


def _java_float_string(value: float, single: bool) -> str:
    """`Float.toString` / `Double.toString` of JDK 19+: the shortest decimal that reads back."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    shortest = _shortest_decimal(abs(value), single)
    _, digit_tuple, exponent = shortest.as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    point = len(digit_tuple) + int(exponent)  # the value is 0.<digits> * 10**point
    if -3 < point <= 7:  # Java writes 1e-3 <= |v| < 1e7 without an exponent
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        return f"{sign}{digits[:point].ljust(point, '0')}.{digits[point:] or '0'}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{point - 1}"


def _shortest_decimal(value: float, single: bool) -> Decimal:
    if single:
        try:
            value = struct.unpack("<f", struct.pack("<f", value))[0]
        except OverflowError:
            raise ValidationError(f"{value} is out of range for type float") from None
    exact = Decimal(value)
    for precision in range(17):
        text = f"{value:.{precision}e}"
        if _reads_back(text, value, single):
            break
    best = Decimal(text)
    if precision == 0:
        # With one digit enough, Java still takes a two-digit decimal if it is closer
        # (4.9E-324, not 5.0E-324).
        two = Decimal(f"{value:.1e}")
        if abs(two - exact) < abs(best - exact):
            best = two
    return best


def _reads_back(text: str, value: float, single: bool) -> bool:
    if not single:
        return float(text) == value
    try:
        return struct.unpack("<f", struct.pack("<f", float(text)))[0] == value
    except OverflowError:
        return False


def _java_string(value: Any, value_type: IcebergType | None) -> str:
    """Java's default `Transform.toHumanString(type, value)`, then `Object.toString`."""
    if value is None:
        return "null"
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if isinstance(value_type, DateType):
            return _human_day(value)
        if isinstance(value_type, TimeType):
            return _local_time_string(value)
        if isinstance(value_type, TimestamptzType):
            return iso_timestamp(value) + "+00:00"
        if isinstance(value_type, TimestampType):
            return iso_timestamp(value)
        if isinstance(value_type, TimestamptzNanoType):
            return iso_timestamp(value, _NANOS_PER_SECOND) + "+00:00"
        if isinstance(value_type, TimestampNanoType):
            return iso_timestamp(value, _NANOS_PER_SECOND)
        return str(value)
    if isinstance(value, float):
        return _java_float_string(value, single=isinstance(value_type, FloatType))
    if isinstance(value, Decimal):
        # BigDecimal.toString, at the column's scale when known; Python's str has the same rules
        # except that Java has no negative zero.
        if isinstance(value_type, DecimalType):
            value = unscaled_to_decimal(value_type, decimal_to_unscaled(value_type, value))
        elif not value.is_finite():
            raise ValidationError(f"decimal value {value} is not finite")
        return str(value.copy_abs() if value.is_zero() else value)
    if isinstance(value, uuid.UUID | str):
        return str(value)
    raise ValidationError(
        f"no string form for {type(value).__name__} value {value!r}"
        + (f" of type {value_type}" if value_type is not None else "")
    )
