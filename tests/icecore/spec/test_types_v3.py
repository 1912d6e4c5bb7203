"""Format v3 types and default values: the JSON stays byte for byte what metadata said, every
mapping (binary bounds, Avro, Arrow/Parquet, Spark, transforms, literals) follows the spec,
and the columns icecore cannot process are named so that jobs can refuse them."""

from __future__ import annotations

import io
import json
import pickle
import uuid
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg import conversions as pyi_conversions
from pyiceberg import transforms as pyi_transforms
from pyiceberg import types as pyi_types
from pyiceberg.schema import Schema as PyIcebergSchema
from pyspark.sql import types as T

from icecore.avro.decoder import compile_decoder
from icecore.avro.schema import manifest_entry_avro_schema, to_avro
from icecore.data.arrow_schema import FIELD_ID_KEY, arrow_schema, arrow_type
from icecore.errors import ValidationError
from icecore.expressions.literals import to_literal
from icecore.spec.conversions import (
    from_bytes,
    to_bytes,
    value_from_json,
    value_to_json,
)
from icecore.spec.defaults import (
    check_defaults,
    initial_default_value,
    with_defaults,
    write_default_value,
)
from icecore.spec.hashing import bucket_hash
from icecore.spec.manifest_list import PartitionFieldStats
from icecore.spec.schema import Schema, stored_fields, unsupported_columns
from icecore.spec.transforms import parse_transform
from icecore.spec.types import (
    JSON_NULL,
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    GeographyType,
    GeometryType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UnknownType,
    UUIDType,
    VariantType,
    type_from_json,
)
from spark_jobs.schema import TypeNotSupported, check_spark_readable, spark_schema, spark_type

NS = TimestampNanoType()
TZ_NS = TimestamptzNanoType()
# 2017-11-16T22:31:08 UTC, the spec's Appendix B instant, by hand: 17486 days after the epoch
# (47 years of which 12 leap years: 47 * 365 + 12 = 17167 days to 2017-01-01, then 319 more
# to November 16th), plus 22:31:08 of that day.
DAYS_2017_11_16 = 17486
SECONDS = DAYS_2017_11_16 * 86_400 + (22 * 60 + 31) * 60 + 8
NANOS = SECONDS * 1_000_000_000


def test_the_hand_computed_instant_is_right() -> None:
    assert datetime(2017, 11, 16, 22, 31, 8, tzinfo=UTC).timestamp() == SECONDS
    assert date(1970, 1, 1) + timedelta(days=DAYS_2017_11_16) == date(2017, 11, 16)


# JSON forms of the types (Appendix C) ------------------------------------------------------

TYPE_TEXTS = {
    "timestamp_ns": NS,
    "timestamptz_ns": TZ_NS,
    "unknown": UnknownType(),
    "variant": VariantType(),
    "geometry": GeometryType(),
    "geometry(srid:4326)": GeometryType("srid:4326"),  # the spec's example
    "geometry(OGC:CRS84)": GeometryType(),
    "geometry( EPSG:3857 )": GeometryType("EPSG:3857"),  # whitespace around parameters
    "geometry(projjson:my_crs_property)": GeometryType("projjson:my_crs_property"),
    "geometry('EPSG:4326')": GeometryType("EPSG:4326"),  # PyIceberg 0.12's spelling
    "geography": GeographyType(),
    "geography(srid:4326, spherical)": GeographyType("srid:4326"),  # the spec's example
    "geography(EPSG:4326,karney)": GeographyType("EPSG:4326", "karney"),
    "geography( OGC:CRS84 , Vincenty )": GeographyType(None, "vincenty"),
    "geography(EPSG:4326)": GeographyType("EPSG:4326", "spherical"),
}


@pytest.mark.parametrize(("text", "expected"), TYPE_TEXTS.items())
def test_v3_type_json_is_kept_exactly(text: str, expected: Any) -> None:
    parsed = type_from_json(text)
    assert parsed == expected
    assert parsed.to_json() == text  # never normalized: metadata rewrites stay byte-identical
    field = NestedField(1, "c", parsed)
    assert NestedField.from_json(json.loads(json.dumps(field.to_json()))).to_json() == {
        "id": 1,
        "name": "c",
        "required": False,
        "type": text,
    }


def test_geo_parameters_and_equality_follow_the_spec_defaults() -> None:
    assert GeometryType().crs == "OGC:CRS84"
    assert GeographyType().crs == "OGC:CRS84"
    assert GeographyType().algorithm == "spherical"
    # Java compares CRS case-insensitively; equal types hash alike.
    assert type_from_json("geometry(ogc:crs84)") == GeometryType()
    assert hash(type_from_json("geometry(ogc:crs84)")) == hash(GeometryType())
    assert GeometryType("EPSG:4326") != GeometryType()
    assert GeographyType("EPSG:4326", "karney") != GeographyType("EPSG:4326")
    assert GeometryType("EPSG:4326") != GeographyType("EPSG:4326")
    # Built here, the canonical forms of Appendix C.
    assert GeometryType("EPSG:4326").to_json() == "geometry(EPSG:4326)"
    assert GeographyType("EPSG:4326").to_json() == "geography(EPSG:4326, spherical)"
    assert GeographyType().to_json() == "geography"


