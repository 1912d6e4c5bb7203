"""Jobs on a warm Spark Connect server against the same jobs through spark-submit (issue 26).

In one run, on one machine, with one stock server (the pinned pyspark's own
`SparkConnectServer` on local[2], its Python workers without the project:
tests/support/spark_connect.py) against spark-submits on local[2]:

- **the bar**: `python spark_jobs/main.py rewrite_data_files` with `SPARK_REMOTE` on `--tables`
  small tables (15 one-row appends each) against the same job through spark-submit on twins
  of them: each leaves one data file with the same rows, median wall time over Connect at
  most 0.3x spark-submit's;
- per-job wall times both ways on small tables: the position-delete rewrite and the
  conversion (its Spark route, `--driver-max-bytes 0`) on tables of three CDC batches, the
  expiry and the orphan removal (both small enough for the driver alone: no Spark at all over
  Connect, a JVM start with spark-submit), and an ingestion of 1,000 rows from Parquet into a
  new bucketed table;
- where a Connect run's seconds go: the client's imports, the shared session and the upload
  of the packages, a first and a later task in it, and what a session of a job's own costs
  (its Python workers start cold: the compaction's Spark-shuffled writes use one);
- with `--twin-scale`: issue 16's conversion bar warm, `convert_equality_deletes` over the
  warm server at most 0.15x `rewrite_data_files --rewrite-all` over the same server, on
  copies of Iceberg Java's equality-deleted twin (built by bench/iceberg_java_benchmark.py's
  Java side; its virtualenv is set up as that script's docstring says): medians of
  `--twin-rounds` rounds, each from the twins as built.

    .venv/bin/python bench/connect_benchmark.py                       # small tables only
    .venv/bin/python bench/connect_benchmark.py --twin-scale 0.05     # and the twin, 1M rows
    .venv/bin/python bench/connect_benchmark.py --twin-scale 1 --twin-dir .cache/twin  # kept
    .venv/bin/python bench/connect_benchmark.py --twin-scale 1 --twin-only  # the twin's bar alone

The twin's clients use the packages' bytecode (compiled first, as an installed package has it);
`--no-bytecode` keeps a shell's PYTHONDONTWRITEBYTECODE, so each compiles them from source.

The last line of stdout is the JSON report (ratios measured in this run); progress goes to
stderr. The exit status is 0 only when every bar measured is met and every table checked.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from bench.iceberg_java_benchmark import copy_catalog  # noqa: E402
from icecore.catalog import SqlCatalog  # noqa: E402
from icecore.spec.manifest import FileContent  # noqa: E402
from icecore.spec.schema import Schema  # noqa: E402
from icecore.spec.types import LongType, NestedField, StringType  # noqa: E402
from tests.spark.delete_tables import batch, commit_cdc, create, live  # noqa: E402
from tests.spark.submit import submit_command  # noqa: E402
from tests.support.reader import scan_rows  # noqa: E402
from tests.support.spark_connect import (  # noqa: E402
    SparkConnectServer,
    clean_environment,
    start_spark_connect,
)
from tests.support.tables import LocalTable  # noqa: E402

SCHEMA = Schema((NestedField(1, "id", LongType()), NestedField(2, "data", StringType())))
BAR = 0.3
CONVERSION_BAR = 0.15
_PROFILE = """\
import json, sys, time
start = time.perf_counter()
from spark_jobs.common import cli
import spark_jobs.rewrite_data_files
imported = time.perf_counter()
from spark_jobs.common.connect import private_session, shared_session
from spark_jobs.common.session import ICEBERG_SQL_CONF
session = shared_session(sys.argv[1], ICEBERG_SQL_CONF)
connected = time.perf_counter()

def task(batches):
    import spark_jobs.rewrite_data_files.in_tasks
    yield from batches

def run(spark):
    spark.range(0, 2, 1, 2).mapInArrow(task, "id long").collect()

run(session)
first = time.perf_counter()
run(session)
second = time.perf_counter()
with private_session(session, ICEBERG_SQL_CONF) as private:
    opened = time.perf_counter()
    run(private)
    cold = time.perf_counter()
session.stop()
print(json.dumps({"imports_s": imported - start, "session_and_upload_s": connected - imported,
                  "first_task_s": first - connected, "later_task_s": second - first,
                  "private_session_s": opened - second, "private_first_task_s": cold - opened}))
