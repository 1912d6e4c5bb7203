"""Concurrent commits and crashes, with real OS processes on real SQLite and PostgreSQL catalogs.

Each scenario runs the committers as separate Python processes (this file, run as a script, is
the worker), so they share nothing but the catalog database and the warehouse directory, as
Spark jobs and Airflow tasks do:

- 4 processes x 50 fast appends to one table: every commit lands, sequence numbers rise by
  one along the snapshot chain, and the metadata directory holds exactly what the table
  references (lost compare-and-swap attempts cleaned up after themselves);
- a rewrite racing a row delta on the same data file: exactly the outcome Iceberg's rules
  give (a position delete conflicts, an equality delete does not), and the rows read
  afterwards are right;
- processes SIGKILLed at chosen and at random points of a commit: the catalog always points
  at a complete, readable metadata file, planning works, and the next commit goes through.

PostgreSQL cases are skipped only when no server answers at 127.0.0.1:5432, with a reason
saying so.
"""

from __future__ import annotations

import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from icecore.catalog.sql import SqlCatalog
from icecore.errors import CommitConflictError
from icecore.scan import snapshot_manifests
from icecore.spec.manifest import DataFile, FileContent, FileFormat
from icecore.spec.metadata import TableMetadata, read_table_metadata
from icecore.spec.schema import Schema
from icecore.spec.types import LongType, NestedField, StringType
from icecore.table import Table
from tests.support.catalogs import (
    BACKENDS,
    await_killed_client,
    catalog_uri,
    forget_catalog,
    tagged_uri,
    unique_catalog_name,
)
from tests.support.parquet import to_arrow, write_parquet
from tests.support.reader import scan_rows
from tests.support.tables import DELETE_FILE_PATH, DELETE_POS

REPO = Path(__file__).resolve().parents[3]
SCHEMA = Schema(
    (NestedField(1, "id", LongType(), required=True), NestedField(2, "data", StringType()))
)
IDENTIFIER = ("db", "events")
# Contention must cost retries, never failures: many retries, short waits.
CONTENDED = {
    "commit.retry.num-retries": "1000",
    "commit.retry.min-wait-ms": "5",
    "commit.retry.max-wait-ms": "100",
    "write.metadata.previous-versions-max": "40",
    "write.metadata.delete-after-commit.enabled": "true",
}
PROCESSES, APPENDS = 4, 50
KILLS = 4
RACE_ROWS = [{"id": i, "data": f"row{i}"} for i in range(4)]


# Worker side: runs in the child processes -------------------------------------------------


def write_data_file(table: Table, rows: list[dict[str, Any]]) -> DataFile:
    """A real Parquet data file of `rows` under the table's data directory."""
    return _write(table, rows, SCHEMA.fields, FileContent.DATA)


def write_position_delete(table: Table, data_file: DataFile, position: int) -> DataFile:
    rows = [{"file_path": data_file.file_path, "pos": position}]
    return _write(table, rows, (DELETE_FILE_PATH, DELETE_POS), FileContent.POSITION_DELETES)


def write_equality_delete(table: Table, ids: list[int]) -> DataFile:
    rows = [{"id": i} for i in ids]
    return _write(table, rows, SCHEMA.fields[:1], FileContent.EQUALITY_DELETES, [1])


def _write(
    table: Table,
    rows: list[dict[str, Any]],
    fields: Any,
    content: FileContent,
    equality_ids: list[int] | None = None,
) -> DataFile:
    directory = Path(table.metadata.location, "data")
    directory.mkdir(parents=True, exist_ok=True)
    path = str(directory / f"{uuid.uuid4()}.parquet")
    metrics = write_parquet(path, to_arrow(fields, rows), fields)
    return DataFile(
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=(),
        record_count=metrics.record_count,
        file_size_in_bytes=Path(path).stat().st_size,
        content=content,
        column_sizes=metrics.column_sizes,
        value_counts=metrics.value_counts,
        null_value_counts=metrics.null_value_counts,
        lower_bounds=metrics.lower_bounds,
        upper_bounds=metrics.upper_bounds,
        equality_ids=equality_ids,
    )


def _say(line: str) -> None:
    print(line, flush=True)


def _worker_catalog(config: dict[str, Any]) -> SqlCatalog:
    return SqlCatalog(
        config["catalog"], tagged_uri(config["uri"], config["tag"]), config["warehouse"]
    )


