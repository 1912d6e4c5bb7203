"""uuid, fixed, time, lists and maps: written with pyarrow, read back identically by others.

Spark's Parquet writer cannot produce these types, so the ingestion job writes such tables'
files with pyarrow on the executors. A Parquet source written by pyarrow with every Iceberg
primitive type (uuid, fixed and time included) plus a struct, a list, a list of structs, a
map and a map with struct values is ingested into a new partitioned table (partitioned by
bucket of the uuid, the fixed value itself and bucket of the time) and a new unpartitioned
one; PyIceberg and DuckDB must return the source's values, and the files must have Iceberg's
physical types and field ids on every field, elements, keys and values included, with the
footer metrics Java records (no bounds inside lists and maps). A keyed upsert and a CDC batch
on a uuid key, from CSV text, must give what a plain model of the operations gives.
"""

from __future__ import annotations

import datetime as dt
import math
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.table import StaticTable
from pyspark.sql import SparkSession

from icecore.catalog import SqlCatalog
from icecore.io import FileIO
from icecore.jobs.errors import JobError
from icecore.jobs.jobs import IngestOptions
from icecore.scan import snapshot_manifests
from icecore.spec.conversions import from_bytes
from icecore.spec.manifest import DataFile, FileContent, read_manifest
from icecore.spec.metadata import TableMetadata, read_table_metadata
from icecore.spec.transforms import BucketTransform
from icecore.spec.types import (
    FixedType,
    ListType,
    MapType,
    StringType,
    StructType,
    TimeType,
    UUIDType,
)
from spark_jobs.ingest import run as ingest
from tests.support.duckdb import duck_connection  # noqa: F401 - provides the `duck` fixture
from tests.support.reader import scan_rows

UTC = dt.UTC
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
U1 = uuid.UUID("123e4567-e89b-12d3-a456-426614174000")
U2 = uuid.UUID("ffffffff-0000-4000-8000-000000000001")
U3 = uuid.UUID("00000000-0000-0000-0000-000000000000")
POINT = pa.struct([("x", pa.float64()), ("label", pa.string())])
SOURCE = pa.schema(
    [
        ("id", pa.int64()),
        ("flag", pa.bool_()),
        ("i", pa.int32()),
        ("f", pa.float32()),
        ("d", pa.float64()),
        ("dec", pa.decimal128(9, 2)),
        ("big", pa.decimal128(38, 10)),
        ("day", pa.date32()),
        ("tm", pa.time64("us")),
        ("ntz", pa.timestamp("us")),
        ("tz", pa.timestamp("us", tz="UTC")),
        ("s", pa.string()),
        ("u", pa.uuid()),
        ("fx", pa.binary(4)),
        ("b", pa.binary()),
        ("st", pa.struct([("p", pa.int32()), ("q", pa.list_(pa.string()))])),
        ("li", pa.list_(pa.int64())),
        ("points", pa.list_(POINT)),
        ("tags", pa.map_(pa.string(), pa.int64())),
        ("named", pa.map_(pa.string(), POINT)),
    ]
)
LONG_TEXT = "ünïcødé-text-longer-than-sixteen-characters"
ROWS: list[dict[str, Any]] = [
    {
        "id": 1, "flag": True, "i": 7, "f": 1.5, "d": float("nan"), "dec": Decimal("12.34"),
        "big": Decimal("-1.0000000001"), "day": dt.date(2024, 2, 29),
        "tm": dt.time(23, 59, 59, 999999), "ntz": dt.datetime(2024, 2, 29, 12, 0, 0, 654321),
        "tz": dt.datetime(2024, 2, 29, 12, 0, 0, 123456, tzinfo=UTC), "s": LONG_TEXT,
        "u": U1.bytes, "fx": b"\x00\x01\x02\x03", "b": b"\x00\xff",
        "st": {"p": 1, "q": ["a", None, "c"]}, "li": [3, 1, None, 2],
        "points": [{"x": 0.5, "label": "a"}, None, {"x": float("-inf"), "label": None}],
        "tags": [("k1", 1), ("k2", None)], "named": [("home", {"x": 1.0, "label": "h"})],
    },
    {
        "id": 2, "flag": False, "i": -1, "f": -0.0, "d": -1e300, "dec": Decimal("-0.01"),
        "big": Decimal("123456789.0123456789"), "day": dt.date(1969, 12, 31),
        "tm": dt.time(0, 0), "ntz": dt.datetime(1900, 1, 1, 0, 0, 1),
        "tz": dt.datetime(1950, 6, 1, tzinfo=UTC), "s": "", "u": U2.bytes,
        "fx": b"\xff\xff\xff\xff", "b": b"", "st": {"p": None, "q": []}, "li": [],
        "points": [], "tags": [], "named": [("void", None)],
    },
    {name: None for name in SOURCE.names} | {"id": 3},
    {
        "id": 4, "flag": True, "i": 2**31 - 1, "f": float("inf"), "d": 2.25,
        "dec": Decimal("9999999.99"), "big": Decimal(0), "day": dt.date(1, 1, 1),
        "tm": dt.time(12, 30, 0, 5), "ntz": dt.datetime(9999, 12, 31, 23, 59, 59),
        "tz": dt.datetime(2262, 4, 11, 23, 47, 16, tzinfo=UTC), "s": "漢字🙂", "u": U3.bytes,
        "fx": b"\x00\x01\x02\x03", "b": b"binary\x01", "st": None, "li": None,
        "points": None, "tags": None, "named": None,
    },
]  # fmt: skip
COLUMNS = SOURCE.names


def _norm(value: Any, t: pa.DataType) -> Any:
    """A reader's value in one comparable form, guided by the source's Arrow type: structs
    as tuples, maps as lists of pairs (DuckDB returns dicts), uuids as bytes, NaN as text,
    aware timestamps in UTC."""
    if value is None:
        return None
    if isinstance(t, pa.BaseExtensionType):
        return value.bytes if isinstance(value, uuid.UUID) else bytes(value)
    if pa.types.is_struct(t):
        return tuple(_norm(value[t.field(i).name], t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        pairs = value.items() if isinstance(value, dict) else value
        return [(_norm(k, t.key_type), _norm(v, t.item_type)) for k, v in pairs]
    if pa.types.is_list(t):
        return [_norm(v, t.value_type) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(UTC)
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    return value


def _normal_rows(rows: list[dict[str, Any]]) -> list[tuple]:
    return sorted(
        (tuple(_norm(r[c], SOURCE.field(c).type) for c in COLUMNS) for r in rows),
        key=lambda row: row[0],
    )


def _write_source(path: Path, rows: list[dict[str, Any]]) -> str:
    path.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, SOURCE), path / "part-0.parquet")
    return str(path)


PARTITIONINGS = {
    "partitioned": "bucket(4, u), identity(fx), bucket(3, tm)",
    "unpartitioned": None,
}


@pytest.fixture(scope="module", params=list(PARTITIONINGS))
def table_location(
    request: pytest.FixtureRequest, spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> str:
    root = tmp_path_factory.mktemp(f"nested-{request.param}")
    catalog = SqlCatalog("default", warehouse=root / "warehouse")
    result = ingest(
        spark,
        catalog,
        IngestOptions(
            table="db.nested",
            source=_write_source(root / "source", ROWS),
            create=True,
            partition_by=PARTITIONINGS[request.param],
        ),
    )
    assert result.status == "committed" and result.rows == len(ROWS)
    location = catalog.load_table("db.nested").metadata_location
    catalog.close()
    assert location is not None
    return location


def _data_files(metadata: TableMetadata) -> list[DataFile]:
    io = FileIO()
    snapshot = metadata.current_snapshot()
    assert snapshot is not None
    return [
        entry.data_file
        for manifest in snapshot_manifests(io, snapshot)
        for entry in read_manifest(io, manifest, spec=metadata.spec())
    ]


def test_table_gets_iceberg_types_from_the_source(table_location: str) -> None:
    schema = read_table_metadata(FileIO(), table_location).schema()
    assert schema.find_field("u").field_type == UUIDType()
    assert schema.find_field("fx").field_type == FixedType(4)
    assert schema.find_field("tm").field_type == TimeType()
    named = schema.find_field("named").field_type
    assert isinstance(named, MapType) and isinstance(named.value_type, StructType)
    points = schema.find_field("points").field_type
    assert isinstance(points, ListType) and isinstance(points.element_type, StructType)


def test_pyiceberg_reads_every_value(table_location: str) -> None:
    rows = StaticTable.from_metadata(table_location).scan().to_arrow().to_pylist()
    # PyIceberg reads a null list of structs (and map with struct values) as an empty one,
    # a known bug of its reader (apache/iceberg-python#3833); DuckDB and pyarrow read null.
    expected = [
        row | {c: [] for c in ("points", "named") if row[c] is None and row["id"] != 0}
        for row in ROWS
    ]
    assert _normal_rows(rows) == _normal_rows(expected)


def test_duckdb_reads_every_value(table_location: str, duck: duckdb.DuckDBPyConnection) -> None:
    scan = f"iceberg_scan('{table_location}')"
    # timestamptz as epoch microseconds: DuckDB's Python conversion of it needs pytz.
    selected = ", ".join("epoch_us(tz) AS tz" if c == "tz" else c for c in COLUMNS)
    cursor = duck.execute(f"SELECT {selected} FROM {scan}")
    names = [d[0] for d in cursor.description]
    rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    for row in rows:
        if row["tz"] is not None:
            row["tz"] = EPOCH + dt.timedelta(microseconds=row["tz"])
    assert _normal_rows(rows) == _normal_rows(ROWS)
    # Pruning on our partition values and bounds finds the rows it must.
    where = {
        f"u = '{U2}'": 1,
        "fx = '\\x00\\x01\\x02\\x03'::BLOB": 2,
        "tm = TIME '12:30:00.000005'": 1,
        "tm IS NULL": 1,
    }
    for condition, count in where.items():
        assert duck.execute(f"SELECT count(*) FROM {scan} WHERE {condition}").fetchone() == (
            count,
        ), condition


def _parquet_node(schema: pq.ParquetSchema, path: str) -> str:
    """The printed line of one node of a Parquet schema, found by dotted path."""
    lines = str(schema).splitlines()[2:]
    stack: list[str] = []
    for line in lines:
        text = line.strip()
        if text == "}":
            stack.pop()
            continue
        name = text.split("field_id=")[1].split()[1].rstrip(";")
        if ".".join([*stack, name]) == path:
            return text
        if text.endswith("{"):
            stack.append(name)
    raise AssertionError(f"{path} not in {schema}")


def test_files_have_iceberg_physical_types_and_field_ids(table_location: str) -> None:
    metadata = read_table_metadata(FileIO(), table_location)
    schema = metadata.schema()
    files = _data_files(metadata)
    assert files and sum(f.record_count for f in files) == len(ROWS)
    expected = {
        "u": ("fixed_len_byte_array(16)", "(UUID)"),
        "fx": ("fixed_len_byte_array(4)", ""),
        "tm": ("int64", "Time(isAdjustedToUTC=false, timeUnit=microseconds)"),
        "tz": ("int64", "Timestamp(isAdjustedToUTC=true, timeUnit=microseconds"),
        "ntz": ("int64", "Timestamp(isAdjustedToUTC=false, timeUnit=microseconds"),
    }
    ids = {
        "li": "li",
        "li.list.element": "li.element",
        "points.list.element": "points.element",
        "points.list.element.label": "points.element.label",
        "tags.key_value.key": "tags.key",
        "tags.key_value.value": "tags.value",
        "named.key_value.value.x": "named.value.x",
        "st.q.list.element": "st.q.element",
    }
    for data_file in files:
        parquet = pq.ParquetFile(data_file.file_path).schema
        for column, (physical, logical) in expected.items():
            node = _parquet_node(parquet, column)
            field_id = schema.find_field(column).field_id
            assert node.startswith(f"optional {physical} field_id={field_id} {column}"), node
            assert logical in node, node
        for path, iceberg_name in ids.items():
            node = _parquet_node(parquet, path)
            assert f"field_id={schema.find_field(iceberg_name).field_id} " in node, (path, node)
        for line in str(parquet).splitlines()[2:]:  # only the repeated groups have no id
            if "field_id=-1" in line:
                assert line.strip().startswith("repeated group field_id=-1 "), line
        assert "int96" not in str(parquet).lower()


def test_manifest_metrics_follow_iceberg(table_location: str) -> None:
    metadata = read_table_metadata(FileIO(), table_location)
    schema = metadata.schema()
    files = _data_files(metadata)
    u_id, fx_id, tm_id = (schema.find_field(c).field_id for c in ("u", "fx", "tm"))
    element = schema.find_field("li.element").field_id
    label = schema.find_field("points.element.label").field_id
    s_id = schema.find_field("s").field_id
    bounds: dict[str, list[Any]] = {"u": [], "tm": []}
    for f in files:
        assert f.content == FileContent.DATA
        for field_id in (element, label):
            assert field_id in f.value_counts and field_id in f.null_value_counts
            assert field_id not in (f.lower_bounds or {}) and field_id not in (f.upper_bounds or {})
        if u_id in (f.lower_bounds or {}):
            bounds["u"] += [from_bytes(UUIDType(), f.lower_bounds[u_id])]
            bounds["u"] += [from_bytes(UUIDType(), f.upper_bounds[u_id])]
            bounds["tm"] += [from_bytes(TimeType(), f.lower_bounds[tm_id])]
            bounds["tm"] += [from_bytes(TimeType(), f.upper_bounds[tm_id])]
            assert len(f.lower_bounds[fx_id]) == 4  # fixed is never truncated
        for bound in (f.lower_bounds.get(s_id), f.upper_bounds.get(s_id)):
            assert bound is None or len(from_bytes(StringType(), bound)) <= 16
        if f.lower_bounds.get(s_id, b"").startswith(LONG_TEXT[:4].encode()):
            assert from_bytes(StringType(), f.lower_bounds[s_id]) == LONG_TEXT[:16]
            upper = from_bytes(StringType(), f.upper_bounds[s_id])
            assert len(upper) == 16 and upper > LONG_TEXT[:16]
    assert min(bounds["u"]) == U3 and max(bounds["u"]) == U2
    assert min(bounds["tm"]) == 0 and max(bounds["tm"]) == 86_399_999_999
    total = {element: 0}
    for f in files:
        total[element] += f.value_counts[element]
    # 4 slots, one empty list, two null lists: each empty or null list is one value.
    assert total[element] == 4 + 1 + 2


def test_partition_values_are_icebergs(table_location: str) -> None:
    metadata = read_table_metadata(FileIO(), table_location)
    if not metadata.spec().fields:
        return
    for f in _data_files(metadata):
        for row in pq.read_table(f.file_path).to_pylist():
            u = row["u"]  # pyarrow reads the UUID logical type as uuid.UUID
            tm = row["tm"]
            micros = None if tm is None else (tm.hour * 3600 + tm.minute * 60 + tm.second) * 10**6
            assert f.partition == (
                BucketTransform(4).apply(u, UUIDType()),
                None if row["fx"] is None else bytes(row["fx"]),
                BucketTransform(3).apply(
                    None if micros is None else micros + tm.microsecond, TimeType()
                ),
            )


# Keyed changes on a uuid key -------------------------------------------------------------

KEYED = pa.schema(
    [
        ("u", pa.uuid()),
        ("v", pa.string()),
        ("tm", pa.time64("us")),
        ("fx", pa.binary(2)),
        ("li", pa.list_(pa.int64())),
        ("tags", pa.map_(pa.string(), pa.int64())),
    ]
)
Model = dict[uuid.UUID, tuple]


def _keyed_row(key: uuid.UUID, v: str, micros: int, extra: bool = True) -> dict[str, Any]:
    tm = (dt.datetime.min + dt.timedelta(microseconds=micros)).time()
    row: dict[str, Any] = {"u": key.bytes, "v": v, "tm": tm}
    if extra:
        row |= {"fx": v[:2].encode().ljust(2, b"_"), "li": [len(v), None], "tags": [(v, 1)]}
    return row


def _model_row(row: dict[str, Any]) -> tuple:
    tm = row["tm"]
    micros = ((tm.hour * 60 + tm.minute) * 60 + tm.second) * 10**6 + tm.microsecond
    return (row["v"], micros, row.get("fx"), row.get("li"), row.get("tags"))


def _apply(model: Model, rows: list[dict[str, Any]], ops: list[str]) -> None:
    for row, op in zip(rows, ops, strict=True):
        key = uuid.UUID(bytes=row["u"])
        if op == "D":
            model.pop(key, None)
        else:
            model[key] = _model_row(row)


def _duck_rows(duck: duckdb.DuckDBPyConnection, location: str) -> Model:
    selected = "u, v, epoch_us(DATE '1970-01-01' + tm) AS tm, fx, li, tags"
    rows = duck.execute(f"SELECT {selected} FROM iceberg_scan('{location}')").fetchall()
    return {
        u: (
            v,
            tm,
            None if fx is None else bytes(fx),
            li,
            None if tags is None else list(tags.items()),
        )
        for u, v, tm, fx, li, tags in rows
    }


def _reader_rows(metadata: TableMetadata) -> Model:
    out = {}
    for row in scan_rows(FileIO(), metadata):
        assert row["u"] not in out, row
        tags = None if row["tags"] is None else [tuple(p) for p in row["tags"]]
        out[row["u"]] = (row["v"], row["tm"], row["fx"], row["li"], tags)
    return out


@pytest.mark.parametrize("partition_by", [None, "bucket(2, u)"])
def test_upsert_and_cdc_on_a_uuid_key(
    spark: SparkSession,
    catalog: SqlCatalog,
    tmp_path: Path,
    duck: duckdb.DuckDBPyConnection,
    partition_by: str | None,
) -> None:
    keys = [uuid.UUID(int=(i * 0x9E3779B97F4A7C15) % (1 << 128)) for i in range(1, 8)]
    model: Model = {}

    def run(mode: str, source: str, **options: Any) -> dict[str, Any]:
        result = ingest(
            spark,
            catalog,
            IngestOptions(table="db.keyed", source=source, mode=mode, key=["u"], **options),
        )
        assert result.status == "committed", result
        return result

    def check(pyiceberg: bool) -> None:
        table = catalog.load_table("db.keyed")
        assert table.metadata_location is not None
        assert _duck_rows(duck, table.metadata_location) == model
        assert _reader_rows(table.metadata) == model
        if pyiceberg:
            rows = StaticTable.from_metadata(table.metadata_location).scan().to_arrow()
            got = {
                u: _model_row(r)
                for r in rows.to_pylist()
                for u in (r["u"] if isinstance(r["u"], uuid.UUID) else uuid.UUID(bytes=r["u"]),)
            }
            assert got == model

    first = [_keyed_row(k, f"a{i}", i * 1_000_000) for i, k in enumerate(keys[:4])]
    source = tmp_path / "b0.parquet"
    pq.write_table(pa.Table.from_pylist(first, KEYED), source)
    # A 1-byte target file size: later batches write one row per file (rolling, and
    # positions of superseded rows found across the files of one task).
    target = {"write.target-file-size-bytes": "1"}
    run("append", str(source), create=True, partition_by=partition_by, properties=target)
    _apply(model, first, ["I"] * 4)
    check(pyiceberg=True)

    # Upsert: one key updated, one new key written twice (the first copy is superseded).
    second = [
        _keyed_row(keys[0], "b0", 5),
        _keyed_row(keys[4], "b1", 6),
        _keyed_row(keys[4], "b2", 86_399_999_999),
    ]
    source = tmp_path / "b1.parquet"
    pq.write_table(pa.Table.from_pylist(second, KEYED), source)
    result = run("upsert", str(source))
    assert result.position_deletes == 1 and result.equality_deletes == 2
    assert result.data_files == 3 and result.data_records == 3
    _apply(model, second, ["U"] * 3)
    check(pyiceberg=False)

    # CDC from CSV text: uuids and times as strings, the other columns absent (null).
    third = [
        ("D", keys[1], "c0", "00:00:00"),
        ("I", keys[5], "c1", "01:02:03.5"),
        ("U", keys[5], "c2", "23:59:59.999999"),
        ("U", keys[2], "c3", "12:00:00.000001"),
    ]
    lines = ["op,u,v,tm", *(f"{op},{str(k).upper()},{v},{t}" for op, k, v, t in third)]
    source = tmp_path / "b2.csv"
    source.write_text("\n".join(lines) + "\n")
    run("cdc", str(source), op_column="op")
    rows = [
        {"u": k.bytes, "v": v, "tm": dt.time.fromisoformat(t), "fx": None, "li": None, "tags": None}
        for _, k, v, t in third
    ]
    _apply(model, rows, [op for op, *_ in third])
    check(pyiceberg=False)

    # The equality delete files hold the key as Iceberg's uuid, with its field id.
    table = catalog.load_table("db.keyed")
    u_id = table.metadata.schema().find_field("u").field_id
    deletes = [
        entry.data_file
        for manifest in snapshot_manifests(table.io, table.metadata.current_snapshot())
        for entry in read_manifest(table.io, manifest, spec=table.metadata.spec())
        if entry.data_file.content == FileContent.EQUALITY_DELETES
    ]
    assert deletes and all(d.equality_ids == [u_id] for d in deletes)
    for d in deletes:
        node = _parquet_node(pq.ParquetFile(d.file_path).schema, "u")
        assert node.startswith(f"optional fixed_len_byte_array(16) field_id={u_id} u (UUID)")


def test_malformed_values_fail_naming_the_column(
    spark: SparkSession, catalog: SqlCatalog, tmp_path: Path
) -> None:
    source = tmp_path / "b0.parquet"
    pq.write_table(pa.Table.from_pylist([_keyed_row(U1, "ok", 0)], KEYED), source)
    ingest(spark, catalog, IngestOptions(table="db.bad", source=str(source), create=True))
    before = catalog.load_table("db.bad").metadata.snapshots
    bad = {
        "u,v,tm\nnot-a-uuid,x,00:00:00\n": "column u is uuid: a value is not a UUID",
        f"u,v,tm\n{U2},x,24:00:00\n": "column tm is time: a value is not a time of day",
    }
    for i, (text, message) in enumerate(bad.items()):
        path = tmp_path / f"bad{i}.csv"
        path.write_text(text)
        with pytest.raises(JobError, match=message):
            ingest(spark, catalog, IngestOptions(table="db.bad", source=str(path)))
    frame = spark.createDataFrame([(U2.bytes, b"toolong")], "u binary, fx binary")
    with pytest.raises(JobError, match="column fx is fixed\\[2\\]: a value is not 2 bytes long"):
        ingest(spark, catalog, IngestOptions(table="db.bad"), source=frame)
    assert catalog.load_table("db.bad").metadata.snapshots == before
