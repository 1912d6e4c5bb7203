"""`--where`: the rows a job's plan is limited to, read by icecore's filter parser."""

from __future__ import annotations

from icecore.errors import ValidationError
from icecore.expressions import BooleanExpression
from icecore.expressions.parser import parse_filter
from icecore.jobs.errors import JobError


def parse_where(where: str | None) -> BooleanExpression | None:
    """The filter, None for every row; a JobError naming the flag for text that is not one."""
    if not where:
        return None
    try:
        return parse_filter(where)
    except ValidationError as exc:
        raise JobError(f"--where {where!r}: {exc}") from None
