"""Partition specs: JSON, partition types, paths like Java's, validation and evolution."""

from __future__ import annotations

import datetime as dt
import json
import re
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg import transforms as pyt
from pyiceberg import types as pyty

from icecore.errors import ValidationError
from icecore.spec.partitioning import (
    UNPARTITIONED,
    PartitionField,
    PartitionSpec,
    PartitionSpecUpdate,
    default_partition_name,
    java_url_encode,
)
from icecore.spec.schema import Schema
from icecore.spec.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    TruncateTransform,
    VoidTransform,
    YearTransform,
    parse_transform,
)
from icecore.spec.types import (
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)

SCHEMA = Schema(
    (
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "ts", TimestamptzType(), required=True),
        NestedField(3, "category", StringType(), required=True),
        NestedField(4, "data", StringType()),
    )
)

# Like the spec Iceberg Java's tests evolve: identity(category), day(ts), bucket[16](id) "shard".
PARTITIONED = PartitionSpec(
    0,
    (
        PartitionField(3, 1000, IdentityTransform(), "category"),
        PartitionField(2, 1001, DayTransform(), "ts_day"),
        PartitionField(1, 1002, BucketTransform(16), "shard"),
    ),
)


def fields_of(spec: PartitionSpec) -> list[tuple[int, int, str, str]]:
    return [(f.source_id, f.field_id, f.name, str(f.transform)) for f in spec.fields]


def update(spec: PartitionSpec, version: int, **kwargs: object) -> PartitionSpecUpdate:
    return PartitionSpecUpdate(spec, SCHEMA, version, **kwargs)  # type: ignore[arg-type]


# --- JSON --------------------------------------------------------------------------------


def test_json_round_trip_keeps_ids_names_and_transforms() -> None:
    obj = PARTITIONED.to_json()
    assert obj == {
        "spec-id": 0,
        "fields": [
            {"name": "category", "transform": "identity", "source-id": 3, "field-id": 1000},
            {"name": "ts_day", "transform": "day", "source-id": 2, "field-id": 1001},
            {"name": "shard", "transform": "bucket[16]", "source-id": 1, "field-id": 1002},
        ],
    }
    assert PartitionSpec.from_json(json.loads(json.dumps(obj))) == PARTITIONED


def test_v1_json_without_field_ids_numbers_fields_from_1000() -> None:
    spec = PartitionSpec.from_json(
        {
            "spec-id": 0,
            "fields": [
                {"name": "a", "transform": "identity", "source-id": 3},
                {"name": "b", "transform": "void", "source-id": 2},
            ],
        }
    )
    assert [f.field_id for f in spec.fields] == [1000, 1001]
    assert spec.last_assigned_field_id == 1001


def test_bad_json_and_duplicates_are_rejected() -> None:
    with pytest.raises(ValidationError, match="lacks 'source-id'"):
        PartitionSpec.from_json({"fields": [{"name": "a", "transform": "identity"}]})
    with pytest.raises(ValidationError, match="unknown partition transform 'zorder'"):
        PartitionSpec.from_json(
            {"fields": [{"name": "a", "transform": "zorder", "source-id": 1, "field-id": 1000}]}
        )
    with pytest.raises(ValidationError, match="repeats a field name"):
        PartitionSpec(
            1,
            (
                PartitionField(1, 1000, IdentityTransform(), "x"),
                PartitionField(2, 1001, DayTransform(), "x"),
            ),
        )
    with pytest.raises(ValidationError, match="repeats a field id"):
        PartitionSpec(
            1,
            (
                PartitionField(1, 1000, IdentityTransform(), "x"),
                PartitionField(2, 1000, DayTransform(), "y"),
            ),
        )
    with pytest.raises(ValidationError, match="empty name"):
        PartitionSpec(1, (PartitionField(1, 1000, IdentityTransform(), ""),))


