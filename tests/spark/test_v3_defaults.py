"""v3 default values: a column added with an `initial-default` reads that value in rows of
files written before it existed (spec "Column Projection"), so a compaction writes the
default into every old row, never a null."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from icecore.catalog import Catalog
from icecore.jobs.jobs import RewriteDataFilesOptions
from icecore.spec.defaults import with_defaults
from icecore.spec.metadata_builder import MetadataBuilder
from icecore.spec.schema import Schema
from icecore.spec.types import DecimalType, NestedField, StringType
from spark_jobs.rewrite_data_files import run as rewrite_data_files
from tests.support.batches import Model, batch, feed
from tests.support.committing import commit_builder


def test_compaction_fills_old_rows_with_the_initial_default(
    spark: SparkSession, catalog: Catalog
) -> None:
    name, model = "db.defaults", Model()
    for first in (0, 20):
        feed(spark, catalog, name, mode="append", rows=batch(first, 20), model=model,
             properties={"format-version": "3"})  # fmt: skip
    table = catalog.load_table(name)
    schema = table.metadata.schema()
    added = (
        with_defaults(NestedField(10, "region", StringType()), initial="eu", write="eu"),
        with_defaults(NestedField(11, "rate", DecimalType(9, 2)), initial=Decimal("1.50")),
    )
    builder = MetadataBuilder(table.metadata)
    builder.add_schema(Schema((*schema.fields, *added)))
    commit_builder(table, builder)
    written = table.metadata.schema().find_field(10).to_json()
    assert (written["initial-default"], written["write-default"]) == ("eu", "eu")

    rewrite_data_files(spark, catalog, RewriteDataFilesOptions(table=name, rewrite_all=True))
    table = catalog.load_table(name)
    paths = [t.file.file_path for t in table.scan().plan_files()]
    rows = [r for p in paths for r in pq.read_table(Path(p)).to_pylist()]
    assert len(rows) == 40
    assert {(r["region"], r["rate"]) for r in rows} == {("eu", Decimal("1.50"))}
