"""Manifest lists (sequence number assignment, v1/v2 reading by field id) and the whole
manifest tree exchanged with PyIceberg 0.12 in both directions."""

from __future__ import annotations

import json
import struct
import uuid
from dataclasses import astuple, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import DataFile as PyDataFile
from pyiceberg.manifest import DataFileContent as PyContent
from pyiceberg.manifest import FileFormat as PyFileFormat
from pyiceberg.manifest import read_manifest_list as py_read_manifest_list
from pyiceberg.partitioning import PartitionField as PyPartitionField
from pyiceberg.partitioning import PartitionSpec as PyPartitionSpec
from pyiceberg.schema import Schema as PySchema
from pyiceberg.table import Table as PyTable
from pyiceberg.transforms import BucketTransform, DayTransform, IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import DoubleType as PyDoubleType
from pyiceberg.types import LongType as PyLongType
from pyiceberg.types import NestedField as PyNestedField
from pyiceberg.types import StringType as PyStringType
from pyiceberg.types import TimestampType as PyTimestampType

from icecore.errors import ManifestError, ValidationError
from icecore.io import FileIO
from icecore.spec.manifest import (
    DataFile,
    EntryStatus,
    FileContent,
    FileFormat,
    ManifestEntry,
    ManifestWriter,
    read_manifest,
)
from icecore.spec.manifest_list import (
    UNASSIGNED_SEQ,
    ManifestContent,
    ManifestFile,
    ManifestListWriter,
    PartitionFieldSummary,
    read_manifest_list,
)
from icecore.spec.partitioning import PartitionField, PartitionSpec
from icecore.spec.schema import Schema
from icecore.spec.transforms import parse_transform
from icecore.spec.types import (
    DecimalType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    UUIDType,
)

IO = FileIO()


def manifest(path: str, snapshot_id: int, seq: int, min_seq: int, **kwargs: Any) -> ManifestFile:
    fields: dict[str, Any] = {
        "manifest_path": path,
        "manifest_length": 1234,
        "partition_spec_id": 0,
        "content": ManifestContent.DATA,
        "sequence_number": seq,
        "min_sequence_number": min_seq,
        "added_snapshot_id": snapshot_id,
        "added_files_count": 1,
        "existing_files_count": 2,
        "deleted_files_count": 3,
        "added_rows_count": 10,
        "existing_rows_count": 20,
        "deleted_rows_count": 30,
    }
    return ManifestFile(**(fields | kwargs))


# Writing and assigning sequence numbers ----------------------------------------------------


def test_list_writer_assigns_this_commits_sequence_number(tmp_path: Path) -> None:
    location = str(tmp_path / "snap.avro")
    ours = manifest("new.avro", 8, UNASSIGNED_SEQ, UNASSIGNED_SEQ, content=ManifestContent.DELETES)
    rewritten = manifest("rewritten.avro", 8, UNASSIGNED_SEQ, 2)
    older = manifest(
        "old.avro",
        5,
        3,
        1,
        partitions=[PartitionFieldSummary(True, None, b"\x01", b"\x02")],
        key_metadata=b"k",
    )

    with ManifestListWriter(IO, location, 8, 5, 4) as writer:
        writer.add_all([ours, rewritten, older])
    listed = writer.close()

    assert listed == [
        replace(ours, sequence_number=4, min_sequence_number=4),
        replace(rewritten, sequence_number=4),
        older,
    ]
    assert read_manifest_list(IO, location) == listed


