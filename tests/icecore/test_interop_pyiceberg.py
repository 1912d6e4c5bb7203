"""PyIceberg 0.12 and icecore read each other's tables and agree on every file and row.

One direction: PyIceberg's `StaticTable` reads tables icecore wrote (with position deletes;
PyIceberg cannot apply equality deletes) and its `inspect` tables describe our manifests as
we do. The other: tables PyIceberg wrote through a SQLite catalog (v1 and v2, several
partition transforms, appends, overwrites, copy-on-write deletes, and position deletes added
with PyIceberg's own writers) are planned by `TableScan` exactly as PyIceberg plans them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo, GreaterThanOrEqual, In, LessThan
from pyiceberg.io.fileformat import FileFormatFactory
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.manifest import DataFile as PyDataFile
from pyiceberg.manifest import DataFileContent, ManifestWriterV2
from pyiceberg.manifest import FileFormat as PyFileFormat
from pyiceberg.manifest import ManifestContent as PyManifestContent
from pyiceberg.partitioning import PartitionField as PyPartitionField
from pyiceberg.partitioning import PartitionSpec as PyPartitionSpec
from pyiceberg.schema import Schema as PySchema
from pyiceberg.table import StaticTable, Table
from pyiceberg.table.snapshots import Operation as PyOperation
from pyiceberg.table.update.snapshot import _FastAppendFiles
from pyiceberg.transforms import BucketTransform, DayTransform, IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import LongType as PyLongType
from pyiceberg.types import NestedField as PyNestedField
from pyiceberg.types import StringType as PyStringType
from pyiceberg.types import TimestamptzType as PyTimestamptzType

from icecore.expressions import BooleanExpression, equal, greater_than_or_equal, is_in, less_than
from icecore.io import FileIO
from icecore.scan import TableScan, snapshot_manifests
from icecore.spec.conversions import from_bytes
from icecore.spec.manifest import EntryStatus, read_manifest
from icecore.spec.metadata import TableMetadata, read_table_metadata
from icecore.spec.schema import Schema
from tests.support.reader import arrow_values, scan_rows
from tests.support.samples import (
    ALL_TYPES,
    ALL_TYPES_ROWS,
    EXAMPLE_SCHEMA,
    PSCHEMA,
    all_types_table,
)
from tests.support.tables import LocalTable

pytestmark = pytest.mark.interop

DAY = 86_400_000_000


def stem(path: str) -> str:
    return Path(path).stem


def their_rows(table: Table, schema: Schema, snapshot_id: int | None = None) -> list[dict]:
    """PyIceberg's rows, as icecore values (columns matched by name, as PyIceberg names them)."""
    arrow = table.scan(snapshot_id=snapshot_id).to_arrow()
    columns = {f.name: arrow_values(arrow.column(f.name), f.field_type) for f in schema.fields}
    return [{n: values[i] for n, values in columns.items()} for i in range(arrow.num_rows)]


def sorted_rows(rows: Iterator[dict] | list[dict], key: str) -> list[dict]:
    return sorted(rows, key=lambda r: r[key])


def our_plan(metadata: TableMetadata, **options: Any) -> dict[str, list[str]]:
    tasks = TableScan(FileIO(), metadata, **options).plan_files()
    return {t.file.file_path: sorted(d.file_path for d in t.deletes) for t in tasks}


def their_plan(table: Table, **options: Any) -> dict[str, list[str]]:
    tasks = table.scan(**options).plan_files()
    return {t.file.file_path: sorted(d.file_path for d in t.delete_files) for t in tasks}


# PyIceberg reads icecore's tables ------------------------------------------------------------


def test_pyiceberg_reads_every_primitive_type_and_a_struct(tmp_path: Path) -> None:
    table = all_types_table(tmp_path / "types")
    theirs = StaticTable.from_metadata(table.metadata_location)
    assert sorted_rows(their_rows(theirs, ALL_TYPES), "l") == [
        {f.name: row.get(f.name) for f in ALL_TYPES.fields} for row in ALL_TYPES_ROWS
    ]


