"""Iceberg types as Avro schemas, and the fixed schemas of manifests and manifest lists.

Iceberg resolves Avro columns by field id, never by name (spec Appendix A), so every record
field carries `field-id`, every array `element-id` and every map `key-id`/`value-id`. Names
follow Iceberg Java's `AvroSchemaUtil` exactly (records `r<field id>`, map entries
`k<key id>_v<value id>`, fixed `fixed_<L>`, decimals `decimal_<P>_<S>`) so that files we
write are byte-for-byte the shape every other Iceberg implementation expects.
"""

from __future__ import annotations

from typing import Any

from icecore.errors import ValidationError
from icecore.spec.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    GeographyType,
    GeometryType,
    IcebergType,
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
)

FIELD_ID = "field-id"
ELEMENT_ID = "element-id"
KEY_ID = "key-id"
VALUE_ID = "value-id"
ICEBERG_FIELD_NAME = "iceberg-field-name"

# manifest_entry (spec "Manifests"), v2 layout.
STATUS = NestedField(0, "status", IntegerType(), required=True)
SNAPSHOT_ID = NestedField(1, "snapshot_id", LongType())
SEQUENCE_NUMBER = NestedField(3, "sequence_number", LongType())
FILE_SEQUENCE_NUMBER = NestedField(4, "file_sequence_number", LongType())
DATA_FILE_ID = 2
PARTITION_ID = 102


def _long_map(field_id: int, name: str, key_id: int, value_type: IcebergType) -> NestedField:
    return NestedField(field_id, name, MapType(key_id, IntegerType(), key_id + 1, value_type))


# data_file (spec "Manifests"), v2 layout; the partition struct depends on the spec.
CONTENT = NestedField(134, "content", IntegerType(), required=True)
FILE_PATH = NestedField(100, "file_path", StringType(), required=True)
FILE_FORMAT = NestedField(101, "file_format", StringType(), required=True)
RECORD_COUNT = NestedField(103, "record_count", LongType(), required=True)
FILE_SIZE = NestedField(104, "file_size_in_bytes", LongType(), required=True)
COLUMN_SIZES = _long_map(108, "column_sizes", 117, LongType())
VALUE_COUNTS = _long_map(109, "value_counts", 119, LongType())
NULL_VALUE_COUNTS = _long_map(110, "null_value_counts", 121, LongType())
NAN_VALUE_COUNTS = _long_map(137, "nan_value_counts", 138, LongType())
LOWER_BOUNDS = _long_map(125, "lower_bounds", 126, BinaryType())
UPPER_BOUNDS = _long_map(128, "upper_bounds", 129, BinaryType())
KEY_METADATA = NestedField(131, "key_metadata", BinaryType())
SPLIT_OFFSETS = NestedField(132, "split_offsets", ListType(133, LongType(), True))
EQUALITY_IDS = NestedField(135, "equality_ids", ListType(136, IntegerType(), True))
SORT_ORDER_ID = NestedField(140, "sort_order_id", IntegerType())
REFERENCED_DATA_FILE = NestedField(143, "referenced_data_file", StringType())
# v3: row lineage, and the byte range of a deletion vector inside its Puffin file.
FIRST_ROW_ID = NestedField(142, "first_row_id", LongType())
CONTENT_OFFSET = NestedField(144, "content_offset", LongType())
CONTENT_SIZE_IN_BYTES = NestedField(145, "content_size_in_bytes", LongType())

# Column metrics: the part of a data_file that planning without filters never looks at.
METRICS_FIELD_IDS = frozenset(
    f.field_id
    for f in (
        COLUMN_SIZES,
        VALUE_COUNTS,
        NULL_VALUE_COUNTS,
        NAN_VALUE_COUNTS,
        LOWER_BOUNDS,
        UPPER_BOUNDS,
        SPLIT_OFFSETS,
    )
)