def test_written_list_schema_and_metadata(tmp_path: Path) -> None:
    location = str(tmp_path / "snap.avro")
    with ManifestListWriter(IO, location, 8, None, 4) as writer:
        writer.add(manifest("m.avro", 8, UNASSIGNED_SEQ, UNASSIGNED_SEQ, partitions=[]))
    with open(location, "rb") as f:
        reader = fastavro.reader(f)
        metadata, records = reader.metadata, list(reader)
    schema = json.loads(metadata["avro.schema"])

    assert {k: v for k, v in metadata.items() if not k.startswith("avro.")} == {
        "snapshot-id": "8",
        "parent-snapshot-id": "null",
        "sequence-number": "4",
        "format-version": "2",
    }
    assert schema["name"] == "manifest_file"
    assert [(f["name"], f["field-id"]) for f in schema["fields"]] == [
        ("manifest_path", 500), ("manifest_length", 501), ("partition_spec_id", 502),
        ("content", 517), ("sequence_number", 515), ("min_sequence_number", 516),
        ("added_snapshot_id", 503), ("added_files_count", 504), ("existing_files_count", 505),
        ("deleted_files_count", 506), ("added_rows_count", 512), ("existing_rows_count", 513),
        ("deleted_rows_count", 514), ("partitions", 507), ("key_metadata", 519),
    ]  # fmt: skip
    # v2 makes everything but the partition summaries and key metadata required.
    assert [isinstance(f["type"], list) for f in schema["fields"]] == [False] * 13 + [True] * 2
    summary = schema["fields"][13]["type"][1]
    assert summary["element-id"] == 508
    assert summary["items"]["name"] == "r508"
    assert [(f["name"], f["field-id"], f["type"]) for f in summary["items"]["fields"]] == [
        ("contains_null", 509, "boolean"),
        ("contains_nan", 518, ["null", "boolean"]),
        ("lower_bound", 510, ["null", "bytes"]),
        ("upper_bound", 511, ["null", "bytes"]),
    ]
    assert (records[0]["sequence_number"], records[0]["min_sequence_number"]) == (4, 4)


def test_parent_snapshot_id_is_written(tmp_path: Path) -> None:
    location = str(tmp_path / "snap.avro")
    ManifestListWriter(IO, location, 8, 7, 4).close()
    with open(location, "rb") as f:
        assert fastavro.reader(f).metadata["parent-snapshot-id"] == "7"
    assert read_manifest_list(IO, location) == []


def test_list_writer_refuses_unassigned_numbers_of_another_snapshot(tmp_path: Path) -> None:
    writer = ManifestListWriter(IO, str(tmp_path / "snap.avro"), 8, None, 4)
    for stray in (
        manifest("m.avro", 7, UNASSIGNED_SEQ, 2),
        manifest("m.avro", 7, 3, UNASSIGNED_SEQ),
    ):
        with pytest.raises(
            ValidationError, match="added by snapshot 7, not by committing snapshot 8"
        ):
            writer.add(stray)


def test_v2_list_needs_counts(tmp_path: Path) -> None:
    writer = ManifestListWriter(IO, str(tmp_path / "snap.avro"), 8, None, 4)
    writer.add(manifest("m.avro", 8, 1, 1, added_rows_count=None))
    with pytest.raises(ValidationError, match="require added_rows_count"):
        writer.close()
    assert not (tmp_path / "snap.avro").exists()


# Reading -----------------------------------------------------------------------------------


def _fastavro_list(tmp_path: Path, fields: list[dict[str, Any]], record: dict[str, Any]) -> str:
    path = str(tmp_path / "list.avro")
    schema = {"type": "record", "name": "manifest_file", "fields": fields}
    with open(path, "wb") as f:
        fastavro.writer(f, schema, [record])
    return path


V1_FIELDS = [
    {"name": "manifest_path", "type": "string", "field-id": 500},
    {"name": "manifest_length", "type": "long", "field-id": 501},
    {"name": "partition_spec_id", "type": "int", "field-id": 502},
    {"name": "added_snapshot_id", "type": "long", "field-id": 503},
    # Old Java wrote these names; readers must go by field id.
    {"name": "added_data_files_count", "type": ["null", "int"], "field-id": 504},
    {"name": "existing_data_files_count", "type": ["null", "int"], "field-id": 505},
    {"name": "deleted_data_files_count", "type": ["null", "int"], "field-id": 506},
    {"name": "unknown_extra", "type": "string", "field-id": 9999},
    {
        "name": "partitions",
        "field-id": 507,
        "type": [
            "null",
            {
                "type": "array",
                "element-id": 508,
                "items": {
                    "type": "record",
                    "name": "r508",
                    "fields": [
                        {"name": "contains_null", "type": "boolean", "field-id": 509},
                        {"name": "lower_bound", "type": ["null", "bytes"], "field-id": 510},
                        {"name": "upper_bound", "type": ["null", "bytes"], "field-id": 511},
                    ],
                },
            },
        ],
    },
]


