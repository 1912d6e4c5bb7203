"""The in-task reader of a compaction (`icecore.data.live_batches`), on real Parquet
files: every delete rule against a model computed from the rows themselves.

The job-level compaction tests cover the common shapes (CDC tables with one key column); these
pin the cases they do not reach: several equality columns with nulls in them, a file read in
several splits with deletes in every row group, a position delete file naming a file it is
not paired with, and the lineage columns' inheritance.
"""

from __future__ import annotations

import datetime as dt
import random
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from icecore.data.arrow_schema import arrow_schema
from icecore.data.live_batches import (
    EQUALITY,
    POSITION,
    DataRef,
    DeleteRef,
    KeySet,
    LiveBatches,
)
from icecore.io import FileIO
from icecore.spec.metadata_columns import (
    LAST_UPDATED_SEQUENCE_NUMBER,
    POSITION_DELETE_SCHEMA,
    ROW_ID,
)
from icecore.spec.types import (
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    UUIDType,
)

FIELDS = [
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "region", StringType()),
    NestedField(3, "shard", IntegerType()),
]
WHOLE = 2**62


def _write(path: Path, fields: list[NestedField], columns: dict, row_group: int = 1_000) -> str:
    table = pa.table(columns, schema=arrow_schema(fields, all_optional=True))
    pq.write_table(table, path, row_group_size=row_group)
    return str(path)


def _data(path: Path, n: int, seed: int, row_group: int = 1_000) -> tuple[str, list[tuple]]:
    rnd = random.Random(seed)
    rows = [(i, rnd.choice(["eu", "us", None]), rnd.choice([1, 2, None])) for i in range(n)]
    columns = {f.name: [r[k] for r in rows] for k, f in enumerate(FIELDS)}
    return _write(path, FIELDS, columns, row_group), rows


def _reader(deletes: list[DeleteRef], paths: list[str], lineage: bool = False) -> LiveBatches:
    fields = [*FIELDS, *((ROW_ID, LAST_UPDATED_SEQUENCE_NUMBER) if lineage else ())]
    return LiveBatches(
        FileIO({}), FIELDS, arrow_schema(fields, all_optional=True), deletes, paths,
        lineage=lineage,
    )  # fmt: skip


def _rows(reader: LiveBatches, refs: list[DataRef]) -> list[tuple]:
    out: list[tuple] = []
    for ref in refs:
        for batch in reader.read(ref):
            out.extend(tuple(r.values()) for r in batch.to_pylist())
    return out


def test_several_equality_columns_match_null_to_null(tmp_path: Path) -> None:
    path, rows = _data(tmp_path / "d.parquet", 3_000, seed=1)
    keys = [("eu", 1), ("us", None), (None, 2), (None, None)]
    delete = _write(
        tmp_path / "eq.parquet",
        FIELDS[1:],
        {"region": [k[0] for k in keys], "shard": [k[1] for k in keys]},
    )
    reader = _reader([DeleteRef(EQUALITY, delete, (2, 3))], [path])
    got = _rows(reader, [DataRef(path, 0, WHOLE, 1, deletes=(0,))])
    expected = [r for r in rows if (r[1], r[2]) not in keys]
    assert sorted(got) == sorted(expected)
    assert 0 < len(expected) < len(rows)
    # One column with nulls: an `is_in` that matches null to null.
    delete_one = _write(tmp_path / "eq1.parquet", FIELDS[1:2], {"region": [None, "us"]})
    reader = _reader([DeleteRef(EQUALITY, delete_one, (2,))], [path])
    got = _rows(reader, [DataRef(path, 0, WHOLE, 1, deletes=(0,))])
    assert sorted(got) == sorted(r for r in rows if r[1] == "eu")


