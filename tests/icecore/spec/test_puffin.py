"""Puffin files (icecore.spec.puffin): Iceberg Java's own files read and reproduced, round
trips, ranged reads, and every malformed footer refused with the file named."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pyarrow as pa
import pytest

from icecore.errors import FileError
from icecore.io import FileIO
from icecore.spec import puffin
from icecore.spec.puffin import (
    Blob,
    BlobMetadata,
    FileMetadata,
    PuffinError,
    PuffinReader,
    PuffinWriter,
    read_footer,
    read_range,
)
from tests.support.objectstores import ObjectStore

DATA = Path(__file__).resolve().parents[2] / "data" / "puffin"
# The two blobs of Iceberg Java's sample files (TestPuffinFormat / PuffinFormatTestUtil).
SAMPLE_BLOBS = (
    b"abcdefghi",
    "some blob \0 binary data 🤯 that is not very very very very very very long, is it?".encode(),
)


class RecordingIO(FileIO):
    """A FileIO that records every `read_at(length, offset)` made through `open_input`."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[tuple[int, int]] = []

    def open_input(self, location: str) -> pa.NativeFile:
        return _Recorder(super().open_input(location), self.reads)


class _Recorder:
    def __init__(self, file: pa.NativeFile, reads: list[tuple[int, int]]) -> None:
        self._file, self._reads = file, reads

    def size(self) -> int:
        return self._file.size()

    def read_at(self, length: int, offset: int) -> bytes:
        self._reads.append((offset, length))
        return self._file.read_at(length, offset)

    def close(self) -> None:
        self._file.close()


def sample_blobs(codec: str | None = None) -> list[Blob]:
    return [
        Blob("some-blob", SAMPLE_BLOBS[0], fields=[1], snapshot_id=2, sequence_number=1,
             compression_codec=codec),
        Blob("some-other-blob", SAMPLE_BLOBS[1], fields=[2], snapshot_id=2, sequence_number=1,
             compression_codec=codec),
    ]  # fmt: skip


def write(io: FileIO, location: str, blobs: list[Blob], **kwargs: object) -> puffin.PuffinFile:
    with PuffinWriter(io, location, **kwargs) as writer:  # type: ignore[arg-type]
        for blob in blobs:
            writer.write(blob)
    return writer.close()


# Iceberg Java's files (core/src/test/resources/org/apache/iceberg/puffin/v1)


def test_java_empty_file_is_read_and_reproduced_byte_for_byte(tmp_path: Path) -> None:
    io, golden = FileIO(), DATA / "empty-puffin-uncompressed.bin"
    footer = read_footer(io, str(golden))
    assert footer.metadata == FileMetadata(blobs=(), properties={})
    assert (footer.file_size, footer.footer_size) == (32, 28)
    ours = write(io, str(tmp_path / "empty.puffin"), [], created_by=None)
    assert (tmp_path / "empty.puffin").read_bytes() == golden.read_bytes()
    assert ours.file_size == 32


def test_java_uncompressed_sample_is_read_and_reproduced_byte_for_byte(tmp_path: Path) -> None:
    io, golden = FileIO(), DATA / "sample-metric-data-uncompressed.bin"
    footer = read_footer(io, str(golden))
    assert footer.blobs == (
        BlobMetadata("some-blob", (1,), 2, 1, offset=4, length=9),
        BlobMetadata("some-other-blob", (2,), 2, 1, offset=13, length=83),
    )
    assert footer.metadata.properties == {"created-by": "Test 1234"}
    with PuffinReader(io, str(golden)) as reader:
        assert tuple(reader.read_blob(b) for b in footer.blobs) == SAMPLE_BLOBS

    location = str(tmp_path / "sample.puffin")
    ours = write(io, location, sample_blobs(), created_by="Test 1234")
    assert Path(location).read_bytes() == golden.read_bytes()
    assert ours.metadata == footer.metadata and ours.file_size == golden.stat().st_size


