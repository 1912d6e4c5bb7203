"""Airflow runs the jobs on a Spark Connect server (issue 26): a job operator given a
`spark_connect` connection (the Spark provider's type) runs its job as the server's client in
a process of the worker, with no spark-submit, inside `dag.test()`; the fleet DAG with the
connection in its config; and `icefloe run --remote`. Each is checked on a real table: the
rows every reader sees, the result in XCom, the run record and lease, the task log's lines,
and the connection's token only in the job's environment, never on its command line.

The server is the `spark_connect` fixture's stock one; the connection names it `localhost`,
where PySpark sends a token without TLS (its local channel credentials).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from icefloe_airflow.hook import IcebergHook
from icefloe_airflow.state import MaintenanceRun, MaintenanceStore

from icecore.catalog import Catalog, SqlCatalog
from icecore.jobs.argv import REMOTE_ENV
from icecore.spec.schema import Schema
from icecore.spec.types import LongType, NestedField, StringType, TimestampType
from tests.airflow.conftest import SPARK_CONNECT_CONN_ID as CONN_ID
from tests.airflow.conftest import SPARK_CONNECT_TOKEN as TOKEN
from tests.airflow.conftest import state_store_uri
from tests.airflow.tables import load_dag, table_rows
from tests.airflow.test_operators import xcom
from tests.support.batches import pyiceberg_rows
from tests.support.duckdb import connect as duckdb_connect
from tests.support.fleet_catalog import record_orphan_runs
from tests.support.spark_connect import SparkConnectServer
from tests.support.tables import LocalTable

pytestmark = pytest.mark.usefixtures("airflow_db")

START = datetime(2024, 1, 1, tzinfo=UTC)
SCHEMA = Schema(
    (
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "v", StringType()),
        NestedField(3, "ts", TimestampType()),
    )
)
TS0 = 1_700_000_000_000_000
Rows = Counter[tuple[Any, ...]]


def small_files_table(warehouse: Path, table: str, files: int, first: int = 0) -> Rows:
    """`table`: `files` one-row Parquet files in one snapshot, registered in the warehouse's
    SQLite catalog; returns its rows (id, v, ts micros)."""
    namespace, name = table.split(".")
    local = LocalTable.create(warehouse / namespace / name, SCHEMA)
    ids = range(first, first + files)
    local.commit(add=[local.write_data([{"id": i, "v": f"v{i}", "ts": TS0 + i}]) for i in ids])
    catalog = SqlCatalog("default", warehouse=warehouse)
    if not catalog.namespace_exists(namespace):
        catalog.create_namespace(namespace)
    catalog.register_table(table, local.metadata_location)
    catalog.close()
    return Counter((i, f"v{i}", TS0 + i) for i in ids)


def readers_rows(catalog: Catalog, table: str) -> list[Rows]:
    """The table's rows as three readers see them: icecore's spec reader, PyIceberg, DuckDB."""
    loaded = catalog.load_table(table)
    duck = duckdb_connect()
    try:
        sql = f"SELECT id, v, epoch_us(ts) FROM iceberg_scan('{loaded.metadata_location}')"
        duck_rows = Counter(duck.execute(sql).fetchall())
    finally:
        duck.close()
    return [table_rows(loaded), pyiceberg_rows(loaded, {}), duck_rows]


def recorded(table: str) -> tuple[list[MaintenanceRun], Any]:
    """The table's runs in the state store (newest first) and its lock's holder."""
    hook = IcebergHook()
    try:
        store = hook.state_store()
        return store.recent_runs(table), store.lock_holder(table)
    finally:
        hook.close()


def _descends_from(pid: int, ancestor: int) -> bool:
    """Whether process `pid` is `ancestor`'s child, grandchild, ... (other test sessions on
    the machine run jobs too)."""
    while pid > 1:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rpartition(")")[2].split()[1])  # the field after the state: ppid
        if pid == ancestor:
            return True
    return False


class JobProcesses:
    """Every `python -m spark_jobs` process this test starts, seen while it runs: its command
    line and its `SPARK_REMOTE` (read from /proc, as anyone on the machine could)."""

    def __init__(self) -> None:
        self.seen: dict[int, tuple[list[str], str | None]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> JobProcesses:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._stop.is_set():
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit() or int(entry.name) in self.seen:
                    continue
                try:
                    argv = (entry / "cmdline").read_bytes().split(b"\0")
                    if b"spark_jobs" not in argv or b"-m" not in argv:
                        continue
                    if not _descends_from(int(entry.name), os.getpid()):
                        continue
                    environ = (entry / "environ").read_bytes().split(b"\0")
                except OSError:
                    continue
                variables = dict(e.decode().split("=", 1) for e in environ if b"=" in e)
                remote = variables.get(REMOTE_ENV)
                self.seen[int(entry.name)] = ([a.decode() for a in argv if a], remote)
            time.sleep(0.02)


def test_a_job_runs_as_a_client_of_the_connect_server(
    run_dag: Callable[..., Any],
    iceberg_connection: Path,
    spark_connect_conn: str,
    capfd: pytest.CaptureFixture[str],
) -> None:
    from airflow.sdk import DAG  # noqa: PLC0415
    from icefloe_airflow.operators import RewriteDataFilesOperator  # noqa: PLC0415

    rows = small_files_table(iceberg_connection, "db.events", files=5)
    with DAG("icefloe_test_connect_job", schedule=None, start_date=START) as dag:
        RewriteDataFilesOperator(
            task_id="compact",
            table="db.events",
            options={"min-input-files": 2},
            spark_connect_conn_id="{{ 'spark_connect_' ~ 'tests' }}",  # templated
            conn_id="no_such_spark_connection",  # spark-submit's: unused over Connect
        )
    with JobProcesses() as processes:
        run = run_dag(dag)
    task_log = capfd.readouterr().out  # dag.test() prints the task's log lines
    assert run.state == "success", [(ti.task_id, ti.state) for ti in run.get_task_instances()]

    result = xcom(dag.dag_id, run.run_id, "compact")
    assert (result["rewritten_data_files"], result["added_data_files"]) == (5, 1)
    catalog = SqlCatalog("default", warehouse=iceberg_connection)
    table = catalog.load_table("db.events")
    assert [f.file.record_count for f in table.scan().plan_files()] == [5]
    assert readers_rows(catalog, "db.events") == [rows] * 3
    catalog.close()

    [compaction], holder = recorded("db.events")
    assert (compaction.job, compaction.state, compaction.result) == (
        "rewrite_data_files",
        "success",
        result,
    )
    assert (compaction.dag_id, compaction.run_id) == (dag.dag_id, run.run_id)
    assert holder is None  # the lease released

    # One job process, a Connect client: the server's URL with the token in its environment
    # only; no spark-submit.
    [(argv, remote)] = processes.seen.values()
    assert argv[:4] == [sys.executable, "-m", "spark_jobs", "rewrite_data_files"]
    assert not any(TOKEN in a for a in argv)
    assert remote is not None and f"token={TOKEN}" in remote and "localhost" in remote

    lines = [line for line in task_log.splitlines() if "RewriteDataFilesOperator" in line]
    said = "\n".join(lines)
    assert "as a client of the Spark Connect server sc://localhost:" in said
    # The job's own lines, streamed as they came: its plan, its progress, its commit.
    assert "icefloe.rewrite_data_files: plan: 5 data files" in said
    assert "icefloe.rewrite_data_files: 1 of 1 groups written" in said
    assert "icefloe.rewrite_data_files: committed" in said
    assert "rewrite_data_files on db.events: rewrote 5 data files" in said  # the summary
    assert f"result: {json.dumps(result, sort_keys=True)}" in said
    assert TOKEN not in task_log


def test_a_wrong_connection_is_refused_before_anything_runs(
    run_dag: Callable[..., Any],
    iceberg_connection: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    from airflow.sdk import DAG  # noqa: PLC0415
    from icefloe_airflow.operators import ExpireSnapshotsOperator  # noqa: PLC0415

    small_files_table(iceberg_connection, "db.events", files=1)
    with DAG("icefloe_test_connect_refused", schedule=None, start_date=START) as dag:
        ExpireSnapshotsOperator(
            task_id="expire",
            table="db.events",
            spark_connect_conn_id="spark_default",  # a `spark` connection, not a Connect one
            retries=0,
        )
    with JobProcesses() as processes:
        run = run_dag(dag)
    assert run.state == "failed"
    refusal = "refused: connection 'spark_default' is of type 'spark', not a Spark Connect"
    assert refusal in capfd.readouterr().out
    assert processes.seen == {}  # no job started
    assert recorded("db.events") == ([], None)  # refused before it was recorded


def test_tables_yaml_sends_a_tables_jobs_to_the_connect_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table's `spark_connect_conn_id` in tables.yaml reaches every job of its
    self-optimizing DAG; the other table's jobs keep spark-submit."""
    from icefloe_airflow.policy import JOB_ORDER  # noqa: PLC0415
    from icefloe_airflow.tables_config import TablesConfigError, parse_tables_config  # noqa: PLC0415

    config = tmp_path / "tables.yaml"
    config.write_text(
        "tables:\n  - table: db.events\n    spark_connect_conn_id: spark_connect_default\n"
        "  - table: db.users\n"
    )
    monkeypatch.setenv("ICEFLOE_TABLES_CONFIG", str(config))
    dags = Path(__file__).resolve().parents[2] / "dags" / "icefloe_self_optimizing.py"
    for table, expected in (("events", "spark_connect_default"), ("users", None)):
        dag = load_dag(dags, f"icefloe_optimize__db__{table}")
        jobs = [dag.get_task(f"self_optimizing.{job}") for job in JOB_ORDER]
        assert {job.spark_connect_conn_id for job in jobs} == {expected}
    with pytest.raises(TablesConfigError, match=r"tables\[0\].spark_connect_conn_id: expected"):
        parse_tables_config({"tables": [{"table": "db.t", "spark_connect_conn_id": 7}]})


