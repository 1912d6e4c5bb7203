"""Table metadata JSON: v1 and v2 reading, v2 writing, validation, and PyIceberg's files."""

import copy
import datetime
import gzip
import json
import uuid

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.partitioning import PartitionField as PyPartitionField
from pyiceberg.partitioning import PartitionSpec as PyPartitionSpec
from pyiceberg.schema import Schema as PySchema
from pyiceberg.serializers import FromInputFile
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import DateType, LongType, NestedField, StringType

from icecore.errors import FileError, MetadataError, NotFoundError, ValidationError
from icecore.io import FileIO
from icecore.spec.metadata import TableMetadata, read_table_metadata, write_table_metadata
from icecore.spec.partitioning import PartitionField, PartitionSpec
from icecore.spec.properties import DELETE_TARGET_FILE_SIZE_BYTES, BoolProperty, IntProperty
from icecore.spec.refs import SnapshotRef, SnapshotRefType
from icecore.spec.snapshots import MetadataLogEntry, Operation, SnapshotLogEntry
from icecore.spec.sorting import NullOrder, SortDirection
from icecore.spec.transforms import parse_transform

S1, S2, S3 = 3051729675574597004, 3055729675574597004, 3059729675574597004

# Hand-written after the spec's Appendix C examples, in the field order icecore (and Java) write.
V2 = {
    "format-version": 2,
    "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1",
    "location": "s3://bucket/test/location",
    "last-sequence-number": 34,
    "last-updated-ms": 1602638573590,
    "last-column-id": 3,
    "current-schema-id": 1,
    "schemas": [
        {
            "type": "struct",
            "schema-id": 0,
            "fields": [{"id": 1, "name": "x", "required": True, "type": "long"}],
        },
        {
            "type": "struct",
            "schema-id": 1,
            "identifier-field-ids": [1, 2],
            "fields": [
                {"id": 1, "name": "x", "required": True, "type": "long"},
                {"id": 2, "name": "y", "required": True, "type": "long", "doc": "comment"},
                {"id": 3, "name": "z", "required": True, "type": "long"},
            ],
        },
    ],
    "default-spec-id": 0,
    "partition-specs": [
        {
            "spec-id": 0,
            "fields": [{"name": "x", "transform": "identity", "source-id": 1, "field-id": 1000}],
        }
    ],
    "last-partition-id": 1000,
    "default-sort-order-id": 3,
    "sort-orders": [
        {
            "order-id": 3,
            "fields": [
                {
                    "transform": "identity",
                    "source-id": 2,
                    "direction": "asc",
                    "null-order": "nulls-first",
                },
                {
                    "transform": "bucket[4]",
                    "source-id": 3,
                    "direction": "desc",
                    "null-order": "nulls-last",
                },
            ],
        }
    ],
    "properties": {"write.format.default": "parquet", "commit.retry.num-retries": "4"},
    "current-snapshot-id": S2,
    "refs": {
        "main": {"snapshot-id": S2, "type": "branch", "min-snapshots-to-keep": 3},
        "audit": {"snapshot-id": S1, "type": "tag", "max-ref-age-ms": 10000000},
    },
    "snapshots": [
        {
            "sequence-number": 0,
            "snapshot-id": S1,
            "timestamp-ms": 1515100955770,
            "summary": {"operation": "append"},
            "manifest-list": "s3://a/b/1.avro",
        },
        {
            "sequence-number": 1,
            "snapshot-id": S2,
            "parent-snapshot-id": S1,
            "timestamp-ms": 1555100955770,
            "summary": {"operation": "append"},
            "manifest-list": "s3://a/b/2.avro",
            "schema-id": 1,
        },
    ],
    "snapshot-log": [
        {"timestamp-ms": 1515100955770, "snapshot-id": S1},
        {"timestamp-ms": 1555100955770, "snapshot-id": S2},
    ],
    "metadata-log": [{"timestamp-ms": 1515100, "metadata-file": "s3://bucket/.../v1.json"}],
    "statistics": [
        {
            "snapshot-id": S2,
            "statistics-path": "s3://a/b/stats.puffin",
            "file-size-in-bytes": 413,
            "file-footer-size-in-bytes": 42,
            "blob-metadata": [
                {
                    "type": "apache-datasketches-theta-v1",
                    "snapshot-id": S2,
                    "sequence-number": 1,
                    "fields": [1],
                    "properties": {"ndv": "5"},
                }
            ],
        }
    ],
    "partition-statistics": [
        {"snapshot-id": S2, "statistics-path": "s3://a/b/p.parquet", "file-size-in-bytes": 43}
    ],
}

