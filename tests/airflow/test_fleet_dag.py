"""The fleet DAG, run by Airflow (`dag.test()`) on a generated catalog of 100 tables: it maps
exactly the due tables, in benefit order, within the budget; a table created between two
runs is picked up; a disabled table never runs; the checks land in the health history; the
metrics reach a StatsD listener on loopback; the DAG file parses fast, with no catalog call."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from icefloe_airflow.policy import JOB_ORDER
from sqlalchemy import create_engine, func, select

from icecore.catalog import catalog_from_settings
from tests.airflow.conftest import airflow_env, state_store_uri
from tests.support.fleet_catalog import FleetTruth, make_fleet_catalog, write_table

DAGS = Path(__file__).resolve().parents[2] / "dags"
DAG_ID = "icefloe_fleet__iceberg_default"
MAX_TABLES = 6


@pytest.fixture
def fleet(iceberg_connection: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FleetTruth:
    """100 tables (10 due) behind `iceberg_default`, a fleet of at most 6 tables per run."""
    truth = make_fleet_catalog(
        iceberg_connection, 100, state_uri=state_store_uri(iceberg_connection.parent)
    )
    config = tmp_path / "tables.yaml"
    config.write_text(
        f"fleets:\n  - iceberg_conn_id: iceberg_default\n    max_tables: {MAX_TABLES}\n"
    )
    monkeypatch.setenv("ICEFLOE_TABLES_CONFIG", str(config))
    monkeypatch.setenv("ICEFLOE_CACHE_DIR", str(tmp_path / "cache"))
    return truth


def _fleet_dag() -> Any:
    from icefloe_airflow.fleet.config import load_fleet_settings  # noqa: PLC0415
    from icefloe_airflow.fleet_dag.dag import fleet_dag  # noqa: PLC0415

    (config,) = load_fleet_settings().fleets
    return fleet_dag(config)


def _states(run: Any) -> dict[tuple[str, int], str]:
    return {(ti.task_id, ti.map_index): str(ti.state) for ti in run.get_task_instances()}


def _planned(run: Any) -> list[dict[str, Any]]:
    ti = next(ti for ti in run.get_task_instances() if ti.task_id == "plan")
    return ti.xcom_pull(task_ids="plan")


def expected_order(truth: FleetTruth, *extra: str) -> list[str]:
    """The due tables by benefit (the numbers the generator wrote), highest first."""
    due = [*truth.due, *extra]
    return sorted(due, key=lambda t: (-truth.benefit[t], t))


def test_a_new_table_is_picked_and_a_disabled_one_never_runs(
    fleet: FleetTruth, run_dag: Callable[..., Any], iceberg_connection: Path
) -> None:
    everything = {"dry_run": True, "max_tables": 100}
    first = [p["table"] for p in _planned(run_dag(_fleet_dag(), run_conf=everything))]
    assert first == expected_order(fleet)

    # Created between two runs, with no config change: 60 small files, the worst table.
    catalog = catalog_from_settings(warehouse=iceberg_connection)
    location, _, (_due, benefit, _bytes) = write_table(
        f"{iceberg_connection}/ns03/fresh", "small", 48, int(time.time() * 1000)
    )
    catalog.register_table("ns03.fresh", location)
    catalog.close()
    fleet.benefit["ns03.fresh"] = benefit

    second = [p["table"] for p in _planned(run_dag(_fleet_dag(), run_conf=everything))]
    assert second == expected_order(fleet, "ns03.fresh")
    assert second[0] == "ns03.fresh"
    disabled = fleet.tables_of("disabled")
    assert disabled and not set(disabled) & {*first, *second}

    # Every check of both runs is in the health history, the disabled tables' too.
    engine = create_engine(state_store_uri(iceberg_connection.parent))
    from icefloe_airflow.health_history import HEALTH_CHECKS  # noqa: PLC0415

    with engine.connect() as conn:
        rows = conn.execute(
            select(HEALTH_CHECKS.c.table_name, func.count()).group_by(HEALTH_CHECKS.c.table_name)
        ).all()
        disabled_row = conn.execute(
            select(HEALTH_CHECKS.c.due_json, HEALTH_CHECKS.c.inputs_json).where(
                HEALTH_CHECKS.c.table_name == disabled[0]
            )
        ).first()
        fresh = conn.execute(
            select(HEALTH_CHECKS.c.inputs_json).where(HEALTH_CHECKS.c.table_name == "ns03.fresh")
        ).scalar_one()
    engine.dispose()
    # What the UI's sorts and charts read: the histogram covers every data file.
    assert fresh["data_files"] == fresh["small_files"] == 12 + 48  # of 1 MiB each
    assert fresh["total_bytes"] == 60 * 1024 * 1024
    assert fresh["size_histogram"][0] == [1024 * 1024, 60]
    assert sum(n for _, n in fresh["size_histogram"]) == 60
    counts = dict(rows)
    assert len(counts) == 101 and counts["ns03.fresh"] == 1
    assert {n for t, n in counts.items() if t != "ns03.fresh"} == {2}
    assert disabled_row is not None and disabled_row.due_json == []
    assert disabled_row.inputs_json["enabled"] is False


class StatsdListener:
    """A StatsD server on loopback: a thread reads every datagram as it comes (a kernel
    buffer alone would drop some of the hundreds a fleet run sends at once)."""

    def __init__(self) -> None:
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind(("127.0.0.1", 0))
        self.socket.settimeout(0.1)
        self.lines: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return self.socket.getsockname()[1]

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                self.lines.extend(self.socket.recv(65536).decode().splitlines())
            except TimeoutError:
                continue

    def received(self) -> set[str]:
        time.sleep(0.3)  # what is in flight on loopback
        return set(self.lines)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.socket.close()


@pytest.fixture
def statsd(monkeypatch: pytest.MonkeyPatch) -> Iterator[StatsdListener]:
    """A StatsD listener on loopback, and Airflow's `[metrics]` pointed at it."""
    listener = StatsdListener()
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_ON", "True")
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_HOST", "127.0.0.1")
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_PORT", str(listener.port))
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_PREFIX", "airflow")
    yield listener
    listener.close()