def _position_delete_example(location: Path) -> tuple[LocalTable, list[int]]:
    """The worked example with position deletes only: one by path bounds, one without."""
    table = LocalTable.create(location, EXAMPLE_SCHEMA)
    a = table.write_data([{"id": 1, "data": "X"}, {"id": 2, "data": "A"}], name="a")
    s1 = table.commit(add=[a])
    b = table.write_position_deletes([(a.file_path, 1)], name="b")
    c = table.write_data([{"id": 3, "data": "Q"}, {"id": 2, "data": "B"}], name="c")
    s2 = table.commit(add=[b, c])
    d = table.write_position_deletes([(c.file_path, 0)], name="d")
    unbounded = table.write_position_deletes([(c.file_path, 1)], name="u")
    unbounded = dataclasses.replace(unbounded, lower_bounds=None, upper_bounds=None)
    e = table.write_data([{"id": 4, "data": "Y"}], name="e")
    s3 = table.commit(add=[d, unbounded, e])
    return table, [s1.snapshot_id, s2.snapshot_id, s3.snapshot_id]


def test_pyiceberg_reads_our_position_deletes_per_snapshot(tmp_path: Path) -> None:
    table, snapshot_ids = _position_delete_example(tmp_path / "t")
    theirs = StaticTable.from_metadata(table.metadata_location)
    expected = [
        [{"id": 1, "data": "X"}, {"id": 2, "data": "A"}],
        [{"id": 1, "data": "X"}, {"id": 2, "data": "B"}, {"id": 3, "data": "Q"}],
        [{"id": 1, "data": "X"}, {"id": 4, "data": "Y"}],
    ]
    for snapshot_id, rows in zip(snapshot_ids, expected, strict=True):
        ours = scan_rows(table.io, table.metadata, snapshot_id=snapshot_id)
        assert sorted_rows(ours, "id") == rows
        assert sorted_rows(their_rows(theirs, EXAMPLE_SCHEMA, snapshot_id), "id") == rows
        assert our_plan(table.metadata, snapshot_id=snapshot_id) == their_plan(
            theirs, snapshot_id=snapshot_id
        )
    named = {stem(k): [stem(d) for d in v] for k, v in our_plan(table.metadata).items()}
    assert named == {"a": ["b", "u"], "c": ["d", "u"], "e": ["u"]}


def _partition_days(value: Any) -> Any:
    """PyIceberg's inspect tables give day partitions as dates; icecore keeps days."""
    return (value - dt.date(1970, 1, 1)).days if isinstance(value, dt.date) else value


@pytest.fixture
def evolved(tmp_path: Path) -> LocalTable:
    """Unpartitioned, then identity+bucket+day; position deletes; two files removed."""
    table = LocalTable.create(tmp_path / "t", PSCHEMA)
    old = table.write_data([{"id": 1, "category": "x", "ts": DAY}, {"id": 2}], name="old")
    table.commit(add=[old])
    table.add_spec(
        [("category", "identity", "category"), ("id", "bucket[4]", "b"), ("ts", "day", "d")]
    )
    rows = [{"id": i, "category": "xy"[i % 2], "ts": (i % 3) * DAY + i} for i in range(3, 9)]
    rows.append({"id": 9})  # null partition values
    files = [table.write_data([row], name=f"n{row['id']}") for row in rows]
    table.commit(add=files)
    positions = table.write_position_deletes([(files[0].file_path, 0)], name="p")
    table.commit(add=[positions], remove=[old, files[1]])
    return table