def test_geography_algorithms_outside_the_spec() -> None:
    with pytest.raises(ValidationError, match="edge algorithm 'planar'"):
        GeographyType("EPSG:4326", "planar")
    # ...but metadata naming one (PyIceberg 0.12 allows it) stays readable and intact.
    text = "geography('EPSG:4326', 'planar')"
    assert type_from_json(text).to_json() == text
    with pytest.raises(ValidationError, match="CRS cannot be empty"):
        type_from_json("geometry()")


@pytest.mark.parametrize("bad", ["timestamp_nanos", "timestamp_ms", "variant(1)", "geometries"])
def test_near_miss_type_names_are_rejected(bad: str) -> None:
    with pytest.raises(ValidationError, match="unknown Iceberg type"):
        type_from_json(bad)


def test_variant_is_neither_primitive_nor_nested() -> None:
    """Spec "Semi-structured Types": so it can be neither a partition source nor a key."""
    assert not VariantType().is_primitive
    assert GeometryType().is_primitive and UnknownType().is_primitive and NS.is_primitive
    for transform in ("identity", "bucket[4]", "truncate[4]", "day", "void"):
        assert parse_transform(transform).can_transform(VariantType()) is (transform == "void")


def test_unknown_must_be_optional() -> None:
    with pytest.raises(ValidationError, match="must be optional"):
        NestedField(1, "u", UnknownType(), required=True)
    with pytest.raises(ValidationError, match="must be optional"):
        ListType(2, UnknownType(), element_required=True)
    with pytest.raises(ValidationError, match="keys are required"):
        MapType(3, UnknownType(), 4, StringType())
    with pytest.raises(ValidationError, match="must be optional"):
        MapType(3, StringType(), 4, UnknownType(), value_required=True)
    ListType(2, UnknownType(), element_required=False)


# A v3 schema with every new type, nested too, and defaults of every kind.
V3_SCHEMA_JSON = {
    "type": "struct",
    "schema-id": 7,
    "identifier-field-ids": [1],
    "fields": [
        # Appendix C's own example of defaults.
        {
            "id": 1,
            "name": "id",
            "required": True,
            "type": "uuid",
            "initial-default": "0db3e2a8-9d1d-42b9-aa7b-74ebe558dceb",
            "write-default": "ec5911be-b0a7-458c-8438-c9a3e53cffae",
        },
        {"id": 2, "name": "event_ns", "required": True, "type": "timestamp_ns"},
        {"id": 3, "name": "seen_ns", "required": False, "type": "timestamptz_ns", "doc": "x"},
        {"id": 4, "name": "later", "required": False, "type": "unknown"},
        {"id": 5, "name": "payload", "required": False, "type": "variant"},
        {"id": 6, "name": "shape", "required": False, "type": "geometry(srid:4326)"},
        {"id": 7, "name": "area", "required": False, "type": "geography(srid:4326, spherical)"},
        {
            "id": 8,
            "name": "point",
            "required": False,
            "type": {
                "type": "struct",
                "fields": [
                    {
                        "id": 9,
                        "name": "x",
                        "required": True,
                        "type": "int",
                        "initial-default": 0,
                        "write-default": 0,
                    },
                    {
                        "id": 10,
                        "name": "y",
                        "required": True,
                        "type": "int",
                        "initial-default": 0,
                        "write-default": 0,
                    },
                    {"id": 11, "name": "where", "required": False, "type": "geometry"},
                ],
            },
            "initial-default": {},
            "write-default": None,
        },
        {
            "id": 12,
            "name": "tags",
            "required": False,
            "type": {
                "type": "list",
                "element-id": 13,
                "element": "variant",
                "element-required": False,
            },
        },
        {
            "id": 14,
            "name": "amount",
            "required": False,
            "type": "decimal(9, 2)",
            "initial-default": "14.20",
            "write-default": "0.00",
        },
        {
            "id": 15,
            "name": "blob",
            "required": False,
            "type": "binary",
            "initial-default": "000102FF",  # Java's upper-case hex, kept as is
        },
        {
            "id": 16,
            "name": "ratio",
            "required": False,
            "type": "float",
            "initial-default": 1.0,
            "write-default": None,
        },
        {
            "id": 17,
            "name": "at_ns",
            "required": False,
            "type": "timestamptz_ns",
            "initial-default": "2017-11-16T22:31:08.123456789+00:00",
        },
    ],
}