def test_unpartitioned_and_void_only_specs() -> None:
    assert UNPARTITIONED.is_unpartitioned
    assert UNPARTITIONED.last_assigned_field_id == 999
    assert PartitionSpec(1, (PartitionField(1, 1000, VoidTransform(), "id"),)).is_unpartitioned
    assert not PARTITIONED.is_unpartitioned


# --- partition type and validation -------------------------------------------------------


def test_partition_type_has_partition_ids_names_and_optional_result_types() -> None:
    spec = PartitionSpec(
        3,
        (
            *PARTITIONED.fields,
            PartitionField(4, 1003, TruncateTransform(4), "prefix"),
            PartitionField(2, 1004, HourTransform(), "ts_hour"),
            PartitionField(4, 1005, VoidTransform(), "gone"),
        ),
    )
    assert spec.partition_type(SCHEMA) == StructType(
        NestedField(1000, "category", StringType(), required=False),
        NestedField(1001, "ts_day", DateType(), required=False),
        NestedField(1002, "shard", IntegerType(), required=False),
        NestedField(1003, "prefix", StringType(), required=False),
        NestedField(1004, "ts_hour", IntegerType(), required=False),
        NestedField(1005, "gone", StringType(), required=False),
    )
    assert UNPARTITIONED.partition_type(SCHEMA) == StructType()


def test_partition_type_of_fields_whose_source_was_dropped() -> None:
    """Old specs may point at dropped columns; fixed result types keep their manifests readable."""
    old = PartitionSpec(
        2,
        (
            PartitionField(99, 1000, BucketTransform(4), "b"),
            PartitionField(98, 1001, DayTransform(), "d"),
            PartitionField(98, 1002, YearTransform(), "y"),
        ),
    )
    assert old.partition_type(SCHEMA) == StructType(
        NestedField(1000, "b", IntegerType(), required=False),
        NestedField(1001, "d", DateType(), required=False),
        NestedField(1002, "y", IntegerType(), required=False),
    )
    for transform in (IdentityTransform(), TruncateTransform(3), VoidTransform()):
        spec = PartitionSpec(2, (PartitionField(99, 1000, transform, "old"),))
        with pytest.raises(
            ValidationError,
            match=rf"spec 2 field 'old' \({re.escape(str(transform))} of source id 99\)"
            r".*not in schema 0.*unknown without its source",
        ):
            spec.partition_type(SCHEMA)


NESTED = Schema(
    (
        NestedField(1, "id", LongType(), required=True),
        NestedField(
            2,
            "location",
            StructType(NestedField(3, "lat", DoubleType()), NestedField(4, "city", StringType())),
        ),
        NestedField(5, "tags", ListType(6, StructType(NestedField(7, "name", StringType())))),
        NestedField(8, "props", MapType(9, StringType(), 10, LongType())),
        NestedField(11, "price", DecimalType(9, 2)),
    )
)


def test_validate_accepts_struct_nested_sources_and_void_fields_without_source() -> None:
    PartitionSpec(
        1,
        (
            PartitionField(4, 1000, TruncateTransform(2), "city_prefix"),
            PartitionField(11, 1001, BucketTransform(4), "price_bucket"),
            PartitionField(404, 1002, VoidTransform(), "dropped_long_ago"),
        ),
    ).validate(NESTED)


@pytest.mark.parametrize(
    ("field", "problem"),
    [
        (PartitionField(404, 1000, IdentityTransform(), "x"), "source id 404 is not in schema"),
        (PartitionField(2, 1000, IdentityTransform(), "x"), "'location' is not a primitive"),
        (PartitionField(7, 1000, IdentityTransform(), "x"), "inside a list or map"),
        (PartitionField(9, 1000, IdentityTransform(), "x"), "inside a list or map"),
        (PartitionField(10, 1000, BucketTransform(2), "x"), "inside a list or map"),
        (PartitionField(3, 1000, BucketTransform(2), "x"), "bucket\\[2\\] cannot be applied to"),
        (PartitionField(1, 1000, DayTransform(), "x"), "day cannot be applied to type long"),
    ],
)
def test_validate_rejects_and_names_the_field(field: PartitionField, problem: str) -> None:
    spec = PartitionSpec(7, (field,))
    with pytest.raises(ValidationError, match=f"partition spec 7 field 'x'.*{problem}"):
        spec.validate(NESTED)