@pytest.mark.usefixtures("spark_connect_conn")
def test_the_fleet_runs_its_jobs_on_the_connect_server(
    run_dag: Callable[..., Any],
    iceberg_connection: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tables = ("db.alpha", "db.beta")
    rows = {t: small_files_table(iceberg_connection, t, files=6, first=100 * n)
            for n, t in enumerate(tables)}  # fmt: skip
    hour_ago = int(time.time() * 1000) - 3_600_000  # orphans removed an hour ago: compaction
    record_orphan_runs(state_store_uri(iceberg_connection.parent), list(tables), hour_ago)
    config = tmp_path / "tables.yaml"
    config.write_text(
        "defaults: {thresholds: {minor_file_count: 2}}\n"
        "fleets:\n  - iceberg_conn_id: iceberg_default\n    max_tables: 5\n"
        f"    spark_apps: 2\n    spark_connect_conn_id: {CONN_ID}\n"
    )
    monkeypatch.setenv("ICEFLOE_TABLES_CONFIG", str(config))
    monkeypatch.setenv("ICEFLOE_CACHE_DIR", str(tmp_path / "cache"))
    from icefloe_airflow.fleet.config import load_fleet_settings  # noqa: PLC0415
    from icefloe_airflow.fleet_dag.dag import fleet_dag  # noqa: PLC0415

    (fleet,) = load_fleet_settings().fleets
    assert fleet.spark_connect_conn_id == CONN_ID
    dag = fleet_dag(fleet)
    jobs = [t for t in dag.tasks if t.task_id.startswith("table.")]
    assert {t.spark_connect_conn_id for t in jobs} == {CONN_ID}
    assert dag.max_active_tasks == 2  # spark_apps on the server, per run

    with JobProcesses() as processes:
        run = run_dag(dag)

    states = {(ti.task_id, ti.map_index): str(ti.state) for ti in run.get_task_instances()}
    assert "failed" not in states.values(), states
    assert states[("table.rewrite_data_files", 0)] == "success"
    assert states[("table.rewrite_data_files", 1)] == "success"
    launched = [argv for argv, remote in processes.seen.values()]
    assert launched and all(a[1:3] == ["-m", "spark_jobs"] for a in launched)
    assert all(f"token={TOKEN}" in (remote or "") for _, remote in processes.seen.values())
    results = [
        ti.xcom_pull(task_ids=ti.task_id, map_indexes=ti.map_index)
        for ti in run.get_task_instances()
        if ti.task_id == "table.rewrite_data_files"
    ]
    catalog = SqlCatalog("default", warehouse=iceberg_connection)
    for table in tables:
        runs, holder = recorded(table)
        [compaction] = [r for r in runs if r.job == "rewrite_data_files"]
        assert holder is None
        assert compaction.state == "success" and compaction.result in results
        assert compaction.result is not None and compaction.result["rewritten_data_files"] == 6
        assert [f.file.record_count for f in catalog.load_table(table).scan().plan_files()] == [6]
        assert readers_rows(catalog, table) == [rows[table]] * 3
    catalog.close()


def test_icefloe_run_remote(
    spark_connect: SparkConnectServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`icefloe run --remote`, and `$SPARK_REMOTE` without it: the job as the server's
    client, under the lease and recorded; a token on `--remote` is refused before anything
    runs."""
    icefloe = Path(sys.executable).parent / "icefloe"
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    rows = small_files_table(warehouse, "db.events", files=3)
    state = f"sqlite:///{tmp_path / 'state.db'}"
    base = [str(icefloe), "run", "rewrite_data_files", "db.events", "--warehouse", str(warehouse)]
    base += ["--state-uri", state]
    env = {k: v for k, v in os.environ.items() if k != REMOTE_ENV}

    refused = subprocess.run(
        [*base, "--remote", f"sc://localhost:1/;token={TOKEN}"],
        env=env, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert refused.returncode == 2
    assert refused.stderr.strip().endswith(f"set ${REMOTE_ENV} instead"), refused.stderr

    with JobProcesses() as flag_run:
        done = subprocess.run(
            [*base, "--remote", spark_connect.url, "--min-input-files", "2"],
            env=env, capture_output=True, text=True, check=False, timeout=600,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["rewritten_data_files"] == 3
    [(argv, remote)] = flag_run.seen.values()  # a Connect client, the URL in its environment
    assert argv[1:4] == ["-m", "spark_jobs", "rewrite_data_files"] and remote == spark_connect.url
    assert spark_connect.url not in argv
    catalog = SqlCatalog("default", warehouse=warehouse)
    assert readers_rows(catalog, "db.events") == [rows] * 3

    # $SPARK_REMOTE, no flag: on the server too (the one file rewritten again).
    with JobProcesses() as variable_run:
        again = subprocess.run(
            [*base, "--min-input-files", "1", "--rewrite-all"],
            env={**env, REMOTE_ENV: spark_connect.url},
            capture_output=True, text=True, check=False, timeout=600,
        )  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    [(argv, remote)] = variable_run.seen.values()
    assert argv[1:3] == ["-m", "spark_jobs"] and remote == spark_connect.url
    store = MaintenanceStore.open(state)
    try:
        runs = store.recent_runs("db.events")
        assert [(r.job, r.state) for r in runs] == [("rewrite_data_files", "success")] * 2
        assert result in [r.result for r in runs]
        assert store.lock_holder("db.events") is None
    finally:
        store.close()
    assert readers_rows(catalog, "db.events") == [rows] * 3
    catalog.close()
