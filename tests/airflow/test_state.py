"""icefloe's state store on SQLite and PostgreSQL, a database of its own beside any catalog:
run history, and table locks under contention between threads and between processes,
including a holder killed with -9; where the store is configured."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from icefloe_airflow.state import LOCKS, RUNS, MaintenanceStore, TableBusyError, run_owner
from icefloe_airflow.state_db import STATE_URI_ENV, configured_state_uri, default_state_uri
from sqlalchemy import delete, inspect

from icecore.catalog import SqlCatalog
from icecore.catalog.sql import TABLES
from tests.support.catalogs import POSTGRES_URI, postgres_unavailable, unique_catalog_name

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def state_uri(backend: str, directory: Path) -> str:
    """A state store on `backend`: a SQLite file of its own, or the PostgreSQL server."""
    if backend == "sqlite":
        return f"sqlite:///{directory / 'state' / 'icefloe_state.db'}"
    if reason := postgres_unavailable():
        pytest.skip(reason)
    return POSTGRES_URI


def forget_store(store: MaintenanceStore) -> None:
    """Delete the store's rows (PostgreSQL outlives the test) and close it."""
    with store.engine.begin() as conn:
        conn.execute(delete(LOCKS).where(LOCKS.c.catalog_name == store.catalog_name))
        conn.execute(delete(RUNS).where(RUNS.c.catalog_name == store.catalog_name))
    store.close()


@pytest.fixture
def uri(backend: str, tmp_path: Path) -> str:
    return state_uri(backend, tmp_path)


@pytest.fixture
def store(uri: str) -> Iterator[MaintenanceStore]:
    """A store at `uri`, under a catalog name of the test's own."""
    opened = MaintenanceStore.open(uri, unique_catalog_name())
    yield opened
    forget_store(opened)


def test_runs_are_recorded_and_read_back(store: MaintenanceStore) -> None:
    before = datetime.now(UTC)
    first = store.start_run(
        "db.events", "rewrite_data_files", dag_id="d", run_id="r1", task_id="t", try_number=1
    )
    store.finish_run(first, state="failed", error="NoSuchTableError: db.events")
    second = store.start_run(
        "db.events", "rewrite_data_files", dag_id="d", run_id="r2", task_id="t", try_number=1
    )
    store.finish_run(second, state="success", result={"rewritten_data_files": 7, "ok": True})
    expiry = store.start_run(
        "db.events", "expire_snapshots", dag_id="d", run_id="r2", task_id="e", try_number=2
    )
    store.start_run("db.other", "ingest", dag_id="i", run_id="r", task_id="t", try_number=1)

    last = store.last_runs("db.events")
    assert set(last) == {"rewrite_data_files", "expire_snapshots"}
    rewrite = last["rewrite_data_files"]
    assert (rewrite.run_id, rewrite.state, rewrite.error) == ("r2", "success", None)
    assert rewrite.result == {"rewritten_data_files": 7, "ok": True}
    assert rewrite.started_at.tzinfo is UTC and before - timedelta(seconds=1) <= rewrite.started_at
    assert rewrite.finished_at is not None and rewrite.finished_at >= rewrite.started_at
    assert last["expire_snapshots"].state == "running"
    assert last["expire_snapshots"].finished_at is None
    assert last["expire_snapshots"].try_number == 2

    failed = store.last_runs("db.events", state="failed")
    assert list(failed) == ["rewrite_data_files"]
    assert failed["rewrite_data_files"].error == "NoSuchTableError: db.events"

    recent = store.recent_runs("db.events")
    assert [r.id for r in recent] == [expiry, second, first]
    assert [r.job for r in store.recent_runs("db.events", limit=1)] == ["expire_snapshots"]
    assert json.loads(json.dumps(recent[1].to_dict()))["result"]["rewritten_data_files"] == 7
    assert store.tables() == ["db.events", "db.other"]


def test_stores_of_two_catalogs_do_not_see_each_other(store: MaintenanceStore) -> None:
    other = MaintenanceStore(store.engine, store.catalog_name + "_other")
    try:
        other.start_run(
            "db.events", "ingest", dag_id=None, run_id=None, task_id=None, try_number=None
        )
        with other.lock("db.events", "other-owner"):
            assert store.lock_holder("db.events") is None
            assert store.tables() == []
    finally:
        forget_store(other)  # shares the engine: nothing to dispose of


