"""Schema evolution committed through a real SqlCatalog, read back by us and by PyIceberg.

Data files are real Parquet written before and after each change, so "a renamed column reads
old files by id" and "a re-added column does not resurrect old values" are checked on actual
rows, not on metadata alone.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from pyiceberg.catalog.sql import SqlCatalog as PySqlCatalog

from icecore.catalog import SqlCatalog
from icecore.errors import CommitConflictError, ValidationError
from icecore.spec.partitioning import PartitionField, PartitionSpec
from icecore.spec.schema import Schema
from icecore.spec.sorting import SortField, SortOrder
from icecore.spec.transforms import parse_transform
from icecore.spec.types import (
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
)
from icecore.table import Table
from tests.support.catalogs import append_rows
from tests.support.reader import scan_rows

SCHEMA = Schema(
    (
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "data", StringType()),
        NestedField(3, "n", IntegerType()),
        NestedField(4, "f", FloatType()),
        NestedField(5, "price", DecimalType(9, 2)),
    ),
    identifier_field_ids=(1,),
)
NESTED = Schema(
    (
        NestedField(1, "id", LongType(), required=True),
        NestedField(
            2,
            "point",
            StructType(NestedField(3, "x", DoubleType()), NestedField(4, "y", DoubleType())),
        ),
        NestedField(5, "tags", ListType(6, StructType(NestedField(7, "k", StringType())), False)),
        NestedField(
            8,
            "attrs",
            MapType(9, StringType(), 10, StructType(NestedField(11, "v", LongType())), False),
        ),
    )
)


def rows(table: Table) -> list[dict]:
    return sorted(scan_rows(table.io, table.metadata), key=lambda r: r["id"])


def pyiceberg_rows(catalog: SqlCatalog, identifier: str) -> list[dict]:
    warehouse = catalog.properties["warehouse"]
    theirs = PySqlCatalog(catalog.name, uri=catalog.uri, warehouse=warehouse)
    try:
        table = theirs.load_table(identifier)
        return sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    finally:
        theirs.engine.dispose()


@pytest.fixture
def table(catalog: SqlCatalog) -> Table:
    catalog.create_namespace("db")
    return catalog.create_table("db.t", SCHEMA)


@pytest.mark.interop
def test_evolved_table_reads_old_files_by_field_id(catalog: SqlCatalog, table: Table) -> None:
    append_rows(table, [{"id": 1, "data": "a", "n": 7, "f": 1.5, "price": Decimal("12.34")}])
    committed = (
        table.update_schema()
        .rename_column("data", "payload")
        .update_column("n", LongType())
        .update_column("f", DoubleType())
        .update_column("price", DecimalType(12, 2))
        .add_column("note", StringType(), doc="free text")
        .move_after("note", "id")
        .commit()
    )
    assert committed.metadata_location == table.metadata_location
    reloaded = catalog.load_table("db.t")
    schema = reloaded.metadata.schema()
    assert reloaded.metadata.current_schema_id == 1
    assert [f.name for f in schema.fields] == ["id", "note", "payload", "n", "f", "price"]
    assert schema.find_field("payload").field_id == 2
    assert schema.find_field("note").field_id == 6
    assert schema.find_field("note").doc == "free text"
    assert reloaded.metadata.last_column_id == 6
    assert schema.identifier_field_ids == (1,)

    append_rows(
        reloaded,
        [{"id": 2, "note": "new", "payload": "b", "n": 2**40, "f": 0.1, "price": Decimal("1E+9")}],
    )
    expected = [
        {"id": 1, "note": None, "payload": "a", "n": 7, "f": 1.5, "price": Decimal("12.34")},
        {"id": 2, "note": "new", "payload": "b", "n": 2**40, "f": 0.1,
         "price": Decimal("1000000000.00")},
    ]  # fmt: skip
    assert rows(reloaded) == expected
    assert pyiceberg_rows(catalog, "db.t") == expected


@pytest.mark.interop
def test_dropped_and_readded_column_does_not_resurrect_old_values(
    catalog: SqlCatalog, table: Table
) -> None:
    append_rows(table, [{"id": 1, "data": "old", "n": 1}])
    table.update_schema().delete_column("data").commit()
    assert [f.name for f in table.metadata.schema().fields] == ["id", "n", "f", "price"]
    table.update_schema().add_column("data", StringType()).commit()
    assert table.metadata.schema().find_field("data").field_id == 6
    append_rows(table, [{"id": 2, "data": "new", "n": 2}])
    expected = [
        {"id": 1, "n": 1, "f": None, "price": None, "data": None},
        {"id": 2, "n": 2, "f": None, "price": None, "data": "new"},
    ]
    assert rows(table) == expected
    assert pyiceberg_rows(catalog, "db.t") == expected


def test_nested_adds_take_fresh_ids_in_java_order(catalog: SqlCatalog) -> None:
    catalog.create_namespace("db")
    table = catalog.create_table("db.nested", NESTED)
    new_type = StructType(
        NestedField(0, "a", IntegerType()),
        NestedField(0, "b", ListType(0, StructType(NestedField(0, "c", StringType())))),
        NestedField(0, "m", MapType(0, StringType(), 0, LongType())),
    )
    table.update_schema().add_column("point.z", DoubleType()).add_column(
        "tags.v", LongType()
    ).add_column(("attrs", "w"), StringType()).add_column("s", new_type).move_first(
        "point.z"
    ).commit()
    schema = table.metadata.schema()
    assert schema.find_field("point.z").field_id == 12
    assert [f.name for f in schema.find_type("point").fields] == ["z", "x", "y"]
    assert schema.find_field("tags.element.v").field_id == 13
    assert schema.find_field("attrs.value.w").field_id == 14
    # Java's AssignFreshIds: the column, then a struct's fields, then each field's children.
    assert schema.find_field("s").field_id == 15
    assert [schema.find_field(n).field_id for n in ("s.a", "s.b", "s.m")] == [16, 17, 18]
    assert schema.find_type("s.b") == ListType(19, StructType(NestedField(20, "c", StringType())))
    assert schema.find_type("s.m") == MapType(21, StringType(), 22, LongType())
    assert table.metadata.last_column_id == 22


def test_same_schema_again_reuses_its_id(table: Table) -> None:
    table.update_schema().add_column("tmp", StringType()).commit()
    assert table.metadata.current_schema_id == 1
    table.update_schema().delete_column("tmp").commit()
    # Fields equal to schema 0 again: schema 0 is current, no third schema; ids never reused.
    assert table.metadata.current_schema_id == 0
    assert len(table.metadata.schemas) == 2
    assert table.metadata.last_column_id == 6
    table.update_schema().add_column("tmp", StringType()).commit()
    assert table.metadata.schema().find_field("tmp").field_id == 7
    assert table.metadata.current_schema_id == 2


@pytest.mark.parametrize(
    ("column", "new_type"),
    [
        ("n", StringType()),
        ("id", IntegerType()),
        ("f", LongType()),
        ("price", DecimalType(12, 3)),  # scale must stay
        ("price", DecimalType(8, 2)),  # precision only grows
        ("data", LongType()),
    ],
)
def test_unsafe_type_changes_are_refused(table: Table, column: str, new_type) -> None:
    with pytest.raises(ValidationError, match="cannot change column type"):
        table.update_schema().update_column(column, new_type)


def test_incompatible_changes_need_the_flag(table: Table) -> None:
    with pytest.raises(ValidationError, match="required column 'x'"):
        table.update_schema().add_column("x", StringType(), required=True)
    with pytest.raises(ValidationError, match="optional -> required"):
        table.update_schema().require_column("data")
    table.update_schema(allow_incompatible_changes=True).add_column(
        "x", StringType(), required=True
    ).require_column("data").commit()
    schema = table.metadata.schema()
    assert schema.find_field("x").required and schema.find_field("data").required
    table.update_schema().make_column_optional("x").commit()
    assert not table.metadata.schema().find_field("x").required


def test_call_errors_name_the_column(table: Table) -> None:
    update = table.update_schema()
    with pytest.raises(ValidationError, match="'data': the name already exists"):
        update.add_column("data", StringType())
    with pytest.raises(ValidationError, match="cannot rename missing column 'nope'"):
        update.rename_column("nope", "x")
    with pytest.raises(ValidationError, match="non-struct column 'data'"):
        update.add_column("data.x", StringType())
    update.delete_column("n")
    with pytest.raises(ValidationError, match="will be deleted"):
        update.rename_column("n", "m")
    with pytest.raises(ValidationError, match="has updates"):
        table.update_schema().rename_column("data", "d").delete_column("data")
    # A rename freeing a name and an add taking it is fine; two columns of one name are not.
    table.update_schema().rename_column("data", "d").add_column("data", LongType()).commit()
    with pytest.raises(ValidationError, match="two columns named 'n'"):
        table.update_schema().rename_column("f", "n").schema()


def test_nested_structure_rules(catalog: SqlCatalog) -> None:
    catalog.create_namespace("db")
    table = catalog.create_table("db.nested", NESTED)
    with pytest.raises(ValidationError, match="map keys"):
        table.update_schema().update_column("attrs.key", StringType())
    with pytest.raises(ValidationError, match="lists and maps need their children"):
        table.update_schema().delete_column("tags.element")
    with pytest.raises(ValidationError, match="different struct"):
        table.update_schema().move_before("point.x", "id")
    table.update_schema().delete_column("point.y").rename_column("tags.element.k", "key").commit()
    schema = table.metadata.schema()
    assert [f.name for f in schema.find_type("point").fields] == ["x"]
    assert schema.find_field("tags.element.key").field_id == 7


def test_identifier_fields(table: Table) -> None:
    with pytest.raises(ValidationError, match="cannot delete identifier field 'id'"):
        table.update_schema().delete_column("id").commit()
    for column, problem in (
        ("data", "not a required column"),
        ("nope", "no such column"),
    ):
        with pytest.raises(ValidationError, match=problem):
            table.update_schema(allow_incompatible_changes=True).set_identifier_fields(
                column
            ).schema()
    with pytest.raises(ValidationError, match="float and double"):
        table.update_schema(allow_incompatible_changes=True).require_column(
            "f"
        ).set_identifier_fields("id", "f").schema()
    with pytest.raises(ValidationError, match="not a required column"):
        table.update_schema().make_column_optional("id").commit()

    table.update_schema(allow_incompatible_changes=True).add_column(
        "region", StringType(), required=True
    ).set_identifier_fields("id", "region").commit()
    schema = table.metadata.schema()
    assert schema.identifier_field_ids == (1, 6)
    table.update_schema().set_identifier_fields().delete_column("id").commit()
    assert table.metadata.schema().identifier_field_ids == ()
    assert "id" not in {f.name for f in table.metadata.schema().fields}


def test_identifier_fields_nested_in_optional_struct_are_refused(catalog: SqlCatalog) -> None:
    catalog.create_namespace("db")
    table = catalog.create_table("db.nested", NESTED)
    update = table.update_schema(allow_incompatible_changes=True)
    update.add_column("point.k", LongType(), required=True)
    with pytest.raises(ValidationError, match=r"'point\.k'.*nested in optional column 'point'"):
        update.set_identifier_fields("point.k").schema()
    update.require_column("point")
    assert update.schema().identifier_field_ids == (12,)


def test_partition_source_of_the_current_spec_cannot_be_dropped(catalog: SqlCatalog) -> None:
    """Java's rule: the default spec must bind to the schema; older specs need not."""
    catalog.create_namespace("db")
    spec = PartitionSpec(0, (PartitionField(3, 1000, parse_transform("bucket[8]"), "n_b"),))
    table = catalog.create_table("db.p", SCHEMA, spec=spec)
    with pytest.raises(ValidationError, match=r"cannot delete column 'n'.*partition field 'n_b'"):
        table.update_schema().delete_column("n").commit()
    # Widening a partition source keeps the spec valid (bucket hashes int and long alike).
    table.update_schema().update_column("n", LongType()).commit()
    table.update_spec().remove_field("n_b").commit()
    table.update_schema().delete_column("n").commit()
    assert "n" not in {f.name for f in table.metadata.schema().fields}
    # The old spec still names source id 3, and keeps its partition type for old manifests.
    old_spec = table.metadata.spec_by_id(0)
    assert old_spec.fields[0].source_id == 3
    assert old_spec.partition_type(table.metadata.schema()).fields[0].field_type == IntegerType()
    assert table.metadata.default_spec_id == 1


def test_sort_column_of_the_current_order_cannot_be_dropped(catalog: SqlCatalog) -> None:
    catalog.create_namespace("db")
    order = SortOrder(1, (SortField(2, parse_transform("identity")),))
    table = catalog.create_table("db.s", SCHEMA, sort_order=order)
    with pytest.raises(ValidationError, match=r"cannot delete column 'data'.*sort order 1"):
        table.update_schema().delete_column("data").commit()


def test_column_properties_follow_renames_and_drops(catalog: SqlCatalog) -> None:
    catalog.create_namespace("db")
    table = catalog.create_table(
        "db.t",
        SCHEMA,
        properties={
            "write.metadata.metrics.column.data": "full",
            "write.parquet.bloom-filter-enabled.column.n": "true",
            "write.metadata.metrics.default": "counts",
        },
    )
    table.update_schema().rename_column("data", "payload").delete_column("n").commit()
    assert table.metadata.properties == {
        "write.metadata.metrics.column.payload": "full",
        "write.metadata.metrics.default": "counts",
    }


def test_concurrent_adds_of_different_columns_both_land(catalog: SqlCatalog, table: Table) -> None:
    other = catalog.load_table("db.t")
    mine = table.update_schema().add_column("x", StringType())
    other.update_schema().add_column("y", LongType()).commit()
    mine.commit()
    assert mine.attempts == 2
    schema = catalog.load_table("db.t").metadata.schema()
    # The replay took ids after the concurrent add's: no id means two columns.
    assert (schema.find_field("y").field_id, schema.find_field("x").field_id) == (6, 7)
    assert catalog.load_table("db.t").metadata.last_column_id == 7


