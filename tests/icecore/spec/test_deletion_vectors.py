"""Deletion vectors (icecore.spec.deletion_vectors): Iceberg Java's and CRoaring's golden
files reproduced byte for byte, round trips, corrupt blobs refused naming both files, and
DVs exchanged with readers and writers nobody here wrote (PyIceberg, DuckDB)."""

from __future__ import annotations

import struct
import uuid
import zlib
from pathlib import Path

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyroaring import BitMap64

from icecore.errors import FileError
from icecore.io import FileIO
from icecore.spec.deletion_vectors import (
    DV_BLOB_TYPE,
    MAGIC,
    MAX_POSITION,
    ROW_POSITION_FIELD_ID,
    DeletionVector,
    DeletionVectorError,
    deserialize_dv,
    merge,
    read_dv,
    read_dvs,
    serialize_dv,
    write_dvs,
)
from icecore.spec.puffin import read_footer, read_range
from tests.support.duckdb import connect, extension_path
from tests.support.rest_catalog import RestCatalogServer

DATA = Path(__file__).resolve().parents[2] / "data" / "puffin"
KEY, CONTAINER = 1 << 32, 1 << 16


def position(bitmap: int, container: int, value: int) -> int:
    return bitmap * KEY + container * CONTAINER + value


# What Iceberg Java's TestBitmapPositionDeleteIndex serialized into each golden file.
JAVA_DVS = {
    "empty-position-index.bin": [],
    "small-alternating-values-position-index.bin": [1, 3, 5, 7, 9],
    "small-and-large-values-position-index.bin": [100, 101, 2**31 + 99, 2**31 + 100],
    "all-container-types-position-index.bin": [
        position(0, 0, 5), position(0, 0, 7),
        *range(position(0, 1, 1), position(0, 1, 1000)),  # array, run-length encoded
        *range(position(0, 2, 1), position(0, 2, CONTAINER - 1)),  # bitset, likewise
        position(1, 0, 10), position(1, 0, 20),
        *range(position(1, 1, 10), position(1, 1, 500)),
        *range(position(1, 2, 1), position(1, 2, CONTAINER - 1)),
    ],
}  # fmt: skip
# What CRoaring's Roaring64Map wrote (no run-length encoding) into RoaringFormatSpec's files.
ROARING64 = {
    "64mapempty.bin": [],
    "64map32bitvals.bin": list(range(10)),
    "64mapspreadvals.bin": [(high << 32) + low for high in range(10) for low in range(10)],
}
MULTI_KEY = [0, 1, 2**32 + 5, 3 * 2**32]


def frame(vector: bytes, magic: bytes = MAGIC) -> bytes:
    """A DV blob around `vector`, its length and CRC right."""
    body = magic + vector
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body))


# Golden files


@pytest.mark.parametrize("name", sorted(JAVA_DVS))
def test_java_golden_dvs_are_read_and_reproduced_byte_for_byte(name: str) -> None:
    golden, positions = (DATA / name).read_bytes(), JAVA_DVS[name]
    assert serialize_dv(positions) == golden
    dv = deserialize_dv(golden, str(DATA / name), cardinality=len(positions))
    assert list(dv) == positions and dv.cardinality == len(positions)


@pytest.mark.parametrize("name", sorted(ROARING64))
def test_croaring_64_bit_portable_files_are_read_and_reproduced(name: str) -> None:
    golden, positions = (DATA / name).read_bytes(), ROARING64[name]
    dv = DeletionVector.from_portable(golden)
    assert list(dv) == positions
    assert dv.to_portable(run_optimize=False) == golden


def test_croaring_file_with_the_sign_bit_set_is_refused() -> None:
    """64maphighvals.bin holds keys near 2^32 (and is stored mangled by UTF-8 replacement
    characters upstream); Java refuses it for its key, and so do we."""
    with pytest.raises(ValueError, match="bitmap key 0xefbdbfef is too large"):
        DeletionVector.from_portable((DATA / "64maphighvals.bin").read_bytes())


def test_our_64_bit_layout_is_croarings_own() -> None:
    """pyroaring's BitMap64 writes CRoaring's 64-bit portable format: ours is identical."""
    rng = np.random.default_rng(7)
    positions = np.concatenate([rng.integers(0, 5 * KEY, 50_000), np.arange(KEY, KEY + 70_000)])
    reference = BitMap64(positions.tolist())
    reference.run_optimize()
    assert DeletionVector.from_positions(positions).to_portable() == reference.serialize()
    assert DeletionVector.from_positions(MULTI_KEY).to_portable() == BitMap64(MULTI_KEY).serialize()


