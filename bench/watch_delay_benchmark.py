"""The commit-to-run delay of `schedule: asset` (issue 37) with Airflow's real triggerer and
scheduler: a SQL catalog of 10,000 tables of which about 1% change each minute, watched by ONE
fleet (`schedule: asset`, every namespace), at the default `[icefloe] watch_poll_interval`.

What runs: a real Airflow 3 deployment (`tests/airflow/server.py`: api-server, scheduler,
dag-processor, then the triggerer) on a PostgreSQL metadata database of its own (created and
dropped here), with the fleet DAG of this repository's `dags/`. The catalog is SQLite,
10,000 empty v2 tables (20 columns; `watch_poll_benchmark.make_catalog`, no snapshot yet);
another engine (PyIceberg 0.12, in a thread of this process) then appends one row to a random
table at an even pace (`--per-minute`, 100 by default: 1% of the catalog a minute), each a
real Parquet file, manifest and metadata file, for `--minutes`. The fleet runs with
`max_tables: 0`: every run plans (its `plan` task surveys the tables its events name, reading
their manifests, as a real run does) and maps no job: what is measured is the scheduling, not
the compaction; a dry run cannot be asked for by an asset-triggered run (it is a form param).

Delay of a commit = from the moment the writer's commit returned (the catalog pointer
swapped: visible to a poll) to the `start_date` (and `queued_at`) of the first fleet run
whose consumed asset events (`/dagRuns/{id}/upstreamAssetEvents`, their `extra.payload.
snapshots`) name that commit's snapshot; also to the asset event's own `timestamp` (the
triggerer's part). Reported: median, 95th percentile and max, each also as a ratio to the
poll interval; the runs, the commits, and the load average. `--keep DIR` keeps the
deployment's files and logs there, with each commit's times and run (`commits.json`).

    python bench/watch_delay_benchmark.py                                 # 10,000 tables, 6 min
    python bench/watch_delay_benchmark.py --tables 1000 --minutes 2       # quicker

The last line of stdout is the JSON report; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog as PyIcebergCatalog
from sqlalchemy import create_engine, text

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "plugins")]

from icefloe_airflow.catalog_watch.state import WatchStore  # noqa: E402
from icefloe_airflow.state_db import STATE_URI_ENV  # noqa: E402
from icefloe_airflow.tables_config import CONFIG_ENV  # noqa: E402
from watch_poll_benchmark import CONN_ID, all_tables, log, make_catalog  # noqa: E402

from tests.airflow.deployment import icefloe_connection  # noqa: E402
from tests.airflow.server import AirflowServer, airflow_server  # noqa: E402

POSTGRES = os.environ.get(
    "ICECORE_TEST_POSTGRES_URI", "postgresql+psycopg2://postgres@127.0.0.1:5432/test"
)
FLEET_DAG = f"icefloe_fleet__{CONN_ID}"
FLEET_ASSET = f"icefloe-fleet/{CONN_ID}"
POLL_SECONDS = 20.0  # `[icefloe] watch_poll_interval`'s default: the deployment leaves it unset


# The deployment --------------------------------------------------------------------------------


@contextmanager
def metadata_database() -> Iterator[str]:
    """A PostgreSQL database of its own for Airflow's metadata, dropped afterwards."""
    name = f"icefloe_watch_delay_{os.getpid()}"
    admin = create_engine(POSTGRES, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
    try:
        yield POSTGRES.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        admin.dispose()


def airflow_environment(home: Path, metadata_uri: str, warehouse: Path, uri: str) -> dict[str, str]:
    """The settings every Airflow process gets: this checkout's dags/ and plugins/, a tables
    config with the one fleet, and the catalog's connection as an environment variable."""
    state_uri = f"sqlite:///{home / 'icefloe_state.db'}"
    config = home / "tables.yaml"
    fleet = {"iceberg_conn_id": CONN_ID, "schedule": "asset", "include": ["*"], "max_tables": 0}
    config.write_text(json.dumps({"tables": [], "fleets": [fleet]}))
    connection = icefloe_connection(warehouse, uri=uri, name=CONN_ID, state_uri=state_uri)
    venv_bin = str(Path(sys.executable).parent)
    return {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": metadata_uri,
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
        f"AIRFLOW_CONN_{CONN_ID.upper()}": json.dumps(connection),
        CONFIG_ENV: str(config),
        STATE_URI_ENV: state_uri,
        "PATH": os.pathsep.join([venv_bin, os.environ.get("PATH", "")]),
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "plugins")]),
    }


