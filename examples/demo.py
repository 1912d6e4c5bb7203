"""`make demo`: the platform end to end on the embedded default, through Airflow.

    python examples/demo.py [warehouse]        # default ./warehouse

Everything is local and real: an Airflow home under `<warehouse>/.airflow` (its
`airflow.cfg` points at this checkout's dags/ and plugins/, its SQLite metadata database holds
the demo's runs and connections), a SQLite Iceberg catalog in the warehouse
(`<warehouse>/catalog.db`), Spark in local mode through spark-submit. Afterwards
`AIRFLOW_HOME=<warehouse>/.airflow airflow api-server` serves the same Airflow, with the
Iceberg page at /icefloe/ (README: "Open the demo in the Airflow UI"). Steps:

1. the ingest DAG (`icefloe_ingest`) commits CDC batches (inserts, updates, deletes; keys
   repeated within and across batches) into `demo.events`, partitioned by day: small files,
   equality deletes and position deletes pile up, as they do under streaming ingestion;
2. the table's health is printed, with the jobs the policy says are due;
3. the table's self-optimizing DAG (`icefloe_optimize__demo__events`, from
   dags/icefloe_self_optimizing.py with a tables.yaml that lists the table) runs: only the due
   jobs, in order;
4. the health is printed again, and the table's rows are checked against a plain Python
   model of the CDC batches.

Exit status 1 when a DAG run fails, the rows differ from the model or compaction is still due.
Each `dag.test()` runs its tasks in this process, like `airflow dags test`.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TABLE = "demo.events"
BATCHES = 4
COMPACTION_JOBS = ("convert_equality_deletes", "rewrite_position_deletes", "rewrite_data_files")

_TABLES_YAML = f"""\
# Written by `make demo`; dags/tables.yaml documents the format.
tables:
  - table: {TABLE}
    schedule: asset
"""
_SPARK_DEFAULTS = """\
spark.ui.enabled false
spark.ui.showConsoleProgress false
spark.sql.shuffle.partitions 4
"""


_AIRFLOW_CFG = """\
# Written by `make demo`: the demo's Airflow, also for `airflow api-server` afterwards.
[core]
dags_folder = {dags}
plugins_folder = {plugins}
load_examples = False
simple_auth_manager_all_admins = True

[database]
sql_alchemy_conn = sqlite:///{home}/airflow.db
"""


def configure_environment(warehouse: Path) -> Path:
    """Airflow and Spark settings for a demo under `warehouse`, set before Airflow is imported
    (Airflow reads its configuration once, at import), and written to the demo's
    `airflow.cfg` so that an api-server started on the same home sees the same Airflow.
    Returns AIRFLOW_HOME."""
    home = warehouse / ".airflow"
    spark_conf = home / "spark-conf"
    spark_conf.mkdir(parents=True, exist_ok=True)
    (spark_conf / "spark-defaults.conf").write_text(_SPARK_DEFAULTS)
    (home / "airflow.cfg").write_text(
        _AIRFLOW_CFG.format(dags=ROOT / "dags", plugins=ROOT / "plugins", home=home)
    )
    tables = home / "tables.yaml"
    tables.write_text(_TABLES_YAML)
    iceberg = {"conn_type": "icefloe", "extra": {"warehouse": str(warehouse)}}
    os.environ.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
            # Task logs go to the terminal in dag.test(); keep them to warnings and errors.
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
            "AIRFLOW_CONN_ICEBERG_DEFAULT": json.dumps(iceberg),
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
            "ICEFLOE_TABLES_CONFIG": str(tables),
            "SPARK_CONF_DIR": str(spark_conf),
            # spark-submit from this virtualenv; its Python workers run this interpreter.
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
    )
    return home


def migrate_metadata_db() -> None:
    """`airflow db migrate` (idempotent: a second demo run reuses the database), and the
    demo's connections stored in it, for an api-server started later without this
    environment."""
    airflow = Path(sys.executable).parent / "airflow"
    commands = [["db", "migrate"]]
    for conn_id in ("iceberg_default", "spark_default"):
        variable = f"AIRFLOW_CONN_{conn_id.upper()}"
        commands.append(["connections", "delete", conn_id])
        commands.append(["connections", "add", conn_id, "--conn-json", os.environ[variable]])
    for command in commands:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_CONN_")}
        done = subprocess.run(
            [str(airflow), *command], capture_output=True, text=True, check=False, env=env
        )
        if done.returncode != 0 and command[1] != "delete":
            raise SystemExit(
                f"demo: airflow {' '.join(command[:2])} failed:\n{done.stdout}\n{done.stderr}"
            )


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
    """Score, summary and due jobs, decided as the DAG's health task decides them."""
    from icefloe_airflow.hook import IcebergHook  # noqa: PLC0415
    from icefloe_airflow.policy import (  # noqa: PLC0415
        MaintenancePolicy,
        due_jobs,
        health_score,
        health_summary,
        measure_health,
    )
    from icefloe_airflow.tables_config import load_tables_config  # noqa: PLC0415

    policy = next(c.policy for c in load_tables_config() if c.table == table)
    hook = IcebergHook()
    try:
        report = measure_health(hook.load_table(table), policy or MaintenancePolicy())
        runs = hook.state_store().last_runs(table, state="success")
    finally:
        hook.close()
    last = {job: run.finished_at for job, run in runs.items()}
    return {
        "score": health_score(report, policy),
        "summary": health_summary(report),
        "due": [d.to_dict() for d in due_jobs(report, policy, last, datetime.now(UTC))],
    }


