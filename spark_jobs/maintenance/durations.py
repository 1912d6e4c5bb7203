"""Ages and instants as the maintenance jobs take them on the command line.

    parse_duration_ms("7d") == 7 * 86_400_000
    parse_instant_ms("2024-01-07T00:00:00Z", now_ms=...)  # an ISO timestamp (UTC if naive)
    parse_instant_ms("3d", now_ms=...)                    # or an age: now minus 3 days

Durations are a number and a unit: `ms`, `s`, `m` (minutes), `h`, `d`, `w`; several may be
chained (`1d12h`). A bare number is refused: seconds or milliseconds would be a guess.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from spark_jobs.common.errors import JobError

_UNITS_MS = {
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
    "w": 7 * 86_400_000,
}
_PART = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)\s*", re.IGNORECASE)
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?\s*(?:ms|s|m|h|d|w)\s*)+", re.IGNORECASE)


def parse_duration_ms(text: str) -> int:
    """`7d`, `36h`, `90m`, `1d12h`, `0s` as milliseconds; JobError otherwise."""
    value = text.strip()
    if not value:
        raise JobError("empty duration")
    total = 0.0
    position = 0
    for match in _PART.finditer(value):
        if match.start() != position:
            break
        total += float(match.group(1)) * _UNITS_MS[match.group(2).lower()]
        position = match.end()
    if position != len(value) or position == 0:
        raise JobError(
            f"invalid duration {text!r}: use a number and a unit (ms, s, m, h, d, w), e.g. 7d"
        )
    return int(total)


def parse_instant_ms(text: str, *, now_ms: int) -> int:
    """An ISO-8601 timestamp (naive ones are UTC) or an age (`7d`: now minus 7 days), as
    milliseconds since the epoch."""
    value = text.strip()
    if _DURATION.fullmatch(value):
        return now_ms - parse_duration_ms(value)
    try:
        instant = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise JobError(
            f"invalid time {text!r}: give an ISO timestamp (2024-01-07T00:00:00Z) or an age "
            "(7d, 12h)"
        ) from None
    if instant.tzinfo is None:
        instant = instant.replace(tzinfo=UTC)
    return int(instant.timestamp() * 1000)


def format_ms(timestamp_ms: int) -> str:
    """An instant as an ISO timestamp in UTC, for messages and results."""
    return datetime.fromtimestamp(timestamp_ms / 1000, tz=UTC).isoformat(timespec="milliseconds")
