"""`TableChangesTrigger` run as a triggerer without shared streams runs it (`run()`), in this
process, on a real SQLite catalog and state store, polling every 0.1 s: what it fires across
a restart, for icefloe's own commits, and for a burst inside `min_interval`. The shared poll
loop in Airflow's own triggerer is tests/airflow/test_catalog_watch.py's.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from icefloe_airflow.catalog_watch.state import WatchStore
from icefloe_airflow.catalog_watch.trigger import TableChangesTrigger, stream_name

from icecore.catalog import SqlCatalog
from icecore.jobs.jobs import RewriteManifestsOptions
from spark_jobs.rewrite_manifests import run as rewrite_manifests
from tests.airflow.conftest import state_store_uri
from tests.support.pyiceberg_appends import create_partitioned, one_row_appends

pytestmark = pytest.mark.usefixtures("airflow_db")
TABLE = "db.events"
POLL = 0.1


def trigger(min_interval: float = 0.0) -> TableChangesTrigger:
    return TableChangesTrigger(
        "iceberg_default", tables=[TABLE], poll_seconds=POLL, min_interval_seconds=min_interval
    )


class Running:
    """The trigger's `run()` in a thread of its own, its events collected as they come."""

    def __init__(self, watcher: TableChangesTrigger) -> None:
        self.events: list[dict[str, Any]] = []
        self.times: list[float] = []
        self._loop = asyncio.new_event_loop()
        self._task: asyncio.Task[None] | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(watcher), self._loop).result(30)

    async def _start(self, watcher: TableChangesTrigger) -> None:
        async def consume(events: AsyncIterator[Any]) -> None:
            async for event in events:
                self.events.append(event.payload)
                self.times.append(time.monotonic())

        self._task = asyncio.ensure_future(consume(watcher.run()))

    def reported(self) -> list[int]:
        """Every snapshot id its events named, in order."""
        return [i for event in self.events for i in snapshot_ids(event)]

    def wait(self, count: int, timeout: float = 30.0) -> list[dict[str, Any]]:
        """The events, once there are `count` of them."""
        return self.wait_for(lambda: len(self.events) >= count, timeout)

    def wait_for(self, done: Callable[[], bool], timeout: float = 30.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while not done():
            assert self._task is not None
            if self._task.done():
                self._task.result()  # its error
            assert time.monotonic() < deadline, f"not after {timeout}s: {self.events}"
            time.sleep(0.05)
        return self.events

    def stop(self) -> None:
        """Cancelled, as the triggerer cancels a trigger when it stops."""

        async def cancel() -> None:
            assert self._task is not None
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(cancel(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)


def stored_cursor(warehouse: Path) -> dict[str, str] | None:
    store = WatchStore.open(state_store_uri(warehouse.parent), "default")
    try:
        return store.cursor(stream_name("iceberg_default", POLL))
    finally:
        store.close()


def until(check: Callable[[], Any], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline
        time.sleep(0.05)


def snapshot_ids(event: dict[str, Any]) -> list[int]:
    return [s["snapshot_id"] for s in event["snapshots"]]


def test_a_restart_misses_no_commit_and_reports_none_twice(iceberg_connection: Path) -> None:
    warehouse = iceberg_connection
    create_partitioned(warehouse, TABLE)
    running = Running(trigger())
    try:
        until(lambda: stored_cursor(warehouse) is not None)  # the baseline
        first = one_row_appends(warehouse, TABLE, 3)
        running.wait_for(lambda: len(running.reported()) >= 3)
        time.sleep(5 * POLL)  # a few more polls: the events' cursor is stored
        assert running.reported() == first  # one or more events (the polls fell as they did)
        event = running.events[-1]
        assert event["table"] == TABLE and event["reasons"][0].endswith("small data file(s) added")
        assert {s["operation"] for s in event["snapshots"]} == {"append"}
    finally:
        running.stop()
    # While no trigger runs: another engine's commits, then icefloe's own (a manifest rewrite).
    later = one_row_appends(warehouse, TABLE, 2, first=3)
    catalog = SqlCatalog("default", warehouse=warehouse)
    own = rewrite_manifests(None, catalog, RewriteManifestsOptions(TABLE, rewrite_all=True))
    catalog.close()
    assert own.status == "committed"

    restarted = Running(trigger())
    try:
        restarted.wait(1)
        time.sleep(10 * POLL)
    finally:
        restarted.stop()
    # Found at the first poll; not the first three again, not icefloe's own.
    assert [snapshot_ids(e) for e in restarted.events] == [later]


def test_a_burst_fires_once_then_what_came_inside_min_interval(iceberg_connection: Path) -> None:
    warehouse = iceberg_connection
    create_partitioned(warehouse, TABLE)
    min_interval = 1.5
    running = Running(trigger(min_interval))
    try:
        until(lambda: stored_cursor(warehouse) is not None)
        first = one_row_appends(warehouse, TABLE, 1)
        running.wait(1)
        burst = one_row_appends(warehouse, TABLE, 4, first=1)
        second = running.wait(2)[1]
        time.sleep(min_interval + 5 * POLL)
    finally:
        running.stop()
    assert [snapshot_ids(e) for e in running.events] == [first, burst]
    assert second["commits"] == 4
    assert running.times[1] - running.times[0] >= min_interval
