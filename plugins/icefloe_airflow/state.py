"""icefloe's state store: one maintenance lock per table, and the run history.

A SQLAlchemy database of its own, whatever the catalog (SQL or REST): a REST catalog has no
database to lend, and the locks must exclude each other across every worker and deployment
maintaining the same tables, so the store is configured once for the whole Airflow:

- Airflow config `[icefloe] state_uri` (env `AIRFLOW__ICEFLOE__STATE_URI`; a sensitive option,
  so `AIRFLOW__ICEFLOE__STATE_URI_SECRET` / `_CMD` and secrets backends work for its password),
  e.g. `postgresql+psycopg2://icefloe@db:5432/icefloe`;
- overridden for one connection by its extra `state_uri` (a connection whose tables are
  maintained by another team's store);
- by default the SQLite file `<AIRFLOW_HOME>/icefloe_state.db`, which suits one machine (the
  LocalExecutor, the demo); workers on several machines need a shared server.

`icefloe_airflow.state_db` resolves the URL and makes the engine (and, for docker-compose, the
PostgreSQL database). Rows are keyed by catalog name and table, so catalogs sharing a store
need distinct names. Pointing `state_uri` at a SQL catalog's own database is allowed and finds
the history that earlier versions kept there (same tables). Two tables are created on first
use:

- `icefloe_maintenance_locks`: at most one maintenance job per (catalog, table). A lock is a
  lease: it expires `ttl` after its last renewal, and a background thread renews it while the
  holder runs, so a worker that is killed (OOM, node lost, `kill -9`) frees the table after at
  most `ttl` instead of blocking it forever. Each acquisition has its own token, so a holder
  whose lease was taken over can neither renew nor release the new holder's lock.
- `icefloe_maintenance_runs`: one row per job run (state running/success/failed, the job's JSON
  result or its one-line cause), read by the policy (when did expiry last succeed?) and the UI.
  The figures the UI charts (`rewritten_bytes`, `removed_files`: the result's `figures()`, see
  `icecore.jobs.results`) have columns of their own, set when the run finishes; a store
  made before they existed gets them when first opened, filled in from the stored results.
  A run whose worker died cannot finish its own row; it is marked failed ("abandoned") when
  its lease is taken over, or when Airflow starts the next try of the same task.

Only portable SQL is used (INSERT, conditional UPDATE, DELETE, ALTER TABLE ADD COLUMN), so
SQLite and PostgreSQL behave the same; times are stored as epoch milliseconds and returned as
aware UTC datetimes.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from sqlalchemy import (
    BigInteger,
    Column,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    and_,
    bindparam,
    delete,
    func,
    insert,
    inspect,
    select,
    text,
    update,
)
from sqlalchemy.exc import DBAPIError, IntegrityError

from icecore.jobs.results import JobResult, result_of
from icefloe_airflow.state_db import create_state_engine

log = logging.getLogger(__name__)

RunState = Literal["running", "success", "failed"]
_FINAL_STATES = ("success", "failed")
ABANDONED = "abandoned"  # how the error of a run whose worker died without finishing begins

_METADATA = MetaData()
LOCKS = Table(
    "icefloe_maintenance_locks",
    _METADATA,
    Column("catalog_name", String(255), primary_key=True),
    Column("table_name", String(1024), primary_key=True),
    Column("owner", String(1024), nullable=False),
    Column("token", String(64), nullable=False),
    Column("acquired_at_ms", BigInteger, nullable=False),
    Column("expires_at_ms", BigInteger, nullable=False),
)
RUNS = Table(
    "icefloe_maintenance_runs",
    _METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("catalog_name", String(255), nullable=False, index=True),
    Column("table_name", String(1024), nullable=False),
    Column("job", String(255), nullable=False),
    Column("dag_id", String(250)),
    Column("run_id", String(250)),
    Column("task_id", String(250)),
    Column("try_number", Integer),
    Column("state", String(16), nullable=False),
    Column("started_at_ms", BigInteger, nullable=False),
    Column("finished_at_ms", BigInteger),
    Column("result", Text),
    Column("error", Text),
    # The result's `figures()`, which the UI charts: set when a run finishes with a result.
    Column("rewritten_bytes", BigInteger),
    Column("removed_files", BigInteger),
)
# Columns added since the first version of the table: added to an existing store on open.
_ADDED_RUN_COLUMNS = (RUNS.c.rewritten_bytes, RUNS.c.removed_files)
_BACKFILL_BATCH = 1000


class TableBusyError(RuntimeError):
    """Another maintenance job holds the table's lock for longer than we were willing to wait."""

    def __init__(self, table: str, holder: str | None, expires_at: datetime | None) -> None:
        self.table = table
        self.holder = holder
        self.expires_at = expires_at
        until = f" (lease until {expires_at.isoformat()})" if expires_at else ""
        super().__init__(f"table {table} is busy: maintenance lock held by {holder}{until}")


