"""Bad v3 input stops a job with one clear line naming what is wrong, and nothing is written:
a deletion vector whose checksum does not match, and a table with a column type the Spark
jobs cannot carry (variant, geometry, geography, nanosecond timestamps)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from icecore.catalog import Catalog
from icecore.errors import IcecoreError
from icecore.jobs.errors import JobError
from icecore.jobs.jobs import RewriteDataFilesOptions
from icecore.spec.deletion_vectors import write_dvs
from icecore.spec.manifest import DataFile, FileContent, FileFormat
from icecore.spec.schema import Schema
from icecore.spec.types import LongType, NestedField, VariantType
from spark_jobs.rewrite_data_files import run as rewrite_data_files
from tests.support.batches import Model, batch, feed
from tests.support.reader import scan_rows


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


def test_a_dv_with_a_wrong_checksum_fails_the_compaction_naming_the_file(
    spark: SparkSession, catalog: Catalog, tmp_path: Path
) -> None:
    name, model = "db.crc", Model()
    feed(spark, catalog, name, mode="append", rows=batch(0, 20), model=model,
         properties={"format-version": "3"})  # fmt: skip
    table = catalog.load_table(name)
    data = next(iter(table.scan().plan_files())).file
    puffin = f"{table.metadata.location}/data/bad-deletes.puffin"
    (written,) = write_dvs(table.io, puffin, {data.file_path: [0, 1]})
    raw = bytearray(Path(puffin).read_bytes())
    crc_at = written.content_offset + written.content_size_in_bytes - 1
    raw[crc_at] ^= 0xFF  # the last byte of the blob's CRC-32
    Path(puffin).write_bytes(bytes(raw))
    dv = DataFile(
        puffin, FileFormat.PUFFIN, data.partition, written.record_count,
        written.file_size_in_bytes, content=FileContent.POSITION_DELETES,
        referenced_data_file=data.file_path, content_offset=written.content_offset,
        content_size_in_bytes=written.content_size_in_bytes, spec_id=data.spec_id,
    )  # fmt: skip
    table.new_row_delta().add_deletes(dv).commit()
    before = catalog.load_table(name).metadata_location
    files = _files(Path(table.metadata.location))

    with pytest.raises(Exception, match=r"bad-deletes\.puffin.*CRC") as raised:
        rewrite_data_files(spark, catalog, RewriteDataFilesOptions(table=name, rewrite_all=True))
    assert data.file_path in str(raised.value) or "bad-deletes.puffin" in str(raised.value)
    assert catalog.load_table(name).metadata_location == before
    assert _files(Path(table.metadata.location)) == files  # nothing left behind


def test_a_v3_table_with_a_variant_column_is_refused_before_anything_runs(
    spark: SparkSession, catalog: Catalog, tmp_path: Path
) -> None:
    schema = Schema((NestedField(1, "id", LongType(), required=True),
                     NestedField(2, "payload", VariantType())))  # fmt: skip
    catalog.create_namespace("v3bad")
    table = catalog.create_table("v3bad.t", schema, properties={"format-version": "3"})
    path = f"{table.metadata.location}/data/only-ids.parquet"
    ids = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
    ids = ids.cast(pa.schema([pa.field("id", pa.int64(), False, {b"PARQUET:field_id": b"1"})]))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(ids, path)
    for _ in range(2):
        table.new_fast_append().append_file(
            DataFile(path, FileFormat.PARQUET, (), 3, Path(path).stat().st_size)
        ).commit()
    before = catalog.load_table("v3bad.t").metadata_location

    with pytest.raises(JobError, match=r"column payload has type variant") as raised:
        rewrite_data_files(
            spark, catalog, RewriteDataFilesOptions(table="v3bad.t", rewrite_all=True)
        )
    assert "\n" not in str(raised.value)
    assert isinstance(raised.value, IcecoreError | JobError)
    assert catalog.load_table("v3bad.t").metadata_location == before


def test_dvs_sharing_one_puffin_file_all_apply_when_their_files_are_compacted(
    spark: SparkSession, catalog: Catalog
) -> None:
    """A compaction group must carry every DV of its files even when one Puffin file holds
    them all (as a Spark task writes them): told apart by offset, not by path."""
    name, model = "db.shared", Model()
    for first in (0, 10):
        feed(spark, catalog, name, mode="append", rows=batch(first, 10), model=model,
             properties={"format-version": "3"})  # fmt: skip
    table = catalog.load_table(name)
    files = [t.file for t in table.scan().plan_files()]
    assert len(files) >= 3
    puffin = f"{table.metadata.location}/data/shared-deletes.puffin"
    written = write_dvs(table.io, puffin, {f.file_path: [0] for f in files})
    delta = table.new_row_delta()
    by_path = {f.file_path: f for f in files}
    for w in written:
        data = by_path[w.referenced_data_file]
        delta.add_deletes(DataFile(
            puffin, FileFormat.PUFFIN, data.partition, w.record_count, w.file_size_in_bytes,
            content=FileContent.POSITION_DELETES, referenced_data_file=data.file_path,
            content_offset=w.content_offset, content_size_in_bytes=w.content_size_in_bytes,
            spec_id=data.spec_id,
        ))  # fmt: skip
    delta.commit()
    expected = sorted(r["id"] for r in scan_rows(table.io, catalog.load_table(name).metadata))
    assert len(expected) == 20 - len(files)

    rewrite_data_files(spark, catalog, RewriteDataFilesOptions(table=name, rewrite_all=True))
    table = catalog.load_table(name)
    assert sorted(r["id"] for r in scan_rows(table.io, table.metadata)) == expected
    assert table.health().totals.deletion_vectors.files == 0