# field_summary and manifest_file (spec "Manifest Lists"), v2 layout.
FIELD_SUMMARY = StructType(
    NestedField(509, "contains_null", BooleanType(), required=True),
    NestedField(518, "contains_nan", BooleanType()),
    NestedField(510, "lower_bound", BinaryType()),
    NestedField(511, "upper_bound", BinaryType()),
)
MANIFEST_FILE = StructType(
    NestedField(500, "manifest_path", StringType(), required=True),
    NestedField(501, "manifest_length", LongType(), required=True),
    NestedField(502, "partition_spec_id", IntegerType(), required=True),
    NestedField(517, "content", IntegerType(), required=True),
    NestedField(515, "sequence_number", LongType(), required=True),
    NestedField(516, "min_sequence_number", LongType(), required=True),
    NestedField(503, "added_snapshot_id", LongType(), required=True),
    NestedField(504, "added_files_count", IntegerType(), required=True),
    NestedField(505, "existing_files_count", IntegerType(), required=True),
    NestedField(506, "deleted_files_count", IntegerType(), required=True),
    NestedField(512, "added_rows_count", LongType(), required=True),
    NestedField(513, "existing_rows_count", LongType(), required=True),
    NestedField(514, "deleted_rows_count", LongType(), required=True),
    NestedField(507, "partitions", ListType(508, FIELD_SUMMARY, True)),
    NestedField(519, "key_metadata", BinaryType()),
)
# v3 adds the first row id of a data manifest's rows (row lineage).
MANIFEST_FILE_V3 = StructType(*MANIFEST_FILE.fields, NestedField(520, "first_row_id", LongType()))


def data_file_type(partition_type: StructType, format_version: int = 2) -> StructType:
    """The `data_file` struct (v2, or v3 with row lineage and DV fields) for one partition
    spec's partition type, in Java's field order."""
    if format_version >= 3:
        return StructType(
            *_data_file_fields(partition_type),
            SORT_ORDER_ID,
            FIRST_ROW_ID,
            REFERENCED_DATA_FILE,
            CONTENT_OFFSET,
            CONTENT_SIZE_IN_BYTES,
        )
    return StructType(*_data_file_fields(partition_type), SORT_ORDER_ID, REFERENCED_DATA_FILE)


def _data_file_fields(partition_type: StructType) -> tuple[NestedField, ...]:
    return (
        CONTENT,
        FILE_PATH,
        FILE_FORMAT,
        NestedField(PARTITION_ID, "partition", partition_type, required=True),
        RECORD_COUNT,
        FILE_SIZE,
        COLUMN_SIZES,
        VALUE_COUNTS,
        NULL_VALUE_COUNTS,
        NAN_VALUE_COUNTS,
        LOWER_BOUNDS,
        UPPER_BOUNDS,
        KEY_METADATA,
        SPLIT_OFFSETS,
        EQUALITY_IDS,
    )


def manifest_entry_type(partition_type: StructType, format_version: int = 2) -> StructType:
    """The `manifest_entry` struct for one partition spec's partition type."""
    return StructType(
        STATUS,
        SNAPSHOT_ID,
        SEQUENCE_NUMBER,
        FILE_SEQUENCE_NUMBER,
        NestedField(
            DATA_FILE_ID,
            "data_file",
            data_file_type(partition_type, format_version),
            required=True,
        ),
    )


def manifest_entry_avro_schema(
    partition_type: StructType, format_version: int = 2
) -> dict[str, Any]:
    """The Avro schema Java writes for manifests (`manifest_entry`, `r2`, `r102`)."""
    # Partition fields are always optional: a transform may produce null for any row.
    optional = StructType(*(_as_optional(f) for f in partition_type.fields))
    return to_avro(manifest_entry_type(optional, format_version), "manifest_entry")


def manifest_list_avro_schema(format_version: int = 2) -> dict[str, Any]:
    """The Avro schema Java writes for manifest lists (`manifest_file`, `r508`)."""
    return to_avro(MANIFEST_FILE_V3 if format_version >= 3 else MANIFEST_FILE, "manifest_file")


def _as_optional(f: NestedField) -> NestedField:
    return NestedField(f.field_id, f.name, f.field_type, required=False, doc=f.doc)


def to_avro(struct: StructType, record_name: str) -> dict[str, Any]:
    """The Avro record schema of an Iceberg struct, with Iceberg's id annotations."""
    return {"type": "record", "name": record_name, "fields": [_field(f) for f in struct.fields]}


def make_compatible_name(name: str) -> str:
    """An Avro-legal field name, sanitized exactly as Iceberg Java's `AvroSchemaUtil` does.

    Avro names must start with a letter or `_` and go on with letters, digits or `_`;
    partition field names such as `ts-day` or `1st` do not, and Java rewrites them
    (`ts_x2Dday`, `_1st`), keeping the original under `iceberg-field-name`.
    """
    if not name:
        raise ValidationError("an Avro field name cannot be empty")
    first = name[0]
    out = [first if first.isalpha() or first == "_" else _escape(first)]
    out.extend(c if _is_name_char(c) else _escape(c) for c in name[1:])
    return "".join(out)


def _is_name_char(char: str) -> bool:
    # Java's Character.isLetterOrDigit: letters and decimal digits (category Nd).
    return char.isalpha() or char.isdecimal() or char == "_"