# Round trips and the reader's API


@pytest.mark.parametrize(
    "positions",
    [MULTI_KEY, [], [0], [MAX_POSITION], list(range(70_000)), [5, 5, 3, 2**40, 3]],
    ids=["multi-key", "empty", "zero", "max", "dense", "unsorted-duplicates"],
)
def test_round_trip(positions: list[int]) -> None:
    expected = sorted(set(positions))
    dv = deserialize_dv(serialize_dv(positions), "mem.puffin", cardinality=len(expected))
    assert list(dv) == expected and len(dv) == len(expected)
    assert dv.to_numpy().tolist() == expected and dv.to_arrow().to_pylist() == expected
    assert dv == DeletionVector.from_positions(expected)


def test_positions_from_numpy_arrow_range_set_and_generators_agree() -> None:
    expected = DeletionVector.from_positions(MULTI_KEY)
    for source in (
        np.array(MULTI_KEY, dtype=np.int64),
        np.array(MULTI_KEY, dtype=np.uint64),
        pa.array(MULTI_KEY),
        pa.chunked_array([MULTI_KEY[:2], MULTI_KEY[2:]]),
        set(MULTI_KEY),
        (p for p in MULTI_KEY),
    ):
        assert DeletionVector.from_positions(source) == expected
    assert DeletionVector.from_positions(range(10, 20, 3)) == DeletionVector.from_positions(
        [10, 13, 16, 19]
    )


def test_membership_masks_and_merge() -> None:
    dv = DeletionVector.from_positions(MULTI_KEY)
    assert 2**32 + 5 in dv and np.int64(3 * 2**32) in dv
    assert 2 not in dv and 2**32 not in dv and -1 not in dv and "1" not in dv
    probe = np.array([0, 2, 2**32 + 5, 2**33, 3 * 2**32, 4 * 2**32])
    assert dv.contains_many(probe).tolist() == [True, False, True, False, True, False]
    assert DeletionVector().contains_many(probe).tolist() == [False] * 6
    assert dv.deleted_mask(0, 4).tolist() == [True, True, False, False]
    assert dv.deleted_mask(2**32 + 4, 3).tolist() == [False, True, False]
    merged = merge(dv, [2, 2**32 + 5], DeletionVector.from_positions([2**35]))
    assert list(merged) == [0, 1, 2, 2**32 + 5, 3 * 2**32, 2**35]
    assert list(dv) == MULTI_KEY  # immutable: the union is a new DV
    assert merge() == DeletionVector() and not DeletionVector()


def test_positions_out_of_range_or_not_integers_are_refused() -> None:
    for bad in ([-1], [MAX_POSITION + 1], [2**63 - 1]):
        with pytest.raises(ValueError, match="out of range"):
            DeletionVector.from_positions(bad)
    with pytest.raises(ValueError, match="out of range"):
        DeletionVector.from_positions(np.array([2**64 - 1], dtype=np.uint64))
    for bad in ([1.5], [True], [2**70], ["3"]):
        with pytest.raises(TypeError, match="must be integers"):
            DeletionVector.from_positions(bad)


def test_two_million_positions_over_two_keys_round_trip() -> None:
    """Large DVs, two keys of bitmaps: exact positions and masks after a round trip."""
    rng = np.random.default_rng(1)
    positions = rng.integers(0, 20_000_000, 1_000_000)
    spread = np.concatenate([positions, positions + 2 * KEY])  # two keys, 2M positions
    for values in (positions, spread):
        ordered = np.sort(values)
        distinct = ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]
        dv = deserialize_dv(serialize_dv(values), "mem.puffin")
        mask = dv.deleted_mask(0, 20_000_000)
        assert np.array_equal(dv.to_numpy(), distinct)
        assert int(mask.sum()) == np.count_nonzero(distinct < 20_000_000)


# Corrupt blobs name the Puffin file and the data file


def corrupt(blob: bytes, index: int) -> bytes:
    data = bytearray(blob)
    data[index] ^= 0x01
    return bytes(data)


