"""The end-to-end demo `make demo` runs: CDC ingestion, then maintenance, on local defaults.

Local Spark, a SQLite catalog and a warehouse directory (default `./warehouse`): it creates
`demo.events` partitioned by `day(ts)`, ingests five CDC batches (inserts, updates and
deletes, keys repeated within and across batches), prints the table's health, converts the
equality deletes to position deletes, compacts, and prints the health again. The rows are
checked against a plain Python model of the CDC operations before and after maintenance.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from icecore.catalog import catalog_from_settings
from icecore.errors import NoSuchTableError
from icecore.manifest import FileContent
from spark_jobs import convert_equality_deletes, ingest, rewrite_data_files

NAMESPACE = "demo"
TABLE = f"{NAMESPACE}.events"
BATCHES = 5
ROWS_PER_BATCH = 2_000


Row = tuple[int, datetime, float]


def cdc_batches(root: Path, batches: int = BATCHES) -> tuple[list[Path], list[Row]]:
    """CDC batches as Parquet (inserts of new keys, updates and deletes of earlier ones),
    and the rows a correct table holds after all of them (also used by the Airflow demo)."""
    rng = random.Random(7)
    start = datetime(2024, 1, 1, tzinfo=UTC)
    live: set[int] = set()
    expected: dict[int, Row] = {}
    next_id = 0
    paths = []
    for batch in range(batches):
        rows: list[dict[str, Any]] = []
        for _ in range(ROWS_PER_BATCH):
            if live and rng.random() < 0.3:
                key = rng.choice(sorted(live))
                op = "D" if rng.random() < 0.3 else "U"
                if op == "D":
                    live.discard(key)
            else:
                key, op = next_id, "I"
                next_id += 1
                live.add(key)
            ts = start + timedelta(hours=rng.randrange(24 * 7))
            amount = round(rng.random() * 100, 2)
            rows.append({"id": key, "ts": ts, "amount": amount, "op": op})
            if op == "D":
                expected.pop(key, None)
            else:
                expected[key] = (key, ts, amount)
        path = root / f"batch-{batch}.parquet"
        pq.write_table(pa.Table.from_pylist(rows), path)
        paths.append(path)
    return paths, sorted(expected.values())


def _health(table: Any) -> dict[str, Any]:
    report = table.refresh().health()
    totals = report.totals
    return {
        "snapshots": report.snapshot_count,
        "data_files": totals.data.files,
        "position_delete_files": totals.position_deletes.files,
        "equality_delete_files": totals.equality_deletes.files,
        "small_data_files": totals.small_data.files,
        "delete_ratio": round(totals.delete_ratio or 0.0, 4),
    }


def live_rows(table: Any) -> list[Row]:
    """The table's rows, read by planning with icecore and applying each task's deletes."""
    rows: list[Row] = []
    for task in table.refresh().scan().plan_files():
        path = task.file.file_path
        positions: set[int] = set()
        deleted_ids: set[int] = set()
        for delete in task.deletes:
            deletes = pq.read_table(table.io.open_input(delete.file_path))
            if delete.content == FileContent.POSITION_DELETES:
                pairs = zip(
                    deletes["file_path"].to_pylist(), deletes["pos"].to_pylist(), strict=True
                )
                positions.update(pos for file, pos in pairs if file == path)
            else:
                deleted_ids.update(deletes["id"].to_pylist())
        data = pq.read_table(table.io.open_input(path), columns=["id", "ts", "amount"])
        for pos, (key, ts, amount) in enumerate(
            zip(*(c.to_pylist() for c in data.columns), strict=True)
        ):
            if pos not in positions and key not in deleted_ids:
                rows.append((key, ts, amount))
    return sorted(rows)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    # Local Spark's Python workers must run this interpreter, which has pyarrow and icecore.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    warehouse = Path((argv or sys.argv[1:] or ["warehouse"])[0]).resolve()
    sources = warehouse / "_demo_sources"
    sources.mkdir(parents=True, exist_ok=True)
    shared = ["--warehouse", str(warehouse), "--table", TABLE]
    catalog = catalog_from_settings(warehouse=str(warehouse))
    with contextlib.suppress(NoSuchTableError):
        catalog.drop_table(TABLE, purge=True)
    if (NAMESPACE,) not in catalog.list_namespaces():
        catalog.create_namespace(NAMESPACE)

    results: dict[str, Any] = {"ingest": []}
    paths, expected = cdc_batches(sources)
    for i, path in enumerate(paths):
        create = ["--create", "--partition-by", "day(ts)"] if i == 0 else []
        args = ["--source", str(path), "--mode", "cdc", "--key", "id", "--batch-id", f"b{i}"]
        results["ingest"].append(ingest.main([*shared, *args, *create]))
    table = catalog.load_table(TABLE)
    results["health_before"] = _health(table)
    if live_rows(table) != expected:
        raise SystemExit("demo: ingested rows differ from the CDC model; please report a bug")
    results["convert_equality_deletes"] = convert_equality_deletes.main(shared)
    results["rewrite_data_files"] = rewrite_data_files.main([*shared, "--rewrite-all"])
    results["health_after"] = _health(table)
    if live_rows(table) != expected:
        raise SystemExit("demo: maintenance changed the table's rows; please report a bug")
    results["live_rows"] = len(expected)
    for key in ("health_before", "health_after"):
        print(f"{key}: {json.dumps(results[key])}")
    print(json.dumps({k: results[k] for k in ("live_rows", "health_before", "health_after")}))
    return results


if __name__ == "__main__":
    main()