def run_appends(config: dict[str, Any]) -> None:
    """`count` one-row fast appends (forever when None), reporting each committed file.

    `pause` holds the process just before or just after the catalog's compare-and-swap, so
    that the parent can kill it exactly there.
    """
    catalog = _worker_catalog(config)
    if config.get("pause"):
        _pause_around_swap(catalog, config["pause"])
    table = catalog.load_table((IDENTIFIER[0], config.get("table", IDENTIFIER[1])))
    worker, count = config["worker"], config.get("count")
    parent = os.getppid()
    n = 0
    _say("ready")
    if config.get("wait"):  # started ahead of time: begin when told
        sys.stdin.readline()
    while (count is None or n < count) and os.getppid() == parent:  # stop if orphaned
        data_file = write_data_file(table, [{"id": worker * 100_000 + n, "data": f"w{worker}"}])
        append = table.new_fast_append().append_file(data_file)
        append.commit()
        _say(f"committed {data_file.file_path} {append.attempts}")
        n += 1


def _pause_around_swap(catalog: SqlCatalog, when: str) -> None:
    swap = catalog._swap

    def paused(identifier: Any, expected: str | None, new: str) -> None:
        if when == "before-swap":
            _say(f"before-swap {new}")
            time.sleep(600)
        swap(identifier, expected, new)
        if when == "after-swap":
            _say(f"after-swap {new}")
            time.sleep(600)

    catalog._swap = paused  # type: ignore[method-assign]


def run_race(config: dict[str, Any]) -> None:
    """One side of the rewrite / row delta race, driven line by line from stdin.

    `prepare <table> <variant>`: load the table and stage the operation against its one data
    file (the rewrite compacts it into a copy; the row delta deletes row 0 by position, or
    id 1 by equality); `go`: commit and report `ok` or `conflict <snapshot id>`; `quit`.
    """
    catalog = _worker_catalog(config)
    role = config["role"]
    operation: Any = None
    _say("ready")
    for line in sys.stdin:
        command, *args = line.split()
        if command == "prepare":
            table = catalog.load_table((IDENTIFIER[0], args[0]))
            (task,) = table.scan().plan_files()
            original = task.file
            if role == "rewrite":
                compacted = write_data_file(table, RACE_ROWS)
                operation = (
                    table.new_rewrite()
                    .rewrite_files([original], [compacted])
                    .use_starting_sequence_number()
                )
            elif args[1] == "position":
                operation = (
                    table.new_row_delta()
                    .add_deletes(write_position_delete(table, original, 0))
                    .validate_data_files_exist([original.file_path])
                )
            else:
                operation = table.new_row_delta().add_deletes(write_equality_delete(table, [1]))
            _say("prepared")
        elif command == "go":
            try:
                operation.commit()
                _say("ok")
            except CommitConflictError as exc:
                _say(f"conflict {exc.snapshot_id}")
        else:
            return


WORKERS = {"append": run_appends, "race": run_race}


# Parent side ------------------------------------------------------------------------------