# The v1 forms: single schema and partition-spec, no sequence numbers, refs or sort orders.
V1 = {
    "format-version": 1,
    "table-uuid": "d20125c8-7284-442c-9aea-15fee620737c",
    "location": "file:/tmp/warehouse/t/",
    "last-updated-ms": 1602638573874,
    "last-column-id": 3,
    "schema": {
        "type": "struct",
        "fields": [
            {"id": 1, "name": "x", "required": True, "type": "long"},
            {"id": 2, "name": "y", "required": True, "type": "long"},
            {"id": 3, "name": "z", "required": True, "type": "long"},
        ],
    },
    "partition-spec": [{"name": "x", "transform": "identity", "source-id": 1}],
    "properties": {"gc.enabled": "false"},
    "current-snapshot-id": S2,
    "snapshots": [
        {"snapshot-id": S1, "timestamp-ms": 1515100955770, "manifests": ["file:/t/m1.avro"]},
        {
            "snapshot-id": S2,
            "parent-snapshot-id": S1,
            "timestamp-ms": 1555100955770,
            "summary": {"operation": "overwrite", "added-records": "1"},
            "manifests": ["file:/t/m1.avro", "file:/t/m2.avro"],
        },
    ],
}


def _with(base: dict, **changes: object) -> dict:
    """`base` with fields replaced (a value of ... deletes the field)."""
    out = copy.deepcopy(base)
    for name, value in changes.items():
        key = name.replace("_", "-")
        if value is ...:
            del out[key]
        else:
            out[key] = value
    return out


def test_v2_fields_are_read_exactly() -> None:
    m = TableMetadata.from_json(V2, location="s3://bucket/test/location/metadata/v3.json")
    assert m.format_version == 2
    assert m.table_uuid == "9c12d441-03fe-4693-9a96-a0705ddf69c1"
    assert m.location == "s3://bucket/test/location"
    assert m.last_sequence_number == 34
    assert m.last_updated_ms == 1602638573590
    assert m.last_column_id == 3
    assert m.metadata_location == "s3://bucket/test/location/metadata/v3.json"
    assert [s.schema_id for s in m.schemas] == [0, 1]
    assert m.schema().schema_id == 1
    assert m.schema().identifier_field_ids == (1, 2)
    assert m.schema_by_id(0).find_field("x").field_id == 1
    assert m.spec() == PartitionSpec(
        0, (PartitionField(1, 1000, parse_transform("identity"), "x"),)
    )
    assert m.last_partition_id == 1000
    order = m.sort_order()
    assert order.order_id == 3
    assert str(order.fields[1].transform) == "bucket[4]"
    assert order.fields[1].direction is SortDirection.DESC
    assert order.fields[1].null_order is NullOrder.NULLS_LAST
    assert m.properties == {"write.format.default": "parquet", "commit.retry.num-retries": "4"}
    assert m.current_snapshot_id == S2
    assert m.current_snapshot() == m.snapshot_by_id(S2)
    assert m.snapshot_by_id(S2).sequence_number == 1
    assert m.snapshot_by_id(S2).operation is Operation.APPEND
    assert m.refs == {
        "main": SnapshotRef(S2, SnapshotRefType.BRANCH, min_snapshots_to_keep=3),
        "audit": SnapshotRef(S1, SnapshotRefType.TAG, max_ref_age_ms=10000000),
    }
    assert m.snapshot_log == (
        SnapshotLogEntry(1515100955770, S1),
        SnapshotLogEntry(1555100955770, S2),
    )
    assert m.metadata_log == (MetadataLogEntry(1515100, "s3://bucket/.../v1.json"),)
    assert set(m.extra) == {"statistics", "partition-statistics"}


