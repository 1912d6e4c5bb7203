"""`schedule: asset` on the session's deployment with the real triggerer: another engine
(PyIceberg) makes 15 one-row appends to one partition, and with no schedule tick the table's
maintenance starts within seconds, compacts the partition (every row there once), and
icefloe's own commits set nothing off afterwards; once for a table's DAG and once for a fleet
(`icefloe_airflow.catalog_watch`). The triggerer polls each catalog every 2 s here
(`[icefloe] watch_poll_interval`), `min_interval` is 5 s, and the jobs run on the session's
warm Spark Connect server.

The fleet's test also stops the triggerer after it recorded its baseline and appends while
none runs: the cursor kept in the state store makes the restarted triggerer find those
commits, each reported once; and the run it sets off maps only the table that changed, not
another of the fleet's, due too but unchanged.
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
    server: AirflowServer, dag_id: str, snapshots: list[int], timeout: float
) -> list[dict[str, Any]]:
    """Wait until runs of `dag_id` have consumed events naming every one of `snapshots` and
    none is running; then for QUIET seconds more, in which no run may start (icefloe's own
    commits, the runs', set nothing off). Returns every run."""
    deadline = time.monotonic() + timeout
    while True:
        server.check_alive()
        runs = dag_runs(server, dag_id)
        over = runs and all(r["state"] in ("success", "failed") for r in runs)
        if over and set(named(server, dag_id, runs)) == set(snapshots):
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"{dag_id}: {[(r['dag_run_id'], r['state']) for r in runs]}")
        time.sleep(1.0)
    time.sleep(QUIET)
    after = dag_runs(server, dag_id)
    assert [r["dag_run_id"] for r in after] == [r["dag_run_id"] for r in runs], (
        f"a run followed icefloe's own commits: {after[len(runs) :]}"
    )
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


def test_another_engines_appends_set_off_the_tables_maintenance_once(watched: Watched) -> None:
    server, warehouse = watched.server, watched.warehouses["iceberg_default"]
    with server.running("triggerer"):
        wait_for(
            "the watcher's baseline",
            lambda: cursor_of(watched.state_uris["iceberg_default"], "iceberg_default") is not None,
            60,
        )
        started = time.monotonic()
        snapshots = one_row_appends(warehouse, TABLE, APPENDS)
        appended = time.monotonic()
        first = wait_for("a run", lambda: dag_runs(server, TABLE_DAG), 120)
        print(f"first run {time.monotonic() - appended:.1f}s after the last append")
        runs = settle(server, TABLE_DAG, snapshots, 300)
        loops = server.logs()["triggerer"].count("(connection iceberg_default)")
    print(f"{len(runs)} runs, {time.monotonic() - started:.0f}s from the first append")
    assert first
    check_runs(server, TABLE_DAG, runs, snapshots)
    assert dag_runs(server, QUIET_DAG) == []  # each watcher fires for its own table only
    assert loops == 1  # one poll loop for the catalog's two watchers
    one_partition_compacted(warehouse, TABLE, range(APPENDS))
    page_says_what_set_it_off(server, snapshots)


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


def test_a_fleet_finds_the_commits_made_while_its_triggerer_was_down(watched: Watched) -> None:
    server, warehouse = watched.server, watched.warehouses[FLEET_CONN]
    state_uri = watched.state_uris[FLEET_CONN]
    with server.running("triggerer"):
        wait_for("the watcher's baseline", lambda: cursor_of(state_uri, FLEET_CONN) is not None, 60)
    baseline = cursor_of(state_uri, FLEET_CONN)
    snapshots = one_row_appends(warehouse, FLEET_TABLE, APPENDS)  # no triggerer runs
    assert dag_runs(server, FLEET_DAG) == []
    with server.running("triggerer"):
        appended = time.monotonic()
        wait_for("a fleet run", lambda: dag_runs(server, FLEET_DAG), 120)
        print(f"first fleet run {time.monotonic() - appended:.1f}s after the triggerer started")
        runs = settle(server, FLEET_DAG, snapshots, 300)
    assert cursor_of(state_uri, FLEET_CONN) != baseline
    check_runs(server, FLEET_DAG, runs, snapshots)
    # Only the changed table, though the other one needs compacting too.
    assert planned_tables_of(server, runs)[0] == [FLEET_TABLE]
    one_partition_compacted(warehouse, FLEET_TABLE, range(APPENDS))


def planned_tables_of(server: AirflowServer, runs: list[dict[str, Any]]) -> list[list[str]]:
    return [planned_tables_for(server, run["dag_run_id"]) for run in runs]


def planned_tables_for(server: AirflowServer, run_id: str) -> list[str]:
    path = f"/api/v2/dags/{FLEET_DAG}/dagRuns/{run_id}/taskInstances/plan/xcomEntries/return_value"
    response = server.get(path)
    assert response.status_code == 200, response.text
    return [entry["table"] for entry in response.json()["value"]]