def test_dry_run_maps_the_due_tables_in_benefit_order_and_its_metrics_reach_statsd(
    fleet: FleetTruth, run_dag: Callable[..., Any], statsd: StatsdListener
) -> None:
    run = run_dag(_fleet_dag(), run_conf={"dry_run": True})

    planned = _planned(run)
    assert [p["table"] for p in planned] == expected_order(fleet)[:MAX_TABLES]
    for p in planned:
        assert p["health"]["due"] == []  # a dry run: every gate says no ...
        reasons = [s["reason"] for s in p["health"]["skipped"]]
        due = [s["job"] for s in p["health"]["skipped"] if s["reason"].startswith("dry run")]
        assert due == fleet.due[p["table"]], reasons  # ... and says what it would run
    states = _states(run)
    assert states.pop(("plan", -1)) == "success"
    assert {task for task, _ in states} == {f"table.{job}" for job in JOB_ORDER}
    assert {index for _, index in states} == set(range(MAX_TABLES))
    assert set(states.values()) == {"skipped"}

    # The run's metrics, and what a job task reports on success (its result) and on failure.
    from icefloe_airflow.fleet_dag import metrics  # noqa: PLC0415

    result = {"rewritten_bytes": 12_582_912, "rewritten_data_files": 12, "added_data_files": 1}
    metrics.job_counters("default", "ns00.t0000", "rewrite_data_files", result)
    metrics.job_failed("default", "ns00.t0000", "rewrite_data_files")

    lines = statsd.received()
    prefix = "airflow.icefloe.fleet.default"
    small = fleet.tables_of("small")[0]
    disabled = fleet.tables_of("disabled")[0]
    assert f"{prefix}.{small}.small_files:{12 + int(small[-3:]) // 10}|g" in lines
    assert f"{prefix}.{small}.score:75|g" in lines  # 12 small files: due, all 25 points
    deletes = fleet.tables_of("deletes")[0]
    assert f"{prefix}.{deletes}.delete_files:{12 + int(deletes[-3:]) // 10}|g" in lines
    assert f"{prefix}.{disabled}.small_files:40|g" in lines
    assert f"{prefix}.bytes_rewritten:12582912|c" in lines
    assert f"{prefix}.files_removed:12|c" in lines
    assert f"{prefix}.failures:1|c" in lines


def test_the_fleet_dag_file_parses_fast_without_calling_a_catalog(tmp_path: Path) -> None:
    """A fleet on a REST catalog that never answers (it takes connections and stays silent):
    parsing must neither call nor wait for it. A call would wait for the REST client's
    request timeout (120 s); parsing takes a second or two, more on a busy machine."""
    config = tmp_path / "tables.yaml"
    config.write_text("fleets:\n  - iceberg_conn_id: nowhere\n    max_tables: 10\n")
    code = (
        "import time; t = time.perf_counter()\n"
        "from airflow.dag_processing.dagbag import DagBag\n"
        "t = time.perf_counter()\n"
        f"bag = DagBag(dag_folder={str(DAGS / 'icefloe_fleet.py')!r})\n"
        "print(time.perf_counter() - t, sorted(bag.dag_ids), bag.import_errors)\n"
    )
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        uri = f"http://127.0.0.1:{silent.getsockname()[1]}"
        env = airflow_env(
            ICEFLOE_TABLES_CONFIG=str(config),
            AIRFLOW_CONN_NOWHERE=f'{{"conn_type": "icefloe", "extra": {{"uri": "{uri}"}}}}',
        )
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        ).stdout.split("\n")[-2]
    seconds, rest = out.split(" ", 1)
    assert "icefloe_fleet__nowhere" in rest and rest.endswith("{}"), out
    assert float(seconds) < 10.0