def test_v2_json_round_trips_exactly() -> None:
    m = TableMetadata.from_json(V2)
    assert m.to_json() == V2
    assert list(m.to_json())[:19] == list(V2)[:19]
    assert TableMetadata.from_json(m.to_json()) == m


def test_write_then_read_is_equal_and_never_overwrites(tmp_path) -> None:
    io = FileIO()
    m = TableMetadata.from_json(V2)
    location = f"file://{tmp_path}/metadata/00001-abc.metadata.json"
    write_table_metadata(io, location, m)
    back = read_table_metadata(io, location)
    assert back == m
    assert back.metadata_location == location
    assert json.loads((tmp_path / "metadata/00001-abc.metadata.json").read_text("utf-8")) == V2
    with pytest.raises(FileError) as err:
        write_table_metadata(io, location, m)
    assert err.value.path == location
    assert "refusing to overwrite" in err.value.problem


def test_non_ascii_is_written_as_utf8(tmp_path) -> None:
    doc = _with(V2, properties={"comment": "données ✓"})
    location = str(tmp_path / "v1.metadata.json")
    write_table_metadata(FileIO(), location, TableMetadata.from_json(doc))
    raw = (tmp_path / "v1.metadata.json").read_bytes()
    assert "données ✓".encode() in raw
    assert read_table_metadata(FileIO(), location).properties == {"comment": "données ✓"}


@pytest.mark.parametrize("name", ["00001-x.gz.metadata.json", "00001-x.metadata.json.gz"])
def test_gzip_metadata_files(tmp_path, name: str) -> None:
    io = FileIO()
    location = str(tmp_path / name)
    m = TableMetadata.from_json(V2)
    write_table_metadata(io, location, m)
    raw = (tmp_path / name).read_bytes()
    assert raw[:2] == b"\x1f\x8b"
    assert json.loads(gzip.decompress(raw)) == V2
    assert read_table_metadata(io, location) == m


def test_v1_defaults_follow_java() -> None:
    m = TableMetadata.from_json(V1)
    assert m.format_version == 1
    assert m.location == "file:/tmp/warehouse/t"  # trailing slash stripped, as Java does
    assert m.last_sequence_number == 0
    assert m.current_schema_id == 0
    assert [f.name for f in m.schema().fields] == ["x", "y", "z"]
    assert m.default_spec_id == 0
    assert m.spec().fields == (PartitionField(1, 1000, parse_transform("identity"), "x"),)
    assert m.last_partition_id == 1000
    assert m.sort_orders[0].is_unsorted
    assert m.default_sort_order_id == 0
    assert all(s.sequence_number == 0 for s in m.snapshots)
    assert m.snapshot_by_id(S1).manifests == ("file:/t/m1.avro",)
    # Spec: there is always a main branch at current-snapshot-id, even when refs are absent.
    assert m.refs == {"main": SnapshotRef(S2, SnapshotRefType.BRANCH)}
    assert m.snapshot_for_ref("main").snapshot_id == S2


def test_v1_unpartitioned_without_last_partition_id() -> None:
    m = TableMetadata.from_json(_with(V1, partition_spec=[]))
    assert m.spec().fields == ()
    assert m.last_partition_id == 999