"""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run(command: Sequence[str], env: dict[str, str], cwd: Path) -> tuple[float, dict[str, Any]]:
    """Wall seconds of the command, and the job's JSON result (its last stdout line)."""
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:4])} failed:\n{done.stderr[-4000:]}")
    return seconds, json.loads(done.stdout.strip().splitlines()[-1])


class Runner:
    """One job, one way: `python spark_jobs/main.py` with SPARK_REMOTE, or a spark-submit."""

    def __init__(self, server: SparkConnectServer, workdir: Path, warehouse: Path) -> None:
        self.server = server
        self.workdir = workdir
        self.warehouse = warehouse

    def connect(self, job: str, args: Sequence[str]) -> tuple[float, dict[str, Any]]:
        command = [sys.executable, str(ROOT / "spark_jobs" / "main.py"), job,
                   "--warehouse", str(self.warehouse), *args]  # fmt: skip
        return run(command, clean_environment(SPARK_REMOTE=self.server.url), self.workdir)

    def submit(self, job: str, args: Sequence[str]) -> tuple[float, dict[str, Any]]:
        command, env = submit_command(
            job, self.workdir, ["--warehouse", str(self.warehouse), *args]
        )
        return run(command, env, self.workdir)


def small_tables(catalog: SqlCatalog, warehouse: Path, names: Sequence[str], appends: int) -> None:
    """Tables of `appends` one-row appends (a snapshot and a Parquet file each)."""
    catalog.create_namespace("small")
    for name in names:
        table = LocalTable.create(warehouse / "small" / name, SCHEMA)
        for i in range(appends):
            table.commit(add=[table.write_data([{"id": i, "data": f"row {i}"}])])
        catalog.register_table(f"small.{name}", table.metadata_location)


def delete_tables(catalog: SqlCatalog, names: Sequence[str], seed: int) -> None:
    """Tables of three CDC batches (position and equality deletes), the same rows each."""
    for name in names:
        rnd = random.Random(seed)
        table = create(catalog, None, f"db.{name}")
        for b in range(3):
            commit_cdc(table, batch(rnd, b, 20, False))


def rows(catalog: SqlCatalog, name: str) -> Counter[tuple[Any, ...]]:
    table = catalog.load_table(name)
    return Counter(tuple(sorted(r.items())) for r in scan_rows(table.io, table.metadata))


def compare_small(runner: Runner, catalog: SqlCatalog, tables: int) -> dict[str, Any]:
    """The bar: rewrite_data_files on `tables` small tables each way (alternating, so load
    drifts hit both), every table left with one data file and its rows."""
    times: dict[str, list[float]] = {"connect": [], "spark_submit": []}
    checked = True
    for i in range(tables):
        for way in ("connect", "spark_submit"):
            name = f"small.{way}_{i}"
            before = rows(catalog, name)
            launch = runner.connect if way == "connect" else runner.submit
            seconds, result = launch("rewrite_data_files", ["--table", name])
            after = catalog.load_table(name)
            files = len(live(after)[FileContent.DATA])
            checked &= files == 1 and rows(catalog, name) == before
            checked &= result["rewritten_data_files"] == len(before)
            times[way].append(seconds)
            log(f"rewrite_data_files {name}: {seconds:.2f} s, {files} data file(s)")
    connect, submit = statistics.median(times["connect"]), statistics.median(times["spark_submit"])
    return {
        "connect_median_s": round(connect, 2),
        "spark_submit_median_s": round(submit, 2),
        "ratio": round(connect / submit, 3),
        "bar": BAR,
        "met": connect / submit <= BAR,
        "tables_checked": checked,
        "seconds": {k: [round(s, 2) for s in v] for k, v in times.items()},
    }