def test_v1_list_by_field_id_with_v2_defaults(tmp_path: Path) -> None:
    record = {
        "manifest_path": "m.avro",
        "manifest_length": 99,
        "partition_spec_id": 2,
        "added_snapshot_id": 5,
        "added_data_files_count": 3,
        "existing_data_files_count": None,
        "deleted_data_files_count": 0,
        "unknown_extra": "ignored",
        "partitions": [{"contains_null": True, "lower_bound": b"a", "upper_bound": None}],
    }

    (read,) = read_manifest_list(IO, _fastavro_list(tmp_path, V1_FIELDS, record))

    assert read == ManifestFile(
        "m.avro", 99, 2, ManifestContent.DATA, 0, 0, 5, 3, None, 0, None, None, None,
        partitions=[PartitionFieldSummary(True, None, b"a", None)],
    )  # fmt: skip
    assert read.has_existing_files and not read.has_deleted_files


def test_missing_required_field_is_named(tmp_path: Path) -> None:
    fields = [f for f in V1_FIELDS if f["field-id"] != 503]
    record = {
        "manifest_path": "m",
        "manifest_length": 1,
        "partition_spec_id": 0,
        "unknown_extra": "",
    }
    path = _fastavro_list(tmp_path, fields, record | {"partitions": None})

    with pytest.raises(
        ManifestError, match="manifest list lacks required field 503 added_snapshot_id"
    ) as err:
        read_manifest_list(IO, path)
    assert err.value.path == path


def test_missing_manifest_list(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="cannot read manifest list: file not found"):
        read_manifest_list(IO, str(tmp_path / "nope.avro"))


def test_manifest_is_not_a_manifest_list(tmp_path: Path) -> None:
    schema = Schema((NestedField(1, "id", LongType(), required=True),))
    spec = PartitionSpec(0, ())
    writer = ManifestWriter(IO, str(tmp_path / "m.avro"), spec, schema, 1)
    writer.add(DataFile("a", FileFormat.PARQUET, (), 1, 1))
    written = writer.close()

    with pytest.raises(ManifestError, match="lacks required field 500 manifest_path"):
        read_manifest_list(IO, written.manifest_path)


# The manifest tree, exchanged with PyIceberg ---------------------------------------------------

PY_SCHEMA = PySchema(
    PyNestedField(1, "id", PyLongType(), required=False),
    PyNestedField(2, "category", PyStringType(), required=False),
    PyNestedField(3, "ts", PyTimestampType(), required=False),
    PyNestedField(4, "price", PyDoubleType(), required=False),
)
PY_SPEC = PyPartitionSpec(
    PyPartitionField(2, 1000, IdentityTransform(), "category"),
    PyPartitionField(3, 1001, DayTransform(), "ts_day"),
    PyPartitionField(1, 1002, BucketTransform(4), "id_bucket"),
)


def _py_data_file(table: PyTable, name: str, partition: tuple[Any, ...]) -> PyDataFile:
    data_file = PyDataFile.from_args(
        content=PyContent.DATA,
        file_path=f"{table.location()}/data/{name}.parquet",
        file_format=PyFileFormat.PARQUET,
        partition=Record(*partition),
        record_count=5,
        file_size_in_bytes=100,
        column_sizes={1: 10, 2: 300},
        value_counts={1: 5, 2: 5},
        null_value_counts={1: 0, 2: 1},
        nan_value_counts={4: 1},
        lower_bounds={1: struct.pack("<q", 1), 2: b"a"},
        upper_bounds={1: struct.pack("<q", 9), 2: b"z"},
        split_offsets=[4],
        sort_order_id=None,
        equality_ids=None,
        key_metadata=None,
    )
    data_file.spec_id = 0
    return data_file