def test_v1_is_written_as_a_v2_upgrade() -> None:
    written = TableMetadata.from_json(V1).to_json()
    assert written["format-version"] == 2
    assert written["last-sequence-number"] == 0
    assert "schema" not in written
    assert "partition-spec" not in written
    assert written["schemas"] == [{**V1["schema"], "schema-id": 0}]
    assert written["current-schema-id"] == 0
    assert written["partition-specs"] == [
        {
            "spec-id": 0,
            "fields": [{"name": "x", "transform": "identity", "source-id": 1, "field-id": 1000}],
        }
    ]
    assert written["last-partition-id"] == 1000
    assert written["sort-orders"] == [{"order-id": 0, "fields": []}]
    assert written["default-sort-order-id"] == 0
    assert written["refs"] == {"main": {"snapshot-id": S2, "type": "branch"}}
    assert [s["sequence-number"] for s in written["snapshots"]] == [0, 0]
    assert written["snapshots"][1]["manifests"] == ["file:/t/m1.avro", "file:/t/m2.avro"]
    assert written["snapshot-log"] == []
    assert written["metadata-log"] == []
    reread = TableMetadata.from_json(written)
    assert reread.format_version == 2
    assert reread == TableMetadata.from_json(V1).upgrade_to_v2()


def test_v1_without_uuid_needs_an_explicit_upgrade() -> None:
    m = TableMetadata.from_json(_with(V1, table_uuid=...))
    assert m.table_uuid is None
    with pytest.raises(ValidationError, match=r"upgrade_to_v2\(\)"):
        m.to_json()
    upgraded = m.upgrade_to_v2()
    assert upgraded.format_version == 2
    assert uuid.UUID(upgraded.table_uuid).version == 4
    assert upgraded.to_json()["table-uuid"] == upgraded.table_uuid
    assert upgraded.upgrade_to_v2() is upgraded


def test_unknown_fields_survive_a_rewrite(tmp_path) -> None:
    doc = _with(V2, **{"x_vendor_field": {"nested": [1, 2.5, None]}})
    m = TableMetadata.from_json(doc)
    assert m.extra["x-vendor-field"] == {"nested": [1, 2.5, None]}
    location = str(tmp_path / "v2.metadata.json")
    write_table_metadata(FileIO(), location, m)
    written = json.loads((tmp_path / "v2.metadata.json").read_text())
    assert written["statistics"] == V2["statistics"]
    assert written["partition-statistics"] == V2["partition-statistics"]
    assert written["x-vendor-field"] == {"nested": [1, 2.5, None]}


def test_no_current_snapshot() -> None:
    doc = _with(V2, current_snapshot_id=-1, refs={}, snapshots=[], snapshot_log=[])
    doc["statistics"] = doc["partition-statistics"] = []
    m = TableMetadata.from_json(doc)
    assert m.current_snapshot_id is None
    assert m.current_snapshot() is None
    assert m.to_json()["current-snapshot-id"] == -1
    assert TableMetadata.from_json(_with(doc, current_snapshot_id=None)) == m
    assert TableMetadata.from_json(_with(doc, current_snapshot_id=...)) == m
    assert TableMetadata.from_json(_with(V1, current_snapshot_id=-1)).refs == {}


def test_lookups() -> None:
    m = TableMetadata.from_json(V2)
    assert m.snapshot_for_ref("audit").snapshot_id == S1
    assert [s.snapshot_id for s in m.ancestors_of(S2)] == [S2, S1]
    assert [s.snapshot_id for s in m.ancestors_of(S1)] == [S1]
    assert m.specs_by_id() == {0: m.spec()}
    assert m.sort_order_by_id(3) is m.sort_order()
    for call, arg, what in (
        (m.snapshot_for_ref, "dev", "branch or tag 'dev'"),
        (m.snapshot_by_id, 5, "snapshot 5"),
        (m.schema_by_id, 7, "schema 7"),
        (m.spec_by_id, 1, "partition spec 1"),
        (m.sort_order_by_id, 0, "sort order 0"),
    ):
        with pytest.raises(NotFoundError, match=f"{what} not found in table s3://bucket/test"):
            call(arg)
    with pytest.raises(NotFoundError):
        next(m.ancestors_of(5))


