"""Major compaction: ours against Iceberg Java's own `rewrite_data_files`, side by side.

The bars (issue 16), on twin copies of tables Iceberg Java wrote (20,000,000 rows of id, name,
ts, amount; 100 data files):
- position-deleted twin (bucket(4, id); Spark SQL merge-on-read DELETE of 10% of the rows and
  UPDATE of 1%): ours at most 1.0x Iceberg Java's time;
- equality-deleted twin (unpartitioned; 20 equality-delete files with 1% of the keys, committed
  through Java's `RowDelta`): ours at most 0.5x;
- `convert_equality_deletes` on the equality-deleted twin: at most 0.15x our compaction of it.

Both sides run as cold processes: Iceberg's procedure in a fresh Spark 3.5.9 session with
iceberg-spark-runtime 1.10.2 (`bench/iceberg_java/java_side.py`, in the Spark 3.5 virtual
environment the tests' Java writer uses too: `.cache/iceberg-java-venv`, made on first use or by
`make iceberg-java`), ours as a spark-submit of our job. Both use one JDBC catalog (Iceberg's
`JdbcCatalog` on SQLite; icecore's `SqlCatalog` opens the same file). The rows of the two
compacted twins are compared with DuckDB.

    .venv/bin/python bench/iceberg_java_benchmark.py --scale 1      # 20M rows
    .venv/bin/python bench/iceberg_java_benchmark.py --scale 0.05   # quick

The virtual environment and the jars come from `tests/support/java_writer/venv.py` (the runtime
jar from PyPI's `snowpark-connect-deps-iceberg`, Jackson relocated as it expects, Debian's
SQLite JDBC). The last stdout line is the JSON report; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.event_log import breakdown  # noqa: E402
from icecore.catalog import SqlCatalog  # noqa: E402
from icecore.scan import TableScan  # noqa: E402
from tests.support.duckdb import connect  # noqa: E402
from tests.support.java_writer.venv import iceberg_java_jars, iceberg_java_python  # noqa: E402

JAVA_SIDE = ROOT / "bench" / "iceberg_java" / "java_side.py"
SUBMIT = Path(sys.executable).parent / "spark-submit"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def timed(command: list[str], env: dict[str, str] | None = None) -> float:
    return run_timed(command, env)[0]


def run_timed(command: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    """Seconds the command took, and its stdout."""
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{command[:3]} failed:\n{done.stderr[-4000:]}")
    return seconds, done.stdout


def copy_catalog(source: Path, target: Path) -> None:
    """Copy a SQLite catalog whole: both catalogs run it in WAL mode, and a process that
    exits without closing its connection (the Java side's JDBC pool) leaves its last commits
    in the `-wal` file, which a copy of the main file alone loses (a stale one left beside
    the target would be replayed onto the copy)."""
    with contextlib.closing(sqlite3.connect(source)) as con:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for suffix in ("-wal", "-shm"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(source, target)


def answer(catalog: SqlCatalog, table: str) -> tuple[Any, ...]:
    """DuckDB's count and sums over the table's rows. Where icecore's planner pairs no delete
    with any data file, DuckDB reads those data files directly: Java's compaction leaves the
    equality deletes in the table (they no longer apply by sequence number), and DuckDB's
    `iceberg_scan` joins them against every row anyway, which takes many minutes at 20M."""
    loaded = catalog.load_table(table)
    tasks = list(TableScan(loaded.io, loaded.metadata).plan_files())
    source = f"iceberg_scan('{loaded.metadata_location}')"
    if not any(t.deletes for t in tasks):
        paths = [t.file.file_path.removeprefix("file://").removeprefix("file:") for t in tasks]
        files = ", ".join(f"'{p}'" for p in paths)
        source = f"read_parquet([{files}])"
    con = connect()
    row = con.execute(
        f"SELECT count(*), sum(id), sum(amount), count(DISTINCT name) FROM {source}"
    ).fetchone()
    con.close()
    return tuple(row or ())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--workdir", help="keep the tables here (default: a temporary dir)")
    parser.add_argument(
        "--reuse", action="store_true",
        help="reuse the twins an earlier run built in --workdir (its catalog is reset)",
    )  # fmt: skip
    parser.add_argument(
        "--before", type=Path,
        help="a checkout of earlier code: its compaction is timed too, on the same twins",
    )  # fmt: skip
    parser.add_argument("--twins", default="pos,eq", help="which twins to compact: pos, eq")
    args = parser.parse_args()
    python = iceberg_java_python()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="iceberg-java-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    shared = {"jars": [str(j) for j in iceberg_java_jars()], "db": str(workdir / "catalog.db"),
              "warehouse": str(workdir / "wh"), "workdir": str(workdir)}  # fmt: skip
    rows = int(20_000_000 * args.scale)
    report: dict[str, Any] = {"rows": rows, "load_average_at_start": os.getloadavg()[0]}
    built = workdir / "catalog.db.built"  # compactions only add files: the catalog resets them
    if args.reuse and built.is_file():
        log(f"reusing the twins in {workdir}")
    else:
        log(f"building the twins with Iceberg Java ({rows:,} rows each) in {workdir}")
        report["build_seconds"] = round(
            timed([str(python), str(JAVA_SIDE), "build", json.dumps({**shared, "rows": rows})]),
            1,
        )
        copy_catalog(workdir / "catalog.db", built)

    def reset() -> None:
        copy_catalog(built, workdir / "catalog.db")

    reset()

    def catalog() -> SqlCatalog:
        """A fresh connection each time: `reset` replaces the database file under it."""
        return SqlCatalog("lake", f"sqlite:///{workdir / 'catalog.db'}")

    checkouts = {"ours": ROOT, **({"before": args.before.resolve()} if args.before else {})}
    packages = {name: _package(root, workdir / "dist" / name) for name, root in checkouts.items()}
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}

    def ours(job: str, table: str, *extra: str, code: str = "ours") -> dict[str, Any]:
        events = Path(tempfile.mkdtemp(prefix="events-", dir=workdir))
        launched = time.time()
        _, out = run_timed([
            str(SUBMIT), "--master", "local[*]", "--driver-memory", "4g",
            "--conf", "spark.ui.enabled=false", "--py-files", str(packages[code]),
            "--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={events}",
            "--conf", "spark.eventLog.compress=false",
            str(checkouts[code] / "spark_jobs" / "main.py"), job,
            "--catalog-uri", f"sqlite:///{workdir / 'catalog.db'}", "--catalog-name", "lake",
            "--table", f"bench.{table}", *extra,
        ], env)  # fmt: skip
        phases = breakdown(events, launched=launched, exited=time.time())
        shutil.rmtree(events)
        # The job's own time, from its result: after the process and imports, with the Spark
        # session's start when the job started one.
        phases["job_s"] = json.loads(out.strip().splitlines()[-1])["seconds"]
        return phases

    def java(table: str) -> float:
        return timed([str(python), str(JAVA_SIDE), "compact",
                      json.dumps({**shared, "table": table})])  # fmt: skip

    # DuckDB answers before compaction only for the position-deleted twin: with live equality
    # deletes its scan of 20M rows takes many minutes (see v3_convert_benchmark.py); there the
    # two compacted twins and the converted copy are compared with each other.
    for twin in args.twins.split(","):
        before = answer(catalog(), f"bench.{twin}_ours") if twin == "pos" else None
        log(f"{twin}: Iceberg Java's rewrite_data_files")
        java_s = java(f"{twin}_java")
        log(f"{twin}: ours ({java_s:.1f}s for Java)")
        phases = ours("rewrite_data_files", f"{twin}_ours", "--rewrite-all")
        after_java = answer(catalog(), f"bench.{twin}_java")
        after_ours = answer(catalog(), f"bench.{twin}_ours")
        report[twin] = {
            "java_s": round(java_s, 1),
            "ours_s": phases["total"],
            "ratio": round(phases["total"] / java_s, 2),
            "rows_equal": after_java == after_ours and before in (None, after_ours),
            "rows": after_ours[0],
            "breakdown": phases,
        }
        if args.before:
            reset()
            earlier = ours("rewrite_data_files", f"{twin}_ours", "--rewrite-all", code="before")
            report[twin]["before"] = {
                "ours_s": earlier["total"],
                "after_over_before": round(phases["total"] / earlier["total"], 2),
                "rows_equal": answer(catalog(), f"bench.{twin}_ours") == after_ours,
                "breakdown": earlier,
            }
        log(f"{twin}: {json.dumps(report[twin])}")
    if "eq" not in report:  # the conversion is compared with our compaction of that twin
        report["load_average_at_end"] = os.getloadavg()[0]
        print(json.dumps(report))
        return
    # The floor of any cold run of ours: spark-submit's launch of an empty Python script
    # (two JVMs: the launcher's, then SparkSubmit's, which starts Python).
    empty = workdir / "empty.py"
    empty.write_text("")
    report["spark_submit_floor_s"] = round(
        timed([str(SUBMIT), "--master", "local[*]", "--conf", "spark.ui.enabled=false",
               str(empty)], env),
        2,
    )  # fmt: skip
    convert = ours("convert_equality_deletes", "eq_convert")
    report["convert"] = {
        "ours_s": convert["total"],
        "over_our_compaction": round(convert["total"] / report["eq"]["ours_s"], 2),
        "job_s_over_our_compaction_job_s": round(
            convert["job_s"] / report["eq"]["breakdown"]["job_s"], 2
        ),
        "floor_over_our_compaction": round(
            report["spark_submit_floor_s"] / report["eq"]["ours_s"], 2
        ),
        "rows_equal": answer(catalog(), "bench.eq_convert") == answer(catalog(), "bench.eq_ours"),
        "breakdown": convert,
    }
    log(f"convert: {report['convert']}")
    report["load_average_at_end"] = os.getloadavg()[0]
    print(json.dumps(report))


def _package(checkout: Path, directory: Path) -> Path:
    """The `--py-files` zip of a checkout, built by that checkout's own packaging code."""
    target = directory / "icefloe.zip"
    subprocess.run(
        [sys.executable, "-c",
         "import sys; from spark_jobs.common.packaging import build_zip; build_zip(sys.argv[1])",
         str(target)],
        cwd=checkout, check=True,
    )  # fmt: skip
    return target


if __name__ == "__main__":
    main()