def pyiceberg_table(tmp_path: Path, format_version: int) -> PyTable:
    """Identity, day and bucket partitions; two appends, then an overwrite that deletes a
    file, so the last snapshot has ADDED, EXISTING and DELETED entries."""
    catalog = SqlCatalog(
        "c", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/warehouse"
    )
    catalog.create_namespace("db")
    table = catalog.create_table(
        "db.t",
        schema=PY_SCHEMA,
        partition_spec=PY_SPEC,
        properties={"format-version": str(format_version)},
    )
    a = _py_data_file(table, "a", ("x", 19_000, 1))
    b = _py_data_file(table, "b", (None, -1, 3))
    c = _py_data_file(table, "c", ("y", None, None))
    with table.transaction() as tx, tx.update_snapshot().fast_append() as append:
        append.append_data_file(a)
        append.append_data_file(b)
    with table.transaction() as tx, tx.update_snapshot().fast_append() as append:
        append.append_data_file(c)
    with table.transaction() as tx, tx.update_snapshot().overwrite() as overwrite:
        overwrite.delete_data_file(a)
    return catalog.load_table("db.t")


def py_manifest(m: Any) -> tuple[Any, ...]:
    summaries = [
        (s.contains_null, s.contains_nan, s.lower_bound, s.upper_bound) for s in m.partitions
    ]
    counts = (m.added_files_count, m.existing_files_count, m.deleted_files_count)
    counts += (m.added_rows_count, m.existing_rows_count, m.deleted_rows_count)
    return (
        m.manifest_path, m.manifest_length, m.partition_spec_id, int(m.content),
        m.sequence_number, m.min_sequence_number, m.added_snapshot_id, *counts,
        summaries, m.key_metadata,
    )  # fmt: skip


def our_manifest(m: ManifestFile) -> tuple[Any, ...]:
    *fields, partitions, key_metadata, _first_row_id = astuple(m)
    return (*fields, [tuple(s) for s in partitions or []], key_metadata)


def py_entry(e: Any) -> tuple[Any, ...]:
    f = e.data_file
    data_file = (
        f.file_path, f.file_format.value, tuple(f.partition), f.record_count,
        f.file_size_in_bytes, int(f.content), f.column_sizes, f.value_counts,
        f.null_value_counts, f.nan_value_counts, f.lower_bounds, f.upper_bounds,
        f.key_metadata, f.split_offsets, f.equality_ids, f.sort_order_id,
    )  # fmt: skip
    return (int(e.status), e.snapshot_id, e.sequence_number, e.file_sequence_number, data_file)


def our_entry(e: ManifestEntry) -> tuple[Any, ...]:
    f = e.data_file
    data_file = astuple(f)[:16]  # without referenced_data_file and spec_id
    return (e.status, e.snapshot_id, e.sequence_number, e.file_sequence_number, data_file)


@pytest.mark.interop
@pytest.mark.parametrize("format_version", [1, 2])
def test_reading_what_pyiceberg_wrote(tmp_path: Path, format_version: int) -> None:
    table = pyiceberg_table(tmp_path, format_version)
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.manifest_list is not None
    theirs = snapshot.manifests(table.io)

    ours = read_manifest_list(IO, snapshot.manifest_list)

    assert [our_manifest(m) for m in ours] == [py_manifest(m) for m in theirs]
    statuses = set()
    for our_file, their_file in zip(ours, theirs, strict=True):
        entries = [our_entry(e) for e in read_manifest(IO, our_file)]
        assert entries == [py_entry(e) for e in their_file.fetch_manifest_entry(table.io, False)]
        statuses |= {e[0] for e in entries}
    assert statuses == set(EntryStatus)
    if format_version == 1:
        assert {(m.sequence_number, m.min_sequence_number) for m in ours} == {(0, 0)}
        assert all(e.sequence_number == 0 for m in ours for e in read_manifest(IO, m))
    else:
        assert [(m.sequence_number, m.min_sequence_number) for m in ours] == [
            (3, 3),
            (2, 2),
            (3, 1),
        ]