def test_inspect_entries_agree_with_our_manifests(evolved: LocalTable) -> None:
    snapshot = evolved.metadata.current_snapshot()
    assert snapshot is not None
    ours = {}
    for manifest in snapshot_manifests(evolved.io, snapshot):
        spec = evolved.metadata.spec_by_id(manifest.partition_spec_id)
        for e in read_manifest(evolved.io, manifest):
            f = e.data_file
            partition = dict(zip((pf.name for pf in spec.fields), f.partition, strict=True))
            ours[f.file_path] = {
                "status": int(e.status),
                "snapshot_id": e.snapshot_id,
                "sequence_number": e.sequence_number,
                "file_sequence_number": e.file_sequence_number,
                "content": int(f.content),
                "partition": partition,
                "record_count": f.record_count,
                "file_size_in_bytes": f.file_size_in_bytes,
            }
    theirs = {}
    for e in StaticTable.from_metadata(evolved.metadata_location).inspect.entries().to_pylist():
        f = e["data_file"]
        # PyIceberg lists every field of every spec, null where the entry's spec has none.
        partition = {k: _partition_days(v) for k, v in f["partition"].items()}
        ours_partition = ours[f["file_path"]]["partition"]
        assert ours_partition.keys() <= partition.keys()
        ours[f["file_path"]]["partition"] = dict.fromkeys(partition) | ours_partition
        theirs[f["file_path"]] = {
            "status": e["status"],
            "snapshot_id": e["snapshot_id"],
            "sequence_number": e["sequence_number"],
            "file_sequence_number": e["file_sequence_number"],
            "content": f["content"],
            "partition": partition,
            "record_count": f["record_count"],
            "file_size_in_bytes": f["file_size_in_bytes"],
        }
    assert theirs == ours
    assert [e["status"] for e in ours.values()].count(int(EntryStatus.DELETED)) == 2


def test_inspect_files_agree_with_our_metrics(evolved: LocalTable) -> None:
    ours = {e.data_file.file_path: e.data_file for e in evolved.live_entries()}
    files = StaticTable.from_metadata(evolved.metadata_location).inspect.files().to_pylist()
    assert {f["file_path"] for f in files} == set(ours)
    for f in files:
        mine = ours[f["file_path"]]
        assert (f["content"], f["record_count"]) == (int(mine.content), mine.record_count)
        assert dict(f["value_counts"]) == mine.value_counts
        assert dict(f["null_value_counts"]) == mine.null_value_counts
        assert dict(f["lower_bounds"]) == mine.lower_bounds
        assert dict(f["upper_bounds"]) == mine.upper_bounds


def test_inspect_manifests_agree_with_our_partition_summaries(evolved: LocalTable) -> None:
    """Summary bounds, decoded and printed by PyIceberg, read as ours do."""
    snapshot = evolved.metadata.current_snapshot()
    assert snapshot is not None
    ours = {}
    for manifest in snapshot_manifests(evolved.io, snapshot):
        spec = evolved.metadata.spec_by_id(manifest.partition_spec_id)
        types = [f.field_type for f in spec.partition_type(evolved.schema).fields]
        ours[manifest.manifest_path] = [
            (
                s.contains_null,
                s.contains_nan,
                *(
                    None if raw is None else pf.transform.to_human_string(from_bytes(t, raw), t)
                    for raw in (s.lower_bound, s.upper_bound)
                ),
            )
            for s, pf, t in zip(manifest.partitions or [], spec.fields, types, strict=True)
        ]
    manifests = StaticTable.from_metadata(evolved.metadata_location).inspect.manifests()
    theirs = {
        m["path"]: [
            (p["contains_null"], p["contains_nan"], p["lower_bound"], p["upper_bound"])
            for p in m["partition_summaries"]
        ]
        for m in manifests.to_pylist()
    }
    assert theirs == ours
    assert any(summary and summary[0][2] == "x" for summary in ours.values())


# icecore plans PyIceberg's tables ---------------------------------------------------------------

PY_SCHEMA = PySchema(
    PyNestedField(1, "id", PyLongType(), required=True),
    PyNestedField(2, "category", PyStringType()),
    PyNestedField(3, "ts", PyTimestamptzType()),
)
ARROW_SCHEMA = schema_to_pyarrow(PY_SCHEMA)


def arrow_rows(ids: range, category: Any = None) -> pa.Table:
    rows = [
        {
            "id": i,
            "category": category or "abc"[i % 3],
            "ts": dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(hours=7 * i),
        }
        for i in ids
    ]
    return pa.Table.from_pylist(rows, schema=ARROW_SCHEMA)


@pytest.fixture
def catalog(tmp_path: Path) -> SqlCatalog:
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    catalog = SqlCatalog(
        "test", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=warehouse.as_uri()
    )
    catalog.create_namespace("ns")
    return catalog


