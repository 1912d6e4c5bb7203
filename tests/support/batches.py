"""Ingestion batches and the rows they must leave, for tests that run every job on a table
(object stores, REST catalogs): `batch` makes rows, `feed` ingests them and updates
the `Model`, whose `counter()` is what any reader must see."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

import pyarrow as pa
from pyiceberg.table import StaticTable
from pyspark.sql import SparkSession

from icecore.catalog import Catalog
from icecore.table import Table
from spark_jobs.ingest import run as ingest
from spark_jobs.specs.jobs import IngestOptions

SOURCE = "id long, v string, ts timestamp_ntz, op string"
EPOCH = dt.datetime(1970, 1, 1)
Rows = Counter[tuple[Any, ...]]


class Model:
    """The rows the batches leave, by the ingestion contract (`I` adds, `U` replaces every
    row of its key, `D` deletes them; upsert replaces, delete removes, overwrite replaces
    the whole table)."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, str, int]] = []

    def apply(self, mode: str, batch: list[tuple[Any, ...]]) -> None:
        if mode == "overwrite":
            self.rows = []
        by_mode = {"append": "I", "overwrite": "I", "upsert": "U", "delete": "D"}
        for key, v, ts, change in batch:
            op = by_mode.get(mode, change)
            if op != "I":
                self.rows = [r for r in self.rows if r[0] != key]
            if op != "D":
                self.rows.append((key, v, (ts - EPOCH) // dt.timedelta(microseconds=1)))

    def counter(self) -> Rows:
        return Counter(self.rows)


def batch(first: int, n: int, ops: str = "I", tag: str = "") -> list[tuple[Any, ...]]:
    return [
        (k, f"{tag}{k}", dt.datetime(2024, 1, 1 + k % 3, k % 24), ops[k % len(ops)])
        for k in range(first, first + n)
    ]


def feed(
    spark: SparkSession,
    catalog: Catalog,
    table: str,
    *,
    mode: str,
    rows: list[Any],
    model: Model,
    properties: dict[str, str] | None = None,
) -> None:
    """Ingest `rows` in `mode` (creating the table, with `properties`, on first use)."""
    frame = spark.createDataFrame(rows, SOURCE)
    if mode != "cdc":
        frame = frame.drop("op")
    keyed = {"key": ["id"]} if mode in ("upsert", "delete", "cdc") else {}
    options = IngestOptions(
        table=table,
        mode=mode,
        create=True,
        partition_by="bucket(2, id)",
        properties=dict(properties or {}),
        **keyed,
    )
    assert ingest(spark, catalog, options, source=frame)["status"] == "committed"
    model.apply(mode, rows)


def pyiceberg_rows(table: Table, properties: dict[str, str]) -> Rows:
    """The (id, v, ts) rows of a `batch` table as PyIceberg reads them (ts as epoch micros)."""
    assert table.metadata_location is not None
    arrow = StaticTable.from_metadata(table.metadata_location, properties).scan().to_arrow()
    ts = arrow.column("ts").cast(pa.int64()).to_pylist()
    ids, values = arrow.column("id").to_pylist(), arrow.column("v").to_pylist()
    return Counter(zip(ids, values, ts, strict=True))