def per_job(runner: Runner, catalog: SqlCatalog) -> dict[str, Any]:
    """Wall seconds of the other jobs, each way, on their own copies of the same tables."""
    jobs = {
        "rewrite_position_deletes": ["--rewrite-all"],
        "convert_equality_deletes": ["--driver-max-bytes", "0"],
        "expire_snapshots": ["--older-than", "0s", "--min-age", "0s", "--retain-last", "1"],
        "remove_orphan_files": ["--older-than", "0s", "--force"],
    }
    names = [f"{job}_{way}" for job in jobs for way in ("connect", "spark_submit")]
    delete_tables(catalog, names, seed=7)
    source = runner.workdir / "batch.parquet"
    pq.write_table(pa.table({"id": list(range(1000)), "v": [f"v{i}" for i in range(1000)]}),
                   source)  # fmt: skip
    jobs["ingest"] = ["--source", str(source), "--create", "--partition-by", "bucket(4, id)"]
    report = {}
    for job, args in jobs.items():
        seconds = {}
        for way in ("connect", "spark_submit"):
            launch = runner.connect if way == "connect" else runner.submit
            seconds[way], _ = launch(job, ["--table", f"db.{job}_{way}", *args])
        same = rows(catalog, f"db.{job}_connect") == rows(catalog, f"db.{job}_spark_submit")
        report[job] = {
            "connect_s": round(seconds["connect"], 2),
            "spark_submit_s": round(seconds["spark_submit"], 2),
            "ratio": round(seconds["connect"] / seconds["spark_submit"], 3),
            "rows_equal": same,
        }
        log(f"{job}: {report[job]}")
    return report


