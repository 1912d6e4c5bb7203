"""Major compaction of a table on S3 against the same table on local disk, in one run.

    .venv/bin/python bench/objectstore_compaction_benchmark.py              # 2M rows
    .venv/bin/python bench/objectstore_compaction_benchmark.py --scale 0.1  # 200k rows, quick

Issue 18 asks for compaction time on S3 reported against the same table on local disk. Two
copies of one table are built exactly as `compaction_benchmark.py` builds its table (`bench.t`:
id, ts, name, amount, category; bucket(8, id); four appends, then position deletes on every
row at a position 3 mod 10 and equality deletes on every id 7 mod 100): one in a local
warehouse, one in an `s3://` warehouse on moto's S3 server, which the script starts on
127.0.0.1 (`moto_server`, from requirements-test.txt). Both catalogs are SQLite files on
local disk, so only the table files' IO differs. Spark has no S3 connector: every table file
goes through icecore's FileIO (pyarrow's S3 client), as it would on a Spark without hadoop-aws.

`rewrite_data_files --rewrite-all` is then timed on both in one process and one SparkSession,
alternately (local first in odd rounds, S3 first in even ones, so drift in the machine's load
falls on both sides alike), each run starting from the built snapshot (the previous run's
commit is rolled back). Round 0 warms both up (JIT, Python workers, page cache) and is not
timed. After the last round DuckDB scans both compacted tables (httpfs for S3): each must
answer what the construction rules say (computed by Spark from the table's original files,
read through FileIO), and the two must hold the same rows (a hash summed over every row).

moto keeps objects in memory in one Python process on the same two cores, so the ratio is
the cost of the object-store path on this machine (HTTP requests, multipart uploads, ranged
reads of Parquet footers, no page cache), not of a network: a real bucket adds latency and a
bandwidth limit, and a real S3 endpoint answers faster than moto's Python server. Progress
goes to stderr; the last stdout line is a JSON report.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from compaction_benchmark import TABLE, _load, _log, _median, _reset, build
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from icecore.catalog import SqlCatalog
from icecore.jobs.jobs import RewriteDataFilesOptions
from icecore.table import Table
from spark_jobs.common.session import configure
from spark_jobs.reading.parquet_files import PerFile, read_parquet
from spark_jobs.rewrite_data_files import run as compact

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# The tests' moto server and DuckDB set-up (tests/ is not a package the jobs depend on).
from tests.support.duckdb import connect, extension_path  # noqa: E402
from tests.support.objectstores import (  # noqa: E402
    S3_ACCESS_KEY,
    S3_SECRET_KEY,
    _serve,
    free_port,
)

ROWS_AT_SCALE_1 = 2_000_000
BUCKET = "bench"
SIDES = ("local", "s3")
# The rows' answer: construction-rule checks on the first three, equality of every row on
# the last (the same engine computes it on both sides).
SCAN = (
    "SELECT count(*), sum(amount), count(DISTINCT name), "
    "sum(hash(id, ts, name, amount, category)) FROM iceberg_scan('{}')"
)


def start_moto(stack: ExitStack, workdir: Path) -> dict[str, str]:
    """moto's S3 server on 127.0.0.1 until `stack` closes, with the bucket; FileIO's
    properties for it."""
    import boto3  # noqa: PLC0415 (a test dependency, needed here only)

    port = free_port()
    server = Path(sys.executable).with_name("moto_server")
    stack.enter_context(
        _serve([str(server), "-H", "127.0.0.1", "-p", str(port)], port, "moto", workdir)
    )
    endpoint = f"http://127.0.0.1:{port}"
    boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=S3_ACCESS_KEY,
        aws_secret_access_key=S3_SECRET_KEY,
        region_name="us-east-1",
    ).create_bucket(Bucket=BUCKET)
    return {
        "s3.endpoint": endpoint,
        "s3.access-key-id": S3_ACCESS_KEY,
        "s3.secret-access-key": S3_SECRET_KEY,
        "s3.region": "us-east-1",
        "s3.path-style-access": "true",
    }


def expected_scan(spark: SparkSession, table: Table) -> tuple[Any, ...]:
    """The scan's first three answers from the construction rules (position 3 mod 10 and id
    7 mod 100 deleted), computed by Spark from the table's data files, not by the jobs."""
    files = [(t.file.file_path, t.file.file_size_in_bytes) for t in table.scan().plan_files()]
    rows = read_parquet(
        spark,
        files,
        table.metadata.schema().fields,
        table.io.properties,
        per_file=PerFile([("file_path", T.StringType())], {p: (p,) for p, _ in files}),
        position_column="pos",
    ).filter((F.col("pos") % 10 != 3) & (F.col("id") % 100 != 7))
    found = rows.agg(F.count("*"), F.sum("amount"), F.count_distinct("name")).collect()[0]
    return tuple(found)


