"""What the UI page shows about each maintained table, gathered from the catalog.

Which tables: those listed in tables.yaml (with their policy and connection) and those with
a recorded maintenance run in the state store of each connection involved (a table maintained
by hand-triggered DAGs or by a user's own DAG appears there without being configured). Any
catalog works, SQL or REST: tables are read through the `Catalog` API only. A table with runs
whose latest recorded health check a fleet made belongs to the fleet
(`icefloe_airflow.health_history`): the page lists it from its checks (`ui.fleet`) instead of
reading it here, which would cost a catalog call and manifest reads per table for thousands
of tables.

For each table the health report is computed live from the table's metadata (no data file is
read), scored and turned into due jobs by the one health model (`health_model`) with the
policy the fleet and `icefloe health` use for it (`table_health`), so the page, the command
and the DAGs never disagree; a read that finds the table changed since its latest recorded
check is recorded too (the table's charts). Any failure while looking at one table (missing table,
unreadable manifest, unreachable database) is kept as that table's `error`, so one broken
table cannot take the page down. Results are cached for `CACHE_SECONDS`: a page refresh (or
several users) must not re-read every table's manifests each time.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from icecore.catalog.directories import Overlap, catalog_directories, overlaps
from icecore.health import HealthReport
from icefloe_airflow.catalog_watch.state import TableChangeSeen, WatchStore
from icefloe_airflow.fleet.config import PolicyLayers
from icefloe_airflow.health_history import ensure_schema as ensure_history
from icefloe_airflow.health_history import fleet_tables
from icefloe_airflow.health_model import (
    Assessment,
    JobDecision,
    Penalty,
    assess,
    health_summary,
    measure_health,
)
from icefloe_airflow.hook import IcebergHook
from icefloe_airflow.job_dags import job_dag_id
from icefloe_airflow.policy import MaintenancePolicy
from icefloe_airflow.state import MaintenanceRun, MaintenanceStore
from icefloe_airflow.table_health import check_table, policy_layers, table_policy_of
from icefloe_airflow.tables_config import TableConfig, default_config_path, load_tables_config
from icefloe_airflow.ui.set_off import what_set_off

log = logging.getLogger(__name__)

CACHE_SECONDS = 30.0
INGEST_JOB = "ingest"
DEFAULT_CONN_ID = IcebergHook.default_conn_name
RECENT_RUNS = 20


def describe_error(exc: BaseException) -> str:
    """`ExceptionType: message`, the one-line form the jobs use for their causes too."""
    message = str(exc).strip()
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


@dataclass
class TableStatus:
    """One table as the page shows it; `error` set means the numbers could not be read."""

    table: str
    iceberg_conn_id: str
    config: TableConfig | None
    checked_at: datetime
    catalog_name: str | None = None  # the connection's catalog name (keys the history)
    report: HealthReport | None = None
    assessment: Assessment | None = None
    policy: MaintenancePolicy = field(default_factory=MaintenancePolicy)
    last_runs: dict[str, MaintenanceRun] = field(default_factory=dict)
    recent_runs: list[MaintenanceRun] = field(default_factory=list)
    overlaps: list[Overlap] = field(default_factory=list)
    error: str | None = None
    # What set off each recent run (its consumed asset events), by "dag_id/run_id", and when
    # a watcher last saw the table change (`icefloe_airflow.catalog_watch`).
    set_off: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    last_seen: TableChangeSeen | None = None

    def causes(self, run: MaintenanceRun) -> list[dict[str, Any]]:
        """What set off the DAG run `run` belongs to (none: by hand, on the clock)."""
        return self.set_off.get(f"{run.dag_id}/{run.run_id}", [])

    @property
    def location_conflicts(self) -> list[Overlap]:
        """Overlaps that mix this table's files with another's (not plain nesting)."""
        return [o for o in self.overlaps if o.problem]

    @property
    def score(self) -> int | None:
        return None if self.assessment is None else self.assessment.score

    @property
    def decisions(self) -> list[JobDecision]:
        return [] if self.assessment is None else self.assessment.decisions

    @property
    def due(self) -> list[JobDecision]:
        return [] if self.assessment is None else self.assessment.due

    @property
    def penalties(self) -> list[Penalty]:
        return [] if self.assessment is None else self.assessment.penalties

    @property
    def last_run(self) -> MaintenanceRun | None:
        """The most recently started maintenance run (ingestion is not maintenance)."""
        runs = [r for job, r in self.last_runs.items() if job != INGEST_JOB]
        return max(runs, key=lambda r: r.started_at, default=None)

    @property
    def last_ingest(self) -> MaintenanceRun | None:
        return self.last_runs.get(INGEST_JOB)

    def to_dict(self, *, detail: bool = False) -> dict[str, Any]:
        """JSON form; `detail` adds partitions, the policy and the recent runs."""
        last = self.last_run
        out: dict[str, Any] = {
            "table": self.table,
            "iceberg_conn_id": self.iceberg_conn_id,
            "configured": self.config is not None,
            "schedule": self.config.schedule if self.config else None,
            "checked_at": self.checked_at.isoformat(),
            "error": self.error,
            "score": self.score,
            "health": None if self.report is None else health_summary(self.report),
            "due": [{"job": d.job, "reason": d.reason} for d in self.due],
            "penalties": [p.to_dict() for p in self.penalties],
            "last_run": None if last is None else last.to_dict(),
            "last_ingest": None if self.last_ingest is None else self.last_ingest.to_dict(),
            "last_runs": {job: run.to_dict() for job, run in sorted(self.last_runs.items())},
            "location_overlaps": [
                {"other": o.other, "problem": o.problem, "detail": o.detail} for o in self.overlaps
            ],
            "last_seen_changing": None
            if self.last_seen is None
            else {"at": self.last_seen.seen_at.isoformat(), "commit": self.last_seen.commit},
        }
        if detail:
            out["jobs"] = [{**d.to_dict(), "dag_id": job_dag_id(d.job)} for d in self.decisions]
            out["policy"] = self.policy.to_dict()
            out["report"] = None if self.report is None else self.report.to_dict()
            out["recent_runs"] = [
                {**run.to_dict(), "set_off_by": self.causes(run)} for run in self.recent_runs
            ]
        return out


@dataclass
class Overview:
    """Every table, plus the problems that concern the page as a whole."""

    tables: list[TableStatus]
    notices: list[str]
    config_path: str
    checked_at: datetime

    def find(self, table: str) -> TableStatus | None:
        return next((t for t in self.tables if t.table == table), None)

    def to_dict(self, *, detail: bool = False) -> dict[str, Any]:
        return {
            "checked_at": self.checked_at.isoformat(),
            "config_path": self.config_path,
            "notices": list(self.notices),
            "tables": [t.to_dict(detail=detail) for t in self.tables],
        }


def _configured_tables(notices: list[str]) -> tuple[str, list[TableConfig]]:
    """tables.yaml's tables; a missing file means none, a broken one is a notice."""
    try:
        path = default_config_path()
    except Exception as exc:
        notices.append(f"cannot locate tables.yaml: {describe_error(exc)}")
        return "", []
    if not path.exists():
        notices.append(f"{path} does not exist: only tables with recorded runs are listed")
        return str(path), []
    try:
        return str(path), load_tables_config(path)
    except Exception as exc:
        notices.append(describe_error(exc))
        return str(path), []


