"""Manifests: writing v2 files Java and PyIceberg can read, reading v1/v2 files by field id
with the spec's inheritance rules, partition summaries, and the Avro decoder underneath."""

from __future__ import annotations

import io as _io
import json
import math
import struct
import uuid
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pytest

from icecore.avro.decoder import compile_decoder
from icecore.avro.schema import decimal_required_bytes, make_compatible_name
from icecore.errors import ManifestError, ValidationError
from icecore.io import FileIO
from icecore.spec.manifest import (
    DataFile,
    EntryStatus,
    FileContent,
    FileFormat,
    ManifestEntry,
    ManifestWriter,
    manifest_file_from_path,
    read_manifest,
)
from icecore.spec.manifest_list import (
    UNASSIGNED_SEQ,
    ManifestContent,
    ManifestFile,
    ManifestListWriter,
    PartitionFieldSummary,
)
from icecore.spec.partitioning import UNPARTITIONED, PartitionField, PartitionSpec
from icecore.spec.schema import Schema
from icecore.spec.transforms import parse_transform
from icecore.spec.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

SCHEMA = Schema(
    (
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "ts", TimestampType()),
        NestedField(3, "category", StringType()),
        NestedField(4, "price", DoubleType()),
        NestedField(5, "day", DateType()),
        NestedField(6, "key", UUIDType()),
        NestedField(7, "amount", DecimalType(9, 2)),
        NestedField(8, "ratio", FloatType()),
        NestedField(9, "n", IntegerType()),
        NestedField(10, "t", TimeType()),
        NestedField(11, "tz", TimestamptzType()),
        NestedField(12, "fx", FixedType(3)),
        NestedField(13, "bin", BinaryType()),
        NestedField(14, "flag", BooleanType()),
    ),
    schema_id=3,
)


def spec(*fields: tuple[int, str, str], spec_id: int = 0) -> PartitionSpec:
    return PartitionSpec(
        spec_id,
        tuple(
            PartitionField(source, 1000 + i, parse_transform(t), name)
            for i, (source, t, name) in enumerate(fields)
        ),
    )


SPEC = spec((3, "identity", "category"), (2, "day", "ts_day"), (1, "bucket[16]", "id_bucket"))
IO = FileIO()


def data_file(path: str, partition: tuple[Any, ...], **kwargs: Any) -> DataFile:
    defaults: dict[str, Any] = {
        "file_format": FileFormat.PARQUET,
        "record_count": 10,
        "file_size_in_bytes": 1000,
    }
    return DataFile(path, partition=partition, **(defaults | kwargs))


def full_data_file(path: str = "s3://bucket/t/data/a.parquet") -> DataFile:
    """Every field set, with values that need more than one varint byte."""
    return DataFile(
        file_path=path + "/" + "x" * 80,  # a path longer than 63 bytes: two-byte length
        file_format=FileFormat.PARQUET,
        partition=("books", 19_700, 7),
        record_count=123_456_789_012,
        file_size_in_bytes=2**40 + 5,
        content=FileContent.DATA,
        column_sizes={1: 100, 2: 200, 1_000_000: 2**33},
        value_counts={1: 10, 2: 10},
        null_value_counts={1: 0, 2: 3},
        nan_value_counts={4: 1},
        lower_bounds={1: struct.pack("<q", -5), 3: b"a" * 70},
        upper_bounds={1: struct.pack("<q", 2**62), 3: b"z"},
        key_metadata=b"\x00\x01secret",
        split_offsets=[4, 2**31 + 7],
        sort_order_id=2,
        spec_id=0,
    )


def commit(manifest: ManifestFile, tmp_path: Path, snapshot_id: int, seq: int) -> ManifestFile:
    """Put `manifest` in a manifest list committing at `seq`, as a snapshot would."""
    writer = ManifestListWriter(IO, str(tmp_path / f"snap-{seq}.avro"), snapshot_id, None, seq)
    listed = writer.add(manifest)
    writer.close()
    return listed