class Worker:
    """A child process running this file; lines in on stdin, lines out on stdout.

    A thread drains stdout into a queue, so every wait for a line has a timeout: a worker
    that dies or goes silent fails the test instead of hanging it.
    """

    def __init__(self, config: dict[str, Any]) -> None:
        config = {**config, "tag": f"icefloe-worker-{uuid.uuid4().hex[:12]}"}
        self.config = config
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        self.process = subprocess.Popen(
            [sys.executable, __file__, json.dumps(config)],
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._queue.put(line.strip())
        self._queue.put(None)

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def expect(self, prefix: str, timeout: float = 60) -> str:
        """The next line, which must start with `prefix`."""
        try:
            line = self._queue.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"worker silent for {timeout}s, expected {prefix!r}") from None
        if line is None or not line.startswith(prefix):
            raise AssertionError(f"worker said {line!r} (None: exited), expected {prefix!r}")
        self.lines.append(line)
        return line

    def kill(self) -> None:
        """SIGKILL, then wait until the catalog's server has finished with the dead worker."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        await_killed_client(self.config["uri"], self.config["tag"])

    def committed(self) -> list[str]:
        """Paths the worker reported committed; call once it has exited."""
        while (line := self._queue.get(timeout=10)) is not None:
            self.lines.append(line)
        return [line.split()[1] for line in self.lines if line.startswith("committed ")]

    def attempts(self) -> int:
        return sum(int(line.split()[2]) for line in self.lines if line.startswith("committed "))


Spawn = Callable[[dict[str, Any]], Worker]


@pytest.fixture
def spawn() -> Iterator[Spawn]:
    """Starts workers; kills whichever are still running when the test ends."""
    started: list[Worker] = []

    def start(config: dict[str, Any]) -> Worker:
        started.append(Worker(config))
        return started[-1]

    yield start
    for worker in started:
        worker.kill()


@pytest.fixture(params=BACKENDS)
def catalog(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlCatalog]:
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    cat = SqlCatalog(unique_catalog_name(), catalog_uri(request.param, warehouse), warehouse)
    cat.create_namespace(IDENTIFIER[:-1])
    yield cat
    forget_catalog(cat)


def config_of(catalog: SqlCatalog, **options: Any) -> dict[str, Any]:
    return {
        "catalog": catalog.name,
        "uri": catalog.uri,
        "warehouse": catalog.properties["warehouse"],
        **options,
    }


def assert_history_intact(
    catalog: SqlCatalog, identifier: tuple[str, ...] = IDENTIFIER, *, orphans_allowed: bool = False
) -> TableMetadata:
    """The current metadata reads; its snapshot chain has sequence numbers 1, 2, 3, ...;
    every metadata version in its log is complete; and, unless a killed process may have
    left some behind, the metadata directory holds nothing the table does not reference
    (what lost compare-and-swaps wrote was deleted)."""
    metadata = catalog.load_metadata(identifier)
    current = metadata.current_snapshot_id
    chain = [] if current is None else list(metadata.ancestors_of(current))[::-1]
    sequence_numbers = [s.sequence_number for s in chain]
    assert sequence_numbers == list(range(1, len(chain) + 1))
    assert len(chain) == len(metadata.snapshots)

    io = catalog.io
    logged = [e.metadata_file for e in metadata.metadata_log]
    for location in logged:
        read_table_metadata(io, location)  # exists and is complete
    if orphans_allowed:
        return metadata
    metadata_dir = Path(metadata.location, "metadata")
    assert {str(p) for p in metadata_dir.glob("*.metadata.json")} == {
        metadata.metadata_location,
        *logged,
    }
    referenced = {s.manifest_list for s in metadata.snapshots}
    for snapshot in metadata.snapshots:
        referenced.update(m.manifest_path for m in snapshot_manifests(io, snapshot))
    assert {str(p) for p in metadata_dir.glob("*.avro")} == referenced
    return metadata


def test_four_processes_append_fifty_times_each(catalog: SqlCatalog, spawn: Spawn) -> None:
    catalog.create_table(IDENTIFIER, SCHEMA, properties=CONTENDED)
    workers = [spawn(config_of(catalog, worker=w, count=APPENDS)) for w in range(PROCESSES)]
    for worker in workers:
        assert worker.process.wait(timeout=60) == 0
    committed = {path for worker in workers for path in worker.committed()}
    assert len(committed) == PROCESSES * APPENDS
    # The processes did contend: some compare-and-swaps were lost and retried.
    assert sum(worker.attempts() for worker in workers) > PROCESSES * APPENDS

    metadata = assert_history_intact(catalog)
    table = catalog.load_table(IDENTIFIER)
    assert {t.file.file_path for t in table.scan().plan_files()} == committed
    assert len(metadata.snapshots) == PROCESSES * APPENDS
    current = metadata.current_snapshot()
    assert current is not None and current.summary is not None
    assert current.summary.get("total-data-files") == str(PROCESSES * APPENDS)
    assert current.summary.get("total-records") == str(PROCESSES * APPENDS)
    data_dir = Path(metadata.location, "data")
    assert {str(p) for p in data_dir.glob("*.parquet")} == committed
    assert len(metadata.metadata_log) == 40


def rows_of(catalog: SqlCatalog, identifier: tuple[str, ...]) -> set[tuple[int, str]]:
    table = catalog.load_table(identifier)
    return {(r["id"], r["data"]) for r in scan_rows(table.io, table.metadata)}


@pytest.mark.parametrize(
    "variant", ["position", "equality"], ids=["position-delete", "equality-delete"]
)
def test_rewrite_racing_a_row_delta(catalog: SqlCatalog, spawn: Spawn, variant: str) -> None:
    """A compaction of file A and a row delta on A, both planned on the same snapshot.

    Position delete on A: whichever commits second must fail with a conflict naming the
    winner's snapshot: the rewrite would resurrect the deleted row, the row delta would
    delete a row of a file that is gone. Equality delete: both commit, in either order, and
    the delete applies to the compacted file, which keeps A's data sequence number.
    """
    rewrite = spawn(config_of(catalog, mode="race", role="rewrite"))
    delta = spawn(config_of(catalog, mode="race", role="delta"))
    rewrite.expect("ready")
    delta.expect("ready")
    winners = []
    for n, order in enumerate(["rewrite-first", "delta-first", "together"]):
        identifier = (IDENTIFIER[0], f"race{n}")
        table = catalog.create_table(identifier, SCHEMA, properties=CONTENDED)
        original = write_data_file(table, RACE_ROWS)
        table.new_fast_append().append_file(original).commit()
        for worker in (rewrite, delta):
            worker.send(f"prepare {identifier[1]} {variant}")
        for worker in (rewrite, delta):
            worker.expect("prepared")
        sides = {"rewrite": rewrite, "delta": delta}
        order_of_go = ["delta", "rewrite"] if order == "delta-first" else ["rewrite", "delta"]
        outcomes = {}
        for role in order_of_go:
            sides[role].send("go")
            if order != "together":  # let it finish first: the other then has a stale base
                outcomes[role] = sides[role].expect("")
        for role in order_of_go:
            if role not in outcomes:
                outcomes[role] = sides[role].expect("")

        metadata = assert_history_intact(catalog, identifier)
        live = {t.file.file_path for t in catalog.load_table(identifier).scan().plan_files()}
        if variant == "equality":
            assert outcomes == {"rewrite": "ok", "delta": "ok"}, order
            assert rows_of(catalog, identifier) == {(0, "row0"), (2, "row2"), (3, "row3")}
            assert len(metadata.snapshots) == 3
            continue
        assert sorted(outcomes.values()) == ["conflict " + str(metadata.current_snapshot_id), "ok"]
        winner = "rewrite" if outcomes["rewrite"] == "ok" else "delta"
        winners.append(winner)
        assert len(metadata.snapshots) == 2
        if winner == "rewrite":
            assert original.file_path not in live
            assert rows_of(catalog, identifier) == {(r["id"], r["data"]) for r in RACE_ROWS}
        else:
            assert live == {original.file_path}
            assert rows_of(catalog, identifier) == {(1, "row1"), (2, "row2"), (3, "row3")}
    for worker in (rewrite, delta):
        worker.send("quit")
        assert worker.process.wait(timeout=30) == 0
    if variant == "position":
        assert winners[:2] == ["rewrite", "delta"]


def test_kill_before_and_after_the_swap(catalog: SqlCatalog, spawn: Spawn) -> None:
    """A process killed with its new metadata file written but not swapped in leaves the
    table as it was; one killed right after the swap leaves the new version. Either way the
    table reads, plans, and takes the next commit."""
    workers = {}
    for when in ("before-swap", "after-swap"):
        identifier = (IDENTIFIER[0], when.replace("-", "_"))
        table = catalog.create_table(identifier, SCHEMA, properties=CONTENDED)
        table.new_fast_append().append_file(write_data_file(table, RACE_ROWS)).commit()
        config = config_of(catalog, worker=1, count=1, pause=when, table=identifier[1])
        workers[when] = (identifier, catalog.current_metadata_location(identifier), spawn(config))
    for when, (identifier, before, worker) in workers.items():
        worker.expect("ready")
        new = worker.expect(when).split()[1]
        worker.kill()
        read_table_metadata(catalog.io, new)  # the dead process wrote it completely
        if when == "before-swap":
            assert catalog.current_metadata_location(identifier) == before
        else:
            assert catalog.current_metadata_location(identifier) == new
        table = catalog.load_table(identifier)
        expected_files = 1 if when == "before-swap" else 2
        assert len(list(table.scan().plan_files())) == expected_files
        table.new_fast_append().append_file(write_data_file(table, RACE_ROWS)).commit()
        assert len(list(catalog.load_table(identifier).scan().plan_files())) == expected_files + 1
        assert_history_intact(catalog, identifier, orphans_allowed=True)


def test_random_kills_never_break_the_table(catalog: SqlCatalog, spawn: Spawn) -> None:
    """SIGKILL at random moments of a stream of appends. Every append the worker saw
    commit is in the table, at most one more (swapped, not yet reported), and the table
    reads, plans and takes the next commit every time."""
    rng = random.Random(20240607)
    catalog.create_table(IDENTIFIER, SCHEMA, properties=CONTENDED)
    reported: set[str] = set()
    # Started together, so that their interpreter start-ups overlap; each waits for "go".
    workers = [spawn(config_of(catalog, worker=n, count=None, wait=True)) for n in range(KILLS)]
    for worker in workers:
        worker.expect("ready")
        worker.send("go")
        time.sleep(rng.uniform(0.0, 0.4))
        worker.kill()
        reported.update(worker.committed())
        metadata = assert_history_intact(catalog, orphans_allowed=True)
        table = catalog.load_table(IDENTIFIER)
        live = {t.file.file_path for t in table.scan().plan_files()}
        assert reported <= live
        assert len(live - reported) <= 1
        assert all(Path(p).exists() for p in live)
        current = metadata.current_snapshot()
        if current is not None:  # None: killed before its first commit
            assert current.summary is not None
            assert current.summary.get("total-data-files") == str(len(live))
        reported = live
    table = catalog.load_table(IDENTIFIER)
    table.new_fast_append().append_file(write_data_file(table, RACE_ROWS)).commit()
    assert len(list(catalog.load_table(IDENTIFIER).scan().plan_files())) == len(reported) + 1


def main(argv: list[str]) -> None:
    config = json.loads(argv[1])
    WORKERS[config.get("mode", "append")](config)


if __name__ == "__main__":
    main(sys.argv)