def test_v3_schema_round_trips_byte_for_byte() -> None:
    text = json.dumps(V3_SCHEMA_JSON)
    schema = Schema.from_json(json.loads(text))
    assert json.dumps(schema.to_json()) == text


def test_explicit_null_defaults_are_kept_apart_from_missing_ones() -> None:
    point = Schema.from_json(V3_SCHEMA_JSON).find_field("point")
    assert point.write_default is JSON_NULL
    assert write_default_value(point) is None
    assert "write-default" in point.to_json() and point.to_json()["write-default"] is None
    assert "initial-default" not in Schema.from_json(V3_SCHEMA_JSON).find_field(2).to_json()


def test_unsupported_columns_names_what_icecore_cannot_process() -> None:
    schema = Schema.from_json(V3_SCHEMA_JSON)
    assert unsupported_columns(schema) == [
        "payload",
        "shape",
        "area",
        "point.where",
        "tags.element",
    ]
    assert unsupported_columns(schema.fields[:4]) == []
    assert not VariantType().is_readable
    assert not GeometryType().is_readable and not GeographyType().is_readable
    assert NS.is_readable and UnknownType().is_readable
    assert not schema.find_type("point").is_readable
    assert not schema.find_type("tags").is_readable
    assert MapType(20, StringType(), 21, GeometryType()).is_readable is False


def test_stored_fields_leave_unknown_columns_out_of_data_files() -> None:
    fields = (
        NestedField(1, "a", LongType()),
        NestedField(2, "u", UnknownType()),
        NestedField(
            3, "s", StructType(NestedField(4, "u2", UnknownType()), NestedField(5, "b", NS))
        ),
    )
    kept = stored_fields(fields)
    assert [f.name for f in kept] == ["a", "s"]
    assert [f.name for f in kept[1].field_type.fields] == ["b"]  # type: ignore[attr-defined]


# Default values (spec "Default values", Appendix D JSON single-value serialization) -------

# The spec's Appendix D examples: (type, JSON, in-memory value).
SPEC_VALUES: list[tuple[Any, Any, Any]] = [
    (BooleanType(), True, True),
    (IntegerType(), 34, 34),
    (LongType(), 34, 34),
    (FloatType(), 1.0, 1.0),
    (DoubleType(), 1.0, 1.0),
    (DecimalType(9, 2), "14.20", Decimal("14.20")),
    (DecimalType(1, -20), "2E+20", Decimal("2E+20")),
    (DateType(), "2017-11-16", DAYS_2017_11_16),
    (TimeType(), "22:31:08.123456", (SECONDS % 86_400) * 1_000_000 + 123_456),
    (TimestampType(), "2017-11-16T22:31:08.123456", SECONDS * 1_000_000 + 123_456),
    (TimestamptzType(), "2017-11-16T22:31:08.123456+00:00", SECONDS * 1_000_000 + 123_456),
    (NS, "2017-11-16T22:31:08.123456789", NANOS + 123_456_789),
    (TZ_NS, "2017-11-16T22:31:08.123456789+00:00", NANOS + 123_456_789),
    (StringType(), "iceberg", "iceberg"),
    (UUIDType(), "f79c3e09-677c-4bbd-a479-3f349cb785e7", uuid.UUID(bytes=bytes.fromhex(
        "f79c3e09677c4bbda4793f349cb785e7"))),
    (FixedType(4), "000102ff", b"\x00\x01\x02\xff"),
    (BinaryType(), "000102ff", b"\x00\x01\x02\xff"),
    (
        StructType(NestedField(1, "a", IntegerType()), NestedField(2, "b", StringType())),
        {"1": 1, "2": "bar"},
        {"a": 1, "b": "bar"},
    ),
    (ListType(3, IntegerType()), [1, 2, 3], [1, 2, 3]),
    (MapType(4, StringType(), 5, IntegerType()), {"keys": ["a", "b"], "values": [1, 2]},
     {"a": 1, "b": 2}),
]  # fmt: skip


@pytest.mark.parametrize(("t", "text", "value"), SPEC_VALUES, ids=lambda x: str(x)[:30])
def test_json_single_values_of_the_spec(t: Any, text: Any, value: Any) -> None:
    assert value_from_json(t, text) == value
    assert value_to_json(t, value) == text