def raw_records(path: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """What an independent Avro reader (fastavro) sees in a file: metadata and records."""
    with open(path, "rb") as f:
        reader = fastavro.reader(f)
        return dict(reader.metadata), list(reader)


def write(tmp_path: Path, name: str, files: list[DataFile], **kwargs: Any) -> ManifestFile:
    writer = ManifestWriter(
        IO, str(tmp_path / name), kwargs.pop("spec", SPEC), SCHEMA, 42, **kwargs
    )
    for f in files:
        writer.add(f)
    return writer.close()


# Round trips ------------------------------------------------------------------------------


def test_round_trip_keeps_every_field(tmp_path: Path) -> None:
    written = [full_data_file(), data_file("s3://bucket/t/data/b.parquet", (None, None, 0))]
    manifest = commit(write(tmp_path, "m.avro", written), tmp_path, 42, 5)

    entries = list(read_manifest(IO, manifest))

    assert [e.data_file for e in entries] == written
    assert [
        (e.status, e.snapshot_id, e.sequence_number, e.file_sequence_number) for e in entries
    ] == [
        (EntryStatus.ADDED, 42, 5, 5),
        (EntryStatus.ADDED, 42, 5, 5),
    ]


def test_partition_values_keep_their_in_memory_form(tmp_path: Path) -> None:
    """Dates and timestamps come back as ints, uuids as UUID, decimals as Decimal: no
    datetime objects, and no overflow for dates outside years 1..9999."""
    key = uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7")
    typed = spec(
        (5, "identity", "day"),
        (2, "identity", "ts"),
        (6, "identity", "key"),
        (7, "identity", "amount"),
        (4, "identity", "price"),
        (8, "identity", "ratio"),
        (10, "identity", "t"),
        (11, "identity", "tz"),
        (12, "identity", "fx"),
        (13, "identity", "bin"),
        (14, "identity", "flag"),
        (11, "hour", "tz_hour"),
        (11, "month", "tz_month"),
        (11, "year", "tz_year"),
    )
    values = (-800_000_000, -1, key, Decimal("-14.20"), 2.5, -0.0)
    values += (86_399_999_999, 2**62, b"\x00\xff\x01", b"", True, -1, -1, -1)
    manifest = write(tmp_path, "m.avro", [data_file("a", values)], spec=typed)

    (entry,) = read_manifest(IO, manifest)

    assert entry.data_file.partition == values
    assert [type(v) for v in entry.data_file.partition] == [
        int, int, uuid.UUID, Decimal, float, float, int, int, bytes, bytes, bool, int, int, int,
    ]  # fmt: skip
    assert str(entry.data_file.partition[3]) == "-14.20"
    assert math.copysign(1.0, entry.data_file.partition[5]) == -1.0


def test_delete_manifest_round_trip(tmp_path: Path) -> None:
    deletes = [
        data_file(
            "pos.parquet",
            ("a", 1, 2),
            content=FileContent.POSITION_DELETES,
            referenced_data_file="d",
        ),
        data_file(
            "eq.parquet", ("b", 1, 2), content=FileContent.EQUALITY_DELETES, equality_ids=[1, 3]
        ),
    ]
    manifest = write(tmp_path, "d.avro", deletes, content=ManifestContent.DELETES)
    metadata, _ = raw_records(manifest.manifest_path)

    assert manifest.content == ManifestContent.DELETES
    assert metadata["content"] == "deletes"
    assert [e.data_file for e in read_manifest(IO, manifest)] == deletes


def test_without_metrics_only_the_metrics_are_left_out(tmp_path: Path) -> None:
    manifest = write(tmp_path, "m.avro", [full_data_file()])

    (full,) = read_manifest(IO, manifest)
    (lean,) = read_manifest(IO, manifest, include_metrics=False)

    skipped = ("column_sizes", "value_counts", "null_value_counts", "nan_value_counts")
    skipped += ("lower_bounds", "upper_bounds", "split_offsets")
    assert all(getattr(lean.data_file, name) is None for name in skipped)
    assert lean.data_file == replace(full.data_file, **dict.fromkeys(skipped))
    assert lean.data_file.key_metadata == b"\x00\x01secret"
    assert lean.data_file.sort_order_id == 2


@pytest.mark.parametrize("codec", ["null", "deflate", "bzip2", "xz"])
def test_codecs(tmp_path: Path, codec: str) -> None:
    files = [full_data_file(f"s3://b/{i}") for i in range(300)]  # several Avro blocks
    manifest = write(tmp_path, "m.avro", files, codec=codec)
    metadata, _ = raw_records(manifest.manifest_path)

    assert metadata["avro.codec"] == codec
    assert [e.data_file for e in read_manifest(IO, manifest)] == files


def test_spec_orders_the_partition_tuple_by_field_id(tmp_path: Path) -> None:
    """The partition struct is matched by field id: a spec listing the same fields in
    another order gets the tuple in its own order."""
    manifest = write(tmp_path, "m.avro", [data_file("a", ("x", 3, 9))])
    reordered = PartitionSpec(0, (SPEC.fields[2], SPEC.fields[0], SPEC.fields[1]))

    (entry,) = read_manifest(IO, manifest, spec=reordered)

    assert entry.data_file.partition == (9, "x", 3)


def test_unpartitioned_manifest(tmp_path: Path) -> None:
    manifest = write(tmp_path, "m.avro", [data_file("a", ())], spec=UNPARTITIONED)

    assert [e.data_file.partition for e in read_manifest(IO, manifest)] == [()]
    assert manifest.partitions == []


# What the file looks like -------------------------------------------------------------------


def test_written_schema_has_java_names_and_every_field_id(tmp_path: Path) -> None:
    manifest = write(tmp_path, "m.avro", [data_file("a", ("x", 1, 2))])
    metadata, _ = raw_records(manifest.manifest_path)
    schema = json.loads(metadata["avro.schema"])

    assert schema["name"] == "manifest_entry"
    assert [(f["name"], f["field-id"]) for f in schema["fields"]] == [
        ("status", 0),
        ("snapshot_id", 1),
        ("sequence_number", 3),
        ("file_sequence_number", 4),
        ("data_file", 2),
    ]
    data_file_record = schema["fields"][4]["type"]
    assert data_file_record["name"] == "r2"
    assert [f["field-id"] for f in data_file_record["fields"]] == [
        134, 100, 101, 102, 103, 104, 108, 109, 110, 137, 125, 128, 131, 132, 135, 140, 143,
    ]  # fmt: skip
    partition = data_file_record["fields"][3]["type"]
    assert partition["name"] == "r102"
    assert [(f["name"], f["field-id"], f["type"]) for f in partition["fields"]] == [
        ("category", 1000, ["null", "string"]),
        ("ts_day", 1001, ["null", {"type": "int", "logicalType": "date"}]),
        ("id_bucket", 1002, ["null", "int"]),
    ]
    column_sizes = data_file_record["fields"][6]
    assert column_sizes["type"] == [
        "null",
        {
            "type": "array",
            "items": {
                "type": "record",
                "name": "k117_v118",
                "fields": [
                    {"name": "key", "type": "int", "field-id": 117},
                    {"name": "value", "type": "long", "field-id": 118},
                ],
            },
            "logicalType": "map",
        },
    ]
    split_offsets = data_file_record["fields"][13]["type"][1]
    assert split_offsets == {"type": "array", "items": "long", "element-id": 133}
    assert all("field-id" in f for f in _all_fields(schema))


def _all_fields(record: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for f in record["fields"]:
        out.append(f)
        for t in f["type"] if isinstance(f["type"], list) else [f["type"]]:
            if isinstance(t, dict) and t.get("type") == "record":
                out.extend(_all_fields(t))
            if isinstance(t, dict) and t.get("type") == "array" and isinstance(t["items"], dict):
                out.extend(_all_fields(t["items"]))
    return out


def test_written_metadata(tmp_path: Path) -> None:
    manifest = write(tmp_path, "m.avro", [data_file("a", ("x", 1, 2))])
    metadata, _ = raw_records(manifest.manifest_path)

    assert json.loads(metadata["schema"]) == SCHEMA.to_json()
    assert metadata["schema-id"] == "3"
    assert json.loads(metadata["partition-spec"]) == [
        {"name": "category", "transform": "identity", "source-id": 3, "field-id": 1000},
        {"name": "ts_day", "transform": "day", "source-id": 2, "field-id": 1001},
        {"name": "id_bucket", "transform": "bucket[16]", "source-id": 1, "field-id": 1002},
    ]
    assert metadata["partition-spec-id"] == "0"
    assert metadata["format-version"] == "2"
    assert metadata["content"] == "data"
    assert manifest.manifest_length == Path(manifest.manifest_path).stat().st_size


def test_unusual_partition_names_are_sanitized_like_java(tmp_path: Path) -> None:
    odd = spec((3, "identity", "cat-egory"), (1, "bucket[4]", "1st"))
    manifest = write(tmp_path, "m.avro", [data_file("a", ("x", 1))], spec=odd)
    metadata, records = raw_records(manifest.manifest_path)
    partition = json.loads(metadata["avro.schema"])["fields"][4]["type"]["fields"][3]["type"]

    assert [(f["name"], f.get("iceberg-field-name")) for f in partition["fields"]] == [
        ("cat_x2Degory", "cat-egory"),
        ("_1st", "1st"),
    ]
    assert records[0]["data_file"]["partition"] == {"cat_x2Degory": "x", "_1st": 1}
    assert [e.data_file.partition for e in read_manifest(IO, manifest)] == [("x", 1)]


def test_make_compatible_name() -> None:
    assert make_compatible_name("ok_name1") == "ok_name1"
    assert make_compatible_name("a.b") == "a_x2Eb"
    assert make_compatible_name("9lives") == "_9lives"
    assert make_compatible_name("a b") == "a_x20b"


def test_decimal_required_bytes_match_java() -> None:
    assert [decimal_required_bytes(p) for p in (1, 2, 3, 9, 10, 18, 19, 38)] == [
        1, 1, 2, 4, 5, 8, 9, 16,
    ]  # fmt: skip


# Sequence numbers ----------------------------------------------------------------------------


def entry(status: EntryStatus, path: str, seq: int | None, file_seq: int | None) -> ManifestEntry:
    return ManifestEntry(status, 7, seq, file_seq, data_file(path, ("x", 1, 2)))


def test_added_entries_are_written_with_null_sequence_numbers(tmp_path: Path) -> None:
    writer = ManifestWriter(IO, str(tmp_path / "m.avro"), SPEC, SCHEMA, 42)
    writer.add(data_file("new", ("x", 1, 2)))
    writer.add(data_file("rewritten", ("x", 1, 2)), data_sequence_number=3)
    writer.existing(entry(EntryStatus.ADDED, "kept", 4, 6))
    writer.delete(entry(EntryStatus.EXISTING, "gone", 2, 5))
    manifest = writer.close()
    _, records = raw_records(manifest.manifest_path)

    assert [
        (r["status"], r["snapshot_id"], r["sequence_number"], r["file_sequence_number"])
        for r in records
    ] == [(1, 42, None, None), (1, 42, 3, None), (0, 7, 4, 6), (2, 42, 2, 5)]
    assert (manifest.added_files_count, manifest.existing_files_count) == (2, 1)
    assert (manifest.deleted_files_count, manifest.added_rows_count) == (1, 20)
    assert (manifest.existing_rows_count, manifest.deleted_rows_count) == (10, 10)
    assert (manifest.sequence_number, manifest.added_snapshot_id) == (UNASSIGNED_SEQ, 42)
    # The deleted file's 2 is not live; the rewritten file's explicit 3 is the oldest.
    assert manifest.min_sequence_number == 3


def test_reading_inherits_as_the_spec_says(tmp_path: Path) -> None:
    writer = ManifestWriter(IO, str(tmp_path / "m.avro"), SPEC, SCHEMA, 42)
    writer.add(data_file("new", ("x", 1, 2)))
    writer.add(data_file("rewritten", ("x", 1, 2)), data_sequence_number=3)
    writer.existing(entry(EntryStatus.ADDED, "kept", 4, 6))
    writer.delete(entry(EntryStatus.EXISTING, "gone", 2, 5))
    manifest = commit(writer.close(), tmp_path, 42, 9)

    entries = list(read_manifest(IO, manifest))

    assert [
        (e.data_file.file_path, e.status, e.snapshot_id, e.sequence_number, e.file_sequence_number)
        for e in entries
    ] == [
        ("new", EntryStatus.ADDED, 42, 9, 9),
        ("rewritten", EntryStatus.ADDED, 42, 3, 9),
        ("kept", EntryStatus.EXISTING, 7, 4, 6),
        ("gone", EntryStatus.DELETED, 42, 2, 5),
    ]
    assert [e.data_file.file_path for e in read_manifest(IO, manifest, live_only=True)] == [
        "new",
        "rewritten",
        "kept",
    ]


def test_null_snapshot_id_is_inherited(tmp_path: Path) -> None:
    path = _fastavro_manifest(tmp_path, snapshot_id=None, status=0, seq=4)
    manifest = _listed(path, added_snapshot_id=77, seq=9)

    (read,) = read_manifest(IO, manifest)

    assert (read.snapshot_id, read.sequence_number, read.file_sequence_number) == (77, 4, 4)


def test_existing_entry_without_sequence_number_is_an_error(tmp_path: Path) -> None:
    path = _fastavro_manifest(tmp_path, snapshot_id=1, status=0, seq=None)

    with pytest.raises(ManifestError, match=r"EXISTING entry for f\.parquet without a sequence"):
        list(read_manifest(IO, _listed(path, added_snapshot_id=1, seq=9)))
    # A table's first commit has sequence number 0: nothing can be older.
    (read,) = read_manifest(IO, _listed(path, added_snapshot_id=1, seq=0))
    assert read.sequence_number == 0


def test_uncommitted_manifest_reads_with_unknown_sequence_numbers(tmp_path: Path) -> None:
    manifest = write(tmp_path, "m.avro", [data_file("a", ("x", 1, 2))])

    (read,) = read_manifest(IO, manifest)

    assert (read.sequence_number, read.file_sequence_number, read.snapshot_id) == (None, None, 42)


def test_only_added_entries_leave_min_sequence_number_to_the_commit(tmp_path: Path) -> None:
    manifest = write(tmp_path, "m.avro", [data_file("a", ("x", 1, 2))])
    assert manifest.min_sequence_number == UNASSIGNED_SEQ

    listed = commit(manifest, tmp_path, 42, 11)

    assert (listed.sequence_number, listed.min_sequence_number) == (11, 11)


def test_carried_over_entries_need_their_sequence_numbers(tmp_path: Path) -> None:
    writer = ManifestWriter(IO, str(tmp_path / "m.avro"), SPEC, SCHEMA, 42)
    with pytest.raises(ValidationError, match="needs its data sequence number"):
        writer.existing(entry(EntryStatus.ADDED, "kept", None, None))
    with pytest.raises(ValidationError, match="needs its data sequence number"):
        writer.delete(entry(EntryStatus.ADDED, "gone", None, 3))


# Partition summaries -----------------------------------------------------------------------


def test_partition_summaries(tmp_path: Path) -> None:
    files = [
        data_file("a", ("b", 19_000, 3)),
        data_file("b", ("a", 19_002, 15)),
        data_file("c", ("c", None, 0)),
    ]
    summaries = write(tmp_path, "m.avro", files).partitions

    assert summaries == [
        PartitionFieldSummary(False, False, b"a", b"c"),
        PartitionFieldSummary(True, False, struct.pack("<i", 19_000), struct.pack("<i", 19_002)),
        PartitionFieldSummary(False, False, b"\x00\x00\x00\x00", b"\x0f\x00\x00\x00"),
    ]


def test_float_summaries_exclude_nan_and_order_negative_zero_first(tmp_path: Path) -> None:
    floats = spec((4, "identity", "price"), (8, "identity", "ratio"))
    files = [
        data_file("a", (float("nan"), 0.0)),
        data_file("b", (2.5, -0.0)),
        data_file("c", (-1.5, None)),
    ]
    summaries = write(tmp_path, "m.avro", files, spec=floats).partitions

    assert summaries == [
        PartitionFieldSummary(False, True, struct.pack("<d", -1.5), struct.pack("<d", 2.5)),
        PartitionFieldSummary(True, False, struct.pack("<f", -0.0), struct.pack("<f", 0.0)),
    ]


def test_all_null_or_nan_field_has_no_bounds(tmp_path: Path) -> None:
    floats = spec((4, "identity", "price"), (3, "identity", "category"))
    files = [data_file("a", (float("nan"), None)), data_file("b", (None, None))]

    assert write(tmp_path, "m.avro", files, spec=floats).partitions == [
        PartitionFieldSummary(True, True, None, None),
        PartitionFieldSummary(True, False, None, None),
    ]


# Refusing bad input --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (data_file("a", ("x", 1)), "has 2 partition values; spec 0 has 3 fields"),
        (data_file("a", ("x", "2024-01-01", 1)), "a: bad partition value"),
        (data_file("a", ("x", 1, 2), spec_id=4), "belongs to partition spec 4"),
        (data_file("a", ("x", 1, 2), content=FileContent.POSITION_DELETES), "to a DATA manifest"),
        (data_file("a", ("x", 1, 2), file_format="lance"), "a has unknown format 'lance'"),
    ],
)
def test_writer_refuses_bad_files(tmp_path: Path, bad: DataFile, message: str) -> None:
    writer = ManifestWriter(IO, str(tmp_path / "m.avro"), SPEC, SCHEMA, 42)
    with pytest.raises(ValidationError, match=message):
        writer.add(bad)


