"""A table PyIceberg wrote in many small appends, one manifest per commit: what a streaming
writer leaves behind, and the table of `rewrite_manifests`' bar (tests and benchmark).

PyIceberg (0.12) copies its whole metadata on every commit, so a few hundred commits would
take a minute; snapshots are expired every 20 commits (by icecore), which leaves the current
snapshot's manifests, one per commit, untouched.
"""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog as PyIcebergCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from icecore.catalog import SqlCatalog

TABLE = "py.events"
ARROW = pa.schema([("id", pa.int64()), ("part", pa.string())])
ROWS_PER_COMMIT = 8  # in four partitions: four data files, one manifest


def pyiceberg_appends(warehouse: Path, catalog: SqlCatalog, commits: int) -> str:
    """`py.events`, written by PyIceberg's SqlCatalog on the database `catalog` opens (its
    default SQLite file in `warehouse`); returns the table's name."""
    engine = PyIcebergCatalog(
        "default", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}"
    )
    engine.create_namespace("py")
    table = engine.create_table(
        TABLE,
        Schema(NestedField(1, "id", LongType()), NestedField(2, "part", StringType())),
        partition_spec=PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "part")),
    )
    for n in range(commits):
        rows = [{"id": n * 10 + i, "part": "abcd"[i % 4]} for i in range(ROWS_PER_COMMIT)]
        table.append(pa.Table.from_pylist(rows, ARROW))
        if n % 20 == 19:
            ours = catalog.load_table(TABLE)
            cutoff = int(time.time() * 1000) + 1
            ours.expire_snapshots().expire_older_than(cutoff).retain_last(1).commit()
            table.refresh()
    engine.engine.dispose()
    return TABLE


def pyiceberg_catalog(warehouse: Path) -> PyIcebergCatalog:
    """PyIceberg's SqlCatalog on the warehouse's SQLite catalog (`catalog.db`), the one
    icecore's `SqlCatalog("default", warehouse=...)` and an icefloe connection open."""
    return PyIcebergCatalog(
        "default", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}"
    )


def create_partitioned(warehouse: Path, table: str) -> None:
    """`table` (id long, part string), partitioned by `part`, created by PyIceberg with no
    snapshot yet."""
    engine = pyiceberg_catalog(warehouse)
    namespace = table.rpartition(".")[0]
    engine.create_namespace_if_not_exists(namespace)
    engine.create_table(
        table,
        Schema(NestedField(1, "id", LongType()), NestedField(2, "part", StringType())),
        partition_spec=PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "part")),
    )
    engine.engine.dispose()


def one_row_appends(
    warehouse: Path, table: str, commits: int, *, part: str = "a", first: int = 0
) -> list[int]:
    """Another engine's stream into one partition: `commits` appends of one row each (ids
    `first`, `first + 1`, ...), one small file and one snapshot apiece; returns the snapshot
    ids, oldest first."""
    engine = pyiceberg_catalog(warehouse)
    loaded = engine.load_table(table)
    ids = []
    for n in range(first, first + commits):
        loaded.append(pa.Table.from_pylist([{"id": n, "part": part}], ARROW))
        snapshot = loaded.current_snapshot()
        assert snapshot is not None
        ids.append(snapshot.snapshot_id)
    engine.engine.dispose()
    return ids