def print_health(title: str, state: dict[str, Any]) -> None:
    s = state["summary"]
    positions, equalities = s["position_delete_records"], s["equality_delete_records"]
    lines = [
        ("snapshots", s["snapshot_count"]),
        ("data files", f"{s['data_files']} ({s['data_bytes']} bytes, {s['data_records']} rows)"),
        ("small data files", s["small_files"]),
        ("position delete files", f"{s['position_delete_files']} ({positions} deleted rows)"),
        ("equality delete files", f"{s['equality_delete_files']} ({equalities} deleted keys)"),
        ("dangling delete files", s["dangling_delete_files"]),
        *[("due", f"{d['job']}: {d['reason']}") for d in state["due"]],
    ]
    if not state["due"]:
        lines.append(("due", "nothing"))
    print(f"\n{title}: health score {state['score']}/100")
    for name, value in lines:
        print(f"  {name:23}{value}")


def run_dag(dag: Any, conf: dict[str, Any] | None = None) -> dict[str, str]:
    """Run `dag` with dag.test(); its task states in the DAG's order; exit if it failed."""
    run = dag.test(run_conf=conf)
    by_id = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    states = {t.task_id: by_id.get(t.task_id, "none") for t in dag.topological_sort()}
    if str(run.state) != "success":
        raise SystemExit(f"demo: {dag.dag_id} run {run.state}: {states}")
    return states


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    warehouse = Path(args[0] if args else "warehouse").resolve()
    warehouse.mkdir(parents=True, exist_ok=True)
    configure_environment(warehouse)
    migrate_metadata_db()

    from demo_data import cdc_batches, live_rows  # noqa: PLC0415 (beside this file)

    from icecore.catalog import catalog_from_settings  # noqa: PLC0415
    from icecore.errors import NoSuchTableError  # noqa: PLC0415

    catalog = catalog_from_settings(warehouse=str(warehouse))
    with contextlib.suppress(NoSuchTableError):
        catalog.drop_table(TABLE, purge=True)
    sources = warehouse / "_demo_sources"
    sources.mkdir(exist_ok=True)
    paths, expected = cdc_batches(sources, BATCHES)

    ingest = load_dag("icefloe_jobs.py", "icefloe_ingest")
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
    for task_id, state in states.items():
        if not task_id.endswith("_due"):
            print(f"  {task_id.removeprefix('self_optimizing.'):26} {state}")

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
    return 0


if __name__ == "__main__":
    sys.exit(main())