def _table_status(
    hook: IcebergHook,
    store: MaintenanceStore | None,
    table: str,
    config: TableConfig | None,
    *,
    layers: PolicyLayers,
    now: datetime,
) -> TableStatus:
    status = TableStatus(table, hook.iceberg_conn_id, config, now)
    with contextlib.suppress(Exception):  # a broken connection is reported below
        status.catalog_name = hook.settings().name
    try:
        if store is not None:
            status.last_runs = store.last_runs(table)
            status.recent_runs = store.recent_runs(table, limit=RECENT_RUNS)
            status.set_off = set_off_of(status.recent_runs)
            status.last_seen = WatchStore(store.engine, store.catalog_name).last_seen(table)
        iceberg = hook.load_table(table)
        status.policy = table_policy_of(table, iceberg.metadata.properties, layers)
        if store is None:
            status.report = measure_health(iceberg, status.policy)
            status.assessment = assess(status.report, status.policy, {}, now)
        else:
            status.report, status.assessment = check_table(
                iceberg, table, store, status.policy, source="page", only_if_changed=True, now=now
            )
    except Exception as exc:
        log.warning("icefloe UI: cannot read %s: %s", table, exc, exc_info=True)
        status.error = describe_error(exc)
    return status


def set_off_of(runs: list[MaintenanceRun]) -> dict[str, list[dict[str, Any]]]:
    """What set off the DAG runs of `runs`, by "dag_id/run_id"; nothing when Airflow's
    database cannot say."""
    pairs = [(r.dag_id, r.run_id) for r in runs if r.dag_id and r.run_id]
    try:
        found = what_set_off(pairs)  # type: ignore[arg-type]
    except Exception as exc:
        log.warning("icefloe UI: cannot read what set the runs off: %s", exc)
        return {}
    return {f"{dag_id}/{run_id}": causes for (dag_id, run_id), causes in found.items()}


