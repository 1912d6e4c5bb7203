"""`make demo`: the platform end to end on the embedded default, through Airflow.

    python examples/demo.py [warehouse]        # default ./warehouse

Everything is local and real: an Airflow home under `<warehouse>/.airflow`
(examples/demo_home.py: its `airflow.cfg` points at this checkout's dags/ and plugins/), its
metadata database with the demo's runs and connections (PostgreSQL, examples/demo_db.py,
running while the demo runs), a SQLite Iceberg catalog in the warehouse
(`<warehouse>/catalog.db`), Spark in local mode through spark-submit.
Afterwards `make ui` serves the same Airflow, with the Iceberg page at /icefloe/ (README:
"Open the demo in the Airflow UI"). Steps:

1. the ingest DAG (`icefloe_ingest`) commits CDC batches (inserts, updates, deletes; keys
   repeated within and across batches) into `demo.events`, partitioned by day: small files,
   equality deletes and position deletes pile up, as they do under streaming ingestion;
2. the table's health is printed, with the jobs that are due and every point of the score
   lost (`icefloe_airflow.health_model`, as the Iceberg page and `icefloe health` say it);
3. the table's self-optimizing DAG (`icefloe_optimize__demo__events`, from
   dags/icefloe_self_optimizing.py with a tables.yaml that lists the table) runs: only the due
   jobs, in order; each task is printed as it ends;
4. the health is printed again, and the table's rows are checked against a plain Python
   model of the CDC batches.

Every health check (the DAG's health tasks, each job's end) is recorded in the state store,
so the table's charts on the Iceberg page have points. Exit status 1 when a DAG run fails, the
rows differ from the model or compaction is still due. Each `dag.test()` runs its tasks in
this process, like `airflow dags test`.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import demo_db  # beside this file
from demo_home import (
    ROOT,
    TABLE,
    airflow_home,
    connection_env,
    environment,
    migrate_metadata_db,
    write_config,
    write_demo_files,
)

BATCHES = 4
COMPACTION_JOBS = ("convert_equality_deletes", "rewrite_position_deletes", "rewrite_data_files")


def load_dag(file_name: str, dag_id: str) -> Any:
    """A DAG of dags/, parsed as the DAG processor parses it."""
    from airflow.dag_processing.dagbag import DagBag  # noqa: PLC0415 (after the environment)

    # Deprecations inside Airflow's own dependencies (pathspec's pattern class in the DAG-folder
    # scan, Starlette's test client behind dag.test()'s in-process API): not ours to fix, and
    # they would only clutter the demo's output. Set after importing Airflow, which resets the
    # warning filters.
    for message in ("GitWildMatchPattern", "Using `httpx` with `starlette.testclient`"):
        warnings.filterwarnings("ignore", message=message)
    bag = DagBag(dag_folder=str(ROOT / "dags" / file_name))
    if bag.import_errors:
        raise SystemExit(f"demo: {file_name} does not load: {bag.import_errors}")
    return bag.get_dag(dag_id)


def health(table: str) -> dict[str, Any]:
    """Score, summary, due jobs and the points lost, as the Iceberg page and `icefloe health`
    decide them (the fleet's policy for the table)."""
    from icefloe_airflow.health_model import health_summary  # noqa: PLC0415
    from icefloe_airflow.hook import IcebergHook  # noqa: PLC0415
    from icefloe_airflow.table_health import check_table, table_policy_of  # noqa: PLC0415

    hook = IcebergHook()
    try:
        iceberg = hook.load_table(table)
        policy = table_policy_of(table, iceberg.metadata.properties)
        report, assessment = check_table(iceberg, table, hook.state_store(), policy, source="demo")
    finally:
        hook.close()
    return {"summary": health_summary(report), **assessment.to_dict()}


def print_health(title: str, state: dict[str, Any]) -> None:
    from icecore.jobs.grammar import describe_size  # noqa: PLC0415

    s = state["summary"]
    positions, equalities = s["position_delete_records"], s["equality_delete_records"]
    size = describe_size(s["data_bytes"])
    lines = [
        ("snapshots", s["snapshot_count"]),
        ("data files", f"{s['data_files']} ({size}, {s['data_records']} rows)"),
        ("small data files", s["small_files"]),
        ("position delete files", f"{s['position_delete_files']} ({positions} deleted rows)"),
        ("equality delete files", f"{s['equality_delete_files']} ({equalities} deleted keys)"),
        ("dangling delete files", s["dangling_delete_files"]),
        *[("due", f"{d['job']}: {d['reason']}") for d in state["due"]],
    ]
    if not state["due"]:
        lines.append(("due", "nothing"))
    lines.extend(("score", p["text"]) for p in state["penalties"])
    print(f"\n{title}: health score {state['score']}/100")
    for name, value in lines:
        print(f"  {name:23}{value}")


class TaskProgress:
    """Prints each task of a `dag.test()` run as it ends, and every `EVERY_S` seconds which
    one still runs (an Airflow listener, registered in this process, where dag.test() runs the
    tasks): a long run is never silent."""

    EVERY_S = 15.0

    def __init__(self) -> None:
        self.started = time.monotonic()
        self._said = self.started
        self._running: tuple[str, float] | None = None
        self._lock = threading.Lock()
        threading.Thread(target=self._heartbeat, daemon=True).start()

    def _heartbeat(self) -> None:
        while True:
            time.sleep(1.0)
            with self._lock:
                now = time.monotonic()
                if self._running is None or now - self._said < self.EVERY_S:
                    continue
                task_id, since = self._running
                self._said = now
            print(f"  {task_id:26} running  ({now - since:.0f}s)", flush=True)

    @staticmethod
    def _name(task_instance: Any) -> str:
        return str(task_instance.task_id).removeprefix("self_optimizing.")

    def on_task_instance_running(self, previous_state: Any, task_instance: Any) -> None:
        with self._lock:
            self._running = (self._name(task_instance), time.monotonic())
            self._said = time.monotonic()

    def _ended(self, task_instance: Any, state: str) -> None:
        task_id = self._name(task_instance)
        with self._lock:
            since = self._running[1] if self._running else self.started
            self._running = None
            self._said = time.monotonic()
        if not task_id.endswith("_due"):  # the gates: their job's line says it
            print(f"  {task_id:26} {state:8} ({time.monotonic() - since:.0f}s)", flush=True)

    def on_task_instance_success(self, previous_state: Any, task_instance: Any) -> None:
        self._ended(task_instance, "success")

    def on_task_instance_failed(
        self, previous_state: Any, task_instance: Any, error: Any = None
    ) -> None:
        self._ended(task_instance, "failed")


def listen_to_tasks() -> None:
    """Register a `TaskProgress` with the task SDK's listener manager (its hook methods marked
    as Airflow listener hooks), for every dag.test() run that follows."""
    from airflow.listeners import hookimpl  # noqa: PLC0415
    from airflow.sdk.listener import get_listener_manager  # noqa: PLC0415

    for name in ("on_task_instance_running", "on_task_instance_success", "on_task_instance_failed"):
        hookimpl(getattr(TaskProgress, name))
    progress = TaskProgress()
    get_listener_manager().add_listener(progress)


def run_dag(dag: Any, conf: dict[str, Any] | None = None) -> dict[str, str]:
    """Run `dag` with dag.test(), its tasks printed as they end; the task states in the DAG's
    order; exit if it failed."""
    run = dag.test(run_conf=conf)
    by_id = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    states = {t.task_id: by_id.get(t.task_id, "none") for t in dag.topological_sort()}
    if str(run.state) != "success":
        raise SystemExit(f"demo: {dag.dag_id} run {run.state}: {states}")
    return states


def prepare(warehouse: Path, database: demo_db.Server) -> dict[str, str]:
    """The demo's Airflow home and metadata database (on `database`); the environment its
    processes run in (set in this process too: Airflow reads its configuration once, at
    import)."""
    home = airflow_home(warehouse)
    write_config(warehouse, database_url=database.url)
    write_demo_files(warehouse)
    # The SQLite metadata database of a demo made before issue 35 (see demo_db.py's why).
    (home / "airflow.db").unlink(missing_ok=True)
    env = environment(warehouse)
    # Task logs go to the terminal in dag.test(); keep them to warnings and errors.
    env["AIRFLOW__LOGGING__LOGGING_LEVEL"] = "WARNING"
    print(
        f"airflow: metadata database (PostgreSQL on 127.0.0.1:{database.port}, its data in "
        f"{demo_db.data_dir(home)}) and connections",
        flush=True,
    )
    migrate_metadata_db(warehouse, env)
    env.update(connection_env(warehouse))
    os.environ.update(env)
    return env


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    warehouse = Path(args[0] if args else "warehouse").resolve()
    warehouse.mkdir(parents=True, exist_ok=True)
    home = airflow_home(warehouse)
    with demo_db.running(home, home / "logs" / "postgres.log") as database:
        prepare(warehouse, database)
        return demo(warehouse)


def demo(warehouse: Path) -> int:
    """Steps 1 to 4 (the module docstring), with the demo's Airflow prepared."""

    from demo_data import cdc_batches, live_rows  # noqa: PLC0415 (beside this file)

    from icecore.catalog import SqlCatalog  # noqa: PLC0415
    from icecore.errors import NoSuchTableError  # noqa: PLC0415

    catalog = SqlCatalog("default", warehouse=warehouse, create=True)
    with contextlib.suppress(NoSuchTableError):
        catalog.drop_table(TABLE, purge=True)
    sources = warehouse / "_demo_sources"
    sources.mkdir(exist_ok=True)
    paths, expected = cdc_batches(sources, BATCHES)

    ingest = load_dag("icefloe_jobs.py", "icefloe_ingest")
    listen_to_tasks()
    for i, path in enumerate(paths):
        print(f"ingest: CDC batch {i + 1}/{len(paths)} into {TABLE} (icefloe_ingest, spark-submit)")
        conf = {"table": TABLE, "source": str(path), "mode": "cdc", "key": "id"}
        if i == 0:
            conf.update(create=True, partition_by="day(ts)")
        run_dag(ingest, conf)
    if live_rows(catalog.load_table(TABLE)) != expected:
        raise SystemExit("demo: ingested rows differ from the CDC model; please report a bug")

    before = health(TABLE)
    print_health(f"{TABLE} before maintenance", before)

    from icefloe_airflow.self_optimizing import optimize_dag_id  # noqa: PLC0415

    dag_id = optimize_dag_id(TABLE)
    print(f"\nself-optimizing: {dag_id} (only the due jobs run, one spark-submit each)")
    states = run_dag(load_dag("icefloe_self_optimizing.py", dag_id))
    skipped = [t.removeprefix("self_optimizing.") for t, s in states.items() if s == "skipped"]
    if skipped:
        print(f"  not due, skipped: {', '.join(skipped)}")

    after = health(TABLE)
    print_health(f"{TABLE} after maintenance", after)
    rows_ok = live_rows(catalog.load_table(TABLE)) == expected
    still_due = [d["job"] for d in after["due"] if d["job"] in COMPACTION_JOBS]
    verdict = "identical to" if rows_ok else "DIFFERENT from"
    print(f"\nrows: {len(expected)} live rows, {verdict} the CDC model")
    print(
        json.dumps(
            {
                "table": TABLE,
                "score_before": before["score"],
                "score_after": after["score"],
                "rows": len(expected),
                "rows_match": rows_ok,
                "still_due": still_due,
            }
        )
    )
    catalog.close()
    if not rows_ok:
        print("demo: maintenance changed the table's rows; please report a bug", file=sys.stderr)
        return 1
    if still_due:
        print(f"demo: still due after maintenance: {still_due}", file=sys.stderr)
        return 1
    print("\nnext: make ui   (the Airflow UI and the Iceberg page of this demo)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
