"""Major compaction: ours against Iceberg Java's own `rewrite_data_files`, side by side.

The bars (issue 16), on twin copies of tables Iceberg Java wrote (20,000,000 rows of id, name,
ts, amount; 100 data files):
- position-deleted twin (bucket(4, id); Spark SQL merge-on-read DELETE of 10% of the rows and
  UPDATE of 1%): ours at most 1.0x Iceberg Java's time;
- equality-deleted twin (unpartitioned; 20 equality-delete files with 1% of the keys, committed
  through Java's `RowDelta`): ours at most 0.5x;
- `convert_equality_deletes` on the equality-deleted twin: at most 0.15x our compaction of it.

Both sides run as cold processes: Iceberg's procedure in a fresh Spark 3.5.9 session with
iceberg-spark-runtime 1.10.2 (`bench/iceberg_java/java_side.py`, in a virtual environment of
its own: `.cache/iceberg-java-venv`), ours as a spark-submit of our job. Both use one JDBC
catalog (Iceberg's `JdbcCatalog` on SQLite; icecore's `SqlCatalog` opens the same file). The
rows of the two compacted twins are compared with DuckDB.

    python3 -m venv .cache/iceberg-java-venv
    .cache/iceberg-java-venv/bin/pip install pyspark==3.5.9 pyarrow==26.0.1
    .venv/bin/python bench/iceberg_java_benchmark.py --scale 1      # 20M rows
    .venv/bin/python bench/iceberg_java_benchmark.py --scale 0.05   # quick

The jars come from the test REST server's set-up (the runtime jar from PyPI's
`snowpark-connect-deps-iceberg`, Jackson relocated as it expects, Debian's SQLite JDBC). The last
stdout line is the JSON report; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from icecore.catalog import SqlCatalog  # noqa: E402
from spark_jobs.common.packaging import build_zip  # noqa: E402
from tests.support.duckdb import connect  # noqa: E402
from tests.support.rest_server import (  # noqa: E402
    ICEBERG_DIST,
    ICEBERG_RUNTIME_JAR,
    jdbc_driver,
    package_jars,
    relocated_jackson,
)

JAVA_VENV = ROOT / ".cache" / "iceberg-java-venv"
JAVA_SIDE = ROOT / "bench" / "iceberg_java" / "java_side.py"
SUBMIT = Path(sys.executable).parent / "spark-submit"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def timed(command: list[str], env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{command[:3]} failed:\n{done.stderr[-4000:]}")
    return seconds


def answer(catalog: SqlCatalog, table: str) -> tuple[Any, ...]:
    location = catalog.load_table(table).metadata_location
    con = connect()
    row = con.execute(
        "SELECT count(*), sum(id), sum(amount), count(DISTINCT name) "
        f"FROM iceberg_scan('{location}')"
    ).fetchone()
    con.close()
    return tuple(row or ())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--workdir", help="keep the tables here (default: a temporary dir)")
    args = parser.parse_args()
    python = JAVA_VENV / "bin" / "python"
    if not python.is_file():
        raise SystemExit(f"{python} missing: see this script's docstring for the set-up")
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="iceberg-java-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    jars = [*package_jars(ICEBERG_DIST, [ICEBERG_RUNTIME_JAR]), relocated_jackson(),
            jdbc_driver("sqlite")]  # fmt: skip
    shared = {"jars": [str(j) for j in jars], "db": str(workdir / "catalog.db"),
              "warehouse": str(workdir / "wh"), "workdir": str(workdir)}  # fmt: skip
    rows = int(20_000_000 * args.scale)
    report: dict[str, Any] = {"rows": rows}
    log(f"building the twins with Iceberg Java ({rows:,} rows each) in {workdir}")
    report["build_seconds"] = round(
        timed([str(python), str(JAVA_SIDE), "build", json.dumps({**shared, "rows": rows})]), 1
    )
    catalog = SqlCatalog("lake", f"sqlite:///{workdir / 'catalog.db'}")
    package = build_zip(workdir / "dist" / "icefloe.zip")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}

    def ours(job: str, table: str, *extra: str) -> float:
        return timed([
            str(SUBMIT), "--master", "local[*]", "--driver-memory", "4g",
            "--conf", "spark.ui.enabled=false", "--py-files", str(package),
            str(ROOT / "spark_jobs" / "main.py"), job,
            "--catalog-uri", f"sqlite:///{workdir / 'catalog.db'}", "--catalog-name", "lake",
            "--table", f"bench.{table}", *extra,
        ], env)  # fmt: skip

    def java(table: str) -> float:
        return timed([str(python), str(JAVA_SIDE), "compact",
                      json.dumps({**shared, "table": table})])  # fmt: skip

    # DuckDB answers before compaction only for the position-deleted twin: with live equality
    # deletes its scan of 20M rows takes many minutes (see v3_convert_benchmark.py); there the
    # two compacted twins and the converted copy are compared with each other.
    for twin in ("pos", "eq"):
        before = answer(catalog, f"bench.{twin}_ours") if twin == "pos" else None
        log(f"{twin}: Iceberg Java's rewrite_data_files")
        java_s = java(f"{twin}_java")
        log(f"{twin}: ours ({java_s:.1f}s for Java)")
        ours_s = ours("rewrite_data_files", f"{twin}_ours", "--rewrite-all")
        after_java = answer(catalog, f"bench.{twin}_java")
        after_ours = answer(catalog, f"bench.{twin}_ours")
        report[twin] = {
            "java_s": round(java_s, 1),
            "ours_s": round(ours_s, 1),
            "ratio": round(ours_s / java_s, 2),
            "rows_equal": after_java == after_ours and before in (None, after_ours),
            "rows": after_ours[0],
        }
        log(f"{twin}: {report[twin]}")
    convert_s = ours("convert_equality_deletes", "eq_convert")
    report["convert"] = {
        "ours_s": round(convert_s, 1),
        "over_our_compaction": round(convert_s / report["eq"]["ours_s"], 2),
        "rows_equal": answer(catalog, "bench.eq_convert") == answer(catalog, "bench.eq_ours"),
    }
    log(f"convert: {report['convert']}")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
