"""`schedule: asset` on the session's deployment with the real triggerer: another engine
(PyIceberg) makes 15 one-row appends to one partition, and with no schedule tick the table's
maintenance starts within seconds, compacts the partition (every row there once), and
icefloe's own commits set nothing off afterwards; once for a table's DAG and once for a fleet
(`icefloe_airflow.catalog_watch`). The triggerer polls each catalog every 2 s here
(`[icefloe] watch_poll_interval`), `min_interval` is 5 s, and the jobs run on the session's
warm Spark Connect server.

The triggerer is stopped after the table's commits set off its run, and the fleet's table
gets its commits while none runs: the cursor kept in the state store makes the restarted
triggerer find those, and fire none of the table's again; the fleet's run maps only the
table that changed, not another of the fleet's, due too but unchanged.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from icefloe_airflow.catalog_watch.state import WatchStore
from icefloe_airflow.catalog_watch.trigger import stream_name

from icecore.catalog import SqlCatalog
from tests.airflow.deployment import (
    FLEET_SPARK_CONNECT_CONN_ID,
    FLEETS,
    WATCH_POLL,
    Deployment,
    icefloe_connection,
    state_store_uri,
)
from tests.airflow.server import AirflowServer
from tests.airflow.test_fleet_deferral import fleet_jobs_on
from tests.support.pyiceberg_appends import create_partitioned, one_row_appends
from tests.support.reader import scan_rows
from tests.support.spark_connect import SparkConnectServer

pytestmark = pytest.mark.servers
TABLE = "db.events"
TABLE_DAG = "icefloe_optimize__db__events"
# Watched too, in the same catalog (one poll loop for both), and never changed.
QUIET_TABLE = "db.quiet"
QUIET_DAG = "icefloe_optimize__db__quiet"
FLEET_CONN = "iceberg_watched"
FLEET_TABLE = "fleet.events"
IDLE_TABLE = "fleet.idle"
FLEET_DAG = f"icefloe_fleet__{FLEET_CONN}"
MIN_INTERVAL = 5.0
POLL = float(WATCH_POLL.removesuffix("s"))
APPENDS = 15
# After the last run: a poll, `min_interval`, and slack for the scheduler to make a run.
QUIET = POLL + MIN_INTERVAL + 8.0
DAG_FILES = ("icefloe_self_optimizing.py", "icefloe_fleet.py")


@dataclass
class Watched:
    server: AirflowServer
    deployment: Deployment
    warehouses: dict[str, Path]  # by connection id
    state_uris: dict[str, str]


def cursor_of(state_uri: str, conn_id: str) -> dict[str, str] | None:
    store = WatchStore.open(state_uri, "default")
    try:
        return store.cursor(stream_name(conn_id, POLL))
    finally:
        store.close()


def wait_for(what: str, check: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not after {timeout:.0f}s")
        time.sleep(0.5)


def dag_runs(server: AirflowServer, dag_id: str) -> list[dict[str, Any]]:
    response = server.get(f"/api/v2/dags/{dag_id}/dagRuns", params={"order_by": "run_after"})
    assert response.status_code == 200, response.text
    return list(response.json()["dag_runs"])


def set_off_by(server: AirflowServer, dag_id: str, run_id: str) -> list[dict[str, Any]]:
    """The asset events a run consumed: their extras."""
    response = server.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/upstreamAssetEvents")
    assert response.status_code == 200, response.text
    return [event["extra"] for event in response.json()["asset_events"]]


def named(server: AirflowServer, dag_id: str, runs: list[dict[str, Any]]) -> list[int]:
    """The snapshots named by the asset events the runs consumed, each time it was."""
    return [
        snapshot["snapshot_id"]
        for run in runs
        for extra in set_off_by(server, dag_id, run["dag_run_id"])
        for snapshot in (extra.get("payload") or {}).get("snapshots", [])
    ]


def settle(
    server: AirflowServer, snapshots: dict[str, list[int]], timeout: float
) -> dict[str, list[dict[str, Any]]]:
    """Wait until the runs of each DAG in `snapshots` have consumed events naming every one
    of its snapshots and none is running; then QUIET seconds more, in which no run may start
    (icefloe's own commits, the runs', set nothing off). Returns every DAG's runs."""
    deadline = time.monotonic() + timeout
    while True:
        server.check_alive()
        runs = {dag_id: dag_runs(server, dag_id) for dag_id in snapshots}
        over = all(r["state"] in ("success", "failed") for rs in runs.values() for r in rs)
        if over and all(
            set(named(server, dag_id, runs[dag_id])) == set(ids)
            for dag_id, ids in snapshots.items()
        ):
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"runs: {runs}")
        time.sleep(2.0)  # a look is a GET per DAG and per run, 10-20 ms of the api-server's CPU
    time.sleep(QUIET)
    for dag_id, before in runs.items():
        after = dag_runs(server, dag_id)
        assert len(after) == len(before), f"a run followed icefloe's own commits: {after}"
    return runs


