"""What a catalog watcher keeps in icefloe's state store, so that a triggerer restart neither
misses a commit nor sets off a storm of events (`icefloe_airflow.catalog_watch.trigger`).

Three tables, created on first use beside the store's others (`icefloe_airflow.state`):

- `icefloe_watch_cursors`: one row per catalog and poll loop (`stream`), the JSON cursor of
  `icecore.changes.CatalogWatch` (each table's metadata location) as of the last poll whose
  events Airflow has stored. A restarted loop starts from it, so the commits made while no
  triggerer ran are found at its first poll.
- `icefloe_watch_held`: one row per watcher (a trigger: one table's, or one fleet's) and
  table: when the watcher last set the table's maintenance off, the foreign commits it holds
  back until `min_interval` has passed since then (or until they may make maintenance due),
  and the ids of the snapshots it already reported, so that a poll repeated after a restart
  reports none twice.
- `icefloe_table_changes`: when each table was last seen changing (by any engine, icefloe
  included) and its newest commit then, which the Iceberg page shows.

Times are epoch milliseconds; JSON lives in Text columns (portable between SQLite and
PostgreSQL, like the run history's results).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Engine,
    MetaData,
    String,
    Table,
    Text,
    inspect,
    select,
    update,
)
from sqlalchemy.exc import DBAPIError, IntegrityError

from icefloe_airflow.state_db import create_state_engine

_METADATA = MetaData()
CURSORS = Table(
    "icefloe_watch_cursors",
    _METADATA,
    Column("catalog_name", String(255), primary_key=True),
    Column("stream", String(255), primary_key=True),
    Column("cursor_json", Text, nullable=False),
    Column("updated_at_ms", BigInteger, nullable=False),
)
HELD = Table(
    "icefloe_watch_held",
    _METADATA,
    Column("catalog_name", String(255), primary_key=True),
    Column("watcher", String(512), primary_key=True),
    Column("table_name", String(1024), primary_key=True),
    Column("last_emitted_ms", BigInteger),
    Column("held_json", Text, nullable=False),
)
CHANGES = Table(
    "icefloe_table_changes",
    _METADATA,
    Column("catalog_name", String(255), primary_key=True),
    Column("table_name", String(1024), primary_key=True),
    Column("seen_at_ms", BigInteger, nullable=False),
    Column("commit_json", Text),
)
_CREATE_ATTEMPTS = 5
# Snapshot ids a watcher remembers per table as reported: more than one poll can repeat.
REPORTED_KEPT = 200
# Commits a watcher holds per table at most (the newest): a table whose commits never make
# maintenance due must not grow a row without bound.
HELD_KEPT = 200


@dataclass
class Held:
    """One watcher's state for one table: `commits` (JSON objects, `CommitSeen` fields) held
    back, `last_emitted_ms` (None: never), the snapshot ids already reported, and the
    table's commits since icefloe's last as the newest change counted them."""

    last_emitted_ms: int | None = None
    commits: list[dict[str, Any]] = field(default_factory=list)
    reported: list[int] = field(default_factory=list)
    since_own: int = 0

    def to_json(self) -> str:
        return json.dumps(
            {
                "commits": self.commits[-HELD_KEPT:],
                "reported": self.reported[-REPORTED_KEPT:],
                "since_own": self.since_own,
            }
        )

    @classmethod
    def from_row(cls, last_emitted_ms: int | None, held_json: str) -> Held:
        value = json.loads(held_json)
        commits, reported = list(value["commits"]), list(value["reported"])
        return cls(last_emitted_ms, commits, reported, int(value.get("since_own", 0)))


@dataclass(frozen=True)
class TableChangeSeen:
    """When a table was last seen changing, and its newest commit then (None: dropped, or
    a change with no new snapshot such as a property update)."""

    table: str
    seen_at_ms: int
    commit: dict[str, Any] | None

    @property
    def seen_at(self) -> datetime:
        return datetime.fromtimestamp(self.seen_at_ms / 1000, tz=UTC)


def ensure_schema(engine: Engine) -> None:
    """Create the watcher's tables if missing. Several loops and triggers open the store at
    once (one triggerer starts them together), so a creation that meets another's is tried
    again until every table is there."""
    names = {t.name for t in _METADATA.sorted_tables}
    for attempt in range(_CREATE_ATTEMPTS):
        if names <= set(inspect(engine).get_table_names()):
            return
        try:
            _METADATA.create_all(engine, checkfirst=True)
        except DBAPIError:  # another process created one of them between check and CREATE
            if attempt == _CREATE_ATTEMPTS - 1:
                raise
            time.sleep(0.1)


class WatchStore:
    """The watcher state of one catalog (`catalog_name`) in the state store at `engine`."""

    def __init__(self, engine: Engine, catalog_name: str) -> None:
        self.engine = engine
        self.catalog_name = catalog_name
        self._owns_engine = False
        ensure_schema(engine)

    @classmethod
    def open(cls, uri: str, catalog_name: str) -> WatchStore:
        """The store at the SQLAlchemy URL `uri` (`state_db.configured_state_uri`)."""
        engine = create_state_engine(uri)
        try:
            store = cls(engine, catalog_name)
        except Exception:
            engine.dispose()
            raise
        store._owns_engine = True
        return store

    def close(self) -> None:
        if self._owns_engine:
            self.engine.dispose()

    # Cursors -------------------------------------------------------------------------------

    def cursor(self, stream: str) -> dict[str, str] | None:
        """The stored cursor of the poll loop `stream`, or None before its first poll."""
        with self.engine.connect() as conn:
            stored = conn.execute(
                select(CURSORS.c.cursor_json).where(
                    CURSORS.c.catalog_name == self.catalog_name, CURSORS.c.stream == stream
                )
            ).scalar()
        return None if stored is None else dict(json.loads(stored))

    def save_cursor(self, stream: str, cursor: Mapping[str, str], now_ms: int) -> None:
        key = {"catalog_name": self.catalog_name, "stream": stream}
        values = {"cursor_json": json.dumps(dict(cursor), sort_keys=True), "updated_at_ms": now_ms}
        self._upsert(CURSORS, key, values)

    # Held commits --------------------------------------------------------------------------

    def held(self, watcher: str) -> dict[str, Held]:
        """The watcher's state, by table."""
        query = select(HELD.c.table_name, HELD.c.last_emitted_ms, HELD.c.held_json).where(
            HELD.c.catalog_name == self.catalog_name, HELD.c.watcher == watcher
        )
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        return {row.table_name: Held.from_row(row.last_emitted_ms, row.held_json) for row in rows}

    def save_held(self, watcher: str, states: Mapping[str, Held]) -> None:
        """Store the watcher's state of each table in `states` (one transaction each)."""
        for table, held in states.items():
            key = {"catalog_name": self.catalog_name, "watcher": watcher, "table_name": table}
            values = {"last_emitted_ms": held.last_emitted_ms, "held_json": held.to_json()}
            self._upsert(HELD, key, values)

    # Tables last seen changing -------------------------------------------------------------

    def record_seen(self, seen: Iterable[TableChangeSeen]) -> None:
        for change in seen:
            key = {"catalog_name": self.catalog_name, "table_name": change.table}
            commit = None if change.commit is None else json.dumps(change.commit)
            self._upsert(CHANGES, key, {"seen_at_ms": change.seen_at_ms, "commit_json": commit})

    def last_seen(self, table: str) -> TableChangeSeen | None:
        """When the table was last seen changing, if a watcher ever saw it change."""
        query = select(CHANGES.c.seen_at_ms, CHANGES.c.commit_json).where(
            CHANGES.c.catalog_name == self.catalog_name, CHANGES.c.table_name == table
        )
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        if row is None:
            return None
        commit = None if row.commit_json is None else json.loads(row.commit_json)
        return TableChangeSeen(table, row.seen_at_ms, commit)

    def _upsert(self, table: Table, key: Mapping[str, Any], values: Mapping[str, Any]) -> None:
        """Update the row at `key`, or insert it (portable: no dialect's ON CONFLICT)."""
        where = [table.c[name] == value for name, value in key.items()]
        with self.engine.begin() as conn:
            if conn.execute(update(table).where(*where).values(**values)).rowcount:
                return
        try:
            with self.engine.begin() as conn:
                conn.execute(table.insert().values(**key, **values))
        except IntegrityError:  # inserted by another process meanwhile
            with self.engine.begin() as conn:
                conn.execute(update(table).where(*where).values(**values))