def test_equality_deletes_need_equality_ids(tmp_path: Path) -> None:
    writer = ManifestWriter(
        IO, str(tmp_path / "m.avro"), SPEC, SCHEMA, 42, content=ManifestContent.DELETES
    )
    with pytest.raises(ValidationError, match="lacks equality_ids"):
        writer.add(data_file("eq", ("x", 1, 2), content=FileContent.EQUALITY_DELETES))


def test_writer_never_overwrites(tmp_path: Path) -> None:
    (tmp_path / "m.avro").write_bytes(b"precious")
    with pytest.raises(Exception, match="refusing to overwrite"):
        write(tmp_path, "m.avro", [data_file("a", ("x", 1, 2))])
    assert (tmp_path / "m.avro").read_bytes() == b"precious"


# Reading bad files --------------------------------------------------------------------------


def _listed(path: str, added_snapshot_id: int = 1, seq: int = 1) -> ManifestFile:
    return ManifestFile(
        path, 0, 0, ManifestContent.DATA, seq, seq, added_snapshot_id, 1, 0, 0, 1, 0, 0
    )


def _fastavro_manifest(
    tmp_path: Path,
    *,
    snapshot_id: int | None = 1,
    status: int = 1,
    seq: int | None = None,
    file_path_id: int = 100,
    name: str = "f.avro",
) -> str:
    """A minimal v2 manifest written by fastavro from a hand-written schema."""
    long_opt: Any = ["null", "long"]
    schema = {
        "type": "record",
        "name": "manifest_entry",
        "fields": [
            {"name": "status", "type": "int", "field-id": 0},
            {"name": "snapshot_id", "type": long_opt, "field-id": 1},
            {"name": "sequence_number", "type": long_opt, "field-id": 3},
            {"name": "file_sequence_number", "type": long_opt, "field-id": 4},
            {
                "name": "data_file",
                "field-id": 2,
                "type": {
                    "type": "record",
                    "name": "r2",
                    "fields": [
                        {"name": "content", "type": "int", "field-id": 134},
                        {"name": "file_path", "type": "string", "field-id": file_path_id},
                        {"name": "file_format", "type": "string", "field-id": 101},
                        {
                            "name": "partition",
                            "field-id": 102,
                            "type": {"type": "record", "name": "r102", "fields": []},
                        },
                        {"name": "record_count", "type": "long", "field-id": 103},
                        {"name": "file_size_in_bytes", "type": "long", "field-id": 104},
                    ],
                },
            },
        ],
    }
    record = {
        "status": status,
        "snapshot_id": snapshot_id,
        "sequence_number": seq,
        "file_sequence_number": seq,
        "data_file": {
            "content": 0,
            "file_path": "f.parquet",
            "file_format": "parquet",
            "partition": {},
            "record_count": 1,
            "file_size_in_bytes": 2,
        },
    }
    path = str(tmp_path / name)
    with open(path, "wb") as f:
        fastavro.writer(f, schema, [record], metadata={"partition-spec": "[]"})
    return path