def assert_same_plans(table: Table, filters: list[tuple[BooleanExpression, Any]] = ()) -> None:
    """Every snapshot plans to the same files, deletes and rows in icecore and PyIceberg."""
    metadata = read_table_metadata(FileIO(), table.metadata_location)
    assert metadata.format_version == table.format_version
    assert len(metadata.snapshots) == len(table.metadata.snapshots) > 1
    for snapshot in metadata.snapshots:
        sid = snapshot.snapshot_id
        assert our_plan(metadata, snapshot_id=sid) == their_plan(table, snapshot_id=sid)
        ours = scan_rows(FileIO(), metadata, snapshot_id=sid)
        assert sorted_rows(ours, "id") == sorted_rows(their_rows(table, PSCHEMA, sid), "id")
    for ours_filter, their_filter in filters:
        assert our_plan(metadata, row_filter=ours_filter) == their_plan(
            table, row_filter=their_filter
        )


FILTERS = [
    (equal("category", "a"), EqualTo("category", "a")),
    (less_than("id", 4), LessThan("id", 4)),
    (is_in("id", [3, 11, 12]), In("id", {3, 11, 12})),
    (
        greater_than_or_equal("ts", "2024-01-03T00:00:00+00:00"),
        GreaterThanOrEqual("ts", "2024-01-03T00:00:00+00:00"),
    ),
]


@pytest.mark.parametrize("format_version", [1, 2])
@pytest.mark.parametrize("partitioned", [False, True], ids=["unpartitioned", "identity"])
def test_appends_overwrite_and_copy_on_write_delete(
    catalog: SqlCatalog, format_version: int, partitioned: bool
) -> None:
    spec = PyPartitionSpec(
        *([PyPartitionField(2, 1000, IdentityTransform(), "category")] if partitioned else [])
    )
    table = catalog.create_table(
        "ns.t",
        schema=PY_SCHEMA,
        partition_spec=spec,
        properties={"format-version": str(format_version)},
    )
    table.append(arrow_rows(range(0, 6)))
    table.append(arrow_rows(range(6, 10)))
    table.overwrite(arrow_rows(range(10, 13), "a"), overwrite_filter="category == 'a'")
    table.delete("id < 2")
    table.append(arrow_rows(range(13, 15)))
    assert {r["id"] for r in their_rows(table, PSCHEMA)} == {2, 4, 5, 7, 8, 10, 11, 12, 13, 14}
    assert_same_plans(table, FILTERS)

    metadata = read_table_metadata(FileIO(), table.metadata_location)
    entries = {
        e["data_file"]["file_path"]: e["sequence_number"]
        for e in table.inspect.entries().to_pylist()
    }
    tasks = TableScan(FileIO(), metadata).plan_files()
    seqs = {t.file.file_path: t.data_sequence_number for t in tasks}
    assert seqs == {path: entries[path] for path in seqs}
    if format_version == 1:
        assert set(seqs.values()) == {0}


def _write_with_pyiceberg(
    table: Table, arrow: pa.Table, schema: PySchema, content: DataFileContent, partition: Record
) -> PyDataFile:
    """One Parquet file written by PyIceberg's own writer, with its metrics, as a DataFile."""
    path = f"{table.location()}/data/{content.name.lower()}-{uuid.uuid4()}.parquet"
    output = table.io.new_output(path)
    model = FileFormatFactory.get(PyFileFormat.PARQUET)
    with model.create_writer(output, schema, table.properties) as writer:
        writer.write(arrow)
    return PyDataFile.from_args(
        content=content,
        file_path=path,
        file_format=PyFileFormat.PARQUET,
        partition=partition,
        file_size_in_bytes=len(output),
        sort_order_id=None,
        spec_id=table.spec().spec_id,
        equality_ids=None,
        key_metadata=None,
        **writer.result().to_serialized_dict(),
    )


def _append_partitioned(table: Table, rows: pa.Table) -> None:
    """One file per partition, committed by a PyIceberg fast append.

    `Table.append` computes day and bucket partitions only with pyiceberg-core installed;
    PyIceberg's pure-Python transforms compute them here instead.
    """
    field = table.spec().fields[0]
    transform = field.transform.transform(table.schema().find_type(field.source_id))
    source = table.schema().find_column_name(field.source_id)
    groups: dict[Any, list[int]] = {}
    for i, value in enumerate(rows.column(source).cast(pa.int64()).to_pylist()):
        groups.setdefault(transform(value), []).append(i)
    files = [
        _write_with_pyiceberg(
            table, rows.take(indices), PY_SCHEMA, DataFileContent.DATA, Record(partition)
        )
        for partition, indices in groups.items()
    ]
    with table.transaction() as transaction, transaction.update_snapshot().fast_append() as append:
        for data_file in files:
            append.append_data_file(data_file)


