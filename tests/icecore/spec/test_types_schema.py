"""Types and schemas: the JSON form must be exactly the spec's, ids must never clash."""

import json

import pytest

from icecore.errors import ValidationError
from icecore.spec.schema import Schema
from icecore.spec.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
    type_from_json,
)

PRIMITIVE_JSON = {
    "boolean": BooleanType(),
    "int": IntegerType(),
    "long": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "decimal(9, 2)": DecimalType(9, 2),
    "date": DateType(),
    "time": TimeType(),
    "timestamp": TimestampType(),
    "timestamptz": TimestamptzType(),
    "string": StringType(),
    "uuid": UUIDType(),
    "fixed[16]": FixedType(16),
    "binary": BinaryType(),
}


@pytest.mark.parametrize(("text", "expected"), PRIMITIVE_JSON.items())
def test_primitive_json_round_trip(text, expected):
    assert type_from_json(text) == expected
    assert expected.to_json() == text


def test_decimal_and_fixed_parse_whitespace_and_compare_by_value():
    assert type_from_json("decimal(38,10)") == DecimalType(38, 10)
    assert DecimalType(10, 2) != DecimalType(10, 3)
    assert hash(FixedType(3)) == hash(FixedType(3))
    assert FixedType(3) != BinaryType()


@pytest.mark.parametrize("bad", ["decimal(39, 2)", "fixed[0]", "varchar", "timestamp_nanos", 42])
def test_unknown_or_invalid_types_are_rejected(bad):
    with pytest.raises(ValidationError):
        type_from_json(bad)


# The spec's nested JSON examples ("Appendix C: JSON serialization").
SPEC_SCHEMA = {
    "type": "struct",
    "schema-id": 3,
    "identifier-field-ids": [1],
    "fields": [
        {"id": 1, "name": "id", "required": True, "type": "long", "doc": "row key"},
        {
            "id": 2,
            "name": "tags",
            "required": False,
            "type": {
                "type": "list",
                "element-id": 5,
                "element": "string",
                "element-required": False,
            },
        },
        {
            "id": 3,
            "name": "props",
            "required": False,
            "type": {
                "type": "map",
                "key-id": 6,
                "key": "string",
                "value-id": 7,
                "value": "double",
                "value-required": True,
            },
        },
        {
            "id": 4,
            "name": "loc",
            "required": True,
            "type": {
                "type": "struct",
                "fields": [
                    {"id": 8, "name": "lat", "required": True, "type": "float"},
                    {"id": 9, "name": "when", "required": False, "type": "timestamptz"},
                ],
            },
        },
    ],
}


def test_schema_json_round_trip_is_exact():
    schema = Schema.from_json(SPEC_SCHEMA)
    assert schema.to_json() == SPEC_SCHEMA
    assert json.loads(json.dumps(schema.to_json())) == SPEC_SCHEMA
    assert schema.schema_id == 3
    assert schema.identifier_field_ids == (1,)
    assert schema.highest_field_id == 9


def test_schema_resolves_nested_fields_by_id_and_dotted_name():
    schema = Schema.from_json(SPEC_SCHEMA)
    assert schema.find_field("loc.when").field_id == 9
    assert schema.find_type(9) == TimestamptzType()
    assert schema.find_field("tags.element").field_id == 5
    assert schema.find_field("props.value").field_type == DoubleType()
    assert schema.column_name(8) == "loc.lat"
    assert isinstance(schema.find_type("loc"), StructType)
    assert isinstance(schema.find_type(2), ListType)
    assert isinstance(schema.find_type(3), MapType)
    with pytest.raises(ValidationError, match="no field 'nope'"):
        schema.find_field("nope")


def test_field_id_clash_names_both_columns():
    with pytest.raises(ValidationError, match=r"field id 2 is used by both 'b' and 'c.x'"):
        Schema(
            (
                NestedField(1, "a", LongType(), True),
                NestedField(2, "b", StringType()),
                NestedField(3, "c", StructType(NestedField(2, "x", IntegerType()))),
            )
        )


def test_identifier_field_must_exist():
    with pytest.raises(ValidationError, match="identifier field id 7"):
        Schema((NestedField(1, "a", LongType(), True),), identifier_field_ids=(7,))


def test_struct_field_without_type_is_an_error_naming_the_key():
    with pytest.raises(ValidationError, match="lacks 'type'"):
        Schema.from_json({"type": "struct", "fields": [{"id": 1, "name": "a", "required": True}]})
