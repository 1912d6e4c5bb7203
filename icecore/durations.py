"""Durations as people type them: `7d`, `36h`, `90m`, `1d12h`, `0s`; the one rule.

    parse_duration_ms("1d12h") == 129_600_000
    format_duration_ms(259_200_000) == "3d"

Job flags, Airflow form fields, `tables.yaml` settings (all through `icecore.jobs.grammar`)
and icefloe's own duration-valued table properties (`icecore.spec.properties`, such as
`icefloe.trash.retention`) read durations here, so `3d` means the same wherever it is typed
and is refused the same way. Nothing is guessed: a bare number is refused (seconds or
milliseconds would be a guess) and a duration must come to whole milliseconds.

Standard library only, and importing nothing else of icecore: the jobs' declarations
(`icecore.jobs`, imported by Airflow workers that build forms) use it too.
"""

from __future__ import annotations

import re

DURATION_EXAMPLE = "7d, 36h, 90m or 1d12h (units ms, s, m, h, d, w)"

_UNITS_MS = {
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
    "w": 7 * 86_400_000,
}
_PART = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)(?![a-z])\s*", re.IGNORECASE)
_WHOLE = re.compile(r"(?:\s*\d+(?:\.\d+)?\s*(?:ms|s|m|h|d|w)(?![a-z])\s*)+", re.IGNORECASE)

# Formatting stops at days: `7d` reads better than `1w`, `10d` better than `1w3d`.
_UNIT_NAMES_MS = (
    (86_400_000, "d"),
    (3_600_000, "h"),
    (60_000, "m"),
    (1000, "s"),
    (1, "ms"),
)


def parse_duration_ms(text: str | int) -> int:
    """Milliseconds from `7d`, `36h`, `90m`, `1d12h`, `1.5h`, `0s`; bare numbers in text are
    refused (seconds or milliseconds would be a guess), while an int is milliseconds already.
    ValueError saying what was expected, for callers to prefix with the field's name."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    value = str(text).strip()
    total = 0.0
    position = 0
    for match in _PART.finditer(value):
        if match.start() != position:
            break
        total += float(match.group(1)) * _UNITS_MS[match.group(2).lower()]
        position = match.end()
    if not value or position != len(value) or position == 0:
        raise ValueError(f"expected a duration such as {DURATION_EXAMPLE}, got {str(text)!r}")
    if total != int(total):
        raise ValueError(f"{str(text)!r} is not a whole number of milliseconds")
    return int(total)


def format_duration_ms(duration_ms: int) -> str:
    """The shortest exact spelling: 86400000 -> `1d`, 129600000 -> `1d12h`, 0 -> `0s`."""
    if duration_ms == 0:
        return "0s"
    parts = []
    rest = duration_ms
    for multiplier, name in _UNIT_NAMES_MS:
        if rest >= multiplier:
            parts.append(f"{rest // multiplier}{name}")
            rest %= multiplier
    return "".join(parts)


def is_duration(text: str) -> bool:
    return _WHOLE.fullmatch(text.strip()) is not None
