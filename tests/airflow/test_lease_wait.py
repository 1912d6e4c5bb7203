"""A deferrable job operator whose table another job holds waits in the triggerer, not in its
worker slot (`icefloe_airflow.lease_wait`): run by `dag.test()`, which runs the trigger in
line as the triggerer would. The lease released meanwhile, the job then runs (over Spark
Connect, for speed) and is recorded from then on; a lease held past `lock_wait` fails the
task as a blocking wait does, recorded, with no job started."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from icefloe_airflow.lease_wait import LeaseFreeTrigger
from icefloe_airflow.state import MaintenanceStore

from tests.airflow.conftest import SPARK_CONNECT_CONN_ID, state_store_uri
from tests.airflow.test_spark_connect_dags import JobProcesses, recorded, small_files_table

pytestmark = pytest.mark.usefixtures("airflow_db")
START = datetime(2024, 1, 1, tzinfo=UTC)
OTHER = "another_dag/run/job#1"


def lease_triggers() -> int:
    """How many `LeaseFreeTrigger`s deferred tasks have registered for the triggerer."""
    from airflow.models.trigger import Trigger  # noqa: PLC0415
    from airflow.utils.session import create_session  # noqa: PLC0415
    from sqlalchemy import func, select  # noqa: PLC0415

    with create_session() as session:
        query = select(func.count()).where(Trigger.classpath == LeaseFreeTrigger.serialize_path)
        return int(session.scalar(query) or 0)


@contextmanager
def leased(
    warehouse: Path, table: str, *, until: Callable[[], bool], at_most: float = 60
) -> Iterator[list[float]]:
    """The table's lease held by another owner (in a thread) until `until()` says so (asked
    every 0.5 s), or for at most `at_most` seconds; yields a list that then holds the
    release's time.time()."""
    store = MaintenanceStore.open(state_store_uri(warehouse.parent))
    taken = threading.Event()
    released: list[float] = []

    def hold() -> None:
        deadline = time.monotonic() + at_most
        with store.lock(table, OTHER, ttl=timedelta(minutes=2), wait=timedelta(0)):
            taken.set()
            while not until() and time.monotonic() < deadline:
                time.sleep(0.5)
            released.append(time.time())

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    assert taken.wait(30)
    try:
        yield released
    finally:
        holder.join()
        store.close()


@pytest.mark.usefixtures("spark_connect_conn")
def test_a_leased_table_defers_then_runs_when_the_lease_is_free(
    run_dag: Callable[..., Any], iceberg_connection: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    from airflow.sdk import DAG  # noqa: PLC0415
    from icefloe_airflow.operators import RewriteDataFilesOperator  # noqa: PLC0415

    small_files_table(iceberg_connection, "db.events", files=5)
    with DAG("icefloe_test_lease_deferred", schedule=None, start_date=START) as dag:
        RewriteDataFilesOperator(
            task_id="compact",
            table="db.events",
            options={"min-input-files": 2},
            spark_connect_conn_id=SPARK_CONNECT_CONN_ID,
            deferrable=True,
            lock_wait=120,
        )
    before = lease_triggers()
    # Released only once the task has deferred: its trigger is registered for the triggerer.
    until_deferred = leased(
        iceberg_connection, "db.events", until=lambda: lease_triggers() > before
    )
    with until_deferred as released, JobProcesses() as jobs:
        run = run_dag(dag)
    assert run.state == "success"
    log = capfd.readouterr().out
    assert f"table db.events is busy: maintenance lock held by {OTHER}" in log
    assert "waiting for it in the triggerer, this worker slot freed" in log
    assert "the lease on db.events is free: taking it" in log
    assert len(jobs.seen) == 1  # one job, started after the wait
    [compaction], holder = recorded("db.events")
    assert (compaction.job, compaction.state) == ("rewrite_data_files", "success")
    assert compaction.result is not None and compaction.result["rewritten_data_files"] == 5
    assert lease_triggers() == before + 1
    assert compaction.started_at.timestamp() >= released[0]  # recorded once it ran
    assert holder is None


def test_a_lease_held_past_the_wait_fails_the_task_without_a_job(
    run_dag: Callable[..., Any], iceberg_connection: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    from airflow.sdk import DAG  # noqa: PLC0415
    from icefloe_airflow.operators import ExpireSnapshotsOperator  # noqa: PLC0415

    small_files_table(iceberg_connection, "db.events", files=1)
    with DAG("icefloe_test_lease_timeout", schedule=None, start_date=START) as dag:
        ExpireSnapshotsOperator(
            task_id="expire", table="db.events", deferrable=True, lock_wait=2, retries=0
        )
    before = lease_triggers()
    started = time.monotonic()
    ran: list[float] = []
    with leased(iceberg_connection, "db.events", until=lambda: bool(ran)), JobProcesses() as jobs:
        run = run_dag(dag)
        ran.append(time.monotonic() - started)
    assert run.state == "failed"
    assert ran[0] >= 2  # the trigger gave up after lock_wait, the lease still held
    assert lease_triggers() == before + 1  # it deferred once, and failed when back
    assert "waiting for it in the triggerer" in capfd.readouterr().out
    assert jobs.seen == {}
    [failed], _ = recorded("db.events")
    assert (failed.job, failed.state) == ("expire_snapshots", "failed")
    assert failed.error is not None and f"maintenance lock held by {OTHER}" in failed.error