def test_lowercase_format_and_minimal_schema(tmp_path: Path) -> None:
    (read,) = read_manifest(IO, _listed(_fastavro_manifest(tmp_path), seq=3))

    assert read.data_file == DataFile("f.parquet", FileFormat.PARQUET, (), 1, 2)
    assert (read.sequence_number, read.file_sequence_number) == (3, 3)


def test_missing_manifest_is_named(tmp_path: Path) -> None:
    path = str(tmp_path / "nope.avro")
    with pytest.raises(ManifestError, match="file not found") as err:
        list(read_manifest(IO, _listed(path)))
    assert err.value.path == path


def test_field_with_wrong_id_is_named(tmp_path: Path) -> None:
    path = _fastavro_manifest(tmp_path, file_path_id=999)
    with pytest.raises(ManifestError, match="lacks required field 100 file_path in data_file"):
        list(read_manifest(IO, _listed(path)))


def test_manifest_list_is_not_a_manifest(tmp_path: Path) -> None:
    manifest = write(tmp_path, "m.avro", [data_file("a", ("x", 1, 2))])
    commit(manifest, tmp_path, 42, 1)
    with pytest.raises(ManifestError, match="manifest lacks required field 0 status") as err:
        list(read_manifest(IO, _listed(str(tmp_path / "snap-1.avro"))))
    assert err.value.path == str(tmp_path / "snap-1.avro")