def test_equality_deleted_positions_of_a_conversion(tmp_path: Path) -> None:
    """What `convert_equality_deletes` writes: the positions (ascending, across row groups) of
    the rows any of the file's equality deletes match, over two sets of key columns, whether
    a position delete deletes them already or not; position deletes alone match nothing."""
    path, rows = _data(tmp_path / "d.parquet", 5_000, seed=5, row_group=600)
    ids = _write(tmp_path / "ids.parquet", FIELDS[:1], {"id": [7, 4_999, 123_456, 2_500]})
    pairs = _write(
        tmp_path / "pairs.parquet", FIELDS[1:], {"region": [None, "eu"], "shard": [None, 2]}
    )
    positions = _write(
        tmp_path / "pos.parquet",
        list(POSITION_DELETE_SCHEMA.fields),
        {"file_path": [path, path], "pos": [7, 8]},
    )
    deletes = [
        DeleteRef(EQUALITY, ids, (1,)),
        DeleteRef(EQUALITY, pairs, (2, 3)),
        DeleteRef(POSITION, positions),
    ]
    reader = _reader(deletes, [path])
    found = reader.equality_deleted(DataRef(path, 0, WHOLE, 1, deletes=(0, 1, 2)))
    expected = [
        i
        for i, r in enumerate(rows)
        if r[0] in (7, 4_999, 2_500) or (r[1], r[2]) in {(None, None), ("eu", 2)}
    ]
    assert found.tolist() == expected
    assert 7 in expected and 8 not in expected and len(expected) > 500
    assert reader.deleted_positions(DataRef(path, 0, WHOLE, 1, deletes=(0, 1, 2))).tolist() == [
        7,
        8,
    ]
    assert reader.equality_deleted(DataRef(path, 0, WHOLE, 1, deletes=(2,))).size == 0


@pytest.mark.parametrize("keys", [[2, None], [1], [None]], ids=["value-and-null", "value", "null"])
def test_one_integer_key_column_with_nulls(tmp_path: Path, keys: list[int | None]) -> None:
    """The hashed look-up of integer keys (`KeySet`) matches null to null and a value to
    itself only, across row groups."""
    path, rows = _data(tmp_path / "d.parquet", 4_000, seed=6, row_group=900)
    delete = _write(tmp_path / "eq.parquet", FIELDS[2:], {"shard": keys})
    reader = _reader([DeleteRef(EQUALITY, delete, (3,))], [path])
    ref = DataRef(path, 0, WHOLE, 1, deletes=(0,))
    assert sorted(_rows(reader, [ref])) == sorted(r for r in rows if r[2] not in keys)
    assert reader.equality_deleted(ref).tolist() == [i for i, r in enumerate(rows) if r[2] in keys]


LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


@pytest.mark.parametrize(
    ("keys", "dense"),
    [
        ([5, 7, 9, None], True),  # a table of flags over 5..9
        ([LONG_MAX - 2, LONG_MAX, None], True),  # a table at the top of the range
        ([LONG_MIN, LONG_MIN + 2], True),  # at the bottom: `low - 1` itself wraps
        ([LONG_MIN, 0, LONG_MAX], False),  # spread out: the hash index
        ([None], True),  # no value at all
    ],
    ids=["dense", "dense-at-the-top", "dense-at-the-bottom", "sparse", "only-null"],
)
def test_an_integer_key_set_matches_exactly_its_values(keys: list[int | None], dense: bool) -> None:
    """Both look-ups of one integer key column, against values next to every key, at both
    ends of the range (where `value - low` wraps around) and null."""
    key_set = KeySet(pa.table({"k": pa.array(keys, pa.int64())}))
    assert (key_set.table is not None) == dense and (key_set.index is None) == dense
    near = {v + d for v in keys if v is not None for d in (-1, 0, 1)}
    values = sorted(v for v in near | {LONG_MIN, LONG_MAX, 0, 6} if LONG_MIN <= v <= LONG_MAX)
    probe = pa.array([*values, None], pa.int64())
    assert key_set.matches([probe]).tolist() == [v in keys for v in [*values, None]]


def test_a_timestamp_key_is_looked_up_by_its_stored_value(tmp_path: Path) -> None:
    fields = [NestedField(1, "ts", TimestampType()), NestedField(2, "n", LongType())]
    stamps = [dt.datetime(2024, 1, 1) + dt.timedelta(microseconds=7 * i) for i in range(3_000)]
    path = _write(tmp_path / "d.parquet", fields, {"ts": stamps, "n": list(range(3_000))}, 700)
    gone = [stamps[5], stamps[2_999], dt.datetime(1999, 1, 1)]
    delete = _write(tmp_path / "eq.parquet", fields[:1], {"ts": gone})
    reader = LiveBatches(
        FileIO({}), fields, arrow_schema(fields, all_optional=True),
        [DeleteRef(EQUALITY, delete, (1,))], [path],
    )  # fmt: skip
    found = reader.equality_deleted(DataRef(path, 0, WHOLE, 1, deletes=(0,)))
    assert found.tolist() == [5, 2_999]