def test_java_zstd_sample_is_read_and_ours_parses_the_same(tmp_path: Path) -> None:
    """zstd output differs between implementations (Java uses aircompressor): compare the
    decompressed blobs and the footer, offsets and lengths aside."""
    io, golden = FileIO(), DATA / "sample-metric-data-compressed-zstd.bin"
    footer = read_footer(io, str(golden))
    assert [(b.type, b.compression_codec, b.offset, b.length) for b in footer.blobs] == [
        ("some-blob", "zstd", 4, 22),
        ("some-other-blob", "zstd", 26, 77),
    ]
    with PuffinReader(io, str(golden)) as reader:
        assert tuple(reader.read_blob(b) for b in footer.blobs) == SAMPLE_BLOBS

    location = str(tmp_path / "zstd.puffin")
    ours = write(io, location, sample_blobs("zstd"), created_by="Test 1234")
    reread = read_footer(io, location)
    assert reread.metadata == ours.metadata
    strip = [(b.type, b.fields, b.snapshot_id, b.sequence_number, b.compression_codec)
             for b in footer.blobs]  # fmt: skip
    assert [(b.type, b.fields, b.snapshot_id, b.sequence_number, b.compression_codec)
            for b in reread.blobs] == strip  # fmt: skip
    with PuffinReader(io, location) as reader:
        assert tuple(reader.read_blob(b) for b in reread.blobs) == SAMPLE_BLOBS
        first = reader.read_range(reread.blobs[0].offset, reread.blobs[0].length)
    assert first[:4] == b"\x28\xb5\x2f\xfd"  # a zstd frame, stored as such


# Round trips and ranged reads


def test_writer_reports_offsets_lengths_and_size_the_reader_agrees_with(tmp_path: Path) -> None:
    io, location = FileIO(), str(tmp_path / "stats.puffin")
    blobs = [
        Blob("a", b"x" * 1000, fields=[1, 2], compression_codec="zstd", properties={"ndv": "1"}),
        Blob("b", b"", snapshot_id=7, sequence_number=3),
        Blob("c", bytes(range(256)) * 10),
    ]
    with PuffinWriter(io, location, properties={"k": "v"}) as writer:
        written = [writer.write(blob) for blob in blobs]
    result = writer.close()
    assert written[0].offset == 4 and written[0].length < 1000  # compressed
    assert [b.offset for b in written[1:]] == [4 + written[0].length] * 2  # "b" is empty
    assert result.file_size == Path(location).stat().st_size == io.size(location)
    assert result.metadata.properties == {"k": "v", "created-by": puffin.CREATED_BY}

    footer = read_footer(io, location, file_size=result.file_size)
    assert footer == result
    with PuffinReader(io, location) as reader:
        assert [reader.read_blob(b) for b in footer.blobs] == [b.data for b in blobs]
    assert read_range(io, location, written[2].offset, 3) == bytes([0, 1, 2])


def test_footer_comes_from_one_read_of_the_tail_and_blobs_from_their_range(
    tmp_path: Path,
) -> None:
    location = str(tmp_path / "big.puffin")
    result = write(FileIO(), location, [Blob("big", bytes(300_000)), Blob("small", b"xyz")])
    io = RecordingIO()
    assert read_footer(io, location).metadata == result.metadata
    assert io.reads == [(result.file_size - puffin.TAIL_READ_BYTES, puffin.TAIL_READ_BYTES)]
    io.reads.clear()
    small = result.blobs[1]
    assert read_range(io, location, small.offset, small.length) == b"xyz"
    assert io.reads == [(small.offset, 3)]


def test_a_footer_larger_than_the_tail_read_takes_a_second_read(tmp_path: Path) -> None:
    location = str(tmp_path / "wide.puffin")
    blobs = [Blob("dv", b"z", properties={"referenced-data-file": f"s3://b/{i:0200}"})
             for i in range(500)]  # fmt: skip
    result = write(FileIO(), location, blobs)
    assert result.footer_size > puffin.TAIL_READ_BYTES
    io = RecordingIO()
    assert read_footer(io, location) == result
    assert len(io.reads) == 2
    assert io.reads[1] == (result.file_size - result.footer_size, result.footer_size)