@dataclass(frozen=True)
class MaintenanceRun:
    """One recorded run of a job on a table."""

    table: str
    job: str
    dag_id: str | None
    run_id: str | None
    task_id: str | None
    state: str
    started_at: datetime
    finished_at: datetime | None
    result: dict[str, Any] | None
    error: str | None
    try_number: int | None = None
    id: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (ISO times), for XCom and the UI."""
        return {
            "table": self.table,
            "job": self.job,
            "dag_id": self.dag_id,
            "run_id": self.run_id,
            "task_id": self.task_id,
            "try_number": self.try_number,
            "state": self.state,
            "started_at": self.started_at.isoformat(),
            "finished_at": None if self.finished_at is None else self.finished_at.isoformat(),
            "result": self.result,
            "error": self.error,
        }


def run_owner(dag_id: str, run_id: str, task_id: str, try_number: int) -> str:
    """The lock owner name of one task try; the runs it recorded are found by it again."""
    return f"{dag_id}/{run_id}/{task_id}#{try_number}"


@dataclass
class Lease:
    """A held table lock; `lost` turns True if renewal found the lease taken over."""

    table: str
    owner: str
    token: str
    lost: bool = False


def _now_ms() -> int:
    return int(time.time() * 1000)


def _to_datetime(ms: int | None) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=UTC)


def _as_json(result: Mapping[str, Any] | JobResult) -> dict[str, Any]:
    return result.to_dict() if isinstance(result, JobResult) else dict(result)


def run_figures(job: str, result: Mapping[str, Any] | None) -> dict[str, int | None]:
    """The figure columns of a run of `job` that ended with `result` (its JSON object): None
    without a result, or for a job this version does not know."""
    typed = None if result is None else result_of(job, result)
    if typed is None:
        return {"rewritten_bytes": None, "removed_files": None}
    figures = typed.figures()
    return {"rewritten_bytes": figures.rewritten_bytes, "removed_files": figures.removed_files}


def _add_run_columns(engine: Engine) -> None:
    """Bring a run history made by an earlier version up to date, in place: add the columns
    it lacks and fill the figures of its runs in from their stored JSON results. Safe
    against another process doing the same at once (both fill the same values)."""
    present = {c["name"] for c in inspect(engine).get_columns(RUNS.name)}
    missing = [c for c in _ADDED_RUN_COLUMNS if c.name not in present]
    if not missing:
        return
    quote = engine.dialect.identifier_preparer.quote
    for column in missing:
        kind = column.type.compile(dialect=engine.dialect)
        try:
            with engine.begin() as conn:
                conn.execute(
                    text(f"ALTER TABLE {quote(RUNS.name)} ADD COLUMN {quote(column.name)} {kind}")
                )
        except DBAPIError:
            # Another process added it between our check and our ALTER.
            if column.name not in {c["name"] for c in inspect(engine).get_columns(RUNS.name)}:
                raise
    filled = 0
    last = -1
    while True:  # in batches, so that a long history is never read whole
        with engine.begin() as conn:
            rows = conn.execute(
                select(RUNS.c.id, RUNS.c.job, RUNS.c.result)
                .where(RUNS.c.id > last, RUNS.c.result.is_not(None))
                .order_by(RUNS.c.id)
                .limit(_BACKFILL_BATCH)
            ).all()
            if not rows:
                break
            conn.execute(
                update(RUNS)
                .where(RUNS.c.id == bindparam("pk"))
                .values(rewritten_bytes=bindparam("bytes"), removed_files=bindparam("files")),
                [_backfilled(row.id, row.job, row.result) for row in rows],
            )
        filled += len(rows)
        last = rows[-1].id
    log.info(
        "run history upgraded: %s added, %d runs' figures filled in from their results",
        ", ".join(c.name for c in missing),
        filled,
    )


def _backfilled(pk: int, job: str, stored: str) -> dict[str, Any]:
    figures = run_figures(job, _stored_result(stored))
    return {"pk": pk, "bytes": figures["rewritten_bytes"], "files": figures["removed_files"]}


def _stored_result(text_value: str) -> dict[str, Any] | None:
    """A stored JSON result; one that is not an object (written by hand) reads as None."""
    try:
        value = json.loads(text_value)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class MaintenanceStore:
    """Locks and run history of the tables of one catalog (`catalog_name`) in `engine`'s
    database; the tables are created on first use. `open` makes a store with an engine of its
    own, which `close` disposes of."""

    def __init__(self, engine: Engine, catalog_name: str = "default") -> None:
        self.engine = engine
        self.catalog_name = catalog_name
        self._owns_engine = False
        self._ensure_schema()

    @classmethod
    def open(cls, uri: str, catalog_name: str = "default") -> MaintenanceStore:
        """The store at the SQLAlchemy URL `uri` (see `state_db.configured_state_uri`)."""
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

    def __repr__(self) -> str:
        url = self.engine.url.render_as_string(hide_password=True)
        return f"MaintenanceStore({url!r}, catalog_name={self.catalog_name!r})"

    def _ensure_schema(self) -> None:
        existing = set(inspect(self.engine).get_table_names())
        if not {LOCKS.name, RUNS.name} <= existing:
            try:
                _METADATA.create_all(self.engine, checkfirst=True)
            except DBAPIError:
                # Another process created them between our check and our CREATE.
                if not {LOCKS.name, RUNS.name} <= set(inspect(self.engine).get_table_names()):
                    raise
        _add_run_columns(self.engine)

    # Locks ---------------------------------------------------------------------------------

    @contextmanager
    def lock(
        self,
        table: str,
        owner: str,
        *,
        ttl: timedelta = timedelta(minutes=10),
        wait: timedelta = timedelta(hours=1),
        poll: float = 5.0,
    ) -> Iterator[Lease]:
        """Hold the table's maintenance lock for the `with` block.

        Waits up to `wait` (polling every `poll` seconds) while another owner holds a live
        lease, then raises `TableBusyError` naming it. An expired lease is taken over. While
        held, a daemon thread renews the lease every ttl/3.
        """
        if ttl.total_seconds() <= 0:
            raise ValueError(f"lock ttl must be positive, got {ttl}")
        lease = self._acquire(table, owner, ttl, wait, poll)
        stop = threading.Event()
        renewer = threading.Thread(
            target=self._renew_until,
            args=(lease, ttl, stop),
            name=f"icefloe-lease-{table}",
            daemon=True,
        )
        renewer.start()
        try:
            yield lease
        finally:
            stop.set()
            renewer.join()
            self._release(lease)

    def lock_holder(self, table: str) -> tuple[str, datetime] | None:
        """(owner, lease expiry) of the table's live lock, or None when it is free."""
        with self.engine.connect() as conn:
            row = conn.execute(
                select(LOCKS.c.owner, LOCKS.c.expires_at_ms).where(self._lock_key(table))
            ).first()
        if row is None or row.expires_at_ms <= _now_ms():
            return None
        expires = _to_datetime(row.expires_at_ms)
        assert expires is not None
        return row.owner, expires

    def _lock_key(self, table: str) -> Any:
        return and_(LOCKS.c.catalog_name == self.catalog_name, LOCKS.c.table_name == table)

    def _acquire(
        self, table: str, owner: str, ttl: timedelta, wait: timedelta, poll: float
    ) -> Lease:
        ttl_ms = int(ttl.total_seconds() * 1000)
        deadline = time.monotonic() + wait.total_seconds()
        while True:
            token = uuid.uuid4().hex
            if self._try_acquire(table, owner, token, ttl_ms):
                log.info("maintenance lock on %s taken by %s", table, owner)
                return Lease(table, owner, token)
            holder = self.lock_holder(table)
            if time.monotonic() >= deadline:
                raise TableBusyError(
                    table, *(holder if holder else ("an owner that just released it", None))
                )
            if holder:
                log.info("table %s is locked by %s until %s; waiting", table, *holder)
            time.sleep(max(0.0, min(poll, deadline - time.monotonic())))

    def _try_acquire(self, table: str, owner: str, token: str, ttl_ms: int) -> bool:
        now = _now_ms()
        values = {
            "owner": owner,
            "token": token,
            "acquired_at_ms": now,
            "expires_at_ms": now + ttl_ms,
        }
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    insert(LOCKS).values(catalog_name=self.catalog_name, table_name=table, **values)
                )
            return True
        except IntegrityError:
            pass  # a row exists: take it over only if its lease has run out
        expired = and_(self._lock_key(table), LOCKS.c.expires_at_ms <= now)
        with self.engine.begin() as conn:
            previous = conn.execute(select(LOCKS.c.owner).where(expired)).scalar()
            taken = conn.execute(update(LOCKS).where(expired).values(**values))
            if taken.rowcount == 1 and previous is not None:
                self._abandon(
                    conn,
                    and_(RUNS.c.table_name == table, RUNS.c.state == "running"),
                    f"{ABANDONED}: its lease on the table lock expired without being released "
                    f"(worker killed or lost); taken over by {owner}",
                    owner=previous,
                )
        if taken.rowcount == 1:
            log.warning(
                "maintenance lock on %s held by %s had expired; taken over by %s",
                table,
                previous,
                owner,
            )
            return True
        return False

    def _renew_until(self, lease: Lease, ttl: timedelta, stop: threading.Event) -> None:
        interval = ttl.total_seconds() / 3
        ttl_ms = int(ttl.total_seconds() * 1000)
        while not stop.wait(interval):
            try:
                with self.engine.begin() as conn:
                    renewed = conn.execute(
                        update(LOCKS)
                        .where(self._lock_key(lease.table), LOCKS.c.token == lease.token)
                        .values(expires_at_ms=_now_ms() + ttl_ms)
                    )
            except DBAPIError as exc:  # keep trying: the lease is still good for a while
                log.warning("could not renew the lock on %s: %s", lease.table, exc)
                continue
            if renewed.rowcount != 1:
                lease.lost = True
                log.error("maintenance lock on %s was lost (lease expired)", lease.table)
                return

    def _release(self, lease: Lease) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                delete(LOCKS).where(self._lock_key(lease.table), LOCKS.c.token == lease.token)
            )
        log.info("maintenance lock on %s released by %s", lease.table, lease.owner)

    # Runs ----------------------------------------------------------------------------------

    def start_run(
        self,
        table: str,
        job: str,
        *,
        dag_id: str | None,
        run_id: str | None,
        task_id: str | None,
        try_number: int | None,
    ) -> int:
        """Record a run as `running`; returns its key for `finish_run`."""
        with self.engine.begin() as conn:
            result = conn.execute(
                insert(RUNS).values(
                    catalog_name=self.catalog_name,
                    table_name=table,
                    job=job,
                    dag_id=dag_id,
                    run_id=run_id,
                    task_id=task_id,
                    try_number=try_number,
                    state="running",
                    started_at_ms=_now_ms(),
                )
            )
        key = result.inserted_primary_key
        assert key is not None
        return int(key[0])

    def abandon_earlier_tries(
        self, table: str, *, dag_id: str, run_id: str, task_id: str, try_number: int
    ) -> int:
        """Mark the still-running runs of earlier tries of this task instance failed: Airflow
        starts a new try only once the last one is over, so theirs died unrecorded. Returns
        how many were marked."""
        with self.engine.begin() as conn:
            return self._abandon(
                conn,
                and_(
                    RUNS.c.table_name == table,
                    RUNS.c.state == "running",
                    RUNS.c.dag_id == dag_id,
                    RUNS.c.run_id == run_id,
                    RUNS.c.task_id == task_id,
                    RUNS.c.try_number < try_number,
                ),
                f"{ABANDONED}: try ended without recording an outcome (worker killed or lost); "
                f"try {try_number} started",
            )

    def _abandon(self, conn: Any, condition: Any, error: str, owner: str | None = None) -> int:
        """Fail the running runs matching `condition` (and recorded by `owner`, if given)."""
        rows = conn.execute(
            select(
                RUNS.c.id, RUNS.c.dag_id, RUNS.c.run_id, RUNS.c.task_id, RUNS.c.try_number
            ).where(RUNS.c.catalog_name == self.catalog_name, condition)
        ).all()
        ids = [
            row.id
            for row in rows
            if owner is None
            or (
                None not in (row.dag_id, row.run_id, row.task_id, row.try_number)
                and run_owner(row.dag_id, row.run_id, row.task_id, row.try_number) == owner
            )
        ]
        if ids:
            conn.execute(
                update(RUNS)
                .where(RUNS.c.id.in_(ids), RUNS.c.state == "running")
                .values(state="failed", finished_at_ms=_now_ms(), error=error)
            )
            log.warning("maintenance runs %s marked failed: %s", ids, error)
        return len(ids)

    def finish_run(
        self,
        run_pk: int,
        *,
        state: RunState,
        result: Mapping[str, Any] | JobResult | None = None,
        error: str | None = None,
    ) -> None:
        """Record the run's end; its `result` (the job's JSON object, or its result class) is
        stored whole, and its figures in their columns."""
        if state not in _FINAL_STATES:
            raise ValueError(f"a finished run is one of {_FINAL_STATES}, got {state!r}")
        with self.engine.begin() as conn:
            job = conn.execute(select(RUNS.c.job).where(RUNS.c.id == run_pk)).scalar()
            if job is None:
                raise KeyError(f"no maintenance run with id {run_pk}")
            stored = None if result is None else _as_json(result)
            conn.execute(
                update(RUNS)
                .where(RUNS.c.id == run_pk)
                .values(
                    state=state,
                    finished_at_ms=_now_ms(),
                    result=None if stored is None else json.dumps(stored, default=str),
                    error=error,
                    **run_figures(job, stored),
                )
            )

    def last_runs(self, table: str, *, state: str | None = None) -> dict[str, MaintenanceRun]:
        """The latest run of each job on `table` (only runs in `state`, when given)."""
        conditions = [RUNS.c.catalog_name == self.catalog_name, RUNS.c.table_name == table]
        if state is not None:
            conditions.append(RUNS.c.state == state)
        latest = (
            select(func.max(RUNS.c.id).label("id")).where(*conditions).group_by(RUNS.c.job)
        ).subquery()
        query = select(RUNS).join(latest, RUNS.c.id == latest.c.id)
        return {run.job: run for run in self._runs(query)}

    def recent_runs(self, table: str, limit: int = 20) -> list[MaintenanceRun]:
        """The table's runs, newest first."""
        query = (
            select(RUNS)
            .where(RUNS.c.catalog_name == self.catalog_name, RUNS.c.table_name == table)
            .order_by(RUNS.c.id.desc())
            .limit(limit)
        )
        return self._runs(query)

    def tables(self) -> list[str]:
        """Every table with a recorded run or a lock, sorted."""
        runs = select(RUNS.c.table_name).where(RUNS.c.catalog_name == self.catalog_name)
        locks = select(LOCKS.c.table_name).where(LOCKS.c.catalog_name == self.catalog_name)
        with self.engine.connect() as conn:
            names = {row[0] for row in conn.execute(runs.union(locks))}
        return sorted(names)

    def _runs(self, query: Any) -> list[MaintenanceRun]:
        with self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [
            MaintenanceRun(
                table=row["table_name"],
                job=row["job"],
                dag_id=row["dag_id"],
                run_id=row["run_id"],
                task_id=row["task_id"],
                state=row["state"],
                started_at=_to_datetime(row["started_at_ms"]),  # type: ignore[arg-type]
                finished_at=_to_datetime(row["finished_at_ms"]),
                result=None if row["result"] is None else json.loads(row["result"]),
                error=row["error"],
                try_number=row["try_number"],
                id=row["id"],
            )
            for row in rows
        ]