def test_splits_of_one_file_apply_its_positions_in_every_row_group(tmp_path: Path) -> None:
    path, rows = _data(tmp_path / "d.parquet", 10_000, seed=2, row_group=700)
    other, _ = _data(tmp_path / "other.parquet", 100, seed=3)
    deleted = sorted(random.Random(4).sample(range(10_000), 1_500))
    positions = _write(
        tmp_path / "pos.parquet",
        list(POSITION_DELETE_SCHEMA.fields),
        # Rows for another data file too: the reader keeps only its own.
        {"file_path": [path] * len(deleted) + [other] * 50, "pos": [*deleted, *range(50)]},
        row_group=300,
    )
    size = Path(path).stat().st_size
    cut = size // 3
    refs = [
        DataRef(path, 0, cut, 1, deletes=(0,)),
        DataRef(path, cut, cut, 1, deletes=(0,)),
        DataRef(path, 2 * cut, WHOLE, 1, deletes=(0,)),
    ]
    reader = _reader([DeleteRef(POSITION, positions)], [path])
    got = _rows(reader, refs)
    gone = set(deleted)
    assert got == [r for r in rows if r[0] not in gone]  # ids are positions; order kept
    # The same delete file is not paired with `other`: none of its rows go.
    reader = _reader([DeleteRef(POSITION, positions)], [path, other])
    assert len(_rows(reader, [DataRef(other, 0, WHOLE, 1)])) == 100
    assert len(_rows(reader, [DataRef(other, 0, WHOLE, 1, deletes=(0,))])) == 50


def test_lineage_is_the_files_own_else_inherited(tmp_path: Path) -> None:
    fields = [*FIELDS, ROW_ID, LAST_UPDATED_SEQUENCE_NUMBER]
    own_ids = [100, None, 102, None]
    own_seqs = [7, None, None, 8]
    path = _write(
        tmp_path / "d.parquet",
        fields,
        {
            "id": [0, 1, 2, 3], "region": ["eu"] * 4, "shard": [1] * 4,
            "_row_id": own_ids, "_last_updated_sequence_number": own_seqs,
        },
    )  # fmt: skip
    reader = _reader([], [path], lineage=True)
    got = _rows(reader, [DataRef(path, 0, WHOLE, 5, first_row_id=50)])
    assert [r[3:] for r in got] == [(100, 7), (51, 5), (102, 5), (53, 8)]
    # A file without a first_row_id (added before an upgrade to v3) has no lineage at all.
    got = _rows(reader, [DataRef(path, 0, WHOLE, 5, first_row_id=None)])
    assert [r[3:] for r in got] == [(None, None)] * 4


def test_a_uuid_equality_key(tmp_path: Path) -> None:
    """uuid columns are an Arrow extension type, which hash look-ups take as their storage."""
    fields = [NestedField(1, "id", LongType(), required=True), NestedField(2, "u", UUIDType())]
    values = [uuid.UUID(int=i % 7) if i % 5 else None for i in range(50)]
    path = _write(
        tmp_path / "d.parquet",
        fields,
        {"id": list(range(50)), "u": [v.bytes if v else None for v in values]},
    )
    gone = [uuid.UUID(int=3), None]
    delete = _write(
        tmp_path / "eq.parquet", fields[1:], {"u": [g.bytes if g else None for g in gone]}
    )
    reader = LiveBatches(
        FileIO({}), fields, arrow_schema(fields, all_optional=True),
        [DeleteRef(EQUALITY, delete, (2,))], [path],
    )  # fmt: skip
    got = [r[0] for r in _rows(reader, [DataRef(path, 0, WHOLE, 1, deletes=(0,))])]
    assert got == [i for i, v in enumerate(values) if v not in gone]
