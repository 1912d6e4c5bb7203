"""Ingest throughput: our append of N rows vs Spark writing the same DataFrame as Parquet.

The bar, from the issue: appending 10 million rows of 5 columns through the ingestion job is
within 1.5x of the time Spark itself takes to write the same DataFrame as plain Parquet, in
the same run.

    .venv/bin/python bench/ingest_benchmark.py                 # 10M rows, 3 rounds
    .venv/bin/python bench/ingest_benchmark.py --rows 1000000 --repeat 1

Both sides write the same lazily generated DataFrame (id, ts, name, amount, category), so
both pay for generating it. "Ours" is the whole job as Airflow would run it in process:
`ingest(spark, catalog, IngestOptions(mode="append"))` into a fresh table of a SQLite
catalog, that is reading the source plan, conforming columns, Spark's Parquet write with
field ids, listing the run's files, the footer metrics job, manifests and the catalog
commit. "Spark" is `df.write.parquet(path)` with Spark's defaults. Each side writes with its
default codec (zstd for Iceberg tables, snappy for plain Spark) unless `--codec` sets both.

One warm-up round of each side runs first (JIT, Python workers), then `--repeat` rounds
alternate the two; the ratio is of the medians, with the per-round ratios alongside to judge
noise; the load averages at start and end tell a quiet machine from a busy one. Progress
goes to stderr; the last line of stdout is a JSON report, and the exit status
is 0 only when the bar is met.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from icecore.catalog import SqlCatalog
from icecore.jobs.jobs import IngestOptions
from icecore.spec.properties import PARQUET_COMPRESSION
from spark_jobs.common.session import configure
from spark_jobs.ingest import run as ingest

BAR = 1.5


def dataframe(spark: SparkSession, rows: int) -> DataFrame:
    """Five columns of common types, generated lazily from a range."""
    return spark.range(rows).select(
        F.col("id"),
        F.timestamp_micros(F.lit(1_700_000_000_000_000) + F.col("id") * 1_000).alias("ts"),
        F.concat(F.lit("name-"), (F.col("id") % 100_000).cast("string")).alias("name"),
        (F.col("id") * 0.25).alias("amount"),
        (F.col("id") % 1_000).cast("int").alias("category"),
    )


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> dict[str, object]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = configure(
        SparkSession.builder.master(args.master)
        .appName("ingest-benchmark")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", args.driver_memory)
        # The plain-Spark baseline writes timestamps as Iceberg does (INT64 micros).
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    frame = dataframe(spark, args.rows)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="ingest-bench-"))
    properties = {PARQUET_COMPRESSION.name: args.codec} if args.codec else {}
    counter = iter(range(1_000_000))

    def ours() -> float:
        n = next(counter)
        catalog = SqlCatalog("default", warehouse=workdir / f"wh{n}")
        options = IngestOptions(table="bench.t", create=True, properties=properties)
        started = time.perf_counter()
        result = ingest(spark, catalog, options, source=frame)
        elapsed = time.perf_counter() - started
        catalog.close()
        assert result.status == "committed" and result.rows == args.rows, result
        shutil.rmtree(workdir / f"wh{n}")
        return elapsed

    def plain() -> float:
        target = workdir / f"plain{next(counter)}"
        writer = frame.write
        if args.codec:
            writer = writer.option("compression", args.codec)
        started = time.perf_counter()
        writer.parquet(str(target))
        elapsed = time.perf_counter() - started
        shutil.rmtree(target)
        return elapsed

    load_at_start = os.getloadavg()[0]
    _log(f"warming up ({args.rows:,} rows, {args.master})")
    ours()
    plain()
    times: dict[str, list[float]] = {"ours": [], "spark": []}
    for round_number in range(args.repeat):
        times["ours"].append(ours())
        times["spark"].append(plain())
        _log(
            f"round {round_number + 1}: ours {times['ours'][-1]:.2f}s, "
            f"spark {times['spark'][-1]:.2f}s"
        )
    spark.stop()
    shutil.rmtree(workdir, ignore_errors=True)
    ours_median = statistics.median(times["ours"])
    spark_median = statistics.median(times["spark"])
    ratio = ours_median / spark_median
    return {
        "rows": args.rows,
        "columns": 5,
        "master": args.master,
        "codec": args.codec or "defaults (ours zstd, spark snappy)",
        "ours_seconds": [round(t, 3) for t in times["ours"]],
        "spark_seconds": [round(t, 3) for t in times["spark"]],
        "ours_median_seconds": round(ours_median, 3),
        "spark_median_seconds": round(spark_median, 3),
        "ratio": round(ratio, 3),
        "paired_ratios": [
            round(o / s, 3) for o, s in zip(times["ours"], times["spark"], strict=True)
        ],
        "bar": BAR,
        "bar_met": ratio <= BAR,
        "load_average_at_start": round(load_at_start, 2),
        "load_average_at_end": round(os.getloadavg()[0], 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds per side")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--codec", help="compression for both sides (default: each its own)")
    parser.add_argument("--workdir", help="where tables and files go (default: a temp dir)")
    report = run(parser.parse_args())
    print(json.dumps(report))
    return 0 if report["bar_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