def _escape(char: str) -> str:
    if char.isdecimal():
        return "_" + char
    return f"_x{ord(char):X}"


def _field(f: NestedField) -> dict[str, Any]:
    avro_type = _type(f.field_type, f.field_id)
    name = make_compatible_name(f.name)
    out: dict[str, Any] = {"name": name}
    if f.doc is not None:
        out["doc"] = f.doc
    if f.required:
        out["type"] = avro_type
    else:
        out["type"] = _optional(avro_type)
        out["default"] = None
    out[FIELD_ID] = f.field_id
    if name != f.name:
        out[ICEBERG_FIELD_NAME] = f.name
    return out


def _optional(avro_type: Any) -> Any:
    """A nullable Avro type: a union with null, except for `unknown`, which is already null
    (Java's `AvroSchemaUtil.toOption`; a union cannot hold null twice)."""
    return avro_type if avro_type == "null" else ["null", avro_type]


def _type(t: IcebergType, owner_id: int) -> Any:
    """The Avro type of `t`; `owner_id` names nested records (`r<id>`) the way Java does."""
    if isinstance(t, StructType):
        return to_avro(t, f"r{owner_id}")
    if isinstance(t, VariantType):
        # Spec Appendix A: a record of `metadata` and `value` bytes, accessed by name, no field
        # ids; Java names it like a struct and marks it with the `variant` logical type.
        return {
            "type": "record",
            "name": f"r{owner_id}",
            "fields": [{"name": "metadata", "type": "bytes"}, {"name": "value", "type": "bytes"}],
            "logicalType": "variant",
        }
    if isinstance(t, ListType):
        items = _type(t.element_type, t.element_id)
        return {
            "type": "array",
            "items": items if t.element_required else _optional(items),
            ELEMENT_ID: t.element_id,
        }
    if isinstance(t, MapType):
        value = _type(t.value_type, t.value_id)
        if not t.value_required:
            value = _optional(value)
        if isinstance(t.key_type, StringType):
            return {"type": "map", "values": value, KEY_ID: t.key_id, VALUE_ID: t.value_id}
        # Avro maps only allow string keys: other keys become an array of key/value records.
        return {
            "type": "array",
            "items": {
                "type": "record",
                "name": f"k{t.key_id}_v{t.value_id}",
                "fields": [
                    {"name": "key", "type": _type(t.key_type, t.key_id), FIELD_ID: t.key_id},
                    {"name": "value", "type": value, FIELD_ID: t.value_id},
                ],
            },
            "logicalType": "map",
        }
    return _primitive(t)


def _primitive(t: IcebergType) -> Any:
    simple = _SIMPLE.get(type(t))
    if simple is not None:
        return dict(simple) if isinstance(simple, dict) else simple
    if isinstance(t, DecimalType):
        return {
            "type": "fixed",
            "name": f"decimal_{t.precision}_{t.scale}",
            "size": decimal_required_bytes(t.precision),
            "logicalType": "decimal",
            "precision": t.precision,
            "scale": t.scale,
        }
    if isinstance(t, FixedType):
        return {"type": "fixed", "name": f"fixed_{t.length}", "size": t.length}
    if isinstance(t, UUIDType):
        return {"type": "fixed", "name": "uuid_fixed", "size": 16, "logicalType": "uuid"}
    raise ValidationError(f"type {t} has no Avro representation")


_SIMPLE: dict[type, Any] = {
    BooleanType: "boolean",
    IntegerType: "int",
    LongType: "long",
    FloatType: "float",
    DoubleType: "double",
    StringType: "string",
    BinaryType: "bytes",
    DateType: {"type": "int", "logicalType": "date"},
    TimeType: {"type": "long", "logicalType": "time-micros"},
    TimestampType: {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": False},
    TimestamptzType: {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": True},
    # v3. `timestamp-nanos` is an Iceberg convention (Appendix A note 2).
    TimestampNanoType: {"type": "long", "logicalType": "timestamp-nanos", "adjust-to-utc": False},
    TimestamptzNanoType: {"type": "long", "logicalType": "timestamp-nanos", "adjust-to-utc": True},
    UnknownType: "null",  # always null; optional, so never wrapped in a union (see _optional)
    GeometryType: "bytes",  # WKB
    GeographyType: "bytes",
}


def decimal_required_bytes(precision: int) -> int:
    """Bytes of the smallest two's-complement fixed that holds every `precision`-digit value."""
    if not 0 < precision <= 38:
        raise ValidationError(f"decimal precision must be in 1..38, got {precision}")
    length = 1
    while len(str(2 ** (8 * length - 1) - 1)) - 1 < precision:
        length += 1
    return length