@pytest.mark.parametrize(
    ("t", "text", "value"),
    # A struct field's own default is {} (see the point tests); nested in lists it has values.
    [c for c in SPEC_VALUES if not isinstance(c[0], StructType)],
    ids=lambda x: str(x)[:30],
)
def test_defaults_round_trip_and_give_the_in_memory_value(t: Any, text: Any, value: Any) -> None:
    field = NestedField(1, "c", t, initial_default=text, write_default=text)
    as_json = json.dumps(field.to_json())
    again = NestedField.from_json(json.loads(as_json))
    assert json.dumps(again.to_json()) == as_json
    assert initial_default_value(again) == value
    assert write_default_value(again) == value
    built = with_defaults(NestedField(1, "c", t), initial=value, write=value)
    assert built.initial_default == text and initial_default_value(built) == value


def test_pyiceberg_reads_our_defaults_as_the_same_values() -> None:
    """PyIceberg 0.12 parses defaults of the microsecond types (it has no JSON form for the
    nanosecond ones); its values, in icecore's representation, are ours."""
    epoch = datetime(1970, 1, 1)

    def ours(value: Any) -> Any:
        if isinstance(value, datetime):
            naive = value.replace(tzinfo=None) - (value.utcoffset() or timedelta())
            return (naive - epoch) // timedelta(microseconds=1)
        if isinstance(value, date):
            return (value - epoch.date()).days
        return value

    fields = [
        NestedField(i, f"c{i}", t, initial_default=text)
        for i, (t, text, _) in enumerate(SPEC_VALUES[:17], start=1)
        if not isinstance(t, TimestampNanoType | TimestamptzNanoType | TimeType)
        and not (isinstance(t, DecimalType) and t.scale < 0)
    ]
    payload = json.dumps(Schema(tuple(fields)).to_json())
    theirs = PyIcebergSchema.model_validate_json(payload)
    for field in fields:
        other = theirs.find_field(field.field_id)
        assert ours(other.initial_default) == initial_default_value(field), field.name


def test_the_spec_point_example() -> None:
    """Spec "Default values": `point` defaults to `{}` or null, its fields to 0."""
    x = NestedField(9, "x", IntegerType(), True, initial_default=0, write_default=0)
    y = NestedField(10, "y", IntegerType(), True, initial_default=0, write_default=0)
    struct = StructType(x, y)
    assert initial_default_value(NestedField(8, "point", struct)) is None
    with_empty = NestedField(8, "point", struct, initial_default={}, write_default={})
    assert initial_default_value(with_empty) == {"x": 0, "y": 0}
    assert write_default_value(with_empty) == {"x": 0, "y": 0}
    # A field value given in the struct's default wins over the field's own default.
    partial = NestedField(8, "point", struct, initial_default={"10": -1})
    assert initial_default_value(partial) == {"x": 0, "y": -1}
    # Nested structs: each level takes its fields' defaults.
    outer = NestedField(
        20, "outer", StructType(NestedField(8, "point", struct, initial_default={})),
        initial_default={},
    )  # fmt: skip
    assert initial_default_value(outer) == {"point": {"x": 0, "y": 0}}
    assert with_defaults(NestedField(8, "point", struct), initial={}).initial_default == {}
    with pytest.raises(ValidationError, match="only be null or"):
        with_defaults(NestedField(8, "point", struct), initial={"x": 1})


def test_struct_values_inside_a_default_miss_fields_as_null() -> None:
    """Appendix D: a struct value omits its null fields (Java writes none), so inside a list
    a missing field is null; only a struct field's own default falls back to its fields'."""
    element = StructType(
        NestedField(31, "a", IntegerType(), initial_default=5), NestedField(32, "b", StringType())
    )
    field = NestedField(30, "l", ListType(33, element), initial_default=[{"32": "x"}])
    assert initial_default_value(field) == [{"a": None, "b": "x"}]
    assert value_to_json(ListType(33, element), [{"a": None, "b": "x"}]) == [{"32": "x"}]


def test_explicit_null_survives_pickling() -> None:
    """Fields travel to Spark executors pickled; JSON_NULL must stay the one marker."""
    field = NestedField(1, "c", IntegerType(), initial_default=JSON_NULL)
    assert pickle.loads(pickle.dumps(field)).initial_default is JSON_NULL