@pytest.mark.parametrize(
    "field",
    [
        PyPartitionField(3, 1000, DayTransform(), "ts_day"),
        PyPartitionField(1, 1000, BucketTransform(4), "id_bucket"),
    ],
    ids=["day", "bucket"],
)
def test_day_and_bucket_partitions(catalog: SqlCatalog, field: PyPartitionField) -> None:
    table = catalog.create_table("ns.t", schema=PY_SCHEMA, partition_spec=PyPartitionSpec(field))
    _append_partitioned(table, arrow_rows(range(12)))
    _append_partitioned(table, arrow_rows(range(12, 24)))
    assert_same_plans(table, FILTERS)

    metadata = read_table_metadata(FileIO(), table.metadata_location)
    entries = {
        e["data_file"]["file_path"]: tuple(
            _partition_days(v) for v in e["data_file"]["partition"].values()
        )
        for e in table.inspect.entries().to_pylist()
    }
    ours = {t.file.file_path: t.file.partition for t in TableScan(FileIO(), metadata).plan_files()}
    assert ours == entries
    assert len(set(ours.values())) > 2
    assert len(our_plan(metadata, row_filter=FILTERS[2][0])) < len(ours)


# Position deletes committed with PyIceberg's own writers ------------------------------------------

POSITION_DELETE_SCHEMA = PySchema(
    PyNestedField(2147483546, "file_path", PyStringType(), required=True),
    PyNestedField(2147483545, "pos", PyLongType(), required=True),
)


class _DeleteManifestWriter(ManifestWriterV2):
    """PyIceberg's v2 manifest writer, declaring delete content (0.12 has no such writer)."""

    def content(self) -> PyManifestContent:
        return PyManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


class _AddDeleteFiles(_FastAppendFiles):
    """A fast append whose new manifest is a delete manifest."""

    def new_manifest_writer(self, spec: PyPartitionSpec) -> ManifestWriterV2:
        output = self.new_manifest_output()
        return _DeleteManifestWriter(
            spec, self.schema(), output, self._snapshot_id, self._compression
        )


def _write_position_deletes(
    table: Table, deletes: list[tuple[str, int]], partition: Record
) -> PyDataFile:
    rows = [{"file_path": p, "pos": n} for p, n in sorted(deletes)]
    arrow = pa.Table.from_pylist(rows, schema=schema_to_pyarrow(POSITION_DELETE_SCHEMA))
    return _write_with_pyiceberg(
        table, arrow, POSITION_DELETE_SCHEMA, DataFileContent.POSITION_DELETES, partition
    )


def test_position_deletes_written_by_pyiceberg(catalog: SqlCatalog) -> None:
    spec = PyPartitionSpec(PyPartitionField(2, 1000, IdentityTransform(), "category"))
    table = catalog.create_table("ns.t", schema=PY_SCHEMA, partition_spec=spec)
    table.append(arrow_rows(range(0, 6)))
    table.append(arrow_rows(range(6, 9)))
    by_category: dict[str, list[str]] = {}
    for task in table.scan().plan_files():
        by_category.setdefault(task.file.partition[0], []).append(task.file.file_path)
    a_files = sorted(by_category["a"])
    deletes = _write_position_deletes(table, [(a_files[0], 0), (a_files[1], 0)], Record("a"))
    with (
        table.transaction() as transaction,
        _AddDeleteFiles(PyOperation.DELETE, transaction, table.io) as producer,
    ):
        producer.append_data_file(deletes)

    metadata = read_table_metadata(FileIO(), table.metadata_location)
    planned = our_plan(metadata)
    assert planned == their_plan(table)
    # Truncated path bounds (PyIceberg's default truncate(16)) cover every path, so only the
    # partition keeps the delete file away from the other categories' files.
    assert {p for p, d in planned.items() if d} == set(a_files)
    assert_same_plans(table)
    assert {r["id"] for r in their_rows(table, PSCHEMA)} == set(range(1, 9)) - {6}
