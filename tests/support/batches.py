"""Ingestion batches and the rows they must leave: the one CDC source (`SOURCE`), model
(`Model`: the ingestion contract) and builders of the tests. `batch` makes keyed rows,
`feed` ingests them in a mode and updates the `Model`, whose `counter()` is what any reader
must see; `CdcLog` is a database's change log (random inserts, updates and deletes of live
keys) and `cdc_frame` the two-slice DataFrame the CDC builders ingest."""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter
from typing import Any

import pyarrow as pa
from pyiceberg.table import StaticTable
from pyspark.sql import DataFrame, SparkSession

from icecore.catalog import Catalog
from icecore.jobs.jobs import IngestOptions
from icecore.table import Table
from spark_jobs.ingest import run as ingest

SOURCE = "id long, v string, ts timestamp_ntz, op string"
EPOCH = dt.datetime(1970, 1, 1)
Rows = Counter[tuple[Any, ...]]


def micros(ts: dt.datetime) -> int:
    """A naive timestamp as the table stores it: microseconds since the epoch."""
    return (ts - EPOCH) // dt.timedelta(microseconds=1)


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
                self.rows.append((key, v, micros(ts)))

    def counter(self) -> Rows:
        return Counter(self.rows)


class CdcLog:
    """Changes as a database's log has them: inserts of new keys, updates and deletes of live
    ones (keys recur within a batch: position deletes; and across batches: equality
    deletes), with the rows a correct table holds after them (`model`)."""

    def __init__(self, seed: int) -> None:
        self.rnd = random.Random(seed)
        self.model = Model()
        self.next_id = 1

    def batch(self, size: int) -> list[tuple[Any, ...]]:
        rows = []
        for i in range(size):
            live = sorted({row[0] for row in self.model.rows})
            if not live or self.rnd.random() < 0.4:
                key, op = self.next_id, "I"
                self.next_id += 1
            else:
                key = self.rnd.choice(live)
                op = "D" if self.rnd.random() < 0.3 else "U"
            ts = dt.datetime(2024, 1, 1 + self.rnd.randint(0, 2), self.rnd.randint(0, 23))
            change = (key, f"r{self.next_id}-{i}", ts, op)
            rows.append(change)
            self.model.apply("cdc", [change])
        return rows


def cdc_frame(spark: SparkSession, rows: list[tuple[Any, ...]]) -> DataFrame:
    """CDC rows as a source DataFrame in two slices (two files per batch and partition)."""
    return spark.createDataFrame(spark.sparkContext.parallelize(rows, 2), SOURCE)


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
    assert ingest(spark, catalog, options, source=frame).status == "committed"
    model.apply(mode, rows)


def pyiceberg_rows(table: Table, properties: dict[str, str]) -> Rows:
    """The (id, v, ts) rows of a `batch` table as PyIceberg reads them (ts as epoch micros)."""
    assert table.metadata_location is not None
    arrow = StaticTable.from_metadata(table.metadata_location, properties).scan().to_arrow()
    ts = arrow.column("ts").cast(pa.int64()).to_pylist()
    ids, values = arrow.column("id").to_pylist(), arrow.column("v").to_pylist()
    return Counter(zip(ids, values, ts, strict=True))
