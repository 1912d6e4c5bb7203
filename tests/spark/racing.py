"""Racing a maintenance job: a table whose every commit a Python model follows
(`RacedTable`), a concurrent commit at a known moment of the job (`race`), and the checks
that nothing was lost or came back (`check`, `check_rewrite`)."""

from __future__ import annotations

import os
import random
import threading
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import duckdb
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from icecore.catalog import SqlCatalog
from icecore.data.arrow_schema import arrow_schema
from icecore.data.live_batches import DataRef, DeleteRef, LiveBatches
from icecore.spec.deletion_vectors import write_dvs
from icecore.spec.manifest import DataFile, FileContent
from icecore.table import Table
from tests.spark.delete_tables import TABLE, batch, before_swap, cdc, commit_cdc, create, live, rows
from tests.support.batches import Model
from tests.support.reader import scan_rows
from tests.support.tables import LocalTable

ROUNDS = int(os.environ.get("ICEFLOE_RACE_ROUNDS", "5"))
SIZE = 16


class RacedTable:
    """The table under race: the CDC batches committed so far and what it must read."""

    def __init__(
        self, catalog: SqlCatalog, partition_by: str | None, seed: int, format_version: int = 2
    ) -> None:
        self.catalog = catalog
        self.rnd = random.Random(seed)
        self.model = Model()
        self.batches = 0
        self.at: dict[int, Counter[tuple[Any, ...]]] = {}  # snapshot id -> its rows
        create(catalog, partition_by, format_version=format_version)

    def commit(self, catalog: SqlCatalog | None = None) -> int:
        """Commit the next CDC batch (through `catalog`, default the model's)."""
        changes = batch(self.rnd, self.batches, SIZE, null_keys=False)
        self.batches += 1
        snapshot_id = commit_cdc((catalog or self.catalog).load_table(TABLE), changes)
        self.model.apply("cdc", changes)
        self.at[snapshot_id] = self.expected
        return snapshot_id

    def ingest(self, spark: SparkSession, catalog: SqlCatalog) -> int:
        """Commit the next CDC batch with the ingestion job itself (Spark, in process)."""
        changes = batch(self.rnd, self.batches, SIZE, null_keys=False)
        self.batches += 1
        snapshot_id = int(cdc(spark, catalog, changes).snapshot_id)
        self.model.apply("cdc", changes)
        self.at[snapshot_id] = self.expected
        return snapshot_id

    def delete_row(self, catalog: SqlCatalog) -> int:
        """A merge-on-read DELETE of one live row, as another engine writes it: a position
        delete on its data file. Values of `v` are unique, so the row has one position."""
        table = catalog.load_table(TABLE)
        victim = self.rnd.choice(sorted(self.model.rows, key=str))
        for entry in live(table)[FileContent.DATA]:
            path = entry.data_file.file_path
            values = pq.read_table(path, columns=["v"]).column("v").to_pylist()
            if victim[1] in values:
                break
        else:
            raise AssertionError(f"row {victim} is in no live data file")
        local = LocalTable(table.io, table.metadata)
        deletes = local.write_position_deletes(
            [(path, values.index(victim[1]))],
            partition=entry.data_file.partition,
            spec_id=entry.data_file.spec_id,
        )
        delta = table.new_row_delta().add_deletes(deletes)
        delta.commit()
        self.model.rows.remove(victim)
        self.at[delta.snapshot_id] = self.expected
        return delta.snapshot_id

    def delete_rows_as_dvs(self, catalog: SqlCatalog) -> int:
        """A merge-on-read DELETE of one live row of every data file, as a v3 writer commits
        it: each file's new DV holds every position already deleted from the file (its old
        DV's, its legacy position delete files') and replaces its old DV. Returns the
        snapshot id."""
        table = catalog.load_table(TABLE)
        schema = table.metadata.schema()
        positions: dict[str, list[int]] = {}
        by_path: dict[str, DataFile] = {}
        old_dvs: list[DataFile] = []
        for task in table.scan().plan_files():
            path = task.file.file_path
            values = pq.read_table(path, columns=["v"]).column("v").to_pylist()
            live_rows = sorted((r for r in self.model.rows if r[1] in values), key=str)
            if not live_rows:
                continue
            victim = self.rnd.choice(live_rows)
            refs = [DeleteRef.of(d) for d in task.deletes]
            reader = LiveBatches(table.io, schema.fields, arrow_schema(schema.fields), refs, [path])
            every = tuple(range(len(refs)))
            deleted = reader.deleted_positions(DataRef(path, 0, 2**62, 0, deletes=every))
            positions[path] = [*deleted.tolist(), values.index(victim[1])]
            by_path[path] = task.file
            old_dvs.extend(d for d in task.deletes if d.is_deletion_vector)
            self.model.rows.remove(victim)
        location = f"{table.metadata.location}/data/{uuid.uuid4()}-deletes.puffin"
        delta = table.new_row_delta()
        for w in write_dvs(table.io, location, positions):
            delta.add_deletes(w.entry(by_path[w.referenced_data_file]))
        for old in old_dvs:
            delta.remove_deletes(old)
        delta.validate_data_files_exist(positions).commit()
        self.at[delta.snapshot_id] = self.expected
        return delta.snapshot_id

    @property
    def expected(self) -> Counter[tuple[Any, ...]]:
        return self.model.counter()