def test_ancestry_stops_at_expired_parents() -> None:
    doc = copy.deepcopy(V2)
    doc["snapshots"][0]["parent-snapshot-id"] = 1  # long expired
    m = TableMetadata.from_json(doc)
    assert [s.snapshot_id for s in m.ancestors_of(S2)] == [S2, S1]


def test_ancestry_loops_are_refused() -> None:
    doc = copy.deepcopy(V2)
    doc["snapshots"][0]["parent-snapshot-id"] = S2
    with pytest.raises(ValidationError, match="its own ancestor"):
        list(TableMetadata.from_json(doc).ancestors_of(S2))


def test_typed_properties() -> None:
    """Declared properties read strictly from the metadata's map (`icecore.spec.properties`)."""
    size = IntProperty("n", 1)
    flag = BoolProperty("t", False)
    m = TableMetadata.from_json(
        _with(V2, properties={"n": "42", "t": "TRUE", "f": "false", "bad": "4x", "yes": "yes"})
    )
    assert size.read(m.properties) == 42
    assert IntProperty("missing", 7).read(m.properties) == 7
    assert flag.read(m.properties) is True
    assert BoolProperty("f", True).read(m.properties) is False
    assert BoolProperty("missing", True).read(m.properties) is True
    with pytest.raises(ValidationError, match="property bad must be an integer, got '4x'"):
        IntProperty("bad", 0).read(m.properties)
    with pytest.raises(ValidationError, match="property yes must be true or false"):
        BoolProperty("yes", False).read(m.properties)
    assert DELETE_TARGET_FILE_SIZE_BYTES.read(m.properties) == 64 * 1024 * 1024


def _tag(snapshot_id: int) -> dict:
    return {"snapshot-id": snapshot_id, "type": "tag"}