@pytest.mark.parametrize(
    ("theirs", "mine", "message"),
    [
        (("add_column", "x", StringType()), ("add_column", "x", LongType()), "already exists"),
        (("rename_column", "data", "d"), ("rename_column", "data", "e"), "missing column 'data'"),
        (("delete_column", "n"), ("update_column", "n", LongType()), "missing column 'n'"),
    ],
)
def test_conflicting_concurrent_schema_changes_fail(
    catalog: SqlCatalog, table: Table, theirs: tuple, mine: tuple, message: str
) -> None:
    other = catalog.load_table("db.t")
    update = getattr(table.update_schema(), mine[0])(*mine[1:])
    getattr(other.update_schema(), theirs[0])(*theirs[1:]).commit()
    before = catalog.load_table("db.t").metadata_location
    with pytest.raises(CommitConflictError, match=message):
        update.commit()
    assert catalog.load_table("db.t").metadata_location == before


def test_name_now_meaning_another_column_is_a_conflict(catalog: SqlCatalog, table: Table) -> None:
    other = catalog.load_table("db.t")
    update = table.update_schema().update_column_doc("data", "the payload")
    other.update_schema().rename_column("data", "old").add_column("data", StringType()).commit()
    with pytest.raises(CommitConflictError, match=r"'data' \(field id 2, now 6\)"):
        update.commit()


def test_apply_and_schema_commit_nothing(catalog: SqlCatalog, table: Table) -> None:
    before = table.metadata_location
    update = table.update_schema().add_column("x", StringType())
    assert update.schema().find_field("x").field_id == 6
    assert update.apply().schema().find_field("x").field_id == 6
    assert catalog.load_table("db.t").metadata_location == before
