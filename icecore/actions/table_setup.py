"""Creating the target table, evolving its schema, and the specs a batch writes with.

`--partition-by "day(ts), bucket(16, id)"` and `--sort-by "ts, id desc nulls last"` are
Iceberg's Spark DDL terms, parsed by `icecore.spec.terms`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence

from icecore.catalog import Catalog
from icecore.errors import AlreadyExistsError, ValidationError
from icecore.jobs.errors import JobError
from icecore.spec.partitioning import PartitionSpec
from icecore.spec.properties import FORMAT_VERSION
from icecore.spec.schema import Schema
from icecore.spec.terms import parse_partition_spec, parse_sort_order
from icecore.spec.types import IcebergType
from icecore.table import Table


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
    if format_version not in (2, 3):
        raise JobError(f"--format-version {format_version}: format versions 2 and 3 are written")
    try:
        spec = parse_partition_spec(partition_by, schema)
    except ValidationError as exc:
        raise JobError(f"--partition-by {partition_by!r}: {exc}") from None
    try:
        order = parse_sort_order(sort_by, schema)
    except ValidationError as exc:
        raise JobError(f"--sort-by {sort_by!r}: {exc}") from None
    namespace = identifier.rsplit(".", 1)[0]
    if not catalog.namespace_exists(namespace):
        with contextlib.suppress(AlreadyExistsError):  # created by a concurrent run
            catalog.create_namespace(namespace)
    properties = dict(properties)
    properties.setdefault(FORMAT_VERSION, str(format_version))
    return catalog.create_table(
        identifier, schema, spec=spec, sort_order=order, properties=properties
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