@pytest.mark.parametrize(
    ("t", "raw", "why"),
    [
        (UnknownType(), 1, "must default to null"),
        (VariantType(), {}, "must default to null"),
        (GeometryType(), "POINT (30 10)", "must default to null"),
        (GeographyType(), "POINT (30 10)", "must default to null"),
        (IntegerType(), 2**31, "out of range"),
        (IntegerType(), "34", "not the JSON form"),
        (BooleanType(), 1, "not the JSON form"),
        (DecimalType(9, 2), "14.2", "scale"),
        (DecimalType(3, 2), "14.20", "digits"),
        (FixedType(4), "000102", "4 bytes"),
        (BinaryType(), "0g", "not the JSON form"),
        (UUIDType(), "f79c3e09677c4bbda4793f349cb785e7", "not the JSON form"),
        (DateType(), "2017-02-29", "not a calendar date"),
        (TimeType(), "22:31:08.1234567", "finer than microseconds"),
        (TimestampType(), "2017-11-16T22:31:08+00:00", "cannot carry an offset"),
        (TimestampType(), "2017-11-16T22:31:08.123456789", "finer than microseconds"),
        (TimestamptzType(), "2017-11-16T22:31:08", "lacks its offset"),
        (TZ_NS, "2017-11-16T14:31:08-08:00", "must be in UTC"),
        (NS, "2017-11-16T22:31:08.1234567891", "not the JSON form"),
        (NS, "2300-01-01T00:00:00", "out of range"),
        (StructType(NestedField(1, "a", IntegerType())), {"2": 1}, "no field id 2"),
    ],
)
def test_invalid_defaults_are_refused_when_the_schema_is_built(t: Any, raw: Any, why: str) -> None:
    field = {"id": 1, "name": "c", "required": False, "type": t.to_json(), "initial-default": raw}
    with pytest.raises(ValidationError, match=why):
        Schema.from_json({"type": "struct", "schema-id": 0, "fields": [field]})
    with pytest.raises(ValidationError, match=why):
        check_defaults(NestedField.from_json(field))


def test_defaults_accept_what_the_spec_and_java_allow() -> None:
    # Any spelling of the UTC offset (Java's `isUTCTimestamptz`), a lower-case `t`.
    for text in ("2017-11-16T22:31:08Z", "2017-11-16t22:31:08-00:00", "2017-11-16T22:31:08+00:00"):
        assert value_from_json(TZ_NS, text) == NANOS
    assert value_from_json(NS, "2017-11-16T22:31") == NANOS - 8 * 1_000_000_000
    assert value_from_json(NS, "1969-12-31T23:59:59.999999999") == -1
    assert value_to_json(NS, -1) == "1969-12-31T23:59:59.999999999"
    assert value_to_json(TimestampType(), NANOS // 1000) == "2017-11-16T22:31:08"
    # Java's `ISO_LOCAL_DATE` for years beyond 9999.
    assert value_to_json(DateType(), 2_932_897) == "+10000-01-01"
    assert value_from_json(DateType(), "+10000-01-01") == 2_932_897
    assert value_from_json(FloatType(), 0.1) == pytest.approx(0.1, rel=1e-7)
    assert value_from_json(FloatType(), 0.1) != 0.1  # rounded to single precision


# Single-value binary serialization (Appendix D) -------------------------------------------


@pytest.mark.parametrize("t", [NS, TZ_NS])
def test_nanosecond_timestamps_are_8_byte_little_endian_nanos(t: Any) -> None:
    value = NANOS + 123_456_789
    data = to_bytes(t, value)
    assert data == value.to_bytes(8, "little", signed=True)
    assert from_bytes(t, data) == value
    assert from_bytes(t, to_bytes(t, -1)) == -1
    pyi_type = pyi_types.TimestampNanoType() if t == NS else pyi_types.TimestamptzNanoType()
    assert pyi_conversions.to_bytes(pyi_type, value) == data
    with pytest.raises(ValidationError, match="takes 8 bytes"):
        from_bytes(t, data[:4])


def test_no_bounds_for_types_icecore_does_not_process() -> None:
    for t in (VariantType(), GeometryType(), GeographyType("EPSG:4326")):
        with pytest.raises(ValidationError, match="neither writes nor reads"):
            to_bytes(t, b"\x01")
        with pytest.raises(ValidationError, match="neither writes nor reads"):
            from_bytes(t, b"\x01")
    with pytest.raises(ValidationError, match="always null"):
        to_bytes(UnknownType(), 1)
    # An identity partition of an unknown column only ever summarizes nulls.
    stats = PartitionFieldStats(UnknownType())
    assert stats.contains_null is False and stats.min is None


# Avro (Appendix A) --------------------------------------------------------------------------

AVRO_STRUCT = StructType(
    NestedField(1, "ts", NS, required=True),
    NestedField(2, "tz", TZ_NS),
    NestedField(3, "u", UnknownType()),
    NestedField(4, "v", VariantType()),
    NestedField(5, "g", GeometryType("srid:4326")),
    NestedField(6, "geo", GeographyType()),
    NestedField(7, "l", ListType(8, UnknownType(), element_required=False)),
    NestedField(9, "m", MapType(10, StringType(), 11, VariantType(), value_required=True)),
)


def test_avro_schema_of_the_v3_types() -> None:
    fields = {f["name"]: f for f in to_avro(AVRO_STRUCT, "r")["fields"]}
    nanos = {"type": "long", "logicalType": "timestamp-nanos"}
    assert fields["ts"]["type"] == {**nanos, "adjust-to-utc": False}
    assert fields["tz"]["type"] == ["null", {**nanos, "adjust-to-utc": True}]
    # unknown: Avro null, not a union holding null twice (Java's AvroSchemaUtil.toOption).
    assert fields["u"] == {"name": "u", "type": "null", "default": None, "field-id": 3}
    variant = {
        "type": "record",
        "name": "r4",
        "fields": [{"name": "metadata", "type": "bytes"}, {"name": "value", "type": "bytes"}],
        "logicalType": "variant",
    }
    assert fields["v"]["type"] == ["null", variant]  # metadata and value carry no field ids
    assert fields["g"]["type"] == ["null", "bytes"]
    assert fields["geo"]["type"] == ["null", "bytes"]
    assert fields["l"]["type"][1]["items"] == "null"
    assert fields["m"]["type"][1]["values"]["name"] == "r11"


def test_avro_files_with_v3_types_are_written_and_read_back() -> None:
    """fastavro (a writer nobody here wrote) accepts the schema, our decoder reads it back."""
    schema = to_avro(AVRO_STRUCT, "r")
    record = {
        "ts": NANOS + 1,
        "tz": -1,
        "u": None,
        "v": {"metadata": b"\x01\x00\x00", "value": b"\x0c\x2a"},
        "g": b"\x01\x01\x00\x00\x00" + b"\x00" * 16,
        "geo": None,
        "l": [None, None],
        "m": {"k": {"metadata": b"\x01", "value": b"\x00"}},
    }
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, fastavro.parse_schema(schema), record)
    assert fastavro.schemaless_reader(io.BytesIO(buffer.getvalue()), schema) == record
    value, end = compile_decoder(schema, schema)(buffer.getvalue(), 0)
    assert end == len(buffer.getvalue())
    assert value[:4] == (NANOS + 1, -1, None, (b"\x01\x00\x00", b"\x0c\x2a"))


