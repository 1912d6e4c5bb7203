"""The cost of one poll of a SQL catalog of 10,000 tables of which 1% changed (issue 37):
icefloe's catalog-wide watch (`icecore.changes.CatalogWatch`) against one
`IcebergTableSnapshotTrigger` per table (apache-airflow-providers-apache-iceberg 2.1.2).

What one poll is, each way:

- **watch**: `Catalog.table_versions` (one query over `iceberg_tables`), then the new metadata
  JSON of each table that moved (snapshot summaries only). Measured twice: the first change
  after the baseline (the baseline records locations only, so a moved table's old metadata
  file is read too), and steady state (a table that moved before: its new file only).
- **trigger**: what each trigger's `run` loop does at each poll, its own code called as it is:
  `IcebergTableSnapshotTrigger._head_snapshot_id()`, i.e. a new `IcebergHook`, whose
  `catalog` builds a new PyIceberg `SqlCatalog` (a new SQLAlchemy engine, a connection, its
  schema probes) and `load_table` (the row, then the whole metadata file, parsed), for every
  table, changed or not. Its connection comes from `AIRFLOW_CONN_<ID>`, as in a triggerer
  with an environment secrets backend. 10,000 of these take minutes, so a `--sample` of the
  tables is polled (against the full catalog) and the poll is extrapolated per table.
- **load_table**: the lower bound of a per-table poll: one shared PyIceberg catalog,
  `load_table` of every table (sampled likewise).

Per poll: SQL statements sent (SQLAlchemy's `before_cursor_execute` on every engine),
seconds, and the growth of the process's peak RSS during the poll (each way in a process of
its own). The catalog is metadata only: 100 namespaces x 100 tables, each a v2 table of
`--snapshots` appends (Spark-like summaries, 20 columns) written as JSON directly.

    python bench/watch_poll_benchmark.py                                # SQLite and PostgreSQL
    python bench/watch_poll_benchmark.py --tables 1000 --backends sqlite  # quicker

The last line of stdout is the JSON report; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

from pyiceberg.catalog.sql import SqlCatalog as PyIcebergCatalog
from sqlalchemy import bindparam, create_engine, delete, event, insert, select, update
from sqlalchemy.engine import Engine

from icecore.catalog.sql import NAMESPACE_PROPERTIES, TABLES, SqlCatalog
from icecore.changes import CatalogWatch

REPO = Path(__file__).resolve().parents[1]
CONN_ID = "iceberg_watch_bench"  # the Airflow connection, and so PyIceberg's catalog name
POSTGRES_URI = os.environ.get(
    "ICECORE_TEST_POSTGRES_URI", "postgresql+psycopg2://postgres@127.0.0.1:5432/test"
)
COLUMNS = 20
NAMESPACES = 100


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# The catalog ---------------------------------------------------------------------------------


def _snapshot(location: str, sequence: int, parent: int | None, at_ms: int) -> dict[str, Any]:
    snapshot_id = random.getrandbits(62)
    size = 20_000 + sequence
    summary = {
        "operation": "append",
        "spark.app.id": "local-1764670000000",
        "added-data-files": "1",
        "added-records": "100",
        "added-files-size": str(size),
        "changed-partition-count": "1",
        "total-records": str(100 * sequence),
        "total-files-size": str(size * sequence),
        "total-data-files": str(sequence),
        "total-delete-files": "0",
        "total-position-deletes": "0",
        "total-equality-deletes": "0",
        "engine-version": "3.5.6",
        "app-id": "local-1764670000000",
        "engine-name": "spark",
        "iceberg-version": "Apache Iceberg 1.10.0",
    }
    out: dict[str, Any] = {"sequence-number": sequence, "snapshot-id": snapshot_id}
    if parent is not None:
        out["parent-snapshot-id"] = parent
    out.update(
        {
            "timestamp-ms": at_ms,
            "summary": summary,
            "manifest-list": f"{location}/metadata/snap-{snapshot_id}-1-{uuid.uuid4()}.avro",
            "schema-id": 0,
        }
    )
    return out


def new_metadata(location: str, snapshots: int, now_ms: int) -> dict[str, Any]:
    fields = [{"id": 1, "name": "id", "required": True, "type": "long"}]
    fields += [
        {"id": i, "name": f"c{i}", "required": False, "type": "string" if i % 2 else "long"}
        for i in range(2, COLUMNS + 1)
    ]
    metadata: dict[str, Any] = {
        "format-version": 2,
        "table-uuid": str(uuid.uuid4()),
        "location": location,
        "last-sequence-number": 0,
        "last-updated-ms": now_ms,
        "last-column-id": COLUMNS,
        "current-schema-id": 0,
        "schemas": [{"type": "struct", "schema-id": 0, "fields": fields}],
        "default-spec-id": 0,
        "partition-specs": [{"spec-id": 0, "fields": []}],
        "last-partition-id": 999,
        "default-sort-order-id": 0,
        "sort-orders": [{"order-id": 0, "fields": []}],
        "properties": {"write.format.default": "parquet"},
        "snapshots": [],
        "snapshot-log": [],
        "metadata-log": [],
        "refs": {},
    }
    for n in range(snapshots):
        add_snapshot(metadata, now_ms - (snapshots - n) * 60_000, None)
    return metadata


def add_snapshot(metadata: dict[str, Any], at_ms: int, previous_file: str | None) -> None:
    sequence = metadata["last-sequence-number"] + 1
    parent = metadata.get("current-snapshot-id")
    snapshot = _snapshot(metadata["location"], sequence, parent, at_ms)
    metadata["snapshots"].append(snapshot)
    metadata["snapshot-log"].append({"timestamp-ms": at_ms, "snapshot-id": snapshot["snapshot-id"]})
    if previous_file is not None:
        metadata["metadata-log"].append(
            {"timestamp-ms": metadata["last-updated-ms"], "metadata-file": previous_file}
        )
    metadata["last-sequence-number"] = sequence
    metadata["last-updated-ms"] = at_ms
    metadata["current-snapshot-id"] = snapshot["snapshot-id"]
    metadata["refs"] = {"main": {"snapshot-id": snapshot["snapshot-id"], "type": "branch"}}


def write_metadata(location: str, version: int, metadata: dict[str, Any]) -> str:
    path = f"{location}/metadata/{version:05d}-{uuid.uuid4()}.metadata.json"
    Path(path).write_text(json.dumps(metadata))
    return path


def make_catalog(uri: str, warehouse: Path, tables: int, snapshots: int) -> None:
    """`tables` tables of `snapshots` commits each, rows inserted in one executemany."""
    catalog = SqlCatalog(CONN_ID, uri, warehouse)
    now_ms = int(time.time() * 1000)
    rows = []
    for i in range(tables):
        namespace, name = f"ns{i % NAMESPACES:03d}", f"t{i:05d}"
        location = str(warehouse / namespace / name)
        Path(location, "metadata").mkdir(parents=True)
        path = write_metadata(location, 1, new_metadata(location, snapshots, now_ms))
        rows.append(
            {
                "catalog_name": CONN_ID,
                "table_namespace": namespace,
                "table_name": name,
                "metadata_location": path,
                "previous_metadata_location": None,
                "iceberg_type": "TABLE",
            }
        )
    with catalog.engine.begin() as conn:
        conn.execute(delete(TABLES).where(TABLES.c.catalog_name == CONN_ID))
        conn.execute(
            delete(NAMESPACE_PROPERTIES).where(NAMESPACE_PROPERTIES.c.catalog_name == CONN_ID)
        )
        conn.execute(insert(TABLES), rows)
    catalog.close()


def commit_to(uri: str, identifiers: list[tuple[str, str]]) -> None:
    """One more append in each of `identifiers`' tables, as another engine commits it: a new
    metadata file, then the pointer swapped (by this process's own engine, uncounted)."""
    engine = create_engine(uri)
    with engine.begin() as conn:
        current = {
            (ns, name): location
            for ns, name, location in conn.execute(
                select(TABLES.c.table_namespace, TABLES.c.table_name, TABLES.c.metadata_location)
                .where(TABLES.c.catalog_name == CONN_ID)
            )
        }  # fmt: skip
        updates = []
        for ident in identifiers:
            old = current[ident]
            metadata = json.loads(Path(old).read_text())
            add_snapshot(metadata, int(time.time() * 1000), old)
            version = int(Path(old).name.split("-", 1)[0]) + 1
            new = write_metadata(metadata["location"], version, metadata)
            updates.append({"ns": ident[0], "n": ident[1], "old": old, "new": new})
        conn.execute(
            update(TABLES)
            .where(
                TABLES.c.catalog_name == CONN_ID,
                TABLES.c.table_namespace == bindparam("ns"),
                TABLES.c.table_name == bindparam("n"),
                TABLES.c.metadata_location == bindparam("old"),
            )
            .values(
                metadata_location=bindparam("new"), previous_metadata_location=bindparam("old")
            ),
            updates,
        )
    engine.dispose()


# One way of polling, in a process of its own ---------------------------------------------------


class Meter:
    """SQL statements of every engine, seconds and peak RSS growth of one stretch."""

    def __init__(self) -> None:
        self.statements = 0
        event.listen(Engine, "before_cursor_execute", self._count)

    def _count(self, *_: Any) -> None:
        self.statements += 1

    @staticmethod
    def python_peak_mib(work: Any) -> float:
        """The peak of Python's allocations during `work` above what was held before
        (tracemalloc: slow, so in a pass of its own, not timed)."""
        tracemalloc.start()
        held = tracemalloc.get_traced_memory()[0]
        work()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return (peak - held) / 2**20

    def measure(self, work: Any) -> dict[str, float]:
        statements, peak = self.statements, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        start = time.perf_counter()
        work()
        seconds = time.perf_counter() - start
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak
        return {
            "statements": self.statements - statements,
            "seconds": seconds,
            "peak_rss_growth_mib": grown / 1024,
        }


def all_tables(uri: str) -> list[tuple[str, str]]:
    engine = create_engine(uri)
    with engine.connect() as conn:
        stmt = select(TABLES.c.table_namespace, TABLES.c.table_name).where(
            TABLES.c.catalog_name == CONN_ID
        )
        out = sorted((ns, name) for ns, name in conn.execute(stmt))
    engine.dispose()
    return out


def run_way(
    way: str, uri: str, warehouse: Path, *, changed: float, sample: int, seed: int
) -> dict[str, Any]:
    rng = random.Random(seed)
    tables = all_tables(uri)
    moved = rng.sample(tables, max(1, round(len(tables) * changed)))
    result: dict[str, Any] = {"tables": len(tables), "changed": len(moved)}
    if way == "watch":
        catalog = SqlCatalog(CONN_ID, uri, warehouse)
        meter = Meter()
        watch = CatalogWatch(catalog)
        result["baseline"] = meter.measure(watch.poll)
        for label in ("first change", "steady"):
            commit_to(uri, moved)
            found: list[Any] = []
            result[label] = meter.measure(lambda found=found: found.extend(watch.poll()))
            result[label]["metadata_reads"] = watch.last_poll.metadata_reads
            commits = sum(len(c.commits) for c in found)
            assert len(found) == len(moved) and commits == len(moved), (len(found), commits)
        commit_to(uri, moved)
        result["steady"]["python_peak_mib"] = meter.python_peak_mib(watch.poll)
        result["cursor_json_bytes"] = len(json.dumps(watch.cursor))
        catalog.close()
        return result
    sampled = tables if sample <= 0 or sample >= len(tables) else rng.sample(tables, sample)
    result["sampled"] = len(sampled)
    commit_to(uri, moved)
    meter = Meter()
    if way == "trigger":
        os.environ[f"AIRFLOW_CONN_{CONN_ID.upper()}"] = json.dumps(
            {"conn_type": "iceberg", "extra": {"type": "sql", "uri": uri,
                                              "warehouse": f"file://{warehouse}"}}
        )  # fmt: skip
        # Airflow's import (1.5 s) only in the process that polls with its triggers.
        from airflow.providers.apache.iceberg.triggers.iceberg import (  # noqa: PLC0415
            IcebergTableSnapshotTrigger,
        )

        triggers = [
            IcebergTableSnapshotTrigger(table=f"{ns}.{name}", iceberg_conn_id=CONN_ID)
            for ns, name in sampled
        ]
        triggers[0]._head_snapshot_id()  # imports and the secrets backend, once, uncounted
        heads = [t._head_snapshot_id for t in triggers]  # what each trigger's poll calls
    else:
        shared = PyIcebergCatalog(CONN_ID, uri=uri, warehouse=f"file://{warehouse}")
        shared.load_table(".".join(sampled[0]))  # PyIceberg's lazy imports, uncounted

        def head(name: str) -> int | None:
            ref = shared.load_table(name).metadata.refs.get("main")
            return ref.snapshot_id if ref else None

        heads = [functools.partial(head, f"{ns}.{name}") for ns, name in sampled]
    found: list[int | None] = []
    sample_cost = meter.measure(lambda: found.extend(h() for h in heads))
    assert len(found) == len(sampled) and None not in found
    # A smaller pass for the memory: one table's allocations are freed before the next.
    sample_cost["python_peak_mib"] = meter.python_peak_mib(lambda: [h() for h in heads[:100]])
    scale = len(tables) / len(sampled)
    result["sample"] = sample_cost
    result["poll"] = {
        "statements": round(sample_cost["statements"] * scale),
        "seconds": sample_cost["seconds"] * scale,
        "peak_rss_growth_mib": sample_cost["peak_rss_growth_mib"],
        "python_peak_mib": sample_cost["python_peak_mib"],
    }
    return result


# The run ---------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=10_000)
    parser.add_argument("--changed", type=float, default=0.01, help="fraction moved per poll")
    parser.add_argument("--snapshots", type=int, default=10, help="commits per table")
    parser.add_argument("--sample", type=int, default=500, help="tables polled per-table (0: all)")
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--seed", type=int, default=37)
    parser.add_argument("--way", help=argparse.SUPPRESS)
    parser.add_argument("--uri", help=argparse.SUPPRESS)
    parser.add_argument("--warehouse", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.way:
        report = run_way(args.way, args.uri, Path(args.warehouse), changed=args.changed,
                         sample=args.sample, seed=args.seed)  # fmt: skip
        print(json.dumps(report))
        return
    random.seed(args.seed)
    out: dict[str, Any] = {
        "tables": args.tables,
        "changed": args.changed,
        "snapshots": args.snapshots,
        "sample": args.sample,
        "load_start": os.getloadavg()[0],
    }
    for backend in args.backends.split(","):
        with tempfile.TemporaryDirectory(prefix="watch-bench-") as tmp:
            warehouse = Path(tmp) / "warehouse"
            uri = f"sqlite:///{tmp}/catalog.db" if backend == "sqlite" else POSTGRES_URI
            start = time.perf_counter()
            make_catalog(uri, warehouse, args.tables, args.snapshots)
            log(f"{backend}: {args.tables} tables written in {time.perf_counter() - start:.1f} s")
            ways: dict[str, Any] = {}
            for way in ("watch", "trigger", "load_table"):
                done = subprocess.run(
                    [sys.executable, __file__, "--way", way, "--uri", uri, "--warehouse",
                     str(warehouse), "--changed", str(args.changed), "--sample",
                     str(args.sample), "--seed", str(args.seed + len(ways))],
                    check=True, capture_output=True, text=True, cwd=REPO,
                )  # fmt: skip
                ways[way] = json.loads(done.stdout.strip().splitlines()[-1])
                log(f"{backend} {way}: {json.dumps(ways[way])}")
            steady, first = ways["watch"]["steady"], ways["watch"]["first change"]
            for way in ("trigger", "load_table"):
                poll = ways[way]["poll"]
                ways[f"ratio watch/{way}"] = {
                    "statements": steady["statements"] / poll["statements"],
                    "seconds steady": steady["seconds"] / poll["seconds"],
                    "seconds first change": first["seconds"] / poll["seconds"],
                }
            out[backend] = ways
            if backend == "postgresql":
                forget_postgres(uri)
    out["load_end"] = os.getloadavg()[0]
    print(json.dumps(out))


def forget_postgres(uri: str) -> None:
    engine = create_engine(uri)
    with engine.begin() as conn:
        conn.execute(delete(TABLES).where(TABLES.c.catalog_name == CONN_ID))
    engine.dispose()


if __name__ == "__main__":
    main()
