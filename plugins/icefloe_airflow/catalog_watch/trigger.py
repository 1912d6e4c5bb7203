"""The event trigger behind `schedule: asset`: maintenance after any engine's commits.

`TableChangesTrigger` is an Airflow `BaseEventTrigger`, the trigger of an `AssetWatcher`:
the table's Asset (a per-table DAG) or a fleet's (`icefloe_airflow.catalog_watch.assets`).
Every trigger of one catalog shares one poll loop in the triggerer (Airflow 3.3's
`shared_stream_key`): `CatalogPolls` asks the catalog every `poll_seconds` which tables'
metadata moved (`icecore.changes.CatalogWatch`: one query on a SQL catalog, a conditional
load per table on a REST one) and reads only the new snapshots' summaries. Each trigger then
keeps the changes of its own tables (`filter_shared_stream`), drops icefloe's own commits (a
compaction never schedules the next one; an ingest publishes its own events) and fires one
event per table whose other engines' commits may make maintenance due
(`icecore.changes.due_reasons`), at most once per `min_interval_seconds`: commits arriving
sooner are held and fire together when it has passed. The event's payload (the asset event's
`extra["payload"]`) names the table and the snapshots that set it off: id, time, operation,
`engine-name`, `app-id`.

Restarts: the loop runs in ack mode (`create_shared_stream_producer`): the catalog cursor is
stored in icefloe's state store (`catalog_watch.state`) only once every trigger has moved past
a poll and Airflow has stored the events it fired, so a triggerer that dies in between polls
again from the last stored cursor and misses no commit. What each trigger holds back, and the
snapshots it already reported, are stored before it moves on, so a poll repeated after a
restart fires nothing twice.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Hashable, Mapping, Sequence
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent
from airflow.triggers.shared_stream import AdvanceItem, AdvanceOutcome, SharedStreamProducer

from icecore.changes import CatalogWatch, CommitSeen, DueThresholds, TableChange, due_reasons
from icefloe_airflow.catalog_watch.state import Held, TableChangeSeen, WatchStore
from icefloe_airflow.fleet.discovery import namespace_matches
from icefloe_airflow.hook import IcebergHook

log = logging.getLogger(__name__)

STREAM_KIND = "icefloe.catalog-watch"
# A data file below this is small when the thresholds do not say (Iceberg's default target
# size, 512 MiB, times the policy's default ratio, 0.75).
SMALL_FILE_BYTES = 384 * 1024 * 1024
# Snapshots named in one event's payload (the newest): an asset event's extra stays small.
SNAPSHOTS_IN_EVENT = 20


def now_ms() -> int:
    return int(time.time() * 1000)


class _SharedStores:
    """One `WatchStore` per connection in the triggerer process, shared by its poll loop and
    every trigger filtering it (a catalog may have thousands of watched tables: one engine
    and one connection lookup each would be thousands of database connections), closed
    when the last one lets go; with the connection's hook, which looked the connection up
    (each lookup is a round trip through the triggerer's supervisor) and opens the
    catalog. Taken and given back in a thread: opening one blocks."""

    def __init__(self) -> None:
        self._stores: dict[str, tuple[WatchStore, IcebergHook, int]] = {}
        self._lock = threading.Lock()

    async def acquire(self, iceberg_conn_id: str) -> tuple[WatchStore, IcebergHook]:
        return await asyncio.to_thread(self._acquire, iceberg_conn_id)

    async def release(self, iceberg_conn_id: str) -> None:
        await asyncio.to_thread(self._release, iceberg_conn_id)

    def _acquire(self, iceberg_conn_id: str) -> tuple[WatchStore, IcebergHook]:
        with self._lock:
            if iceberg_conn_id in self._stores:
                store, hook, users = self._stores[iceberg_conn_id]
            else:
                hook, users = IcebergHook(iceberg_conn_id), 0
                store = WatchStore.open(hook.state_uri(), hook.settings().name)
            self._stores[iceberg_conn_id] = (store, hook, users + 1)
            return store, hook

    def _release(self, iceberg_conn_id: str) -> None:
        with self._lock:
            store, hook, users = self._stores.pop(iceberg_conn_id)
            if users > 1:
                self._stores[iceberg_conn_id] = (store, hook, users - 1)
            else:
                store.close()
                hook.close()


STORES = _SharedStores()


def stream_name(iceberg_conn_id: str, poll_seconds: float) -> str:
    """The poll loop's name, which keys its stored cursor."""
    return f"{iceberg_conn_id}@{poll_seconds:g}s"


class WatchEventsLost(RuntimeError):
    """Airflow did not confirm a poll's events: the loop restarts from the stored cursor."""


class CatalogPolls(SharedStreamProducer):
    """One catalog's poll loop: yields one raw event per poll, `{"catalog", "polled_at_ms",
    "changes": [TableChange JSON]}`, with the cursor after it as the broker payload, and
    stores that cursor once Airflow has stored every event fired from the poll (`advance`).
    Also records when each table was last seen changing, for the Iceberg page."""

    def __init__(self, iceberg_conn_id: str, poll_seconds: float) -> None:
        self.iceberg_conn_id = iceberg_conn_id
        self.poll_seconds = poll_seconds
        self.stream = stream_name(iceberg_conn_id, poll_seconds)
        self._shared: tuple[WatchStore, IcebergHook] | None = None

    async def _open_store(self) -> WatchStore:
        if self._shared is None:
            self._shared = await STORES.acquire(self.iceberg_conn_id)
        return self._shared[0]

    async def open_stream(self) -> AsyncIterator[tuple[Any, Any]]:
        # Every catalog and store call is synchronous: each runs in a thread, never in the
        # triggerer's event loop, which every other trigger shares.
        started = time.monotonic()
        store = await self._open_store()
        opened = time.monotonic()
        assert self._shared is not None
        # The shared hook's catalog: the poll loop is its one user (one loop per connection).
        catalog = await asyncio.to_thread(self._shared[1].get_catalog)
        cursor = await asyncio.to_thread(store.cursor, self.stream)
        watch = CatalogWatch(catalog, cursor)
        log.info(
            "watching catalog %s (connection %s) every %gs, %s (store %.1fs, catalog %.1fs)",
            store.catalog_name,
            self.iceberg_conn_id,
            self.poll_seconds,
            "from its stored cursor" if cursor is not None else "from now on (first start)",
            opened - started,
            time.monotonic() - opened,
        )
        while True:
            # Sleep first: the triggers restarted together subscribe before the first poll.
            await asyncio.sleep(self.poll_seconds)
            try:
                changes = await asyncio.to_thread(watch.poll)
            except Exception as exc:  # the cursor stays as it was: the next poll catches up
                log.warning("catalog %s not polled: %s", store.catalog_name, exc)
                continue
            polled = now_ms()
            if changes:
                seen = [_seen(change, polled) for change in changes]
                await asyncio.to_thread(store.record_seen, seen)
            raw = {
                "catalog": store.catalog_name,
                "polled_at_ms": polled,
                "changes": [change.to_json() for change in changes],
            }
            yield raw, watch.cursor

    async def advance(self, batch: Sequence[AdvanceItem]) -> None:
        cursor = None
        for item in batch:
            if item.outcome.failed or item.outcome.rejected:
                raise WatchEventsLost(
                    f"{self.stream}: a poll's events were not stored; polling again from the "
                    "stored cursor"
                )
            if not item.outcome.acked:  # nobody was listening: keep the cursor before it
                break
            cursor = item.broker_payload
        if cursor is not None:
            store = await self._open_store()
            await asyncio.to_thread(store.save_cursor, self.stream, cursor, now_ms())

    async def aclose(self) -> None:
        if self._shared is not None:
            self._shared = None
            await STORES.release(self.iceberg_conn_id)


def _seen(change: TableChange, polled_ms: int) -> TableChangeSeen:
    newest = change.commits[-1].to_json() if change.commits else None
    return TableChangeSeen(change.name, polled_ms, newest)


class TableChangesTrigger(BaseEventTrigger):
    """Fires for the tables it watches (`tables`, or those whose namespace matches `include`
    and no `exclude` glob) when other engines' commits may make maintenance due under
    `thresholds` (`icecore.changes.DueThresholds` fields), at most once per table every
    `min_interval_seconds`; the catalog is that of the Airflow connection
    `iceberg_conn_id`, polled every `poll_seconds` by one loop for all its triggers."""

    serialize_path = f"{__name__}.TableChangesTrigger"  # where the triggerer imports it from

    def __init__(
        self,
        iceberg_conn_id: str,
        *,
        tables: Sequence[str] = (),
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
        poll_seconds: float = 20.0,
        min_interval_seconds: float = 60.0,
        thresholds: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if not tables and not include:
            raise ValueError("a table watcher needs tables or namespace globs to watch")
        if poll_seconds <= 0 or min_interval_seconds < 0:
            raise ValueError(
                f"poll_seconds must be positive and min_interval_seconds not negative, got "
                f"{poll_seconds} and {min_interval_seconds}"
            )
        self.iceberg_conn_id = iceberg_conn_id
        self.tables = sorted(tables)
        self.include = list(include)
        self.exclude = list(exclude)
        self.poll_seconds = float(poll_seconds)
        self.min_interval_seconds = float(min_interval_seconds)
        self.thresholds = dict(thresholds or {})
        self._due = DueThresholds(**{"small_file_bytes": SMALL_FILE_BYTES, **self.thresholds})

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            self.serialize_path,
            {
                "iceberg_conn_id": self.iceberg_conn_id,
                "tables": self.tables,
                "include": self.include,
                "exclude": self.exclude,
                "poll_seconds": self.poll_seconds,
                "min_interval_seconds": self.min_interval_seconds,
                "thresholds": self.thresholds,
            },
        )

    @property
    def watcher(self) -> str:
        """This trigger's name in the state store: what it watches."""
        if self.tables:
            return "tables:" + ",".join(self.tables)
        return f"namespaces:{','.join(self.include)}-{','.join(self.exclude)}"

    def watches(self, table: str) -> bool:
        if table in self.tables:
            return True
        return bool(self.include) and namespace_matches(
            table.rpartition(".")[0], self.include, self.exclude
        )

    # One poll loop per catalog ---------------------------------------------------------------

    def shared_stream_key(self) -> Hashable | None:
        return (STREAM_KIND, self.iceberg_conn_id, self.poll_seconds)

    @classmethod
    def create_shared_stream_producer(cls, kwargs: dict[str, Any]) -> SharedStreamProducer:
        return CatalogPolls(kwargs["iceberg_conn_id"], float(kwargs["poll_seconds"]))

    async def filter_shared_stream(
        self, shared_stream: AsyncIterator[Any]
    ) -> AsyncIterator[TriggerEvent]:
        store, _ = await STORES.acquire(self.iceberg_conn_id)
        try:
            held = await asyncio.to_thread(store.held, self.watcher)
            async for raw in shared_stream:
                events, changed = self.absorb(held, raw)
                if changed:  # stored before the loop may store the cursor past this poll
                    await asyncio.to_thread(store.save_held, self.watcher, changed)
                for payload in events:
                    log.info(
                        "%s set off by %d commit(s): %s",
                        payload["table"],
                        payload["commits"],
                        "; ".join(payload["reasons"]),
                    )
                    yield TriggerEvent(payload)
        finally:
            await STORES.release(self.iceberg_conn_id)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """The same without a shared loop (a triggerer that does not share streams): the
        cursor is stored once the filter has moved past a poll."""
        producer = self.create_shared_stream_producer(self.serialize()[1])

        async def polls() -> AsyncIterator[Any]:
            done: Any = None
            async for raw, cursor in producer.open_stream():
                if done is not None:
                    await producer.advance([AdvanceItem(done, AdvanceOutcome(acked=1, failed=0))])
                done = cursor
                yield raw

        try:
            async for event in self.filter_shared_stream(polls()):
                yield event
        finally:
            await producer.aclose()

    # What one poll sets off ------------------------------------------------------------------

    def absorb(
        self, held: dict[str, Held], raw: Mapping[str, Any]
    ) -> tuple[list[dict[str, Any]], dict[str, Held]]:
        """Take one poll's changes into `held` (this trigger's state, by table, changed in
        place); returns the payloads of the events to fire and the tables whose state changed
        (to store). Pure: no I/O."""
        now = int(raw["polled_at_ms"])
        changed: dict[str, Held] = {}
        for change in raw["changes"]:
            table = change["table"]
            if not self.watches(table):
                continue
            state = held.setdefault(table, Held())
            if change["dropped"]:
                if state.commits:
                    state.commits = []
                    changed[table] = state
                continue
            known = {*state.reported, *(c["snapshot_id"] for c in state.commits)}
            new = [c for c in change["commits"] if not c["own"] and c["snapshot_id"] not in known]
            if new:
                state.commits.extend(new)
                changed[table] = state
        events = []
        for table, state in held.items():
            payload = self._due_payload(table, state, now, raw.get("catalog"))
            if payload is not None:
                state.reported.extend(c["snapshot_id"] for c in state.commits)
                state.commits = []
                state.last_emitted_ms = now
                changed[table] = state
                events.append(payload)
        return events, changed

    def _due_payload(
        self, table: str, state: Held, now: int, catalog: str | None
    ) -> dict[str, Any] | None:
        """The event for `table` if what it holds may make maintenance due and the table's
        `min_interval` has passed since its last event; else None (held on)."""
        if not state.commits:
            return None
        last = state.last_emitted_ms
        if last is not None and now - last < self.min_interval_seconds * 1000:
            return None
        reasons = due_reasons(_as_change(table, state), self._due)
        if not reasons:
            return None
        return {
            "table": table,
            "catalog": catalog,
            "iceberg_conn_id": self.iceberg_conn_id,
            "reasons": list(reasons),
            "commits": len(state.commits),
            "snapshots": [_snapshot(c) for c in state.commits[-SNAPSHOTS_IN_EVENT:]],
            "seen_at_ms": now,
        }


_SNAPSHOT_KEYS = ("snapshot_id", "timestamp_ms", "operation", "engine", "app_id")


def _snapshot(commit: Mapping[str, Any]) -> dict[str, Any]:
    """What an event says of one snapshot that set it off."""
    return {key: commit.get(key) for key in _SNAPSHOT_KEYS}


def ours(commit: Mapping[str, Any]) -> bool:
    """icefloe's own commit (`CommitSeen` JSON): a job's, which sets no maintenance off, or
    an ingest's, which publishes its own Asset events (the table's and its fleet's)."""
    return bool(commit["own"] or commit.get("batch_id"))


def _as_change(table: str, state: Held) -> TableChange:
    """What a watcher holds for a table, as the change `due_reasons` decides on."""
    fields = CommitSeen.__dataclass_fields__
    seen = tuple(CommitSeen(**{k: v for k, v in c.items() if k in fields}) for c in state.commits)
    return TableChange(
        tuple(table.split(".")), None, seen, commits_since_own=max(state.since_own, len(seen))
    )