def test_manifest_partitions_of_v3_sources_are_valid_avro() -> None:
    """identity(timestamp_ns) and identity(unknown) partition fields (Java allows both)."""
    partition = StructType(NestedField(1000, "ts_ns", NS), NestedField(1001, "u", UnknownType()))
    schema = manifest_entry_avro_schema(partition)
    fastavro.parse_schema(schema)
    data_file = next(f for f in schema["fields"] if f["name"] == "data_file")["type"]
    partition_avro = next(f for f in data_file["fields"] if f["name"] == "partition")["type"]
    assert [f["type"] for f in partition_avro["fields"]] == [
        ["null", {"type": "long", "logicalType": "timestamp-nanos", "adjust-to-utc": False}],
        "null",
    ]


# Arrow and Parquet --------------------------------------------------------------------------


def test_arrow_types_of_the_v3_types() -> None:
    assert arrow_type(NS) == pa.timestamp("ns")
    assert arrow_type(TZ_NS) == pa.timestamp("ns", tz="UTC")
    assert arrow_type(UnknownType()) == pa.null()
    assert arrow_type(GeometryType()) == pa.binary()
    assert arrow_type(GeographyType()) == pa.binary()
    with pytest.raises(ValidationError, match="variant has no Parquet form"):
        arrow_type(VariantType())
    with pytest.raises(ValidationError, match="variant"):
        arrow_schema([NestedField(1, "s", StructType(NestedField(2, "v", VariantType())))])


def test_parquet_file_holds_nanosecond_timestamps_and_no_unknown_column(tmp_path: Path) -> None:
    fields = [
        NestedField(1, "ts", NS, required=True),
        NestedField(2, "tz", TZ_NS),
        NestedField(3, "u", UnknownType()),
    ]
    schema = arrow_schema(stored_fields(fields))
    rows = pa.Table.from_pylist([{"ts": NANOS + 1, "tz": -1}], schema=schema)
    path = tmp_path / "f.parquet"
    pq.write_table(rows, path)
    parquet = pq.ParquetFile(path).schema
    columns = {c.path: c for c in (parquet.column(i) for i in range(len(parquet)))}
    assert set(columns) == {"ts", "tz"}
    assert columns["ts"].physical_type == "INT64"
    assert "timeUnit=nanoseconds" in str(columns["ts"].logical_type)
    assert "isAdjustedToUTC=false" in str(columns["ts"].logical_type)
    assert "isAdjustedToUTC=true" in str(columns["tz"].logical_type)
    back = pq.read_table(path)
    assert back.column("ts").cast(pa.int64()).to_pylist() == [NANOS + 1]
    assert back.column("tz").cast(pa.int64()).to_pylist() == [-1]
    assert int(back.schema.field("tz").metadata[FIELD_ID_KEY]) == 2


# Transforms ---------------------------------------------------------------------------------

