"""Creating the target table, evolving its schema, and the specs a batch writes with.

`--partition-by "day(ts), bucket(16, id), truncate(4, name), identity(x)"` and
`--sort-by "ts, id desc nulls last"` use Iceberg's Spark DDL forms: `year`, `month`, `day`,
`hour`, `bucket(N, col)`, `truncate(N, col)`, `identity(col)` or a bare column, `void(col)`;
the column may also come first (`bucket(id, 16)`, as Trino writes it).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping, Sequence

from icecore.catalog import Catalog
from icecore.errors import AlreadyExistsError, IcecoreError
from icecore.spec.partitioning import UNPARTITIONED, PartitionSpec, PartitionSpecUpdate
from icecore.spec.schema import Schema
from icecore.spec.sorting import UNSORTED, NullOrder, SortDirection, SortField, SortOrder
from icecore.spec.transforms import Transform, parse_transform
from icecore.spec.types import IcebergType
from icecore.table import Table
from spark_jobs.common.errors import JobError

_TERM = re.compile(r"^\s*(?:(\w+)\s*\(\s*([^()]*?)\s*\)|([^\s()]+))\s*(.*?)\s*$", re.DOTALL)
_SIMPLE = {"identity", "year", "month", "day", "hour", "void"}
_PLURALS = {"years": "year", "months": "month", "days": "day", "hours": "hour"}


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
        raise JobError(f"cannot parse {term!r}: expected column or transform(args)")
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
            raise JobError(f"{term!r}: {name} needs a number of buckets or a width")
        return column, parse_transform(f"{name}[{number}]"), rest
    raise JobError(f"cannot parse {term!r}: unknown transform or wrong arguments")


def partition_spec(text: str | None, schema: Schema) -> PartitionSpec:
    if not text:
        return UNPARTITIONED
    update = PartitionSpecUpdate(UNPARTITIONED, schema, 2)
    for term in split_terms(text):
        column, transform, rest = parse_term(term)
        if rest:
            raise JobError(f"--partition-by term {term!r}: unexpected {rest!r}")
        try:
            update.add_field(column, transform)
        except IcecoreError as exc:
            raise JobError(f"--partition-by {term!r}: {exc}") from exc
    return update.apply(0)


def sort_order(text: str | None, schema: Schema) -> SortOrder:
    if not text:
        return UNSORTED
    fields = []
    for term in split_terms(text):
        column, transform, rest = parse_term(term)
        words = rest.lower().split()
        direction = SortDirection.DESC if words[:1] == ["desc"] else SortDirection.ASC
        if words[:1] in (["asc"], ["desc"]):
            words = words[1:]
        default_nulls = (
            NullOrder.NULLS_LAST if direction == SortDirection.DESC else NullOrder.NULLS_FIRST
        )
        nulls = {("nulls", "first"): NullOrder.NULLS_FIRST, ("nulls", "last"): NullOrder.NULLS_LAST}
        if words and tuple(words) not in nulls:
            raise JobError(f"--sort-by term {term!r}: expected [asc|desc] [nulls first|last]")
        try:
            source = schema.find_field(column)
        except IcecoreError as exc:
            raise JobError(f"--sort-by {term!r}: {exc}") from exc
        if not transform.can_transform(source.field_type):
            raise JobError(f"--sort-by {term!r}: {transform} does not apply to {source.field_type}")
        null_order = nulls[tuple(words)] if words else default_nulls  # type: ignore[index]
        fields.append(SortField(source.field_id, transform, direction, null_order))
    return SortOrder(1, tuple(fields))


def create_table(
    catalog: Catalog,
    identifier: str,
    schema: Schema,
    *,
    partition_by: str | None,
    sort_by: str | None,
    properties: Mapping[str, str],
    format_version: int,
) -> Table:
    if format_version != 2:
        raise JobError(f"--format-version {format_version}: only format version 2 is written")
    spec = partition_spec(partition_by, schema)
    order = sort_order(sort_by, schema)
    namespace = identifier.rsplit(".", 1)[0]
    if not catalog.namespace_exists(namespace):
        with contextlib.suppress(AlreadyExistsError):  # created by a concurrent run
            catalog.create_namespace(namespace)
    return catalog.create_table(
        identifier, schema, spec=spec, sort_order=order, properties=dict(properties)
    )


def add_columns(table: Table, additions: Sequence[tuple[str, IcebergType]]) -> list[str]:
    """Add new optional columns (`--merge-schema`) in one schema commit; their names."""
    if not additions:
        return []
    update = table.update_schema()
    for path, column_type in additions:
        update.add_column(path, column_type)
    update.commit()
    table.refresh()
    return [path for path, _ in additions]


def unpartitioned_spec(table: Table) -> PartitionSpec:
    """A spec of the table without partition fields, added (not as default) if missing.

    Equality deletes written with it are global: they apply to data files of every
    partition, which is what a key whose partition is unknown needs.
    """
    for spec in table.metadata.partition_specs:
        if not spec.fields:
            return spec
    update = table.update_spec().add_non_default_spec()
    for field in table.metadata.spec().fields:
        update.remove_field(field.name)
    update.commit()
    table.refresh()
    return next(s for s in table.metadata.partition_specs if not s.fields)