def test_compatible_with_ignores_ids_only() -> None:
    renumbered = PartitionSpec(
        5,
        tuple(
            PartitionField(f.source_id, f.field_id + 10, f.transform, f.name)
            for f in PARTITIONED.fields
        ),
    )
    assert renumbered.compatible_with(PARTITIONED)
    renamed = PartitionSpec(
        5, (*PARTITIONED.fields[:2], PartitionField(1, 1002, BucketTransform(16), "b"))
    )
    assert not renamed.compatible_with(PARTITIONED)
    rebucketed = PartitionSpec(
        5, (*PARTITIONED.fields[:2], PartitionField(1, 1002, BucketTransform(8), "shard"))
    )
    assert not rebucketed.compatible_with(PARTITIONED)
    assert not PartitionSpec(5, PARTITIONED.fields[:2]).compatible_with(PARTITIONED)
    assert UNPARTITIONED.compatible_with(PartitionSpec(3))


# --- partition paths (Iceberg Java's TestPartitionPaths) ---------------------------------

PATH_SCHEMA = Schema(
    (
        NestedField(1, "id", IntegerType(), required=True),
        NestedField(2, "data", StringType()),
        NestedField(3, "ts", TimestampType()),
        NestedField(4, '"esc"#1', StringType()),
        NestedField(5, "d", DateType()),
        NestedField(6, "price", DecimalType(9, 2)),
        NestedField(7, "raw", StringType()),
    )
)


def test_partition_path_of_hour_and_bucket() -> None:
    spec = PartitionSpec(
        0,
        (
            PartitionField(3, 1000, HourTransform(), "ts_hour"),
            PartitionField(1, 1001, BucketTransform(10), "id_bucket"),
        ),
    )
    ts = 1512123175038194  # 2017-12-01T10:12:55.038194
    values = (
        HourTransform().apply(ts, TimestampType()),
        BucketTransform(10).apply(1, IntegerType()),
    )
    assert values == (420034, 6)
    assert spec.partition_path(values, PATH_SCHEMA) == "ts_hour=2017-12-01-10/id_bucket=6"


def test_partition_path_escapes_values_and_names_like_url_encoder() -> None:
    spec = PartitionSpec(
        0,
        (
            PartitionField(2, 1000, IdentityTransform(), "data"),
            PartitionField(2, 1001, TruncateTransform(10), "data_trunc"),
        ),
    )
    assert (
        spec.partition_path(("a/b/c/d", "a/b/c/d"), PATH_SCHEMA)
        == "data=a%2Fb%2Fc%2Fd/data_trunc=a%2Fb%2Fc%2Fd"
    )
    escaped = PartitionSpec(0, (PartitionField(4, 1000, IdentityTransform(), '"esc"#1'),))
    assert escaped.partition_path(("a/b/c/d",), PATH_SCHEMA) == "%22esc%22%231=a%2Fb%2Fc%2Fd"


def test_partition_path_formats_dates_decimals_nulls_and_void() -> None:
    spec = PartitionSpec(
        0,
        (
            PartitionField(5, 1000, IdentityTransform(), "d"),
            PartitionField(3, 1001, DayTransform(), "ts_day"),
            PartitionField(6, 1002, IdentityTransform(), "price"),
            PartitionField(2, 1003, IdentityTransform(), "data"),
            PartitionField(7, 1004, VoidTransform(), "raw"),
            PartitionField(3, 1005, MonthTransform(), "ts_month"),
            PartitionField(3, 1006, YearTransform(), "ts_year"),
        ),
    )
    values = (19729, 19729, Decimal("-1.5"), None, None, 648, 54)
    assert spec.partition_path(values, PATH_SCHEMA) == (
        "d=2024-01-07/ts_day=2024-01-07/price=-1.50/data=null/raw=null/ts_month=2024-01/ts_year=2024"
    )
    with pytest.raises(ValidationError, match="has 7 fields, got 2 partition values"):
        spec.partition_path((1, 2), PATH_SCHEMA)