def test_lz4_footer_and_blob_with_content_size_are_read(tmp_path: Path) -> None:
    """LZ4 frames as the spec wants them (content size present); pyarrow writes frames
    without it, so the test adds it and recomputes the header checksum."""
    blob = b"lz4 blob " * 50
    payload = json.dumps(
        {"blobs": [{"type": "t", "fields": [], "snapshot-id": 1, "sequence-number": 1,
                    "offset": 4, "length": len(spec_lz4(blob)), "compression-codec": "lz4"}]}
    ).encode()  # fmt: skip
    footer = spec_lz4(payload)
    data = (puffin.MAGIC + spec_lz4(blob) + puffin.MAGIC + footer
            + struct.pack("<i", len(footer)) + bytes([1, 0, 0, 0]) + puffin.MAGIC)  # fmt: skip
    path = tmp_path / "lz4.puffin"
    path.write_bytes(data)
    with PuffinReader(FileIO(), str(path)) as reader:
        (meta,) = reader.read_footer().blobs
        assert meta.compression_codec == "lz4" and reader.read_blob(meta) == blob


def test_lz4_frame_without_content_size_and_writing_lz4_are_refused(tmp_path: Path) -> None:
    location = str(tmp_path / "x.puffin")
    frame = pa.Codec("lz4").compress(b"abc" * 10, asbytes=True)
    with pytest.raises(PuffinError, match="content size present") as info:
        puffin.decompress("lz4", frame, location)
    assert info.value.path == location
    with pytest.raises(PuffinError, match="cannot write codec 'lz4'"):
        write(FileIO(), location, [Blob("t", b"abc", compression_codec="lz4")])
    assert not Path(location).exists()  # the failed writer left nothing behind
    with pytest.raises(PuffinError, match="unknown compression codec 'snappy'"):
        puffin.decompress("snappy", b"", location)


def test_existing_file_is_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "taken.puffin"
    path.write_bytes(b"precious")
    with pytest.raises(FileError, match="already exists"):
        PuffinWriter(FileIO(), str(path))
    assert path.read_bytes() == b"precious"


def test_round_trip_on_s3_reads_ranges(s3_store: ObjectStore) -> None:
    io = FileIO(s3_store.properties)
    location = f"{s3_store.new_bucket()}/t/data/stats.puffin"
    result = write(io, location, [Blob("a", b"1" * 5000), Blob("b", b"second")])
    assert read_footer(io, location) == result
    second = result.blobs[1]
    assert read_range(io, location, second.offset, second.length) == b"second"


# Malformed files: every error names the file


def good_file(tmp_path: Path) -> bytes:
    location = str(tmp_path / "good.puffin")
    write(FileIO(), location, sample_blobs(), created_by="Test 1234")
    return Path(location).read_bytes()


def footer_with(payload: bytes, flags: bytes = bytes(4)) -> bytes:
    return puffin.MAGIC + payload + struct.pack("<i", len(payload)) + flags + puffin.MAGIC


