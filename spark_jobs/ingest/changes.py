"""A batch of row changes, resolved the way Iceberg's Flink delta writer resolves them.

Every row of an upsert, delete or CDC batch is an operation on the key (the equality fields):
`I` inserts a row, `U` replaces every row with its key by itself (an update-after or upsert),
`D` deletes every row with its key. Applied in row order, within one atomic commit:

- rows of `I` and `U` are written to new data files;
- a written row that a later `U` or `D` of the same batch replaces or deletes is removed by a
  position delete against the new data file (Flink's `insertedRowMap`): an equality delete
  cannot do it, since it only applies to data of earlier commits;
- a key that any `U` or `D` touches gets one equality delete row, which removes its rows from
  earlier batches (it never touches this batch's own rows, which share its sequence number).

Unlike Flink, which remembers only the last position of each key, every earlier written row
of the key is deleted, so two inserts of one key followed by an update leave one row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from icecore.jobs.errors import JobError
from spark_jobs.ingest.source import ORDER_COLUMNS
from spark_jobs.schema import quote_name

INSERT, UPDATE, DELETE = "I", "U", "D"
OPS = (INSERT, UPDATE, DELETE)
OP = "_ingest_op"
SUPERSEDED = "_ingest_superseded"


@dataclass
class ResolvedBatch:
    """The batch with `_ingest_op` and `_ingest_superseded` per row, persisted, and its
    counts per operation."""

    frame: DataFrame
    counts: dict[str, int]
    superseded: int

    @property
    def rows(self) -> int:
        return sum(self.counts.values())

    def written(self) -> DataFrame:
        """Rows that go to data files (`I` and `U`)."""
        return self.frame.filter(F.col(OP).isin(INSERT, UPDATE))

    def deleted_keys(self, keys: Sequence[str]) -> DataFrame:
        """One row per key that an equality delete must remove from earlier batches."""
        touched = self.frame.filter(F.col(OP).isin(UPDATE, DELETE))
        return touched.select(*(F.col(quote_name(k)) for k in keys)).distinct()

    def release(self) -> None:
        self.frame.unpersist()


def op_column(mode: str, op_column: str | None) -> Column:
    """The operation of each row: from the op column for `cdc`, fixed for the other modes."""
    if mode == "upsert":
        return F.lit(UPDATE)
    if mode == "delete":
        return F.lit(DELETE)
    assert op_column is not None
    return F.upper(F.trim(F.col(quote_name(op_column)).cast("string")))


def resolve(frame: DataFrame, keys: Sequence[str], mode: str, op_name: str | None) -> ResolvedBatch:
    """Flag each row with its operation and whether a later change of its key supersedes it.

    Fails, before anything is written, on an operation other than I, U or D (nulls too) and
    on an empty batch.
    """
    order = [F.col(c).asc_nulls_first() for c in ORDER_COLUMNS]
    key_columns = [F.col(quote_name(k)) for k in keys]
    later = Window.partitionBy(*key_columns).orderBy(*order)
    later = later.rowsBetween(1, Window.unboundedFollowing)
    changes_later = F.max(F.col(OP).isin(UPDATE, DELETE).cast("int")).over(later)
    flagged = frame.withColumn(OP, op_column(mode, op_name))
    flagged = flagged.withColumn(SUPERSEDED, F.coalesce(changes_later, F.lit(0)) == 1)
    flagged = flagged.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        tallies = flagged.groupBy(OP).agg(
            F.count(F.lit(1)).alias("rows"),
            F.sum((F.col(SUPERSEDED) & F.col(OP).isin(INSERT, UPDATE)).cast("long")).alias("gone"),
        )
        rows = tallies.collect()
        counts = {row[OP]: int(row["rows"]) for row in rows}
        unknown: list[str | None] = sorted(op for op in counts if op is not None and op not in OPS)
        if None in counts:
            unknown.append(None)
        if unknown:
            raise JobError(
                f"--op-column {op_name!r} holds values other than I, U, D: "
                + ", ".join(repr(op) for op in unknown[:10])
            )
        if not counts:
            raise JobError("the source is empty: nothing to ingest")
    except BaseException:
        flagged.unpersist()
        raise
    superseded = sum(int(row["gone"] or 0) for row in rows)
    return ResolvedBatch(flagged, {op: counts.get(op, 0) for op in OPS}, superseded)