def test_finish_run_refuses_bad_input(store: MaintenanceStore) -> None:
    run = store.start_run("db.t", "ingest", dag_id="d", run_id="r", task_id="t", try_number=1)
    with pytest.raises(ValueError, match="running"):
        store.finish_run(run, state="running")  # type: ignore[arg-type]
    with pytest.raises(KeyError, match="no maintenance run with id"):
        store.finish_run(run + 1000, state="success")


def test_lock_excludes_a_second_owner_until_released(store: MaintenanceStore) -> None:
    with store.lock("db.events", "dag/run/compact#1") as lease:
        assert lease.owner == "dag/run/compact#1"
        holder = store.lock_holder("db.events")
        assert holder is not None and holder[0] == "dag/run/compact#1"
        started = time.monotonic()
        with (
            pytest.raises(TableBusyError, match=r"db\.events is busy.*dag/run/compact#1") as busy,
            store.lock("db.events", "dag/run/expire#1", wait=timedelta(seconds=0.6), poll=0.1),
        ):
            pytest.fail("second owner got the lock")
        assert time.monotonic() - started >= 0.6
        assert busy.value.holder == "dag/run/compact#1"
        with store.lock("db.other", "dag/run/expire#1"):  # other tables are free
            pass
    assert store.lock_holder("db.events") is None
    with store.lock("db.events", "dag/run/expire#1", wait=timedelta(0)):
        pass


def test_threads_never_hold_the_lock_together(store: MaintenanceStore) -> None:
    inside = 0
    overlaps = 0
    entered = 0
    guard = threading.Lock()

    def worker(n: int) -> None:
        nonlocal inside, overlaps, entered
        with store.lock("db.events", f"worker-{n}", wait=timedelta(seconds=60), poll=0.05):
            with guard:
                inside += 1
                entered += 1
                overlaps += inside > 1
            time.sleep(0.1)
            with guard:
                inside -= 1

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert (entered, overlaps) == (4, 0)


def test_lease_is_renewed_while_held(store: MaintenanceStore) -> None:
    ttl = timedelta(seconds=0.6)
    with store.lock("db.events", "long-job", ttl=ttl) as lease:
        time.sleep(1.5)  # more than two lease lifetimes
        with (
            pytest.raises(TableBusyError, match="long-job"),
            store.lock("db.events", "newcomer", wait=timedelta(0)),
        ):
            pass
        assert not lease.lost


def test_earlier_tries_left_running_are_marked_abandoned(store: MaintenanceStore) -> None:
    """A worker killed mid-job never finishes its run; the task's next try fails it, and
    nothing else: other tasks, runs and tables, and finished tries, are left as they were."""
    ids = {"dag_id": "d", "run_id": "r", "task_id": "t"}
    killed = store.start_run("db.events", "rewrite_data_files", **ids, try_number=1)
    finished = store.start_run("db.events", "rewrite_data_files", **ids, try_number=2)
    store.finish_run(finished, state="failed", error="CommitFailedError: ...")
    other_task = store.start_run(
        "db.events", "expire_snapshots", dag_id="d", run_id="r", task_id="e", try_number=1
    )
    other_run = store.start_run(
        "db.events", "rewrite_data_files", dag_id="d", run_id="r0", task_id="t", try_number=1
    )
    other_table = store.start_run("db.other", "rewrite_data_files", **ids, try_number=1)

    assert store.abandon_earlier_tries("db.events", **ids, try_number=3) == 1
    runs = {r.id: r for r in store.recent_runs("db.events")}
    assert runs[killed].state == "failed" and runs[killed].finished_at is not None
    assert runs[killed].error is not None and runs[killed].error.startswith("abandoned: ")
    assert "try 3 started" in runs[killed].error
    assert runs[finished].error == "CommitFailedError: ..."
    assert runs[other_task].state == runs[other_run].state == "running"
    assert store.recent_runs("db.other")[0].id == other_table
    assert store.recent_runs("db.other")[0].state == "running"
    assert store.abandon_earlier_tries("db.events", **ids, try_number=3) == 0


HOLDER = """
import sys, time
from datetime import timedelta
from icefloe_airflow.state import MaintenanceStore, run_owner
store = MaintenanceStore.open(sys.argv[1], sys.argv[2])
ids = {"dag_id": "d", "run_id": "r", "task_id": "doomed-worker", "try_number": 1}
store.start_run("db.events", "rewrite_data_files", **ids)
with store.lock("db.events", run_owner(**ids), ttl=timedelta(seconds=1.5)):
    print("held", flush=True)
    time.sleep(600)
"""