@pytest.mark.parametrize(
    ("text", "encoded"),
    [
        ("a/b c~d*e.f-g_h", "a%2Fb+c%7Ed*e.f-g_h"),  # Java keeps * and escapes ~
        ("é€😀", "%C3%A9%E2%82%AC%F0%9F%98%80"),
        ("=&?%+", "%3D%26%3F%25%2B"),
        ("", ""),
    ],
)
def test_java_url_encode_matches_jdk(text: str, encoded: str) -> None:
    assert java_url_encode(text) == encoded


def test_partition_values_of_rows_read_from_a_parquet_file(tmp_path: Path) -> None:
    """Rows as a reader sees them: pyarrow timestamps become micros, then partition values."""
    table = pa.table(
        {
            "id": pa.array([1, -7, 2**40, None], pa.int64()),
            "ts": pa.array(
                [
                    dt.datetime(2024, 1, 7, 13, 5, tzinfo=dt.UTC),
                    dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC),
                    dt.datetime(2000, 2, 29, tzinfo=dt.UTC),
                    dt.datetime(1970, 1, 1, tzinfo=dt.UTC),
                ],
                pa.timestamp("us", tz="UTC"),
            ),
            "category": pa.array(["books/new", "a b", "ü", None]),
        }
    )
    path = tmp_path / "rows.parquet"
    pq.write_table(table, path)
    rows = pq.read_table(path)
    spec = PartitionSpec(
        0,
        (
            PartitionField(2, 1000, DayTransform(), "ts_day"),
            PartitionField(1, 1001, BucketTransform(8), "id_bucket_8"),
            PartitionField(3, 1002, IdentityTransform(), "category"),
        ),
    )
    micros = rows.column("ts").cast(pa.int64()).to_pylist()
    ids = rows.column("id").to_pylist()
    categories = rows.column("category").to_pylist()
    day_ref = pyt.DayTransform().transform(pyty.TimestamptzType())
    bucket_ref = pyt.BucketTransform(8).transform(pyty.LongType())
    paths = []
    for ts, id_, category in zip(micros, ids, categories, strict=True):
        values = (
            DayTransform().apply(ts, TimestamptzType()),
            BucketTransform(8).apply(id_, LongType()),
            IdentityTransform().apply(category, StringType()),
        )
        assert values[:2] == (day_ref(ts), bucket_ref(id_))
        paths.append(spec.partition_path(values, SCHEMA))
    assert paths == [
        f"ts_day=2024-01-07/id_bucket_8={bucket_ref(1)}/category=books%2Fnew",
        f"ts_day=1969-12-31/id_bucket_8={bucket_ref(-7)}/category=a+b",
        f"ts_day=2000-02-29/id_bucket_8={bucket_ref(2**40)}/category=%C3%BC",
        "ts_day=1970-01-01/id_bucket_8=null/category=null",
    ]


# --- default names ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("transform", "name"),
    [
        ("identity", "ts"),
        ("bucket[16]", "ts_bucket_16"),
        ("truncate[4]", "ts_trunc_4"),
        ("year", "ts_year"),
        ("month", "ts_month"),
        ("day", "ts_day"),
        ("hour", "ts_hour"),
        ("void", "ts_null"),
    ],
)
def test_default_partition_names_follow_java_update_api(transform: str, name: str) -> None:
    assert default_partition_name("ts", parse_transform(transform)) == name


