"""The fleet's maintained tables per minute, spark-submit against a warm Spark Connect server
(issue 26): the throughput a fleet run gets from one slot when each job is a cold application
or a client of one long-lived server.

Two catalogs of `--tables` small tables each (15 one-row appends: compaction is due), one per
way; each table is maintained by `icefloe run rewrite_data_files <table>` (the fleet's own
runner: the lease, the run record, the launch contract the fleet DAG's tasks use), one
after another, with `--master local[2]` (a spark-submit each) or `--remote` (a client of
the stock server of tests/support/spark_connect.py). Both ways get one untimed warm-up job
first (the server's session and Python workers, the page cache). Every table must end with
one data file and its rows.

    .venv/bin/python bench/fleet_connect_benchmark.py               # 8 tables each way
    .venv/bin/python bench/fleet_connect_benchmark.py --tables 20

The last line of stdout is the JSON report (ratios measured in this run); progress goes to
stderr. The exit status is 0 only when every table was checked.
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

from bench.connect_benchmark import log, rows, small_tables  # noqa: E402
from icecore.catalog import SqlCatalog  # noqa: E402
from icecore.spec.manifest import FileContent  # noqa: E402
from tests.spark.delete_tables import live  # noqa: E402
from tests.support.spark_connect import clean_environment, start_spark_connect  # noqa: E402

ICEFLOE = Path(sys.executable).parent / "icefloe"


def maintain(warehouse: Path, table: str, way: list[str], env: dict[str, str]) -> float:
    """Wall seconds of `icefloe run rewrite_data_files <table>` the given way."""
    command = [str(ICEFLOE), "run", "rewrite_data_files", table, "--warehouse", str(warehouse),
               "--state-uri", f"sqlite:///{warehouse.parent / 'state.db'}", *way]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(
        command, cwd=warehouse.parent, env=env, capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"icefloe run on {table} failed:\n{done.stderr[-4000:]}")
    return seconds


def fleet(workdir: Path, name: str, tables: int, way: list[str], env: dict[str, str]) -> dict:
    warehouse = workdir / name / "wh"
    warehouse.mkdir(parents=True)
    catalog = SqlCatalog("default", warehouse=warehouse)
    names = [f"t{i}" for i in range(tables + 1)]
    small_tables(catalog, warehouse, names, appends=15)
    before = {n: rows(catalog, f"small.{n}") for n in names}
    log(f"{name}: warm-up")
    maintain(warehouse, "small.t0", way, env)
    seconds = []
    for n in names[1:]:
        seconds.append(maintain(warehouse, f"small.{n}", way, env))
        log(f"{name}: small.{n} in {seconds[-1]:.2f} s")
    checked = all(
        len(live(catalog.load_table(f"small.{n}"))[FileContent.DATA]) == 1
        and rows(catalog, f"small.{n}") == before[n]
        for n in names
    )
    catalog.close()
    total = sum(seconds)
    return {
        "tables": tables,
        "seconds": round(total, 2),
        "tables_per_minute": round(tables * 60 / total, 2),
        "per_table_s": [round(s, 2) for s in seconds],
        "tables_checked": checked,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=8, help="timed tables each way")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="icefloe-fleet-connect-") as tmp:
        workdir = Path(tmp)
        load = os.getloadavg()[0]
        with start_spark_connect(workdir / "server") as server:
            env = clean_environment()
            connect = fleet(workdir, "connect", args.tables, ["--remote", server.url], env)
            submit = fleet(workdir, "spark_submit", args.tables, ["--master", "local[2]"], env)
        report: dict[str, Any] = {
            "connect": connect,
            "spark_submit": submit,
            "throughput_ratio": round(
                connect["tables_per_minute"] / submit["tables_per_minute"], 2
            ),
            "load": [round(load, 1), round(os.getloadavg()[0], 1)],
        }
    print(json.dumps(report))
    return 0 if connect["tables_checked"] and submit["tables_checked"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
