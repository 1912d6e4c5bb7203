"""DuckDB full scans of a v3 table before and after `convert_equality_deletes`.

The bar (issue 14): on a 10-million-row v3 table with live equality deletes, a DuckDB full
scan after `convert_equality_deletes` (the equality deletes turned into deletion vectors) is
at least 20x faster than before it, with equal answers.

The table (`bench.t`: id, ts, name, amount, category; bucket(8, id); format v3) is built by
the ingestion job: 4 appends, then `--batches` CDC-style delete batches, each removing 0.2%
of the keys by equality deletes (as a streaming CDC writer leaves a table). DuckDB scans it
with `iceberg_scan` (its own v3 reader: equality deletes, DVs), best of `--duckdb-repeat`.

    .venv/bin/python bench/v3_convert_benchmark.py               # 10M rows
    .venv/bin/python bench/v3_convert_benchmark.py --scale 0.1   # 1M rows, quick

The last stdout line is a JSON report; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from compaction_benchmark import duckdb_scan, source_rows
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from icecore.catalog import SqlCatalog
from icecore.jobs.jobs import ConvertEqualityDeletesOptions, IngestOptions
from icecore.spec.properties import FORMAT_VERSION, WRITE_TARGET_FILE_SIZE_BYTES
from spark_jobs.common.session import configure
from spark_jobs.convert_equality_deletes import run as convert_equality_deletes
from spark_jobs.ingest import run as ingest

TABLE = "bench.t"
APPENDS = 4
BAR = 20.0


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def build(spark: SparkSession, catalog: SqlCatalog, rows: int, batches: int) -> dict[str, Any]:
    started = time.perf_counter()
    per_append = rows // APPENDS
    properties = {FORMAT_VERSION: "3", WRITE_TARGET_FILE_SIZE_BYTES.name: str(16 * 1024 * 1024)}
    for n in range(APPENDS):
        options = IngestOptions(
            table=TABLE, create=True, partition_by="bucket(8, id)", properties=properties
        )
        ingest(spark, catalog, options, source=source_rows(spark, n * per_append, per_append))
    deleted = 0
    for b in range(batches):
        keys = spark.range(0, rows).filter(F.col("id") % 500 == b)
        result = ingest(
            spark, catalog, IngestOptions(table=TABLE, mode="delete", key=["id"]), source=keys
        )
        deleted += result.equality_deletes
    seconds = round(time.perf_counter() - started, 1)
    return {"rows": rows, "equality_deletes": deleted, "build_seconds": seconds}


def expected_answer(rows: int, batches: int) -> tuple[int, float, int]:
    """What `duckdb_scan` must answer (count, sum(amount), distinct names) by the model:
    every id below `rows` except those the delete batches removed (id % 500 < batches)."""
    ids = np.arange(rows, dtype=np.int64)
    kept = ids[ids % 500 >= batches]
    return (len(kept), float(kept.sum()) * 0.25, len(np.unique(kept % 100_000)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--duckdb-repeat", type=int, default=3)
    parser.add_argument(
        "--duckdb-limit",
        type=float,
        default=600.0,
        help="stop a scan before conversion after this many seconds (the speedup is then a "
        "lower bound, and only the answer after conversion is checked, against the model)",
    )
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--driver-memory", default="4g")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = configure(
        SparkSession.builder.master(args.master)
        .appName("v3-convert-benchmark")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", args.driver_memory)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    workdir = Path(tempfile.mkdtemp(prefix="v3-convert-bench-"))
    catalog = SqlCatalog("default", warehouse=workdir / "wh")
    report: dict[str, Any] = {"scale": args.scale}
    report.update(build(spark, catalog, int(10_000_000 * args.scale), args.batches))
    _log(f"built: {report}")
    table = catalog.load_table(TABLE)
    before, before_answer = duckdb_scan(table, args.duckdb_repeat, args.duckdb_limit)
    _log(f"DuckDB before: {before:.2f}s")
    started = time.perf_counter()
    convert_equality_deletes(spark, catalog, ConvertEqualityDeletesOptions(table=TABLE))
    report["convert_seconds"] = round(time.perf_counter() - started, 2)
    table = catalog.load_table(TABLE)
    health = table.health().totals
    after, after_answer = duckdb_scan(table, args.duckdb_repeat)
    _log(f"DuckDB after: {after:.2f}s")
    report.update(
        {
            "equality_delete_files_after": health.equality_deletes.files,
            "deletion_vectors_after": health.deletion_vectors.files,
            "duckdb_before_s": round(before, 3),
            "duckdb_after_s": round(after, 3),
            "speedup": round(before / after, 1),
            "before_interrupted": before_answer is None,
            "answers_equal": after_answer == expected_answer(report["rows"], args.batches)
            and before_answer in (None, after_answer),
        }
    )
    spark.stop()
    print(json.dumps(report))
    sys.exit(0 if report["answers_equal"] and report["speedup"] >= BAR else 1)


if __name__ == "__main__":
    main()