# By hand from the spec: units since 1970-01-01T00:00, floored.
NS_TRANSFORM_CASES = [
    # (nanoseconds, year, month, day, hour)
    (NANOS + 1, 47, 47 * 12 + 10, DAYS_2017_11_16, DAYS_2017_11_16 * 24 + 22),
    (0, 0, 0, 0, 0),
    (-1, -1, -1, -1, -1),  # 1969-12-31T23:59:59.999999999
    (-86_400 * 10**9, -1, -1, -1, -24),  # 1969-12-31T00:00
    (-86_400 * 10**9 - 1, -1, -1, -2, -25),
    (-(2**63), -293, -3508, -106752, -2562048),  # 1677-09-21T00:12:43.145224192
    (2**63 - 1, 292, 3507, 106751, 2562047),  # 2262-04-11T23:47:16.854775807
]


@pytest.mark.parametrize("case", NS_TRANSFORM_CASES, ids=lambda c: str(c[0]))
@pytest.mark.parametrize("t", [NS, TZ_NS])
def test_time_transforms_of_nanosecond_timestamps(t: Any, case: tuple[int, ...]) -> None:
    value, year, month, day, hour = case
    expected = {"year": year, "month": month, "day": day, "hour": hour}
    pyi_type = pyi_types.TimestampNanoType() if t == NS else pyi_types.TimestamptzNanoType()
    pyi = {
        "year": pyi_transforms.YearTransform(),
        "month": pyi_transforms.MonthTransform(),
        "day": pyi_transforms.DayTransform(),
        "hour": pyi_transforms.HourTransform(),
    }
    for name, result in expected.items():
        transform = parse_transform(name)
        assert transform.can_transform(t)
        assert transform.apply(value, t) == result, name
        assert pyi[name].transform(pyi_type)(value) == result, name
    # The same instant in microseconds lands in the same partitions.
    micro_type = TimestampType() if t == NS else TimestamptzType()
    for name in expected:
        transform = parse_transform(name)
        assert transform.apply(value // 1000, micro_type) == transform.apply(value, t)
    assert parse_transform("day").result_type(t) == DateType()
    assert parse_transform("hour").result_type(t) == IntegerType()


def test_other_transforms_on_the_v3_types() -> None:
    assert parse_transform("identity").apply(NANOS, NS) == NANOS
    assert parse_transform("identity").result_type(NS) == NS
    assert not parse_transform("truncate[10]").can_transform(NS)
    for t in (GeometryType(), GeographyType()):
        assert not parse_transform("identity").can_transform(t)  # spec: any primitive but geo
        assert not parse_transform("bucket[4]").can_transform(t)
    assert parse_transform("identity").can_transform(UnknownType())  # as in Java
    assert not parse_transform("hour").can_transform(DateType())


# Appendix B: nanosecond timestamps hash as their microseconds.
BUCKET_VECTORS = [
    (NS, "2017-11-16T22:31:08", -2047944441),
    (NS, "2017-11-16T22:31:08.000001001", -1207196810),
    (TZ_NS, "2017-11-16T14:31:08-08:00", -2047944441),
    (TZ_NS, "2017-11-16T14:31:08.000001001-08:00", -1207196810),
]


@pytest.mark.parametrize(("t", "text", "expected"), BUCKET_VECTORS)
def test_bucket_hash_vectors_of_the_spec(t: Any, text: str, expected: int) -> None:
    value = to_literal(t, text)
    assert bucket_hash(value, t) == expected
    pyi_type = pyi_types.TimestampNanoType() if t == NS else pyi_types.TimestamptzNanoType()
    for n in (1, 16, 1000):
        ours = parse_transform(f"bucket[{n}]").apply(value, t)
        assert ours == (expected & 0x7FFFFFFF) % n
        assert pyi_transforms.BucketTransform(n).transform(pyi_type)(value) == ours


def test_bucket_floors_nanoseconds_before_the_epoch() -> None:
    """Java's `nanosToMicros` is a floor division: -1 ns is -1 us, not 0."""
    assert bucket_hash(-1, NS) == bucket_hash(-1, TimestampType()) != bucket_hash(0, NS)
    assert bucket_hash(-1000, NS) == bucket_hash(-1, TimestampType())
    assert pyi_transforms.BucketTransform(1000).transform(pyi_types.TimestampNanoType())(
        -1
    ) == parse_transform("bucket[1000]").apply(-1, NS)


def test_human_strings_of_nanosecond_partition_values() -> None:
    identity = parse_transform("identity")
    assert identity.to_human_string(NANOS + 1, NS) == "2017-11-16T22:31:08.000000001"
    assert identity.to_human_string(NANOS, NS) == "2017-11-16T22:31:08"
    assert identity.to_human_string(-1, TZ_NS) == "1969-12-31T23:59:59.999999999+00:00"
    fraction = identity.to_human_string(NANOS + 120_000_000, TZ_NS)
    assert fraction == "2017-11-16T22:31:08.12+00:00"


# Literals -----------------------------------------------------------------------------------


def test_nanosecond_literals() -> None:
    assert to_literal(NS, "2017-11-16T22:31:08.123456789") == NANOS + 123_456_789
    assert to_literal(NS, "2017-11-16T22:31:08.1") == NANOS + 100_000_000
    assert to_literal(NS, "2017-11-16 22:31:08,000000001") == NANOS + 1
    assert to_literal(NS, "2017-11-16T22:31:08") == NANOS
    assert to_literal(NS, "2017-11-16") == DAYS_2017_11_16 * 86_400 * 10**9
    assert to_literal(NS, "1969-12-31T23:59:59.999999999") == -1
    assert to_literal(NS, datetime(2017, 11, 16, 22, 31, 8, 5)) == NANOS + 5_000
    assert to_literal(NS, date(2017, 11, 16)) == DAYS_2017_11_16 * 86_400 * 10**9
    assert to_literal(NS, 42) == 42  # ints are the column's unit: nanoseconds
    assert to_literal(TZ_NS, "2017-11-16T14:31:08.000000007-08:00") == NANOS + 7
    east = datetime(2017, 11, 17, 0, 31, 8, tzinfo=timezone(timedelta(hours=2)))
    assert to_literal(TZ_NS, east) == NANOS


@pytest.mark.parametrize(
    ("t", "value", "why"),
    [
        (NS, "2017-11-16T22:31:08.1234567891", "finer than nanoseconds"),
        (NS, "2017-11-16T22:31:08+00:00", "cannot take an offset"),
        (TZ_NS, "2017-11-16T22:31:08.5", "needs an explicit offset"),
        (NS, "2262-04-12T00:00:00", "out of the range"),
        (NS, 2**63, "out of the range"),
        (NS, "yesterday", "not a valid timestamp_ns literal"),
        (NS, 1.5, "expected nanoseconds"),
        (TimestampType(), "2017-11-16T22:31:08.123456789", "finer than microseconds"),
        (UnknownType(), None, "cannot be null"),
        (UnknownType(), 1, "cannot compare"),
        (GeometryType(), b"\x01", "cannot compare"),
    ],
)
def test_bad_nanosecond_literals_are_refused(t: Any, value: Any, why: str) -> None:
    with pytest.raises(ValidationError, match=why):
        to_literal(t, value)


# Spark --------------------------------------------------------------------------------------


def test_spark_refuses_columns_it_cannot_carry_naming_them() -> None:
    with pytest.raises(TypeNotSupported, match=r"column events\.at has type timestamp_ns"):
        spark_type(NS, "events.at")
    with pytest.raises(TypeNotSupported, match="no nanosecond timestamps"):
        spark_schema([NestedField(1, "at", TZ_NS)])
    with pytest.raises(TypeNotSupported, match=r"column s\.g has type geometry\(srid:4326\)"):
        spark_schema(
            [NestedField(1, "s", StructType(NestedField(2, "g", GeometryType("srid:4326"))))]
        )
    assert spark_type(UnknownType()) == T.NullType()
    assert spark_schema([NestedField(1, "u", UnknownType())])[0].dataType == T.NullType()


def test_check_spark_readable_names_every_column_at_once() -> None:
    schema = Schema.from_json(V3_SCHEMA_JSON)
    with pytest.raises(TypeNotSupported) as caught:
        check_spark_readable(schema.fields)
    assert [name for name, _ in caught.value.columns] == [
        "event_ns", "seen_ns", "payload", "shape", "area", "point.where", "tags.element", "at_ns",
    ]  # fmt: skip
    assert "variant" in str(caught.value) and "timestamptz_ns" in str(caught.value)
    check_spark_readable([schema.find_field("id"), schema.find_field("later")])


# PyIceberg reads our v3 schemas -------------------------------------------------------------


def test_pyiceberg_reads_the_v3_types_we_write() -> None:
    fields = (
        NestedField(1, "a", NS),
        NestedField(2, "b", TZ_NS),
        NestedField(3, "c", UnknownType()),
        NestedField(4, "d", GeometryType()),
        NestedField(5, "e", GeographyType()),
    )
    payload = json.dumps(Schema(fields).to_json())
    theirs = PyIcebergSchema.model_validate_json(payload)
    assert [type(f.field_type) for f in theirs.fields] == [
        pyi_types.TimestampNanoType,
        pyi_types.TimestamptzNanoType,
        pyi_types.UnknownType,
        pyi_types.GeometryType,
        pyi_types.GeographyType,
    ]
    assert [str(f.field_type) for f in theirs.fields] == [f.field_type.to_json() for f in fields]