# --- evolution ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize(
    ("source", "transform", "expected"),
    [
        ("category", "identity", (3, 1000, "category", "identity")),
        ("ts", "year", (2, 1000, "ts_year", "year")),
        ("ts", "month", (2, 1000, "ts_month", "month")),
        ("ts", "day", (2, 1000, "ts_day", "day")),
        ("ts", "hour", (2, 1000, "ts_hour", "hour")),
        ("id", "bucket[16]", (1, 1000, "id_bucket_16", "bucket[16]")),
        ("data", TruncateTransform(4), (4, 1000, "data_trunc_4", "truncate[4]")),
    ],
)
def test_add_first_field(version: int, source: str, transform: object, expected: tuple) -> None:
    u = update(UNPARTITIONED, version).add_field(source, transform)  # type: ignore[arg-type]
    spec = u.apply(1)
    assert spec.spec_id == 1
    assert fields_of(spec) == [expected]
    assert u.last_partition_id == 1000


@pytest.mark.parametrize("version", [1, 2])
def test_add_to_existing_and_multiple_adds(version: int) -> None:
    spec = (
        update(PARTITIONED, version)
        .add_field("data", "truncate[4]", "prefix")
        .add_field("id", "bucket[8]")
        .add_field("category", "truncate[2]")
        .apply(1)
    )
    assert fields_of(spec)[3:] == [
        (4, 1003, "prefix", "truncate[4]"),
        (1, 1004, "id_bucket_8", "bucket[8]"),
        (3, 1005, "category_trunc_2", "truncate[2]"),
    ]


@pytest.mark.parametrize("version", [1, 2])
def test_adding_hour_to_day_is_allowed_when_day_already_exists(version: int) -> None:
    by_day = update(UNPARTITIONED, version).add_field("ts", "day").apply(1)
    by_hour = update(by_day, version).add_field("ts", "hour").apply(2)
    assert fields_of(by_hour) == [(2, 1000, "ts_day", "day"), (2, 1001, "ts_hour", "hour")]


@pytest.mark.parametrize("version", [1, 2])
def test_remove_field(version: int) -> None:
    spec = update(PARTITIONED, version).remove_field("category").apply(1)
    if version == 1:  # soft delete: the id stays taken, the field always null
        assert fields_of(spec) == [
            (3, 1000, "category", "void"),
            (2, 1001, "ts_day", "day"),
            (1, 1002, "shard", "bucket[16]"),
        ]
    else:
        assert fields_of(spec) == [(2, 1001, "ts_day", "day"), (1, 1002, "shard", "bucket[16]")]


@pytest.mark.parametrize("version", [1, 2])
def test_rename_field(version: int) -> None:
    spec = update(PARTITIONED, version).rename_field("shard", "id_bucket").apply(1)
    assert fields_of(spec)[2] == (1, 1002, "id_bucket", "bucket[16]")


@pytest.mark.parametrize("version", [1, 2])
def test_multiple_changes(version: int) -> None:
    spec = (
        update(PARTITIONED, version)
        .rename_field("shard", "id_bucket")
        .remove_field("ts_day")
        .add_field("data", "truncate[4]", "prefix")
        .apply(1)
    )
    kept = [(3, 1000, "category", "identity")]
    if version == 1:
        kept.append((2, 1001, "ts_day", "void"))
    assert fields_of(spec) == [
        *kept,
        (1, 1002, "id_bucket", "bucket[16]"),
        (4, 1003, "prefix", "truncate[4]"),
    ]


@pytest.mark.parametrize("version", [1, 2])
def test_remove_and_re_add_same_field_changes_nothing(version: int) -> None:
    for name in ("shard", None):
        spec = (
            update(PARTITIONED, version)
            .remove_field("shard")
            .add_field("id", "bucket[16]", name)
            .apply(0)
        )
        assert spec == PARTITIONED