def test_not_an_avro_file(tmp_path: Path) -> None:
    (tmp_path / "x.avro").write_text("hello")
    with pytest.raises(ManifestError, match="is not an Avro file"):
        list(read_manifest(IO, _listed(str(tmp_path / "x.avro"))))


@pytest.mark.parametrize("cut", [30, -40, -5])
def test_truncated_manifest(tmp_path: Path, cut: int) -> None:
    manifest = write(tmp_path, "m.avro", [full_data_file(f"p{i}") for i in range(50)])
    data = Path(manifest.manifest_path).read_bytes()
    Path(manifest.manifest_path).write_bytes(data[:cut])

    with pytest.raises(ManifestError, match="manifest") as err:
        list(read_manifest(IO, manifest))
    assert err.value.path == manifest.manifest_path


def test_partition_field_missing_from_the_file(tmp_path: Path) -> None:
    manifest = write(tmp_path, "m.avro", [data_file("a", ("x", 1, 2))])
    wider = spec(
        (3, "identity", "category"),
        (2, "day", "ts_day"),
        (1, "bucket[16]", "b"),
        (9, "identity", "n"),
    )
    with pytest.raises(ManifestError, match="lacks required field 1003 p1003 in partition"):
        list(read_manifest(IO, manifest, spec=wider))