def check_runs(
    server: AirflowServer, dag_id: str, runs: list[dict[str, Any]], snapshots: list[int]
) -> None:
    """Every run was set off by the watcher (no clock, no hand), by the other
    engine's snapshots only, each of them named once; a burst makes one run, and one more
    at most for what came while it ran (Airflow queues one)."""
    assert 1 <= len(runs) <= 2, runs
    for run in runs:
        assert run["run_type"] == "asset_triggered", run
        assert run["state"] == "success", run
        for extra in set_off_by(server, dag_id, run["dag_run_id"]):
            assert extra.get("from_trigger") is True, extra
            assert all(s["operation"] == "append" for s in extra["payload"]["snapshots"]), extra
    assert sorted(named(server, dag_id, runs)) == sorted(snapshots)


def one_partition_compacted(warehouse: Path, table: str, ids: range) -> None:
    catalog = SqlCatalog("default", warehouse=warehouse)
    try:
        loaded = catalog.load_table(table)
        assert loaded.health().totals.data.files == 1
        rows = Counter((r["id"], r["part"]) for r in scan_rows(loaded.io, loaded.metadata))
        assert rows == Counter((i, "a") for i in ids)
    finally:
        catalog.close()


@contextmanager
def unpaused_with_watchers(deployment: Deployment, dags: dict[str, str]) -> Iterator[None]:
    """The DAG files parsed again for this module's tables.yaml, `dags` (dag id -> asset
    name) unpaused, and parsed once more so that their assets' watchers are registered
    (Airflow registers them only for unpaused DAGs); on exit, paused and parsed again, which
    takes the watchers away (a DAG gone from its file would leave them running)."""
    server = deployment.server
    for dag_file in DAG_FILES:
        deployment.reparse(dag_file)
    for dag_id in dags:
        server.wait_for_dag(dag_id)
        assert server.patch(f"/api/v2/dags/{dag_id}", json={"is_paused": False}).is_success
    for dag_file in DAG_FILES:
        deployment.reparse(dag_file)
    for asset in dags.values():
        deployment.wait_for_watchers(asset, 1)
    try:
        yield
    finally:
        for dag_id in dags:
            server.patch(f"/api/v2/dags/{dag_id}", json={"is_paused": True})
        for dag_file in DAG_FILES:
            deployment.reparse(dag_file)
        for asset in dags.values():
            deployment.wait_for_watchers(asset, 0)


@pytest.fixture(scope="module")
def watched(
    deployment: Deployment, spark_connect: SparkConnectServer, tmp_path_factory: Any
) -> Iterator[Watched]:
    home = tmp_path_factory.mktemp("watched")
    warehouses = {"iceberg_default": home / "table", FLEET_CONN: home / "fleet"}
    state_uris = {}
    for conn_id, warehouse in warehouses.items():
        warehouse.mkdir()
        (warehouse / "state").mkdir()
        state_uris[conn_id] = state_store_uri(warehouse / "state")
    create_partitioned(warehouses["iceberg_default"], TABLE)
    create_partitioned(warehouses["iceberg_default"], QUIET_TABLE)
    create_partitioned(warehouses[FLEET_CONN], FLEET_TABLE)
    # Due as well, but unchanged once the watchers start: no run set off by changes maps it.
    create_partitioned(warehouses[FLEET_CONN], IDLE_TABLE)
    one_row_appends(warehouses[FLEET_CONN], IDLE_TABLE, APPENDS)
    tables = [
        {
            "table": table,
            "schedule": "asset",
            "min_interval": f"{MIN_INTERVAL:g}s",
            "spark_connect_conn_id": FLEET_SPARK_CONNECT_CONN_ID,
        }
        for table in (TABLE, QUIET_TABLE)
    ]
    fleet = {
        "iceberg_conn_id": FLEET_CONN,
        "schedule": "asset",
        "min_interval": f"{MIN_INTERVAL:g}s",
        "include": ["fleet"],
        "spark_apps": 1,
        "spark_connect_conn_id": FLEET_SPARK_CONNECT_CONN_ID,
    }
    connection = icefloe_connection(
        warehouses["iceberg_default"], state_uri=state_uris["iceberg_default"]
    )
    with deployment.configured(tables, connection, [*FLEETS, fleet]) as server:
        other = icefloe_connection(warehouses[FLEET_CONN], state_uri=state_uris[FLEET_CONN])
        body = {"connection_id": FLEET_CONN, **other, "extra": json.dumps(other["extra"])}
        assert server.post("/api/v2/connections", json=body).status_code == 201
        assets = {
            TABLE_DAG: f"iceberg/default/{TABLE}",
            QUIET_DAG: f"iceberg/default/{QUIET_TABLE}",
            FLEET_DAG: f"icefloe-fleet/{FLEET_CONN}",
        }
        try:
            with fleet_jobs_on(server, spark_connect), unpaused_with_watchers(deployment, assets):
                yield Watched(server, deployment, warehouses, state_uris)
        finally:
            server.delete(f"/api/v2/connections/{FLEET_CONN}")
    for dag_file in DAG_FILES:  # back to the deployment's own tables and fleets
        deployment.reparse(dag_file)