@pytest.mark.parametrize("version", [1, 2])
def test_remove_and_re_add_same_field_under_a_new_name_renames_it(version: int) -> None:
    spec = (
        update(PARTITIONED, version)
        .remove_field("shard")
        .add_field("id", "bucket[16]", "new_shard")
        .apply(1)
    )
    assert fields_of(spec)[2] == (1, 1002, "new_shard", "bucket[16]")


@pytest.mark.parametrize("version", [1, 2])
def test_replace_transform_under_the_same_name(version: int) -> None:
    by_month = PartitionSpec(0, (PartitionField(2, 1000, MonthTransform(), "ts_transformed"),))
    spec = (
        update(by_month, version)
        .remove_field("ts_transformed")
        .add_field("ts", "day", "ts_transformed")
        .apply(1)
    )
    if version == 1:
        assert fields_of(spec) == [
            (2, 1000, "ts_transformed_1000", "void"),
            (2, 1001, "ts_transformed", "day"),
        ]
    else:
        assert fields_of(spec) == [(2, 1001, "ts_transformed", "day")]


def test_v1_remove_and_add_many_times_keeps_every_id_and_renames_voids() -> None:
    spec = update(UNPARTITIONED, 1).add_field("ts", "day", "ts_date").apply(1)
    spec = update(spec, 1).remove_field("ts_date").apply(2)
    spec = update(spec, 1).add_field("ts", "day", "ts_date").apply(3)
    assert fields_of(spec) == [(2, 1000, "ts_date_1000", "void"), (2, 1001, "ts_date", "day")]
    spec = update(spec, 1).remove_field("ts_date").apply(4)
    spec = update(spec, 1).add_field("ts", "month").apply(5)
    spec = update(spec, 1).rename_field("ts_month", "ts_date").apply(6)
    assert fields_of(spec) == [
        (2, 1000, "ts_date_1000", "void"),
        (2, 1001, "ts_date_1001", "void"),
        (2, 1002, "ts_date", "month"),
    ]
    # positional ids: the n-th field of every v1 spec has id 1000 + n
    assert [f.field_id for f in spec.fields] == [1000, 1001, 1002]


def test_v2_new_ids_continue_after_last_partition_id_even_past_dropped_fields() -> None:
    # ids 1000..1004 were used by specs that are gone from the current one
    u = update(PARTITIONED, 2, last_partition_id=1004).add_field("data", "identity")
    assert fields_of(u.apply(3))[3] == (4, 1005, "data", "identity")
    assert u.last_partition_id == 1005


def test_v2_re_adding_a_field_from_an_earlier_spec_reuses_its_id() -> None:
    spec0 = PARTITIONED
    spec1 = update(spec0, 2).remove_field("shard").apply(1)
    history = (spec0, spec1)
    readded = update(spec1, 2, historical_specs=history).add_field("id", "bucket[16]").apply(2)
    # same source and transform as field 1002 of spec 0: same id and, unnamed, the same name
    assert fields_of(readded)[2] == (1, 1002, "shard", "bucket[16]")
    named = (
        update(spec1, 2, historical_specs=history).add_field("id", "bucket[16]", "shard").apply(2)
    )
    assert fields_of(named)[2] == (1, 1002, "shard", "bucket[16]")
    # a different name means a different field: a fresh id, never 1002
    fresh = update(spec1, 2, historical_specs=history).add_field("id", "bucket[16]", "b16")
    assert fields_of(fresh.apply(2))[2] == (1, 1003, "b16", "bucket[16]")
    # a different transform of the same column never takes an old id
    other = update(spec1, 2, historical_specs=history).add_field("id", "bucket[8]").apply(2)
    assert fields_of(other)[2] == (1, 1003, "id_bucket_8", "bucket[8]")


def test_v1_never_reuses_ids_of_earlier_specs() -> None:
    spec1 = update(PARTITIONED, 1).remove_field("shard").apply(1)
    spec2 = update(spec1, 1, historical_specs=(PARTITIONED,)).add_field("id", "bucket[16]").apply(2)
    assert fields_of(spec2)[2:] == [
        (1, 1002, "shard", "void"),
        (1, 1003, "id_bucket_16", "bucket[16]"),
    ]


