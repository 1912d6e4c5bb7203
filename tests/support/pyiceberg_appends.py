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