@pytest.mark.parametrize(
    ("mangle", "message"),
    [
        (lambda d: d[:15], "truncated: 15 bytes"),
        (lambda d: d[:-1], "bad magic .* at the end"),
        (lambda d: d[:-12] + struct.pack("<i", 10_000) + d[-8:], "payload size 10000 is out"),
        (lambda d: d[:-12] + struct.pack("<i", -5) + d[-8:], "payload size -5 is out"),
        (lambda d: d[:-8] + bytes([2, 0, 0, 0]) + d[-4:], "unknown footer flags 02000000"),
        (lambda d: d[:-8] + bytes([0, 0, 1, 0]) + d[-4:], "unknown footer flags 00000100"),
        (lambda d: d[:-12] + struct.pack("<i", len(d) - 28) + d[-8:], "at the footer's start"),
        (lambda d: b"XXXX" + d[4:], "bad magic 58585858 at the start"),
        (lambda d: d[:4] + footer_with(b'{"blobs": [}'), "not UTF-8 JSON"),
        (lambda d: d[:4] + footer_with(b"\xff"), "not UTF-8 JSON"),
        (lambda d: d[:4] + footer_with(b'{"blob": []}'), "'blobs' must be a JSON array"),
        (lambda d: d[:4] + footer_with(b'{"blobs": [{"type": "t"}]}'), "blob 0: 'fields'"),
        (
            lambda d: d[:4] + footer_with(json.dumps({"blobs": [
                {"type": "t", "fields": [], "snapshot-id": 1, "sequence-number": 1,
                 "offset": 4, "length": 99}]}).encode()),
            r"blob 0 \(t\) at \[4, 103\) lies outside",
        ),
        (lambda d: d[:4] + footer_with(b"x", bytes([1, 0, 0, 0])), "footer payload: not a single"),
    ],
)  # fmt: skip
def test_malformed_files_are_refused_naming_the_file(
    tmp_path: Path, mangle: object, message: str
) -> None:
    path = tmp_path / "bad.puffin"
    path.write_bytes(mangle(good_file(tmp_path)))  # type: ignore[operator]
    with pytest.raises(PuffinError, match=message) as info:
        read_footer(FileIO(), str(path))
    assert isinstance(info.value, FileError) and info.value.path == str(path)
    assert str(info.value).startswith(f"{path}: ")


def test_wrong_expected_size_and_ranges_outside_the_file_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "good.puffin"
    path.write_bytes(good_file(tmp_path))
    size = path.stat().st_size
    with pytest.raises(PuffinError, match=f"is {size} bytes, but {size + 1} were expected"):
        read_footer(FileIO(), str(path), file_size=size + 1)
    with pytest.raises(PuffinError, match=r"byte range \[350, 360\) lies outside"):
        read_range(FileIO(), str(path), 350, 10)
    with pytest.raises(FileError, match="file not found"):
        read_footer(FileIO(), str(tmp_path / "missing.puffin"))


def test_corrupt_zstd_blob_is_refused_naming_the_file(tmp_path: Path) -> None:
    location = str(tmp_path / "z.puffin")
    result = write(FileIO(), location, sample_blobs("zstd"))
    data = bytearray(Path(location).read_bytes())
    data[result.blobs[1].offset + 5] -= 1  # the frame's content size: 83 -> 82
    Path(location).write_bytes(bytes(data))
    with PuffinReader(FileIO(), location) as reader, pytest.raises(PuffinError) as info:
        reader.read_blob(reader.read_footer().blobs[1])
    assert info.value.path == location and "zstd" in info.value.problem


# LZ4 frames with their content size, as the spec wants them. pyarrow writes frames without
# it; adding it changes the frame descriptor, whose checksum is xxHash32's second byte.

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393


def _xxh32_short(data: bytes) -> int:
    """xxHash32 (seed 0) of fewer than 16 bytes, all a frame descriptor needs."""

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF

    h, i = (_P5 + len(data)) & 0xFFFFFFFF, 0
    while i + 4 <= len(data):
        h = rotl((h + int.from_bytes(data[i : i + 4], "little") * _P3) & 0xFFFFFFFF, 17)
        h, i = h * _P4 & 0xFFFFFFFF, i + 4
    for byte in data[i:]:
        h = rotl((h + byte * _P5) & 0xFFFFFFFF, 11) * _P1 & 0xFFFFFFFF
    h = (h ^ h >> 15) * _P2 & 0xFFFFFFFF
    h = (h ^ h >> 13) * _P3 & 0xFFFFFFFF
    return h ^ h >> 16


def spec_lz4(data: bytes) -> bytes:
    frame = pa.Codec("lz4").compress(data, asbytes=True)
    assert _xxh32_short(frame[4:6]) >> 8 & 0xFF == frame[6]  # the checksum is computed right
    descriptor = bytes([frame[4] | 0x08, frame[5]]) + len(data).to_bytes(8, "little")
    return frame[:4] + descriptor + bytes([_xxh32_short(descriptor) >> 8 & 0xFF]) + frame[7:]