def test_other_engines_commits_set_off_maintenance_once_and_a_restart_misses_none(
    watched: Watched,
) -> None:
    server = watched.server
    tables, fleets = watched.warehouses["iceberg_default"], watched.warehouses[FLEET_CONN]

    def cursor(conn_id: str) -> dict[str, str] | None:
        return cursor_of(watched.state_uris[conn_id], conn_id)

    with server.running("triggerer"):
        wait_for("the baselines", lambda: cursor("iceberg_default") and cursor(FLEET_CONN), 60)
        baseline = cursor("iceberg_default")
        snapshots = one_row_appends(tables, TABLE, APPENDS)
        appended = time.monotonic()
        wait_for("a run", lambda: dag_runs(server, TABLE_DAG), 120)
        print(f"first run {time.monotonic() - appended:.1f}s after the last append")
        wait_for("the cursor past them", lambda: cursor("iceberg_default") != baseline, 60)
        loops = server.logs()["triggerer"].count("(connection iceberg_default)")
    # The triggerer stopped (the table's run may still be going, its compaction to come):
    # another engine commits to the fleet's table meanwhile.
    fleet_baseline = cursor(FLEET_CONN)
    fleet_snapshots = one_row_appends(fleets, FLEET_TABLE, APPENDS)
    with server.running("triggerer"):
        restarted = time.monotonic()
        wait_for("a fleet run", lambda: dag_runs(server, FLEET_DAG), 120)
        print(f"first fleet run {time.monotonic() - restarted:.1f}s after the triggerer started")
        runs = settle(server, {TABLE_DAG: snapshots, FLEET_DAG: fleet_snapshots}, 300)
    print(f"runs: { {dag_id: len(r) for dag_id, r in runs.items()} }")

    # The table's DAG: set off by the other engine's commits once (the restart fired none of
    # them again), its own compaction set nothing off.
    check_runs(server, TABLE_DAG, runs[TABLE_DAG], snapshots)
    assert dag_runs(server, QUIET_DAG) == []  # each watcher fires for its own table only
    assert loops == 1  # one poll loop for the catalog's two watchers
    one_partition_compacted(tables, TABLE, range(APPENDS))
    page_says_what_set_it_off(server, snapshots)
    # The fleet: the commits made while no triggerer ran were found from the stored cursor.
    assert cursor(FLEET_CONN) != fleet_baseline
    check_runs(server, FLEET_DAG, runs[FLEET_DAG], fleet_snapshots)
    # Only the changed table, though the other one needs compacting too.
    assert planned_tables_of(server, runs[FLEET_DAG])[0] == [FLEET_TABLE]
    one_partition_compacted(fleets, FLEET_TABLE, range(APPENDS))


def page_says_what_set_it_off(server: AirflowServer, snapshots: list[int]) -> None:
    """The Iceberg page: each run's cause (the snapshots' engine, id, operation) and when the
    table was last seen changing (icefloe's compaction, its newest commit)."""
    response = server.get(f"/icefloe/api/tables/{TABLE}", params={"refresh": "true"})
    assert response.status_code == 200, response.text
    status = response.json()
    compaction = next(r for r in status["recent_runs"] if r["job"] == "rewrite_data_files")
    [cause] = compaction["set_off_by"]
    assert cause["kind"] == "commits" and cause["table"] == TABLE, cause
    assert cause["operation"] == "append" and cause["engine"] is None, cause
    assert cause["snapshot_id"] in snapshots, cause
    seen = status["last_seen_changing"]
    assert seen is not None and seen["commit"]["job"] == "rewrite_data_files", seen
    page = server.get(f"/icefloe/tables/{TABLE}")
    assert page.status_code == 200
    assert f"append {cause['snapshot_id']} by an engine that names none" in page.text
    assert "last seen changing" in page.text


def planned_tables_of(server: AirflowServer, runs: list[dict[str, Any]]) -> list[list[str]]:
    return [planned_tables_for(server, run["dag_run_id"]) for run in runs]


def planned_tables_for(server: AirflowServer, run_id: str) -> list[str]:
    path = f"/api/v2/dags/{FLEET_DAG}/dagRuns/{run_id}/taskInstances/plan/xcomEntries/return_value"
    response = server.get(path)
    assert response.status_code == 200, response.text
    return [entry["table"] for entry in response.json()["value"]]
