"""Partition specs and sort orders as people write them: Iceberg's Spark DDL terms.

    parse_partition_spec("day(ts), bucket(16, id), truncate(4, name)", schema)
    parse_sort_order("ts, id desc nulls last", schema)

Terms are `year`, `month`, `day`, `hour` (or their plurals), `bucket(N, col)`,
`truncate(N, col)`, `identity(col)` or a bare column, `void(col)`; the column may also come
first (`bucket(id, 16)`, as Trino writes it); backquotes around names are dropped. A sort term
may be followed by `asc`/`desc` and `nulls first`/`nulls last` (defaults: ascending, nulls
first when ascending and last when descending, as Spark and Iceberg).

`parse_partition_terms` and `parse_sort_terms` check the syntax alone, without a schema: what
an Airflow operator can check before a job starts. Errors are `ValidationError`s that quote
the term and say what was expected.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from icecore.errors import IcecoreError, ValidationError
from icecore.spec.partitioning import UNPARTITIONED, PartitionSpec, PartitionSpecUpdate
from icecore.spec.schema import Schema
from icecore.spec.sorting import UNSORTED, NullOrder, SortDirection, SortField, SortOrder
from icecore.spec.transforms import Transform, parse_transform

_TERM = re.compile(r"^\s*(?:(\w+)\s*\(\s*([^()]*?)\s*\)|([^\s()]+))\s*(.*?)\s*$", re.DOTALL)
_SIMPLE = {"identity", "year", "month", "day", "hour", "void"}
_PLURALS = {"years": "year", "months": "month", "days": "day", "hours": "hour"}
_NULLS = {("nulls", "first"): NullOrder.NULLS_FIRST, ("nulls", "last"): NullOrder.NULLS_LAST}


@dataclass(frozen=True)
class SortTerm:
    column: str
    transform: Transform
    direction: SortDirection
    null_order: NullOrder


def split_terms(text: str) -> list[str]:
    """Split on the commas outside parentheses."""
    terms, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return [t.strip() for t in terms if t.strip()]


def parse_term(term: str) -> tuple[str, Transform, str]:
    """(column, transform, what follows) of `day(ts) desc`, `bucket(16, id)` or `x`."""
    match = _TERM.match(term)
    if match is None:
        raise ValidationError(f"cannot read {term!r}: expected a column or transform(column)")
    name, args, bare, rest = match.groups()
    if bare is not None:
        return bare.strip("`"), parse_transform("identity"), rest
    name = _PLURALS.get(name.lower(), name.lower())
    parts = [a.strip().strip("`") for a in args.split(",")]
    if name in _SIMPLE and len(parts) == 1:
        return parts[0], parse_transform(name), rest
    if name in ("bucket", "truncate") and len(parts) == 2:
        number, column = (parts[0], parts[1]) if parts[0].isdigit() else (parts[1], parts[0])
        if not number.isdigit():
            raise ValidationError(f"{term!r}: {name} needs a number of buckets or a width")
        return column, parse_transform(f"{name}[{number}]"), rest
    raise ValidationError(
        f"cannot read {term!r}: expected year, month, day, hour, bucket(N, column), "
        "truncate(N, column), identity(column), void(column) or a column"
    )


def parse_partition_terms(text: str) -> list[tuple[str, Transform]]:
    """(column, transform) of each term; ValidationError naming a malformed one."""
    terms = []
    for term in split_terms(text):
        column, transform, rest = parse_term(term)
        if rest:
            raise ValidationError(f"partition term {term!r}: unexpected {rest!r}")
        terms.append((column, transform))
    return terms


def parse_sort_terms(text: str) -> list[SortTerm]:
    """Each term with its direction and null order; ValidationError naming a malformed one."""
    terms = []
    for term in split_terms(text):
        column, transform, rest = parse_term(term)
        words = rest.lower().split()
        direction = SortDirection.DESC if words[:1] == ["desc"] else SortDirection.ASC
        if words[:1] in (["asc"], ["desc"]):
            words = words[1:]
        if words and tuple(words) not in _NULLS:
            raise ValidationError(
                f"sort term {term!r}: expected [asc|desc] [nulls first|nulls last] after the "
                f"column, got {rest!r}"
            )
        default = NullOrder.NULLS_LAST if direction == SortDirection.DESC else NullOrder.NULLS_FIRST
        null_order = _NULLS[(words[0], words[1])] if words else default
        terms.append(SortTerm(column, transform, direction, null_order))
    return terms


def parse_partition_spec(text: str | None, schema: Schema) -> PartitionSpec:
    """The spec the terms describe, bound to `schema` (spec id 0)."""
    if not text:
        return UNPARTITIONED
    update = PartitionSpecUpdate(UNPARTITIONED, schema, 2)
    for column, transform in parse_partition_terms(text):
        try:
            update.add_field(column, transform)
        except IcecoreError as exc:
            raise ValidationError(f"partition term {column!r}: {exc}") from exc
    return update.apply(0)


def parse_sort_order(text: str | None, schema: Schema) -> SortOrder:
    """The sort order the terms describe, bound to `schema` (order id 1)."""
    if not text:
        return UNSORTED
    fields = []
    for term in parse_sort_terms(text):
        try:
            source = schema.find_field(term.column)
        except IcecoreError as exc:
            raise ValidationError(f"sort term {term.column!r}: {exc}") from exc
        if not term.transform.can_transform(source.field_type):
            raise ValidationError(
                f"sort term {term.column!r}: {term.transform} does not apply to {source.field_type}"
            )
        fields.append(SortField(source.field_id, term.transform, term.direction, term.null_order))
    return SortOrder(1, tuple(fields))