def collect_overview() -> Overview:
    """Look at every maintained table now (uncached; see `StatusCache`)."""
    now = datetime.now(UTC)
    notices: list[str] = []
    config_path, configs = _configured_tables(notices)
    entries: dict[str, list[tuple[str, TableConfig | None]]] = {DEFAULT_CONN_ID: []}
    seen: set[tuple[str, str]] = set()
    for config in configs:
        entries.setdefault(config.iceberg_conn_id, []).append((config.table, config))
        seen.add((config.iceberg_conn_id, config.table))

    layers = policy_layers()
    statuses: list[TableStatus] = []
    named: dict[tuple[str, str], tuple[str, tuple[Any, ...]]] = {}
    for conn_id, listed in entries.items():
        hook = IcebergHook(conn_id)
        try:
            _note_catalog_names(hook, listed, named, notices)
            store: MaintenanceStore | None = hook.state_store()
            ensure_history(store.engine)
            in_fleet = fleet_tables(store.engine, store.catalog_name)
            recorded = [t for t in store.tables() if (conn_id, t) not in seen and t not in in_fleet]
        except Exception as exc:
            notices.append(f"connection {conn_id!r}: no run history: {describe_error(exc)}")
            store, recorded = None, []
        try:
            tables = [*listed, *((t, None) for t in recorded)]
            found = [_table_status(hook, store, t, c, layers=layers, now=now) for t, c in tables]
            _attach_overlaps(hook, found, notices)
            statuses.extend(found)
        finally:
            hook.close()
    return Overview(statuses, notices, config_path, now)


def _note_catalog_names(
    hook: IcebergHook,
    listed: list[tuple[str, TableConfig | None]],
    named: dict[tuple[str, str], tuple[str, tuple[Any, ...]]],
    notices: list[str],
) -> None:
    """Catalog names that silently go wrong: a tables.yaml entry scheduled on ingest events of
    a catalog name its connection does not have (the DAG would never run), and two
    connections to different catalogs under one name in one state store, which keys runs and
    locks by catalog name (their tables would share history and locks)."""
    settings = hook.settings()
    for table, config in listed:
        if config is not None and config.on_assets and config.catalog_name != settings.name:
            notices.append(
                f"tables.yaml: {table} waits for ingest events of catalog "
                f"{config.catalog_name!r}, but connection {hook.iceberg_conn_id!r} names its "
                f"catalog {settings.name!r}: set catalog_name: {settings.name}"
            )
    key = (hook.state_uri(), settings.name)
    catalog = (settings.kind, settings.uri, settings.warehouse)
    earlier = named.setdefault(key, (hook.iceberg_conn_id, catalog))
    if earlier[1] != catalog:
        notices.append(
            f"connections {earlier[0]!r} and {hook.iceberg_conn_id!r} name different catalogs "
            f"{settings.name!r} in one state store, so their tables share run history and "
            "locks: give one of them another catalog_name"
        )


def _attach_overlaps(hook: IcebergHook, statuses: list[TableStatus], notices: list[str]) -> None:
    """Flag tables whose locations meet another table's: one listing of the catalog."""
    try:
        listing = catalog_directories(hook.get_catalog())
    except Exception as exc:
        notices.append(f"connection {hook.iceberg_conn_id!r}: {describe_error(exc)}")
        return
    by_table = overlaps(listing.tables)
    for status in statuses:
        status.overlaps = by_table.get(status.table, [])


class StatusCache:
    """The last overview, reused for `ttl` seconds; one refresh at a time."""

    def __init__(self, ttl: float = CACHE_SECONDS) -> None:
        self._ttl = ttl
        self._lock = threading.Lock()
        self._value: Overview | None = None
        self._taken_at = 0.0

    def get(self, *, refresh: bool = False) -> Overview:
        with self._lock:
            fresh = time.monotonic() - self._taken_at < self._ttl
            if self._value is None or refresh or not fresh:
                self._value = collect_overview()
                self._taken_at = time.monotonic()
            return self._value