def test_killed_holder_frees_the_table_after_its_lease(store: MaintenanceStore, uri: str) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, uri, store.catalog_name],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.path.join(ROOT, "plugins")])},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with (
            pytest.raises(TableBusyError, match="doomed-worker"),
            store.lock("db.events", "survivor", wait=timedelta(seconds=2), poll=0.2),
        ):
            pass  # the holder renews its 1.5 s lease: still busy after 2 s
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        started = time.monotonic()
        unrelated = store.start_run(
            "db.events", "ingest", dag_id="i", run_id="r", task_id="t", try_number=1
        )
        with store.lock("db.events", "survivor", wait=timedelta(seconds=30), poll=0.1):
            waited = time.monotonic() - started
            holder_now = store.lock_holder("db.events")
            assert holder_now is not None and holder_now[0] == "survivor"
        assert waited < 5  # freed by expiry (<= 1.5 s after the last renewal), not by luck
        # The killed holder's run is failed by the takeover; an ingestion running meanwhile
        # (no lock) is not.
        runs = store.last_runs("db.events")
        doomed = runs["rewrite_data_files"]
        assert run_owner(doomed.dag_id, doomed.run_id, doomed.task_id, doomed.try_number) == (
            "d/r/doomed-worker#1"
        )
        assert doomed.state == "failed" and doomed.error is not None
        assert doomed.error.startswith("abandoned: its lease") and "survivor" in doomed.error
        assert runs["ingest"].id == unrelated and runs["ingest"].state == "running"
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=30)
        if holder.stdout is not None:
            holder.stdout.close()


OTHER_BACKEND = {"sqlite": "postgresql", "postgresql": "sqlite"}


def test_the_store_keeps_to_its_own_database_beside_the_catalogs(
    catalog: SqlCatalog, backend: str, tmp_path: Path
) -> None:
    """Catalog on one database, store on another (SQLite file / PostgreSQL, both ways): the
    store's tables are created in its database only, and the catalog's stay in theirs; the
    store works alike on both."""
    catalog.create_namespace("db")
    uri = state_uri(OTHER_BACKEND[backend], tmp_path)
    store = MaintenanceStore.open(uri, catalog.name)
    try:
        run = store.start_run("db.t", "ingest", dag_id="d", run_id="r", task_id="t", try_number=1)
        store.finish_run(run, state="success", result={"rows": 3})
        with store.lock("db.t", "owner"):
            assert store.lock_holder("db.t") is not None
        assert store.last_runs("db.t")["ingest"].result == {"rows": 3}
        assert store.engine.dialect.name == OTHER_BACKEND[backend]
        # PostgreSQL's `test` database is every test's: look into the SQLite side.
        if backend == "sqlite":
            assert not {LOCKS.name, RUNS.name} & set(inspect(catalog.engine).get_table_names())
        else:
            assert TABLES.name not in inspect(store.engine).get_table_names()
    finally:
        forget_store(store)


def test_a_catalog_database_given_as_state_store_keeps_its_history(catalog: SqlCatalog) -> None:
    """Earlier versions kept the history in the SQL catalog's database: a store at that URL
    reads it on (same tables), no migration."""
    earlier = MaintenanceStore(catalog.engine, catalog.name)
    ids = {"dag_id": "d", "run_id": "r", "task_id": "t", "try_number": 1}
    run = earlier.start_run("db.t", "expire_snapshots", **ids)
    earlier.finish_run(run, state="success", result={"expired": 2})
    store = MaintenanceStore.open(catalog.uri, catalog.name)
    try:
        assert store.last_runs("db.t")["expire_snapshots"].result == {"expired": 2}
    finally:
        forget_store(store)


def test_where_the_store_is_configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A connection's own `state_uri`, else Airflow's `[icefloe] state_uri` (its env var,
    read when asked, as Airflow reads it), else SQLite in AIRFLOW_HOME, created on use."""
    home = tmp_path / "airflow-home"
    monkeypatch.setenv("AIRFLOW_HOME", str(home))
    monkeypatch.delenv(STATE_URI_ENV, raising=False)
    assert configured_state_uri() == default_state_uri()
    assert default_state_uri() == f"sqlite:///{home}/icefloe_state.db"
    store = MaintenanceStore.open(configured_state_uri(), "default")
    try:
        assert store.tables() == []
        assert (home / "icefloe_state.db").is_file()
    finally:
        store.close()
    monkeypatch.setenv(STATE_URI_ENV, "sqlite:////configured/state.db")
    assert configured_state_uri() == "sqlite:////configured/state.db"
    assert configured_state_uri("sqlite:////connection.db") == "sqlite:////connection.db"