def test_v1_inline_manifest(tmp_path: Path) -> None:
    four = replace(SPEC, spec_id=4)
    manifest = write(tmp_path, "m.avro", [data_file("a", ("x", 1, 2), spec_id=4)], spec=four)

    listed = manifest_file_from_path(IO, manifest.manifest_path, 42)

    assert listed == ManifestFile(
        manifest.manifest_path, manifest.manifest_length, 4, ManifestContent.DATA, 0, 0, 42,
        None, None, None, None, None, None,
    )  # fmt: skip
    assert listed.has_added_files and listed.has_existing_files
    (read,) = read_manifest(IO, listed)
    assert (read.sequence_number, read.data_file.spec_id) == (0, 4)


# The decoder on its own ------------------------------------------------------------------------


def _encode(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    out = _io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


DECODER_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "r",
    "fields": [
        {"name": "longs", "type": {"type": "array", "items": "long"}},
        {"name": "tail_null", "type": ["long", "null"]},
        {"name": "union", "type": ["null", "string", "long"]},
        {"name": "smap", "type": {"type": "map", "values": "int"}},
        {"name": "flag", "type": "boolean"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "fx", "type": {"type": "fixed", "name": "fx4", "size": 4}},
        {"name": "fx_again", "type": "fx4"},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}},
        {"name": "text", "type": "string"},
        {"name": "blob", "type": ["null", "bytes"]},
        {
            "name": "nested",
            "type": {
                "type": "record",
                "name": "inner",
                "fields": [{"name": "x", "type": "long"}, {"name": "y", "type": "string"}],
            },
        },
        {
            "name": "dec",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 3},
        },
        {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
    ],
}
DECODER_RECORD = {
    "longs": [0, -1, 1, 63, -64, 64, 2**63 - 1, -(2**63)],
    "tail_null": None,
    "union": 2**40,
    "smap": {"a": -3, "ü" * 40: 2**31 - 1},
    "flag": True,
    "f": 1.5,
    "d": -2.25,
    "fx": b"\x00\xff\x10\x01",
    "fx_again": b"abcd",
    "e": "C",
    "text": "é" * 100,
    "blob": b"\x00" * 200,
    "nested": {"x": -(2**35), "y": ""},
    "dec": Decimal("-123456789012345678901234567.891"),
    "u": uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7"),
}