def duckdb_scan(table: Table, s3: dict[str, str]) -> tuple[Any, ...]:
    con = connect()
    try:
        con.execute(f"LOAD '{extension_path('httpfs')}'")
        con.execute(
            "CREATE SECRET moto (TYPE s3, KEY_ID ?, SECRET ?, ENDPOINT ?, URL_STYLE 'path', "
            "USE_SSL false, REGION 'us-east-1')",
            [S3_ACCESS_KEY, S3_SECRET_KEY, urlsplit(s3["s3.endpoint"]).netloc],
        )
        return tuple(con.execute(SCAN.format(table.metadata_location)).fetchone() or ())
    finally:
        con.close()


def run(args: argparse.Namespace) -> dict[str, Any]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="objectstore-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    rows = int(ROWS_AT_SCALE_1 * args.scale)
    report: dict[str, Any] = {
        "scale": args.scale,
        "rows": rows,
        "master": args.master,
        "processes": "one process, one SparkSession, sides alternating",
        "cpus": os.cpu_count(),
        "load_average_at_start": _load(),
    }
    with ExitStack() as stack:
        s3 = start_moto(stack, workdir)
        spark = configure(
            SparkSession.builder.master(args.master)
            .appName("objectstore-compaction-benchmark")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.memory", args.driver_memory)
            .config("spark.sql.shuffle.partitions", str(args.shuffle_partitions))
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        stack.callback(spark.stop)
        catalogs = {
            "local": SqlCatalog(
                "default", uri=f"sqlite:///{workdir}/local.db", warehouse=workdir / "wh"
            ),
            "s3": SqlCatalog(
                "default",
                uri=f"sqlite:///{workdir}/s3.db",
                warehouse=f"s3://{BUCKET}/wh",
                properties=s3,
            ),
        }
        for catalog in catalogs.values():
            stack.callback(catalog.close)
        start: dict[str, int] = {}
        expected: dict[str, tuple[Any, ...]] = {}
        for side, catalog in catalogs.items():
            _log(f"building the {side} table: {rows:,} rows")
            report[f"{side}_table"] = build(spark, catalog, rows)
            table = catalog.load_table(TABLE)
            snapshot = table.metadata.current_snapshot()
            assert snapshot is not None
            start[side] = snapshot.snapshot_id
            expected[side] = expected_scan(spark, table)
            _log(f"{side} table: {report[f'{side}_table']}")

        rounds: list[dict[str, float]] = []
        last: dict[str, dict[str, Any]] = {}
        for n in range(args.repeat + 1):
            measured = {"load_average": _load()}
            for side in SIDES if n % 2 else reversed(SIDES):
                _reset(catalogs[side], start[side])
                started = time.perf_counter()
                result = compact(
                    spark, catalogs[side], RewriteDataFilesOptions(table=TABLE, rewrite_all=True)
                )
                measured[side] = time.perf_counter() - started
                last[side] = {k: v for k, v in result.to_dict().items() if k != "commits"}
                _log(f"round {n}: {side} rewrite_data_files {measured[side]:.1f}s {result}")
            if n > 0:
                rounds.append({k: round(v, 2) for k, v in measured.items()})

        answers = {s: duckdb_scan(catalogs[s].load_table(TABLE), s3) for s in SIDES}
        _log(f"duckdb after: {answers}, expected {expected}")
        for side in SIDES:
            assert answers[side][:3] == expected[side], (side, answers[side], expected[side])
        assert answers["local"] == answers["s3"], answers

    local, remote = _median([r["local"] for r in rounds]), _median([r["s3"] for r in rounds])
    paired = [round(r["s3"] / r["local"], 2) for r in rounds]
    report.update(
        {
            "rounds": rounds,
            "last_compaction": last,
            "local_seconds": local,
            "s3_seconds": remote,
            "s3_vs_local": round(remote / local, 2),
            "paired_s3_vs_local": paired,
            "paired_s3_vs_local_median": _median(paired),
            "rows_equal": True,
            "load_average_at_end": _load(),
        }
    )
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="1.0 = 2M rows")
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds (medians reported)")
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--shuffle-partitions", type=int, default=8)
    parser.add_argument("--workdir")
    parser.add_argument("--keep", action="store_true", help="keep the local warehouse")
    report = run(parser.parse_args())
    print(json.dumps(report, sort_keys=True, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