def _dup_snapshot() -> list:
    return [*V2["snapshots"], V2["snapshots"][0]]


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        (_with(V2, format_version=4), "unsupported format-version 4"),
        (_with(V2, format_version=3), "next-row-id is required in format v3"),
        (_with(V2, format_version=0), "unsupported format-version 0"),
        (_with(V2, format_version="2"), "'format-version' must be an integer"),
        (_with(V2, format_version=...), "'format-version' is missing"),
        (_with(V2, location=...), "'location' is missing"),
        (_with(V2, last_column_id=...), "'last-column-id' is missing"),
        (_with(V2, last_updated_ms="now"), "'last-updated-ms' must be an integer"),
        (_with(V2, table_uuid=...), "'table-uuid' is missing"),
        (_with(V2, last_sequence_number=...), "'last-sequence-number' is missing"),
        (_with(V2, schemas=...), "'schemas' is missing"),
        (_with(V2, partition_specs=...), "'partition-specs' is missing"),
        (_with(V2, last_partition_id=...), "'last-partition-id' is missing"),
        (_with(V2, sort_orders=...), "'sort-orders' is missing"),
        (_with(V2, current_schema_id=...), "'current-schema-id' is missing"),
        (_with(V2, default_spec_id=...), "'default-spec-id' is missing"),
        (_with(V2, default_sort_order_id=...), "'default-sort-order-id' is missing"),
        (_with(V1, schema=...), "'schemas' \\(or v1 'schema'\\) is missing"),
        (_with(V1, partition_spec=...), "'partition-specs' \\(or v1 'partition-spec'\\)"),
        (_with(V2, current_schema_id=5), "current-schema-id 5 is not among the schema ids"),
        (_with(V2, default_spec_id=2), "default-spec-id 2 is not among the partition spec"),
        (_with(V2, default_sort_order_id=1), "default-sort-order-id 1 is not among"),
        (_with(V2, schemas=V2["schemas"] * 2), "duplicate schema id"),
        (_with(V2, snapshots=_dup_snapshot()), f"duplicate snapshot id\\(s\\) \\[{S1}\\]"),
        (_with(V2, current_snapshot_id=S3), f"current-snapshot-id {S3} is not a known"),
        (_with(V2, refs={**V2["refs"], "old": _tag(S3)}), f"'old' points at unknown .* {S3}"),
        (_with(V2, refs={"main": _tag(S2)}), "ref 'main' must be a branch"),
        (
            _with(V2, refs={"main": {"snapshot-id": S1, "type": "branch"}}),
            f"current-snapshot-id {S2} does not match the main branch \\({S1}\\)",
        ),
        (
            _with(V2, current_snapshot_id=-1),
            f"current-snapshot-id None does not match the main branch \\({S2}\\)",
        ),
        (_with(V2, last_sequence_number=0), "sequence number 1, above last-sequence-number 0"),
        (_with(V2, refs={"r": _tag(S1) | {"min-snapshots-to-keep": 1}}), "ref 'r': a tag cannot"),
        (_with(V2, properties={"a": 1}), "'properties' value of 'a' must be a string"),
        (_with(V2, snapshots={}), "'snapshots' must be a JSON array"),
        (_with(V2, schemas=[{"type": "struct"}]), "schema lacks 'fields'"),
        (_with(V2, location=""), "location must not be empty"),
        ([V2], "table metadata must be a JSON object"),
    ],
)
def test_invalid_metadata_names_file_and_problem(doc: object, problem: str) -> None:
    location = "s3://bucket/t/metadata/00007-x.metadata.json"
    with pytest.raises(MetadataError, match=problem) as err:
        TableMetadata.from_json(doc, location=location)
    assert err.value.path == location
    assert str(err.value).startswith(location + ": ")


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b'{"format-version": 2,', "malformed JSON"),
        (b"", "malformed JSON"),
        (b'{"format-version": NaN}', "malformed JSON: NaN is not valid JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b"\x1f\x8b\x08\x00garbage", "corrupt gzip data"),
    ],
)
def test_unreadable_files(tmp_path, content: bytes, problem: str) -> None:
    path = tmp_path / "v9.metadata.json"
    path.write_bytes(content)
    with pytest.raises(MetadataError, match=problem) as err:
        read_table_metadata(FileIO(), str(path))
    assert err.value.path == str(path)


def test_missing_metadata_file_is_named(tmp_path) -> None:
    location = f"file://{tmp_path}/v1.metadata.json"
    with pytest.raises(FileError, match="file not found") as err:
        read_table_metadata(FileIO(), location)
    assert err.value.path == location


# PyIceberg's files: what another writer actually produces.


def _pyiceberg_table(tmp_path, version: int):
    catalog = SqlCatalog(
        "icecore", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/wh"
    )
    catalog.create_namespace("db")
    schema = PySchema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "name", StringType()),
        NestedField(3, "day", DateType()),
        identifier_field_ids=[1],
    )
    spec = PyPartitionSpec(PyPartitionField(3, 1000, IdentityTransform(), "day"))
    table = catalog.create_table(
        "db.t", schema=schema, partition_spec=spec, properties={"format-version": str(version)}
    )
    rows = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "name": ["a", "b", None],
            "day": [datetime.date(2024, 1, 1), datetime.date(2024, 1, 2), None],
        },
        schema=schema.as_arrow(),
    )
    table.append(rows)
    table.append(rows)
    return catalog.load_table("db.t")