def test_decoder_reads_every_avro_type() -> None:
    data = _encode(DECODER_SCHEMA, DECODER_RECORD)
    value, end = compile_decoder(DECODER_SCHEMA, DECODER_SCHEMA)(data, 0)

    assert end == len(data)
    expected = [DECODER_RECORD[f["name"]] for f in DECODER_SCHEMA["fields"]]
    expected[12] = (-(2**35), "")  # records decode to tuples in reader order
    assert list(value) == expected


@pytest.mark.parametrize("keep", [["text"], ["u", "longs"], [], ["nested", "missing"]])
def test_decoder_skips_what_the_reader_leaves_out(keep: list[str]) -> None:
    data = _encode(DECODER_SCHEMA, DECODER_RECORD)
    by_name = {f["name"]: f for f in DECODER_SCHEMA["fields"]}
    reader = {
        **DECODER_SCHEMA,
        "fields": [by_name.get(n, {"name": n, "type": "null"}) for n in keep],
    }

    value, end = compile_decoder(DECODER_SCHEMA, reader)(data, 0)

    assert end == len(data)
    expected = {**DECODER_RECORD, "nested": (-(2**35), "")}
    assert list(value) == [expected.get(n) for n in keep]


def test_decoder_handles_blocks_with_byte_sizes() -> None:
    """Avro lets writers give an array block as a negative count followed by its size."""
    schema = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "a", "type": {"type": "array", "items": "long"}},
            {"name": "m", "type": ["null", {"type": "array", "items": {
                "type": "record", "name": "kv",
                "fields": [{"name": "key", "type": "int"}, {"name": "value", "type": "bytes"}],
            }, "logicalType": "map"}]},
            {"name": "z", "type": "long"},
        ],
    }  # fmt: skip
    # a: a block of -2 items in 2 bytes (1, 2), a block of 2 items (3, 5), the end.
    # m: present; a block of -1 item in 3 bytes ({5: b"x"}), the end. z: 7.
    data = bytes([3, 4, 2, 4, 4, 6, 10, 0]) + bytes([2, 1, 6, 10, 2, ord("x"), 0]) + bytes([14])
    full = compile_decoder(schema, schema)
    skip_all = compile_decoder(schema, {**schema, "fields": [schema["fields"][2]]})

    assert full(data, 0) == (([1, 2, 3, 5], {5: b"x"}, 7), len(data))
    assert skip_all(data, 0) == ((7,), len(data))


def test_decoder_compiles_no_text_from_the_file() -> None:
    """Names from a file never become code: a hostile name is just a dict key."""
    hostile = 'x"):\n    import os  #'
    schema = {"type": "record", "name": "r", "fields": [{"name": hostile, "type": "long"}]}

    assert compile_decoder(schema, schema)(b"\x04", 0) == ((2,), 1)


@pytest.mark.parametrize("items", ["long", "string"])
def test_decoder_refuses_a_negative_block_size(items: str) -> None:
    """A corrupt size must not send the skipper backwards (and around forever)."""
    schema = {
        "type": "record",
        "name": "r",
        "fields": [{"name": "a", "type": {"type": "array", "items": items}}],
    }
    skip = compile_decoder(schema, {**schema, "fields": []})

    with pytest.raises(ValueError, match="negative block size -3"):
        skip(bytes([1, 5, 0]), 0)