def wait_for(what: str, check: Any, timeout: float, every: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not after {timeout:.0f}s")
        time.sleep(every)
    return found


def watchers(server: AirflowServer) -> int:
    response = server.get("/api/v2/assets", params={"name_pattern": FLEET_ASSET})
    response.raise_for_status()
    found = [a for a in response.json()["assets"] if a["name"] == FLEET_ASSET]
    return len(found[0]["watchers"]) if found else 0


def baseline_stored(state_uri: str) -> bool:
    store = WatchStore.open(state_uri, CONN_ID)
    try:
        return store.cursor(f"{CONN_ID}@{POLL_SECONDS:g}s") is not None
    finally:
        store.close()


# Another engine's commits ---------------------------------------------------------------------


@dataclass(frozen=True)
class Commit:
    table: str
    snapshot_id: int
    visible_ms: int  # when the commit returned: the catalog's pointer swapped


class Writer(threading.Thread):
    """PyIceberg appends of one row to random tables, `per_minute` at an even pace, until
    `stop`; `commits` keeps those of the first `seconds` (the measured window): the writer
    goes on while their runs are awaited, so the last of them meet a steady stream too."""

    def __init__(
        self, uri: str, warehouse: Path, tables: list[str], *, per_minute: float,
        seconds: float, seed: int,
    ) -> None:  # fmt: skip
        super().__init__(daemon=True)
        self.catalog = PyIcebergCatalog(CONN_ID, uri=uri, warehouse=f"file://{warehouse}")
        self.tables, self.gap, self.seconds = tables, 60.0 / per_minute, seconds
        self.rng = random.Random(seed)
        self.commits: list[Commit] = []  # those of the measured window, `seconds` long
        self.behind = 0  # measured commits started later than their slot
        self.stop = threading.Event()
        self.started = time.monotonic()

    def run(self) -> None:
        start = self.started = time.monotonic()
        n = 0
        while not self.stop.is_set():
            wait = start + n * self.gap - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            else:
                self.behind += time.monotonic() - start < self.seconds
            name = self.rng.choice(self.tables)
            table = self.catalog.load_table(name)
            schema = table.schema().as_arrow()
            row = {f.name: (n if pa.types.is_integer(f.type) else "x") for f in schema}
            table.append(pa.Table.from_pylist([row], schema))
            snapshot = table.current_snapshot()
            assert snapshot is not None
            commit = Commit(name, snapshot.snapshot_id, int(time.time() * 1000))
            if time.monotonic() - start < self.seconds:
                self.commits.append(commit)
            n += 1
        self.catalog.engine.dispose()


# The runs -------------------------------------------------------------------------------------


def iso_ms(value: str | None) -> int | None:
    from datetime import datetime  # noqa: PLC0415

    return None if value is None else int(datetime.fromisoformat(value).timestamp() * 1000)


def fleet_runs(server: AirflowServer) -> list[dict[str, Any]]:
    response = server.get(f"/api/v2/dags/{FLEET_DAG}/dagRuns",
                          params={"order_by": "run_after", "limit": 1000})  # fmt: skip
    response.raise_for_status()
    return list(response.json()["dag_runs"])


def consumed(server: AirflowServer, run_id: str) -> list[dict[str, Any]]:
    path = f"/api/v2/dags/{FLEET_DAG}/dagRuns/{run_id}/upstreamAssetEvents"
    response = server.get(path)
    response.raise_for_status()
    return list(response.json()["asset_events"])


def first_sightings(server: AirflowServer) -> dict[int, dict[str, Any]]:
    """For each snapshot the fleet's runs' events name: the first such run's id, queued_at
    and start_date, and the event's timestamp (epoch ms)."""
    seen: dict[int, dict[str, Any]] = {}
    for run in fleet_runs(server):
        for event in consumed(server, run["dag_run_id"]):
            for snapshot in ((event.get("extra") or {}).get("payload") or {}).get("snapshots", []):
                sighting = {
                    "run": run["dag_run_id"],
                    "event": iso_ms(event["timestamp"]),
                    "queued": iso_ms(run.get("queued_at")),
                    "started": iso_ms(run.get("start_date")),
                }
                previous = seen.get(snapshot["snapshot_id"])
                if previous is None or (sighting["queued"] or 0) < (previous["queued"] or 0):
                    seen[snapshot["snapshot_id"]] = sighting
    return seen


def left_behind(server: AirflowServer, run_ids: set[str]) -> dict[str, int]:
    """How many of the runs' consumed events had been stored before the previous run was
    created (so that run could have taken them, and did not), of how many."""
    runs = fleet_runs(server)
    late = total = 0
    for before, run in itertools.pairwise(runs):
        if run["dag_run_id"] not in run_ids:
            continue
        created = iso_ms(before.get("queued_at")) or 0
        events = [iso_ms(e["timestamp"]) or 0 for e in consumed(server, run["dag_run_id"])]
        total += len(events)
        late += sum(at < created for at in events)
    return {"events": total, "stored_before_the_previous_run": late}


def summary(delays_s: list[float]) -> dict[str, float]:
    ordered = sorted(delays_s)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    median = statistics.median(ordered)
    return {
        "median_s": median,
        "p95_s": p95,
        "max_s": ordered[-1],
        "min_s": ordered[0],
        "median/poll": median / POLL_SECONDS,
        "p95/poll": p95 / POLL_SECONDS,
        "max/poll": ordered[-1] / POLL_SECONDS,
    }


def report(server: AirflowServer, commits: list[Commit], keep: Path) -> dict[str, Any]:
    """The figures; each commit's own (table, times, its run) in `keep`/commits.json."""
    seen = first_sightings(server)
    rows = [{**asdict(c), **seen.get(c.snapshot_id, {})} for c in commits]
    (keep / "commits.json").write_text(json.dumps(rows, indent=0))
    run_ids = {seen[c.snapshot_id]["run"] for c in commits if c.snapshot_id in seen}
    runs = [r for r in fleet_runs(server) if r["dag_run_id"] in run_ids]
    out: dict[str, Any] = {
        "commits": len(commits),
        "commits_in_a_run": sum(c.snapshot_id in seen for c in commits),
        "runs": len(runs),
        "run_types": sorted({r["run_type"] for r in runs}),
        "run_states": {s: sum(r["state"] == s for r in runs) for s in {r["state"] for r in runs}},
        "runs_consumed_events": left_behind(server, run_ids),
    }
    starts = [iso_ms(r.get("start_date")) for r in runs]
    ends = [iso_ms(r.get("end_date")) for r in runs]
    lengths = [(e - s) / 1000 for s, e in zip(starts, ends, strict=True) if s and e]
    if lengths:
        out["run_seconds_median"] = statistics.median(lengths)
    for key in ("event", "queued", "started"):
        found = [(c, seen[c.snapshot_id][key]) for c in commits if c.snapshot_id in seen]
        delays = [(at - c.visible_ms) / 1000 for c, at in found if at is not None]
        if delays:
            out[f"commit_to_{key}"] = summary(delays)
    return out


def wait_until_consumed(server: AirflowServer, commits: list[Commit], timeout: float) -> None:
    ids = {c.snapshot_id for c in commits}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        server.check_alive()
        if ids <= set(first_sightings(server)):
            return
        time.sleep(10)
    log(f"not every commit consumed after {timeout:.0f}s: reporting what was")


# The run ---------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=10_000)
    parser.add_argument("--per-minute", type=float, default=100.0, help="commits a minute")
    parser.add_argument("--minutes", type=float, default=6.0, help="of commits")
    parser.add_argument("--seed", type=int, default=37)
    parser.add_argument("--keep", help="a directory to keep the deployment's files in")
    args = parser.parse_args()
    out: dict[str, Any] = {"tables": args.tables, "per_minute": args.per_minute,
                           "minutes": args.minutes, "poll_s": POLL_SECONDS,
                           "load_start": os.getloadavg()}  # fmt: skip
    tmp = Path(args.keep or tempfile.mkdtemp(prefix="watch-delay-"))
    home, warehouse = tmp / "airflow", tmp / "warehouse"
    home.mkdir(parents=True)
    uri = f"sqlite:///{tmp}/catalog.db"
    began = time.perf_counter()
    make_catalog(uri, warehouse, args.tables, 0)
    tables = [f"{ns}.{name}" for ns, name in all_tables(uri)]
    log(f"{len(tables)} tables written in {time.perf_counter() - began:.1f} s")
    with metadata_database() as metadata_uri:
        env = airflow_environment(home, metadata_uri, warehouse, uri)
        began = time.perf_counter()
        airflow = str(Path(sys.executable).with_name("airflow"))
        subprocess.run([airflow, "db", "migrate"], env=env, check=True, capture_output=True)
        log(f"metadata database migrated in {time.perf_counter() - began:.1f} s")
        with airflow_server(env, all_admins=True, scheduler=True, dag_processor=True) as server:
            server.wait_for_dag(FLEET_DAG)
            wait_for("the fleet's watcher", lambda: watchers(server) == 1, 180)
            with server.running("triggerer"):
                state_uri = env[STATE_URI_ENV]
                wait_for("the baseline poll", lambda: baseline_stored(state_uri), 180)
                log(f"triggerer polling; {args.minutes:g} min of commits begin")
                loads = [os.getloadavg()]
                writer = Writer(uri, warehouse, tables, per_minute=args.per_minute,
                                seconds=args.minutes * 60, seed=args.seed)  # fmt: skip
                writer.start()
                for _ in range(math.ceil(args.minutes)):
                    time.sleep(
                        max(0.0, min(60.0, writer.started + writer.seconds - time.monotonic()))
                    )
                    loads.append(os.getloadavg())
                    log(f"{len(writer.commits)} commits, load {loads[-1][0]:.1f}")
                commits = list(writer.commits)
                try:
                    wait_until_consumed(server, commits, 240)
                finally:
                    writer.stop.set()
                    writer.join()
                out["load_during_1min"] = [round(load[0], 2) for load in loads]
                out["writer_behind_its_pace"] = writer.behind
                out.update(report(server, commits, tmp))
    out["load_end"] = os.getloadavg()
    if not args.keep:
        shutil.rmtree(tmp)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