def race(
    spark: SparkSession,
    catalog: SqlCatalog,
    job: Callable[[], dict[str, Any]],
    racer: Callable[[], int],
    *,
    during_write: bool,
) -> tuple[dict[str, Any] | BaseException, str]:
    """Run `job` in a thread and `racer` (a commit) once the job has planned: while its
    Spark work runs (`during_write`, when the job gets there before its commit) or right
    before its first metadata swap. The job's first swap waits for the racer's commit.
    Returns the job's result (or its exception) and where the racer committed."""
    at_swap, raced = threading.Event(), threading.Event()
    outcome: list[dict[str, Any] | BaseException] = []

    def hold(swap: int) -> None:
        if swap == 1:
            at_swap.set()
            assert raced.wait(300), "the racing commit never happened"

    def run_job() -> None:
        try:
            outcome.append(job())
        except BaseException as exc:
            outcome.append(exc)
        finally:
            at_swap.set()  # a job that never commits must not leave the racer waiting

    tracker = spark.sparkContext.statusTracker()
    with before_swap(catalog, hold):
        worker = threading.Thread(target=run_job, name="maintenance-job")
        worker.start()
        where = "swap"
        while not at_swap.wait(0.02):
            if during_write and tracker.getActiveStageIds():
                where = "spark-write"
                break
        if outcome:
            where = "after-job"
        try:
            racer()
        finally:
            raced.set()
            worker.join()
    return outcome[0], where


def check(table: Table, model: RacedTable, duck: duckdb.DuckDBPyConnection) -> None:
    """No row lost, none back, for every reader."""
    assert rows(table, duck) == model.expected


def snapshot_rows(table: Table, snapshot_id: int) -> Counter[tuple[Any, ...]]:
    return Counter(
        (r["id"], r["v"], r["ts"])
        for r in scan_rows(table.io, table.metadata, snapshot_id=snapshot_id)
    )


def check_rewrite(table: Table, snapshot_ids: list[int]) -> None:
    """Each of a rewrite's own commits reads what its parent read."""
    for snapshot_id in snapshot_ids:
        parent = table.metadata.snapshot_by_id(snapshot_id).parent_snapshot_id
        assert parent is not None
        assert snapshot_rows(table, snapshot_id) == snapshot_rows(table, parent), snapshot_id


def result_of(outcome: dict[str, Any] | BaseException) -> dict[str, Any]:
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome
