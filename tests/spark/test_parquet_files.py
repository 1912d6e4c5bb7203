"""Table files read through FileIO in Spark tasks: by field id at every depth, with the row's
position and the file as the manifest spells it, large files split by row group."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from icecore.data.arrow_schema import FIELD_ID_KEY
from icecore.spec.types import (
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    UUIDType,
)
from spark_jobs.reading.parquet_files import PerFile, read_parquet


def _field(name: str, kind: pa.DataType, field_id: int, nullable: bool = True) -> pa.Field:
    return pa.field(name, kind, nullable=nullable, metadata={FIELD_ID_KEY: str(field_id)})


# The file's names differ from the table's (renamed columns): only the ids match.
FILE_SCHEMA = pa.schema(
    [
        _field("old_id", pa.int32(), 1),
        _field(
            "old_point",
            pa.struct([_field("old_x", pa.int32(), 11), _field("old_y", pa.string(), 12)]),
            2,
        ),
        _field("tags", pa.list_(_field("element", pa.string(), 13)), 3),
        _field(
            "attrs",
            pa.map_(
                _field("key", pa.string(), 14, nullable=False), _field("value", pa.int64(), 15)
            ),
            4,
        ),
        _field("key", pa.binary(16), 5),
    ]
)
TABLE_FIELDS = [
    NestedField(1, "id", LongType(), required=False),  # promoted from int
    NestedField(
        2,
        "point",
        StructType(
            NestedField(11, "x", IntegerType(), required=False),
            NestedField(12, "y", StringType(), required=False),
            NestedField(16, "z", LongType(), required=False),  # added later: null
        ),
        required=False,
    ),
    NestedField(3, "tags", ListType(13, StringType(), element_required=False), required=False),
    NestedField(
        4, "attrs", MapType(14, StringType(), 15, LongType(), value_required=False), required=False
    ),
    NestedField(5, "key", UUIDType(), required=False),
    NestedField(6, "note", StringType(), required=False),  # not in the file: null
]


def _rows(n: int, first: int = 0) -> pa.Table:
    ids = list(range(first, first + n))
    return pa.table(
        {
            "old_id": pa.array(ids, pa.int32()),
            "old_point": [None if i % 7 == 0 else {"old_x": i, "old_y": f"y{i}"} for i in ids],
            "tags": [None if i % 5 == 0 else [f"t{i}", None] for i in ids],
            "attrs": [[("a", i), ("b", None)] if i % 3 else None for i in ids],
            "key": [i.to_bytes(16, "big") for i in ids],
        },
        schema=FILE_SCHEMA,
    )


def test_columns_are_matched_by_id_at_every_depth(spark: SparkSession, tmp_path: Path) -> None:
    location = str(tmp_path / "a.parquet")
    pq.write_table(_rows(50), location, row_group_size=20)
    frame = read_parquet(
        spark,
        [(location, Path(location).stat().st_size)],
        TABLE_FIELDS,
        {},
        per_file=PerFile([("_file", T.StringType())], {location: (location,)}),
        position_column="_pos",
    )
    rows = sorted(frame.collect(), key=lambda r: r["id"])
    assert len(rows) == 50
    for i, row in enumerate(rows):
        assert row["id"] == i and row["_pos"] == i and row["_file"] == location
        if i % 7 == 0:
            assert row["point"] is None
        else:
            assert row["point"].asDict() == {"x": i, "y": f"y{i}", "z": None}
        assert row["tags"] == (None if i % 5 == 0 else [f"t{i}", None])
        assert row["attrs"] == ({"a": i, "b": None} if i % 3 else None)
        assert row["key"] == bytearray(i.to_bytes(16, "big"))
        assert row["note"] is None


def test_large_files_split_by_row_group_read_each_row_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    files = []
    for n in range(3):
        location = f"file://{tmp_path}/f{n}.parquet"
        path = tmp_path / f"f{n}.parquet"
        pq.write_table(_rows(3000, first=n * 3000), path, row_group_size=250)
        files.append((location, path.stat().st_size))
    frame = read_parquet(
        spark,
        files,
        TABLE_FIELDS[:1],
        {},
        per_file=PerFile([("_file", T.StringType())], {f: (f,) for f, _ in files}),
        position_column="_pos",
        split_bytes=4096,
    )
    assert frame.rdd.getNumPartitions() > 3 * 3
    rows = frame.collect()
    assert sorted(r["id"] for r in rows) == list(range(9000))
    for row in rows:
        n = row["id"] // 3000
        assert row["_file"] == files[n][0]  # spelled as given, scheme included
        assert row["_pos"] == row["id"] - n * 3000


def test_files_without_ids_are_read_by_name(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"id": [3, 4], "note": ["a", None]}), path)
    frame = read_parquet(spark, [(str(path), path.stat().st_size)], TABLE_FIELDS[-1:], {})
    assert sorted(r["note"] or "" for r in frame.collect()) == ["", "a"]
    assert read_parquet(spark, [], TABLE_FIELDS, {}).count() == 0