def test_corrupt_blobs_are_refused_naming_both_files() -> None:
    blob = serialize_dv([1, 2])
    body = blob[4:-4]
    cases = {
        # Java's TestBitmapPositionDeleteIndex: the same DV and corruption, the same CRCs.
        "CRC-32 mismatch: stored 0x712fa6e9, computed 0x712fa6e8": corrupt(blob, len(blob) - 1),
        "CRC-32 mismatch": corrupt(blob, 20),
        "bad magic d1d33965, expected d1d33964": corrupt(blob, 7),
        "bad magic 00000000": frame(body[4:], magic=bytes(4)),  # with a CRC that fits
        "length field says 37 bytes": corrupt(blob, 3),
        "truncated: 11 bytes": blob[:11],
        "the blob holds 34": blob[:-2],
        "3 bytes follow the last bitmap": frame(body[4:] + b"xyz"),
        "bitmap of key 0 has an unknown cookie": frame(body[4:16] + bytes(4) + body[20:]),
        "bitmap of key 0 is truncated": frame(body[4:-1]),
        "truncated: bitmap 1 of 2 is missing": frame(struct.pack("<Q", 2) + body[12:]),
        "holds 2 positions, but 3 were expected": blob,
    }
    for message, data in cases.items():
        with pytest.raises(DeletionVectorError) as info:
            deserialize_dv(data, "s3://b/t/data/dv.puffin", "s3://b/t/data/a.parquet",
                           cardinality=3 if message.startswith("holds") else None)  # fmt: skip
        error = info.value
        assert isinstance(error, FileError) and error.path == "s3://b/t/data/dv.puffin"
        assert str(error).startswith(
            "s3://b/t/data/dv.puffin: deletion vector of s3://b/t/data/a.parquet: "
        )
        assert message in error.problem, (message, error.problem)


def test_keys_out_of_order_are_refused() -> None:
    one = DeletionVector.from_positions([KEY + 1]).to_portable()[8:]
    zero = DeletionVector.from_positions([1]).to_portable()[8:]
    with pytest.raises(DeletionVectorError, match="keys are not ascending: 0 after 1"):
        deserialize_dv(frame(struct.pack("<Q", 2) + one + zero), "x.puffin")


# Puffin files of DVs


def test_write_dvs_gives_each_delete_file_entry_and_reads_back(tmp_path: Path) -> None:
    io, location = FileIO(), str(tmp_path / "deletes.puffin")
    dvs = {"s3://b/t/data/a.parquet": MULTI_KEY, "s3://b/t/data/b.parquet": range(0, 9_000, 3)}
    written = write_dvs(io, location, dvs)
    size = Path(location).stat().st_size
    assert [w.referenced_data_file for w in written] == list(dvs)
    assert [w.record_count for w in written] == [4, 3_000]
    assert {w.file_path for w in written} == {location}
    assert {w.file_size_in_bytes for w in written} == {size}
    assert written[0].content_offset == 4
    assert written[1].content_offset == 4 + written[0].content_size_in_bytes

    for entry, positions in zip(written, dvs.values(), strict=True):
        dv = read_dv(io, entry.file_path, entry.content_offset, entry.content_size_in_bytes,
                     referenced_data_file=entry.referenced_data_file,
                     cardinality=entry.record_count)  # fmt: skip
        assert list(dv) == list(positions)
        blob = read_range(io, location, entry.content_offset, entry.content_size_in_bytes)
        assert blob == serialize_dv(positions)
    assert {k: list(v) for k, v in read_dvs(io, location).items()} == {
        k: list(v) for k, v in dvs.items()
    }
    footer = read_footer(io, location)
    assert footer.metadata.properties == {"created-by": "icefloe icecore"}
    first = footer.blobs[0]
    assert (first.type, first.fields, first.snapshot_id, first.sequence_number) == (
        DV_BLOB_TYPE, (ROW_POSITION_FIELD_ID,), -1, -1,
    )  # fmt: skip
    assert first.compression_codec is None
    assert first.properties == {"referenced-data-file": "s3://b/t/data/a.parquet",
                                "cardinality": "4"}  # fmt: skip


def test_write_dvs_refuses_empty_dvs_and_writes_nothing_for_none(tmp_path: Path) -> None:
    io, location = FileIO(), str(tmp_path / "deletes.puffin")
    assert write_dvs(io, location, {}) == []
    with pytest.raises(ValueError, match=r"empty deletion vector for b\.parquet"):
        write_dvs(io, location, {"a.parquet": [1], "b.parquet": []})
    assert not Path(location).exists()


def test_read_dv_with_a_wrong_range_names_the_files(tmp_path: Path) -> None:
    io, location = FileIO(), str(tmp_path / "deletes.puffin")
    (entry,) = write_dvs(io, location, {"a.parquet": [1, 2, 3]})
    with pytest.raises(DeletionVectorError, match="length field says") as info:
        read_dv(io, location, entry.content_offset, entry.content_size_in_bytes - 1,
                referenced_data_file="a.parquet")  # fmt: skip
    assert info.value.path == location and info.value.referenced_data_file == "a.parquet"
    with pytest.raises(FileError, match="lies outside the file"):
        read_dv(io, location, entry.content_offset, entry.file_size_in_bytes)


