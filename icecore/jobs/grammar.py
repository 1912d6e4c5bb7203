"""The one grammar for the values people type: sizes, durations, instants, ratios.

    parse_size("128MB") == 134_217_728      # KB, MB, GB, TB are powers of 1024
    parse_duration_ms("1d12h") == 129_600_000
    parse_instant_ms("7d", now_ms=...)      # now minus 7 days; or an ISO timestamp
    parse_ratio("10%") == 0.1

Every job flag, every Airflow form field and every `tables.yaml` setting goes through these
functions, so `7d` means the same everywhere and a value is refused the same way everywhere.
Nothing is rounded, clamped or guessed: a bare number is refused as a duration (seconds or
milliseconds would be a guess), a size must come to a whole number of bytes, a ratio must lie
in its range. Errors are `ValueError`s whose message says what was expected, in words, for
callers to prefix with the field's name.

Sizes use powers of 1024 for K/M/G/T, as Iceberg's documentation (`512 MB` for
536,870,912 bytes) and Spark's settings (`4g`) do; `KiB`/`MiB` spellings are accepted too.

Standard library only (with `icecore.durations`, which is too): Airflow workers import this
module to check a form before any Spark job is submitted.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

# Durations are icecore's rule (its table properties take them too), kept in one place there.
from icecore.durations import DURATION_EXAMPLE, format_duration_ms, is_duration, parse_duration_ms

__all__ = [
    "DURATION_EXAMPLE",
    "INSTANT_EXAMPLE",
    "SIZE_EXAMPLE",
    "check_instant",
    "describe_size",
    "format_duration_ms",
    "format_ms",
    "format_size",
    "is_duration",
    "parse_boolean",
    "parse_duration_ms",
    "parse_instant_ms",
    "parse_integer",
    "parse_ratio",
    "parse_size",
    "parse_timestamp_ms",
]

SIZE_EXAMPLE = "128MB, 512 MiB, 1GB or a byte count"
INSTANT_EXAMPLE = "an age such as 3d or 12h, or an ISO timestamp such as 2024-01-07T00:00:00Z"

_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "m": 1024**2,
    "g": 1024**3,
    "t": 1024**4,
    "p": 1024**5,
}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(?:([kmgtp])(?:i?b)?|(b))?", re.IGNORECASE)

_SIZE_NAMES = ((1024**4, "TB"), (1024**3, "GB"), (1024**2, "MB"), (1024, "KB"))


def parse_size(text: str | int) -> int:
    """Bytes from `128MB`, `512 MiB`, `1.5GB`, `64k` or a plain byte count."""
    if isinstance(text, bool):
        raise ValueError(f"expected a size such as {SIZE_EXAMPLE}, got {text!r}")
    if isinstance(text, int):
        return text
    match = _SIZE.fullmatch(str(text).strip())
    if match is None:
        raise ValueError(f"expected a size such as {SIZE_EXAMPLE}, got {text!r}")
    number, unit, byte = match.groups()
    multiplier = _SIZE_UNITS[(unit or byte or "").lower()]
    value = float(number) * multiplier if "." in number else int(number) * multiplier
    if value != int(value):
        raise ValueError(f"{text!r} is not a whole number of bytes")
    return int(value)


def format_size(size: int) -> str:
    """The shortest exact spelling: 134217728 -> `128MB`, 1000 -> `1000`."""
    for multiplier, name in _SIZE_NAMES:
        if size and size % multiplier == 0:
            return f"{size // multiplier}{name}"
    return str(size)


def describe_size(size: float) -> str:
    """An approximate size for people: `1.2 GB`, `640.0 KB`, `12 B` (powers of 1024)."""
    amount = float(size or 0)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if amount < 1024 or unit == "TB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{amount:.1f} TB"


def parse_instant_ms(text: str, *, now_ms: int) -> int:
    """Milliseconds since the epoch from an ISO-8601 timestamp (naive ones are UTC; a date
    alone is its midnight) or an age (`7d`: now minus 7 days)."""
    value = str(text).strip()
    if is_duration(value):
        return now_ms - parse_duration_ms(value)
    return parse_timestamp_ms(value)


def parse_timestamp_ms(text: str) -> int:
    value = str(text).strip()
    try:
        instant = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"expected {INSTANT_EXAMPLE}, got {str(text)!r}") from None
    if instant.tzinfo is None:
        instant = instant.replace(tzinfo=UTC)
    return int(instant.timestamp() * 1000)


def check_instant(text: str) -> str:
    """`text` unchanged if it is an age or a timestamp: it is resolved against the clock when
    the job runs, not when the form was filled."""
    if not is_duration(str(text)):
        parse_timestamp_ms(str(text))
    return str(text).strip()


def format_ms(timestamp_ms: int) -> str:
    """An instant as an ISO timestamp in UTC, for messages and results."""
    return datetime.fromtimestamp(timestamp_ms / 1000, tz=UTC).isoformat(timespec="milliseconds")


def parse_ratio(text: str | float, *, minimum: float = 0.0, maximum: float = 1.0) -> float:
    """A fraction from `0.3`, `.3` or `30%`, within [minimum, maximum]."""
    if isinstance(text, bool):
        raise ValueError(f"expected a fraction such as 0.3 or 30%, got {text!r}")
    value_text = str(text).strip()
    try:
        percent = value_text.endswith("%")
        value = float(value_text.removesuffix("%")) / (100 if percent else 1)
    except ValueError:
        raise ValueError(f"expected a fraction such as 0.3 or 30%, got {str(text)!r}") from None
    if not minimum <= value <= maximum:
        raise ValueError(f"expected a fraction from {minimum:g} to {maximum:g}, got {text!r}")
    return value


def parse_integer(
    text: str | int, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    """A whole number (`1000`, `1_000`), within its bounds."""
    if isinstance(text, bool):
        raise ValueError(f"expected a whole number, got {text!r}")
    if isinstance(text, int):
        value = text
    else:
        try:
            value = int(str(text).strip())
        except ValueError:
            raise ValueError(f"expected a whole number, got {str(text)!r}") from None
    if minimum is not None and value < minimum:
        raise ValueError(f"expected a whole number of at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"expected a whole number of at most {maximum}, got {value}")
    return value


def parse_boolean(text: str | bool) -> bool:
    """`true`/`false` and their usual spellings (`yes`, `on`, `1`, ...)."""
    if isinstance(text, bool):
        return text
    value = str(text).strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {str(text)!r}")