def profile(server: SparkConnectServer, workdir: Path) -> dict[str, float]:
    """Where a new client's seconds go on the warm server."""
    script = workdir / "client_seconds.py"  # not profile.py: the stdlib has one
    script.write_text(_PROFILE)
    done = subprocess.run(
        [sys.executable, str(script), server.url], cwd=workdir, env=clean_environment(),
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    found: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return {k: round(v, 3) for k, v in found.items()}


def client_environment(url: str, bytecode: bool) -> dict[str, str]:
    """A Connect client's environment. With `bytecode`, icecore's and spark_jobs' bytecode is
    compiled first and the client may use it, as an installed package's (pip compiles it) or
    a checkout's after its first run: a shell with PYTHONDONTWRITEBYTECODE (this machine's)
    makes every client compile the two packages from source again, about 0.4 s of each run."""
    env = clean_environment(SPARK_REMOTE=url)
    if bytecode:
        for package in ("icecore", "spark_jobs"):
            compileall.compile_dir(ROOT / package, quiet=1)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def twin(
    server: SparkConnectServer, workdir: Path, scale: float, *, rounds: int, bytecode: bool
) -> dict[str, Any]:
    """Issue 16's conversion bar over the warm server, on Iceberg Java's equality twin: in
    each round, from the twins as built, the compaction then the conversion (medians over
    the rounds: one pair of fresh client processes varies by a tenth)."""
    from tests.support.java_writer.venv import (  # noqa: PLC0415
        iceberg_java_jars,
        iceberg_java_python,
    )

    workdir.mkdir(parents=True, exist_ok=True)
    python = iceberg_java_python()
    shared = {"jars": [str(j) for j in iceberg_java_jars()], "db": str(workdir / "catalog.db"),
              "warehouse": str(workdir / "wh"), "workdir": str(workdir),
              "rows": int(20_000_000 * scale), "twins": ["eq"]}  # fmt: skip
    built = workdir / f"catalog.db.built-{shared['rows']}"  # the jobs only add files
    if built.is_file():
        log(f"reusing the twins in {workdir}")
    else:
        shutil.rmtree(workdir / "wh", ignore_errors=True)
        log(f"building the twins with Iceberg Java ({shared['rows']:,} rows)")
        subprocess.run([str(python), str(ROOT / "bench" / "iceberg_java" / "java_side.py"),
                        "build", json.dumps(shared)], check=True)  # fmt: skip
        copy_catalog(workdir / "catalog.db", built)
    env = client_environment(server.url, bytecode)
    catalog_args = ["--catalog-uri", f"sqlite:///{workdir / 'catalog.db'}", "--catalog-name",
                    "lake"]  # fmt: skip

    def job(name: str, table: str, *extra: str) -> tuple[float, dict[str, Any]]:
        command = [sys.executable, str(ROOT / "spark_jobs" / "main.py"), name, *catalog_args,
                   "--table", f"bench.{table}", *extra]  # fmt: skip
        return run(command, env, workdir)

    compactions: list[tuple[float, dict[str, Any]]] = []
    conversions: list[tuple[float, dict[str, Any]]] = []
    converted_all = True
    for n in range(rounds):
        copy_catalog(built, workdir / "catalog.db")
        compactions.append(job("rewrite_data_files", "eq_ours", "--rewrite-all"))
        conversions.append(job("convert_equality_deletes", "eq_convert"))
        catalog = SqlCatalog("lake", f"sqlite:///{workdir / 'catalog.db'}")
        try:
            table = catalog.load_table("bench.eq_convert")
            converted_all &= not live(table)[FileContent.EQUALITY_DELETES]
        finally:
            catalog.close()
        log(f"round {n + 1}: compaction {compactions[-1][0]:.2f} s, "
            f"conversion {conversions[-1][0]:.2f} s")  # fmt: skip
    compaction_s = statistics.median(s for s, _ in compactions)
    conversion_s = statistics.median(s for s, _ in conversions)
    return {
        "rows": shared["rows"],
        "rounds": rounds,
        "clients_use_bytecode": bytecode,
        "compaction_s": round(compaction_s, 2),
        "conversion_s": round(conversion_s, 2),
        "compaction_runs_s": [round(s, 2) for s, _ in compactions],
        "conversion_runs_s": [round(s, 2) for s, _ in conversions],
        "compaction_job_s": statistics.median(r["seconds"] for _, r in compactions),
        "conversion_job_s": statistics.median(r["seconds"] for _, r in conversions),
        "conversion_matched_in": sorted({r.get("matched_in") for _, r in conversions}),
        "ratio": round(conversion_s / compaction_s, 3),
        "paired_ratios": [
            round(v / c, 3) for (c, _), (v, _) in zip(compactions, conversions, strict=True)
        ],
        "bar": CONVERSION_BAR,
        "met": conversion_s / compaction_s <= CONVERSION_BAR,
        "no_equality_delete_left": converted_all,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=5, help="small tables each way (the bar)")
    parser.add_argument("--appends", type=int, default=15, help="one-row appends per table")
    parser.add_argument("--twin-scale", type=float, help="also the twin (1: 20M rows)")
    parser.add_argument("--workdir", type=Path, help="default: a temporary directory")
    parser.add_argument("--twin-dir", type=Path, help="keep (and reuse) the twin here")
    parser.add_argument("--twin-only", action="store_true", help="the twin's bar alone")
    parser.add_argument("--twin-rounds", type=int, default=5, help="compaction + conversion pairs")
    parser.add_argument(
        "--no-bytecode",
        action="store_true",
        help="the twin's clients compile the packages from source (PYTHONDONTWRITEBYTECODE kept)",
    )
    args = parser.parse_args()
    if args.twin_only and not args.twin_scale:
        parser.error("--twin-only needs --twin-scale")
    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="connect-bench-"))).resolve()
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    warehouse = workdir / "wh"
    report: dict[str, Any] = {"load_average_at_start": os.getloadavg()[0]}
    with start_spark_connect(workdir / "server") as server:
        log(f"server at {server.url}, up in {server.startup_seconds:.1f} s")
        report["server_startup_s"] = round(server.startup_seconds, 1)
        catalog = SqlCatalog("default", warehouse=warehouse)
        tables = 0 if args.twin_only else args.tables
        names = [f"{way}_{i}" for i in range(tables) for way in ("connect", "spark_submit")]
        small_tables(catalog, warehouse, [*names, "warmup"], args.appends)
        runner = Runner(server, workdir, warehouse)
        runner.connect("rewrite_data_files", ["--table", "small.warmup"])  # the server's JIT
        report["connect_profile"] = profile(server, workdir)
        log(f"profile: {report['connect_profile']}")
        if not args.twin_only:
            report["rewrite_data_files_small"] = compare_small(runner, catalog, args.tables)
            log(f"bar: {report['rewrite_data_files_small']}")
            report["jobs"] = per_job(runner, catalog)
        catalog.close()
        if args.twin_scale:
            twin_dir = (args.twin_dir or workdir / "twin").resolve()
            report["conversion_warm"] = twin(
                server,
                twin_dir,
                args.twin_scale,
                rounds=args.twin_rounds,
                bytecode=not args.no_bytecode,
            )
            log(f"twin: {report['conversion_warm']}")
    report["load_average_at_end"] = os.getloadavg()[0]
    print(json.dumps(report))
    small = report.get("rewrite_data_files_small", {"met": True, "tables_checked": True})
    converted = report.get("conversion_warm", {"met": True, "no_equality_delete_left": True})
    bars = [small, converted]
    checked = (
        small["tables_checked"]
        and converted["no_equality_delete_left"]
        and all(j["rows_equal"] for j in report.get("jobs", {}).values())
    )
    return 0 if all(b["met"] for b in bars) and checked else 1


if __name__ == "__main__":
    sys.exit(main())