@pytest.mark.interop
@pytest.mark.parametrize("version", [1, 2])
def test_reads_pyiceberg_metadata(tmp_path, version: int) -> None:
    table = _pyiceberg_table(tmp_path, version)
    theirs = table.metadata
    ours = read_table_metadata(FileIO(), table.metadata_location)

    assert ours.format_version == theirs.format_version == version
    assert ours.table_uuid == str(theirs.table_uuid)
    assert ours.location == theirs.location
    assert ours.last_sequence_number == (theirs.last_sequence_number if version == 2 else 0)
    assert ours.last_updated_ms == theirs.last_updated_ms
    assert ours.last_column_id == theirs.last_column_id
    assert ours.current_schema_id == theirs.current_schema_id
    assert [json.loads(s.model_dump_json(by_alias=True)) for s in theirs.schemas] == [
        s.to_json() for s in ours.schemas
    ]
    assert ours.default_spec_id == theirs.default_spec_id
    assert ours.last_partition_id == theirs.last_partition_id
    assert [(f.source_id, f.field_id, str(f.transform), f.name) for f in ours.spec().fields] == [
        (f.source_id, f.field_id, str(f.transform), f.name) for f in theirs.spec().fields
    ]
    assert ours.default_sort_order_id == theirs.default_sort_order_id
    assert ours.properties == theirs.properties
    assert ours.current_snapshot_id == theirs.current_snapshot_id
    assert len(ours.snapshots) == len(theirs.snapshots) == 2
    for mine, other in zip(ours.snapshots, theirs.snapshots, strict=True):
        assert mine.snapshot_id == other.snapshot_id
        assert mine.parent_snapshot_id == other.parent_snapshot_id
        assert mine.sequence_number == (other.sequence_number or 0)
        assert mine.timestamp_ms == other.timestamp_ms
        assert mine.manifest_list == other.manifest_list
        assert mine.schema_id == other.schema_id
        assert mine.operation is not None
        assert mine.operation.value == other.summary.operation.value
        assert mine.summary.to_json() == {
            "operation": other.summary.operation.value,
            **other.summary.additional_properties,
        }
    current = ours.current_snapshot()
    assert current.summary.get("total-records") == "6"
    assert current.summary.get("total-data-files") == "6"  # 3 partitions, 2 appends
    assert [s.snapshot_id for s in ours.ancestors_of(current.snapshot_id)] == [
        s.snapshot_id for s in reversed(theirs.snapshots)
    ]
    assert {n: (r.snapshot_id, r.type.value) for n, r in ours.refs.items()} == {
        n: (r.snapshot_id, r.snapshot_ref_type.value) for n, r in theirs.refs.items()
    }
    assert [(e.timestamp_ms, e.snapshot_id) for e in ours.snapshot_log] == [
        (e.timestamp_ms, e.snapshot_id) for e in theirs.snapshot_log
    ]
    assert [(e.timestamp_ms, e.metadata_file) for e in ours.metadata_log] == [
        (e.timestamp_ms, e.metadata_file) for e in theirs.metadata_log
    ]


@pytest.mark.interop
@pytest.mark.parametrize("version", [1, 2])
def test_pyiceberg_reads_what_we_write(tmp_path, version: int) -> None:
    table = _pyiceberg_table(tmp_path, version)
    ours = read_table_metadata(FileIO(), table.metadata_location)
    location = f"file://{tmp_path}/rewritten.metadata.json"
    write_table_metadata(FileIO(), location, ours)

    theirs = FromInputFile.table_metadata(PyArrowFileIO().new_input(location))
    assert theirs.format_version == 2
    assert str(theirs.table_uuid) == ours.table_uuid
    assert theirs.last_sequence_number == ours.last_sequence_number
    assert theirs.current_snapshot_id == table.metadata.current_snapshot_id
    assert [s.snapshot_id for s in theirs.snapshots] == [
        s.snapshot_id for s in table.metadata.snapshots
    ]
    assert [s.sequence_number for s in theirs.snapshots] == ([1, 2] if version == 2 else [0, 0])
    assert theirs.schemas == table.metadata.schemas
    assert theirs.partition_specs == table.metadata.partition_specs
    assert theirs.refs == table.metadata.refs
    assert read_table_metadata(FileIO(), location) == ours.upgrade_to_v2()
