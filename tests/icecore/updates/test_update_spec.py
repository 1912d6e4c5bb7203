"""Partition spec evolution and sort order replacement through a real SqlCatalog.

v2 field ids continue from `last-partition-id` and are reused for a field an earlier spec had;
equal specs and orders reuse their ids; PyIceberg sees the same specs and order we committed.
"""

from __future__ import annotations

import pytest
from pyiceberg.catalog.sql import SqlCatalog as PySqlCatalog

from icecore.catalog import SqlCatalog
from icecore.errors import CommitConflictError, ValidationError
from icecore.spec.schema import Schema
from icecore.spec.sorting import NullOrder, SortDirection
from icecore.spec.types import LongType, NestedField, StringType, TimestamptzType
from icecore.table import Table

SCHEMA = Schema(
    (
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "ts", TimestamptzType()),
        NestedField(3, "category", StringType()),
    )
)


@pytest.fixture
def table(catalog: SqlCatalog) -> Table:
    catalog.create_namespace("db")
    return catalog.create_table("db.t", SCHEMA)


def spec_fields(table: Table, spec_id: int | None = None) -> list[tuple]:
    metadata = table.metadata
    spec = metadata.spec() if spec_id is None else metadata.spec_by_id(spec_id)
    return [(f.field_id, f.name, str(f.transform), f.source_id) for f in spec.fields]


def test_spec_evolution_assigns_v2_ids(catalog: SqlCatalog, table: Table) -> None:
    table.update_spec().add_field("id", "bucket[16]").commit()
    assert table.metadata.default_spec_id == 1
    assert spec_fields(table) == [(1000, "id_bucket_16", "bucket[16]", 1)]
    assert table.metadata.last_partition_id == 1000

    table.update_spec().add_field("ts", "day").add_field("category").commit()
    assert spec_fields(table) == [
        (1000, "id_bucket_16", "bucket[16]", 1),
        (1001, "ts_day", "day", 2),
        (1002, "category", "identity", 3),
    ]
    table.update_spec().remove_field("category").rename_field("ts_day", "day").commit()
    assert table.metadata.default_spec_id == 3
    assert spec_fields(table) == [
        (1000, "id_bucket_16", "bucket[16]", 1),
        (1001, "day", "day", 2),
    ]
    assert table.metadata.last_partition_id == 1002

    # Removing everything gives spec 0 back; re-adding the bucket recycles field 1000 and so
    # gives spec 1 back: no new specs, and no field id ever means two things.
    table.update_spec().remove_field("id_bucket_16").remove_field("day").commit()
    assert table.metadata.default_spec_id == 0
    table.update_spec().add_field("id", "bucket[16]").commit()
    assert table.metadata.default_spec_id == 1
    table.update_spec().add_field("category", "truncate[4]").commit()
    assert spec_fields(table)[-1] == (1003, "category_trunc_4", "truncate[4]", 3)
    assert [s.spec_id for s in table.metadata.partition_specs] == [0, 1, 2, 3, 4]
    assert table.metadata.last_partition_id == 1003

    theirs = PySqlCatalog(catalog.name, uri=catalog.uri, warehouse=catalog.properties["warehouse"])
    try:
        loaded = theirs.load_table("db.t")
        for spec_id, spec in loaded.specs().items():
            assert [(f.field_id, f.name, str(f.transform), f.source_id) for f in spec.fields] == (
                spec_fields(table, spec_id)
            )
        assert loaded.spec().spec_id == 4
    finally:
        theirs.engine.dispose()


def test_non_default_spec(table: Table) -> None:
    table.update_spec().add_field("category").commit()
    table.update_spec().remove_field("category").add_field(
        "id", "bucket[8]"
    ).add_non_default_spec().commit()
    assert table.metadata.default_spec_id == 1
    assert spec_fields(table, 2) == [(1001, "id_bucket_8", "bucket[8]", 1)]
    assert table.metadata.last_partition_id == 1001


@pytest.mark.parametrize(
    ("calls", "message"),
    [
        ([("add_field", "nope", "identity")], "no field 'nope'"),
        ([("add_field", "category", "day")], "does not apply to type string"),
        ([("add_field", "id"), ("add_field", "id")], "duplicate"),
        ([("add_field", "ts", "day"), ("add_field", "ts", "hour")], "redundant"),
        ([("remove_field", "nope")], "cannot find partition field"),
        ([("add_field", "ts", "day", "id")], "named like column 'id'"),
    ],
)
def test_spec_errors_name_the_field(table: Table, calls: list[tuple], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        update = table.update_spec()
        for method, *args in calls:
            getattr(update, method)(*args)
        update.commit()


def test_concurrent_spec_changes(catalog: SqlCatalog, table: Table) -> None:
    other = catalog.load_table("db.t")
    mine = table.update_spec().add_field("ts", "day")
    other.update_spec().add_field("id", "bucket[4]").commit()
    mine.commit()
    assert mine.attempts == 2
    assert spec_fields(catalog.load_table("db.t")) == [
        (1000, "id_bucket_4", "bucket[4]", 1),
        (1001, "ts_day", "day", 2),
    ]

    racing = catalog.load_table("db.t").update_spec().add_field("category")
    table.refresh().update_spec().add_field("category", name="cat").commit()
    with pytest.raises(CommitConflictError, match="duplicate partition field"):
        racing.commit()


def test_sort_order_replacement(catalog: SqlCatalog, table: Table) -> None:
    table.replace_sort_order().asc("category").desc("ts", transform="day").commit()
    order = table.metadata.sort_order()
    assert order.order_id == 1
    assert [(f.source_id, str(f.transform), f.direction, f.null_order) for f in order.fields] == [
        (3, "identity", SortDirection.ASC, NullOrder.NULLS_FIRST),
        (2, "day", SortDirection.DESC, NullOrder.NULLS_LAST),
    ]
    table.replace_sort_order().asc("id", NullOrder.NULLS_LAST).commit()
    assert table.metadata.default_sort_order_id == 2
    table.replace_sort_order().asc("category").desc("ts", transform="day").commit()
    assert table.metadata.default_sort_order_id == 1  # an equal order is reused
    table.replace_sort_order().commit()
    assert table.metadata.default_sort_order_id == 0  # no fields: unsorted
    assert len(table.metadata.sort_orders) == 3

    theirs = PySqlCatalog(catalog.name, uri=catalog.uri, warehouse=catalog.properties["warehouse"])
    try:
        assert [o.order_id for o in theirs.load_table("db.t").sort_orders().values()] == [0, 1, 2]
    finally:
        theirs.engine.dispose()


def test_sort_order_errors(catalog: SqlCatalog, table: Table) -> None:
    with pytest.raises(ValidationError, match="cannot sort by day"):
        table.replace_sort_order().asc("category", transform="day")
    with pytest.raises(ValidationError, match="no field 'nope'"):
        table.replace_sort_order().asc("nope")
    racing = catalog.load_table("db.t").replace_sort_order().asc("category")
    table.update_schema().rename_column("category", "kind").commit()
    with pytest.raises(CommitConflictError, match="no field 'category'"):
        racing.commit()
