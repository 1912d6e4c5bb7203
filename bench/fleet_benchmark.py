"""The fleet's bars (issue 15) on a generated catalog of 1,000 tables (100 due).

- `health cold`: `icefloe health --all` with an empty health cache (every table's metadata,
  manifest list and manifests read, 8 threads), in its own process, as a user runs it;
- `health warm`: the same again, nothing changed (one catalog listing, the cache);
- `due`: `icefloe due`, warm (what the fleet DAG would run);
- `dag parse`: `dags/icefloe_fleet.py` parsed by Airflow's DagBag in a fresh process, with a
  fleet on this catalog (no catalog call at parse time; Airflow's own import not counted).

Each command's peak RSS is its process's `ru_maxrss`. The catalog is written once under
`--workdir` (tests/support/fleet_catalog.py: metadata only, no data files) and reused.

    python bench/fleet_benchmark.py                  # 1,000 tables
    python bench/fleet_benchmark.py --tables 200     # quicker

The last line of stdout is the JSON report; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
BARS = {"health cold": 30.0, "health warm": 3.0, "dag parse": 2.0}
_MEASURE = """\
import resource, subprocess, sys, time
start = time.perf_counter()
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)
seconds = time.perf_counter() - start
print(seconds, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, done.returncode)
"""
_PARSE = """\
import resource, sys, time
from airflow.dag_processing.dagbag import DagBag
start = time.perf_counter()
bag = DagBag(dag_folder=sys.argv[1])
seconds = time.perf_counter() - start
assert not bag.import_errors and bag.dag_ids, (bag.import_errors, bag.dag_ids)
print(seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, 0)
"""


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def ensure_catalog(workdir: Path, tables: int) -> Path:
    """The generated catalog's warehouse (made once per size)."""
    warehouse = workdir / f"fleet-{tables}" / "wh"
    done = warehouse.parent / "done"
    if not done.exists():
        shutil.rmtree(warehouse.parent, ignore_errors=True)
        sys.path[:0] = [str(REPO), str(REPO / "plugins")]
        from tests.support.fleet_catalog import make_fleet_catalog  # noqa: PLC0415

        start = time.perf_counter()
        state = f"sqlite:///{warehouse.parent / 'state.db'}"
        truth = make_fleet_catalog(warehouse, tables, state_uri=state)
        _log(f"catalog: {tables} tables, {len(truth.due)} due, {time.perf_counter() - start:.1f} s")
        done.write_text("ok")
    return warehouse


def measure(command: list[str], env: dict[str, str], code: str = _MEASURE) -> dict[str, Any]:
    out = (
        subprocess.run(
            [sys.executable, "-c", code, *command],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        .stdout.splitlines()[-1]
        .split()
    )  # the last line: Airflow may log before it
    seconds, rss_kib, status = float(out[0]), int(out[1]), int(out[2])
    if status != 0:
        raise RuntimeError(f"{command} exited with {status}")
    return {"seconds": round(seconds, 3), "peak_rss_mib": round(rss_kib / 1024, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument(
        "--workdir", type=Path, default=Path(tempfile.gettempdir()) / "icefloe-bench"
    )
    args = parser.parse_args()

    warehouse = ensure_catalog(args.workdir, args.tables)
    root = warehouse.parent
    cache = root / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    config = root / "tables.yaml"
    config.write_text("fleets:\n  - iceberg_conn_id: fleet_bench\n    max_tables: 50\n")
    env = {
        **os.environ,
        "ICEFLOE_CACHE_DIR": str(cache),
        "ICEFLOE_TABLES_CONFIG": str(config),
        "AIRFLOW_HOME": str(root / "airflow"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_FLEET_BENCH": json.dumps(
            {"conn_type": "icefloe", "extra": {"warehouse": str(warehouse)}}
        ),
    }
    icefloe = [str(BIN / "icefloe")]
    catalog = ["--warehouse", str(warehouse), "--state-uri", f"sqlite:///{root / 'state.db'}"]
    report: dict[str, Any] = {"tables": args.tables, "cpus": os.cpu_count()}
    report["health cold"] = measure([*icefloe, "health", "--all", *catalog], env)
    _log(f"health cold: {report['health cold']}")
    report["health warm"] = measure([*icefloe, "health", "--all", *catalog], env)
    _log(f"health warm: {report['health warm']}")
    report["due"] = measure([*icefloe, "due", *catalog], env)
    _log(f"due (warm): {report['due']}")
    report["dag parse"] = measure([str(REPO / "dags" / "icefloe_fleet.py")], env, _PARSE)
    _log(f"dag parse: {report['dag parse']}")
    report["bars_met"] = {k: report[k]["seconds"] <= bar for k, bar in BARS.items()}
    print(json.dumps(report))
    return 0 if all(report["bars_met"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