# Other implementations


@pytest.mark.interop
def test_pyiceberg_reads_our_dvs(tmp_path: Path) -> None:
    from pyiceberg.table.deletion_vector import deletion_vectors_from_puffin_file  # noqa: PLC0415
    from pyiceberg.table.puffin import PuffinFile  # noqa: PLC0415

    location = tmp_path / "deletes.puffin"
    rng = np.random.default_rng(3)
    dvs = {
        "a.parquet": MULTI_KEY,
        "b.parquet": sorted(set(rng.integers(0, 3 * KEY, 20_000).tolist())),
        "c.parquet": list(range(100, 60_000)),
    }
    write_dvs(FileIO(), str(location), dvs)
    theirs = deletion_vectors_from_puffin_file(PuffinFile(location.read_bytes()))
    assert {dv.referenced_data_file: dv.to_vector().to_pylist() for dv in theirs} == dvs


@pytest.mark.interop
def test_duckdb_dvs_are_read_and_match_our_bytes(rest_catalog_server: RestCatalogServer) -> None:
    """DuckDB 1.5.5 writes v3 DVs through a REST catalog (CREATE TABLE ... WITH
    ('format-version' = '3'), then DELETE). We read its DV by the manifest's range and by the
    footer, find the positions the data file says, and DuckDB's bytes are our layout without
    run-length encoding (which DuckDB does not apply)."""
    server, namespace = rest_catalog_server, f"dv_{uuid.uuid4().hex[:8]}"
    table = f"lake.{namespace}.t"
    con = connect()
    try:
        con.execute(f"LOAD '{extension_path('httpfs')}'")
        con.execute(
            "CREATE SECRET rest (TYPE iceberg, CLIENT_ID ?, CLIENT_SECRET ?, "
            "OAUTH2_SERVER_URI ?, OAUTH2_SCOPE 'catalog')",
            [server.client_id, server.client_secret, server.token_uri],
        )
        con.execute(
            f"ATTACH '{server.warehouse_location}' AS lake "
            f"(TYPE iceberg, SECRET rest, ENDPOINT '{server.uri}')"
        )
        con.execute(f"CREATE SCHEMA lake.{namespace}")
        con.execute(f"CREATE TABLE {table} (i BIGINT) WITH ('format-version' = '3')")
        con.execute(f"INSERT INTO {table} SELECT range FROM range(200000)")
        con.execute(f"DELETE FROM {table} WHERE i % 7 = 3")
        con.execute(f"DELETE FROM {table} WHERE i BETWEEN 1000 AND 60000 OR i = 199999")
        assert con.execute(f"SELECT count(*) FROM {table}").fetchone() == (120_856,)
        entries = con.execute(
            f"SELECT manifest_path, file_path FROM iceberg_metadata('{table}') "
            "WHERE content = 'POSITION_DELETES' AND status <> 'DELETED'"
        ).fetchall()
    finally:
        con.close()

    assert len(entries) == 1 and entries[0][1].endswith(".puffin")  # one DV per data file
    io = FileIO()
    (entry,) = [e["data_file"] for e in _records(entries[0][0])
                if e["data_file"]["file_path"] == entries[0][1]]  # fmt: skip
    data_file = entry["referenced_data_file"]
    i = pq.read_table(data_file).column("i").to_numpy()
    expected = np.flatnonzero((i % 7 == 3) | ((i >= 1000) & (i <= 60000)) | (i == 199999))
    assert entry["record_count"] == len(expected) == 79_144

    dv = read_dv(io, entry["file_path"], entry["content_offset"], entry["content_size_in_bytes"],
                 referenced_data_file=data_file, cardinality=entry["record_count"])  # fmt: skip
    assert np.array_equal(dv.to_numpy(), expected)
    assert read_dvs(io, entry["file_path"]) == {data_file: dv}
    footer = read_footer(io, entry["file_path"], file_size=entry["file_size_in_bytes"])
    assert [(b.offset, b.length) for b in footer.blobs] == [
        (entry["content_offset"], entry["content_size_in_bytes"])
    ]
    theirs = read_range(io, entry["file_path"], entry["content_offset"],
                        entry["content_size_in_bytes"])  # fmt: skip
    assert theirs == frame(dv.to_portable(run_optimize=False))
    assert len(serialize_dv(expected)) < len(theirs)  # ours run-length encodes 1000..60000


def _records(manifest: str) -> list[dict]:
    with open(manifest, "rb") as f:
        return list(fastavro.reader(f))