def test_nested_sources_get_dotted_default_names() -> None:
    u = PartitionSpecUpdate(UNPARTITIONED, NESTED, 2).add_field("location.city", "truncate[3]")
    spec = u.add_field("location.lat", "identity").apply(1)
    assert fields_of(spec) == [
        (4, 1000, "location.city_trunc_3", "truncate[3]"),
        (3, 1001, "location.lat", "identity"),
    ]


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda u: u.add_field("category"), "duplicate partition field identity\\(category\\)"),
        (lambda u: u.add_field("id", "bucket[16]"), "duplicate partition field bucket\\[16\\]"),
        (lambda u: u.add_field("id", "bucket[16]", "b16"), "conflicts with 'shard'"),
        (
            lambda u: u.add_field("data", "identity", "shard"),
            "duplicate partition field name 'shard'",
        ),
        (
            lambda u: u.add_field("data", "truncate[4]", "prefix").add_field("data", "truncate[4]"),
            "already added",
        ),
        (
            lambda u: u.add_field("data", "truncate[4]", "prefix").add_field(
                "data", "truncate[6]", "prefix"
            ),
            "already added",
        ),
        (
            lambda u: u.add_field("data", "truncate[4]", "prefix").remove_field("prefix"),
            "just added",
        ),
        (
            lambda u: u.add_field("data", "truncate[4]", "data_trunc").rename_field(
                "data_trunc", "p"
            ),
            "cannot rename newly added partition field 'data_trunc'",
        ),
        (
            lambda u: u.add_field("ts", "hour").add_field("ts", "month"),
            "redundant partition field month",
        ),
        (lambda u: u.remove_field("moon"), "cannot find partition field to remove: 'moon'"),
        (
            lambda u: u.rename_field("shake", "seal"),
            "cannot find partition field to rename: 'shake'",
        ),
        (lambda u: u.rename_field("shard", "x").remove_field("shard"), "rename and remove"),
        (lambda u: u.remove_field("shard").rename_field("shard", "x"), "remove and rename"),
        (lambda u: u.add_field("nope"), "has no field 'nope'"),
        (
            lambda u: u.add_field("category", "day"),
            "day of 'category': it does not apply to type string",
        ),
        (lambda u: u.add_field("id", "zorder"), "unknown partition transform"),
    ],
)
def test_invalid_changes_are_rejected(version: int, change: object, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        change(update(PARTITIONED, version))  # type: ignore[operator]


def test_two_time_transforms_added_in_one_update_are_redundant() -> None:
    with pytest.raises(ValidationError, match=r"redundant partition field hour\(ts\).*'ts_day'"):
        update(UNPARTITIONED, 2).add_field("ts", "day").add_field("ts", "hour")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda u: u.add_field("id", "bucket[4]", "data"), "named like column 'data'"),
        (lambda u: u.rename_field("shard", "data"), "named like column 'data'"),
        (lambda u: u.rename_field("shard", "ts_day"), "repeats a field name"),
    ],
)
def test_apply_rejects_names_that_clash(change: object, message: str) -> None:
    u = change(update(PARTITIONED, 2))  # type: ignore[operator]
    with pytest.raises(ValidationError, match=message):
        u.apply(1)


def test_a_partition_may_be_named_like_its_own_source_column() -> None:
    spec = update(UNPARTITIONED, 2).add_field("id", "bucket[4]", "id").apply(1)
    assert fields_of(spec) == [(1, 1000, "id", "bucket[4]")]


def test_updates_of_unsupported_format_versions_are_refused() -> None:
    with pytest.raises(ValidationError, match="format version 3"):
        PartitionSpecUpdate(PARTITIONED, SCHEMA, 3)