def test_pyiceberg_reads_what_we_wrote(tmp_path: Path) -> None:
    schema = Schema(
        (
            NestedField(1, "id", LongType(), required=True),
            NestedField(2, "category", StringType()),
            NestedField(3, "ts", TimestampType()),
            NestedField(4, "key", UUIDType()),
            NestedField(5, "amount", DecimalType(9, 2)),
        )
    )
    spec = PartitionSpec(
        1,
        tuple(
            PartitionField(source, 1000 + i, parse_transform(t), name)
            for i, (source, t, name) in enumerate(
                [
                    (2, "identity", "category"),
                    (3, "day", "ts_day"),
                    (1, "bucket[8]", "id_bucket"),
                    (5, "identity", "amount"),
                ]
            )
        ),
    )
    key = uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7")
    added = DataFile(
        "s3://b/t/data/new.parquet",
        FileFormat.PARQUET,
        ("x", 19_700, 5, Decimal("-1.25")),
        7,
        700,
        column_sizes={1: 70},
        value_counts={1: 7, 2: 7},
        null_value_counts={2: 1},
        nan_value_counts={},
        lower_bounds={1: struct.pack("<q", -3), 4: key.bytes},
        upper_bounds={1: struct.pack("<q", 3), 4: key.bytes},
        key_metadata=b"km",
        split_offsets=[4, 64],
        sort_order_id=1,
        spec_id=1,
    )
    kept = replace(added, file_path="s3://b/t/data/kept.parquet", partition=(None, -3, 0, None))
    writer = ManifestWriter(IO, str(tmp_path / "m.avro"), spec, schema, 20)
    writer.add(added)
    writer.existing(ManifestEntry(EntryStatus.EXISTING, 10, 2, 3, kept))
    writer.delete(ManifestEntry(EntryStatus.ADDED, 11, 4, 4, replace(kept, file_path="s3://gone")))
    deletes = ManifestWriter(
        IO, str(tmp_path / "d.avro"), spec, schema, 20, content=ManifestContent.DELETES
    )
    deletes.add(
        replace(added, file_path="eq", content=FileContent.EQUALITY_DELETES, equality_ids=[1, 2])
    )
    location = str(tmp_path / "snap.avro")
    with ManifestListWriter(IO, location, 20, 11, 5) as lister:
        lister.add_all([writer.close(), deletes.close()])
    ours = lister.close()

    py_io = PyArrowFileIO()
    theirs = list(py_read_manifest_list(py_io.new_input(location)))

    assert [py_manifest(m) for m in theirs] == [our_manifest(m) for m in ours]
    their_entries = [py_entry(e) for m in theirs for e in m.fetch_manifest_entry(py_io, False)]
    our_entries = [our_entry(e) for m in ours for e in read_manifest(IO, m)]
    assert their_entries == our_entries
    assert [e[:4] for e in their_entries] == [
        (1, 20, 5, 5),
        (0, 10, 2, 3),
        (2, 20, 4, 4),
        (1, 20, 5, 5),
    ]
    assert their_entries[0][4][2] == ("x", 19_700, 5, Decimal("-1.25"))


def test_fields_are_matched_by_id_not_by_name(tmp_path: Path) -> None:
    """A stray field called `manifest_path` must not be read as field 500."""
    fields = [
        {"name": "manifest_path", "type": "string", "field-id": 9999},
        {"name": "path", "type": "string", "field-id": 500},
        *V1_FIELDS[1:4],
    ]
    record = {"manifest_path": "decoy", "path": "real.avro", "manifest_length": 1}
    path = _fastavro_list(
        tmp_path, fields, record | {"partition_spec_id": 0, "added_snapshot_id": 1}
    )

    assert [m.manifest_path for m in read_manifest_list(IO, path)] == ["real.avro"]


def test_repeated_field_id_is_an_error(tmp_path: Path) -> None:
    fields = [*V1_FIELDS[:4], {"name": "again", "type": "long", "field-id": 501}]
    record = {"manifest_path": "m", "manifest_length": 1, "partition_spec_id": 0}
    path = _fastavro_list(tmp_path, fields, record | {"added_snapshot_id": 1, "again": 2})

    with pytest.raises(ManifestError, match="has field id 501 twice in manifest_file"):
        read_manifest_list(IO, path)
