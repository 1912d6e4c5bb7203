"""The history of table health checks in icefloe's state store, and the queries the UI runs
over it.

Every check of a table's health is recorded here, one row per table and check: when, the
table's metadata location, the score (0..100) and its inputs, and the jobs that were due. The
fleet DAG and `icefloe health` record every table of a catalog they check; the
self-optimizing DAG's health tasks, every job run through Airflow (once it succeeded) and the
Iceberg page's live reads (when the table changed since its latest check) record theirs, so
each table the platform looks at has a history to chart. The UI reads it instead of opening
thousands of tables: the latest check of each table pages, sorts and searches in SQL, and a
table's checks over time draw its charts. Bytes rewritten come from the run history
(`icefloe_airflow.state`), which keeps every run's charted figures (its result's `figures()`)
in columns of their own.

`HEALTH_CHECKS` is the one definition of the table, for the writers (all of the above) and the
reader (the UI) alike; it is created on first use, like the state store's other tables.
Columns, all portable between SQLite and PostgreSQL:

- `catalog`, `table_name` ("ns.name"), `checked_at_ms` (epoch ms): indexed together, so the
  latest check of each table and one table's series are index walks, not scans;
- `metadata_location` (nullable): lets a checker skip a table whose metadata is unchanged;
- `score` (float 0..100, 100 = nothing to do);
- `due_json`: the JSON list of the job names that were due;
- `inputs_json`: the JSON object of the score's inputs (`report_inputs`: `data_files`,
  `small_files`, `delete_files`, `delete_records`, `total_bytes`, `equality_deletes`,
  `data_manifests`, `delete_manifests`, `small_manifests`, `manifest_bytes` (the snapshot's
  manifests, every spec's), `size_histogram` as a list of `[upper_bound_bytes, count]`,
  every job's `decisions` and the `penalties` that explain the score, `source`: who
  checked). Writers pass Python lists and dicts; keys the UI does not know are kept and
  ignored.

Sorting by size or by the number of due jobs reads inside the JSON columns (JSON_EXTRACT on
SQLite, `->>` on PostgreSQL): that touches only the latest check per table, a few thousand
rows, so no extra column is needed and the writers' contract stays these seven columns.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Engine,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    and_,
    case,
    func,
    insert,
    inspect,
    or_,
    select,
    tuple_,
)
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.elements import ColumnElement

from icefloe_airflow.health_model import Assessment, health_summary
from icefloe_airflow.policy import MaintenancePolicy
from icefloe_airflow.state import RUNS, MaintenanceStore

if TYPE_CHECKING:
    from icecore.health import HealthReport

_METADATA = MetaData()
HEALTH_CHECKS = Table(
    "icefloe_health_checks",
    _METADATA,
    # A surrogate key: two checks of one table may share a millisecond (the latest is then the
    # one recorded last).
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("catalog", String(255), nullable=False),
    Column("table_name", String(1024), nullable=False),
    Column("checked_at_ms", BigInteger, nullable=False),
    Column("metadata_location", Text),
    Column("score", Float, nullable=False),
    Column("due_json", JSON, nullable=False),
    Column("inputs_json", JSON, nullable=False),
    Index("ix_icefloe_health_checks_table_time", "catalog", "table_name", "checked_at_ms"),
)

FLEET_SOURCE = "fleet"  # `source` of the checks the fleet DAG and `icefloe health` record
INGEST_JOB = "ingest"  # ingestion is recorded as a run too, but it is not maintenance
BAND_WIDTH = 10  # score bands 0-9, 10-19, ..., 90-100
SORT_KEYS = ("score", "size", "due", "last_run", "table")
MAX_PER_PAGE = 200
DAY_MS = 86_400_000


def ensure_schema(engine: Engine) -> None:
    """Create the health-check table (and its index) if missing, and the run history's tables,
    which the queries join; safe against a concurrent creator, as `MaintenanceStore` is."""
    MaintenanceStore(engine)
    if HEALTH_CHECKS.name in inspect(engine).get_table_names():
        return
    try:
        _METADATA.create_all(engine, checkfirst=True)
    except DBAPIError:
        if HEALTH_CHECKS.name not in inspect(engine).get_table_names():
            raise


@dataclass(frozen=True)
class HealthCheck:
    """One check of one table; `inputs` holds the score's inputs. `catalog` is filled in when
    read back (`record_checks` takes the catalog once for all its checks)."""

    table: str
    checked_at_ms: int
    score: float
    due: list[str] = field(default_factory=list)
    inputs: dict[str, Any] = field(default_factory=dict)
    metadata_location: str | None = None
    catalog: str = ""

    @property
    def checked_at(self) -> datetime:
        return datetime.fromtimestamp(self.checked_at_ms / 1000, tz=UTC)

    def number(self, key: str) -> float | None:
        """An input as a number, or None when absent or not numeric (a writer's choice)."""
        value = self.inputs.get(key)
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "catalog": self.catalog,
            "table": self.table,
            "checked_at": self.checked_at.isoformat(),
            "metadata_location": self.metadata_location,
            "score": self.score,
            "due": list(self.due),
            "inputs": dict(self.inputs),
        }


def record_checks(engine: Engine, catalog: str, checks: Iterable[HealthCheck]) -> int:
    """Insert `checks` of `catalog`'s tables in one transaction; returns how many."""
    ensure_schema(engine)
    rows = [
        {
            "catalog": catalog,
            "table_name": c.table,
            "checked_at_ms": int(c.checked_at_ms),
            "metadata_location": c.metadata_location,
            "score": float(c.score),
            "due_json": list(c.due),
            "inputs_json": dict(c.inputs),
        }
        for c in checks
    ]
    if rows:
        with engine.begin() as conn:
            conn.execute(insert(HEALTH_CHECKS), rows)
    return len(rows)


def report_inputs(
    report: HealthReport, policy: MaintenancePolicy, assessment: Assessment
) -> dict[str, Any]:
    """A measured table's `inputs` (the keys the UI's charts, sorts and explanations read), the
    same whoever checked it."""
    totals = report.totals
    deletes = (totals.position_deletes, totals.equality_deletes, totals.deletion_vectors)
    return {
        "data_files": totals.data.files,
        "small_files": totals.small_data.files,
        "total_bytes": totals.data.bytes,
        "delete_files": sum(d.files for d in deletes),
        "delete_records": sum(d.records for d in deletes),
        "equality_deletes": totals.equality_deletes.files,
        "data_manifests": report.manifests.data_manifests,
        "delete_manifests": report.manifests.delete_manifests,
        "small_manifests": report.manifests.small_manifests,
        "manifest_bytes": report.manifests.bytes,
        "size_histogram": report.size_histogram_bounds(),
        "health": health_summary(report),
        "policy": policy.to_dict(),
        "decisions": [d.to_dict() for d in assessment.decisions],
        "penalties": [p.to_dict() for p in assessment.penalties],
    }


def assessed_check(
    table: str,
    report: HealthReport,
    policy: MaintenancePolicy,
    assessment: Assessment,
    *,
    source: str,
    metadata_location: str | None,
) -> HealthCheck:
    """The history row of one table measured and assessed now (`source`: who checked: `health
    task`, `job`, `page`)."""
    return HealthCheck(
        table=table,
        checked_at_ms=report.computed_at_ms,
        score=float(assessment.score),
        due=[d.job for d in assessment.due],
        inputs={**report_inputs(report, policy, assessment), "source": source},
        metadata_location=metadata_location,
    )


def latest_check(engine: Engine, catalog: str, table: str) -> HealthCheck | None:
    checks = table_checks(engine, catalog, table, limit=1)
    return checks[0] if checks else None


def _check(row: Any) -> HealthCheck:
    return HealthCheck(
        table=row.table_name,
        checked_at_ms=row.checked_at_ms,
        score=row.score,
        due=list(_json(row.due_json) or []),
        inputs=dict(_json(row.inputs_json) or {}),
        metadata_location=row.metadata_location,
        catalog=row.catalog,
    )


def _json(value: Any) -> Any:
    """A JSON column's value; a writer that stored serialized text is read the same."""
    return json.loads(value) if isinstance(value, str) else value


def _latest() -> Any:
    """Select: the latest check of each table (the newest `checked_at_ms`; of checks sharing
    it, the one recorded last). Two GROUP BYs the index answers (on SQLite without reading a
    row), then one row per table by primary key: ten times faster than ROW_NUMBER() over the
    whole history, which sorts every check."""
    h = HEALTH_CHECKS.c
    newest = (
        select(h.catalog, h.table_name, func.max(h.checked_at_ms).label("at"))
        .group_by(h.catalog, h.table_name)
        .subquery("newest")
    )
    ids = (
        select(func.max(h.id).label("id"))
        .join(
            newest,
            and_(
                h.catalog == newest.c.catalog,
                h.table_name == newest.c.table_name,
                h.checked_at_ms == newest.c.at,
            ),
        )
        .group_by(h.catalog, h.table_name)
        .subquery("ids")
    )
    return select(HEALTH_CHECKS).join(ids, h.id == ids.c.id)


def _last_runs() -> Any:
    """Subquery: each table's latest maintenance run start (ingestion excluded)."""
    return (
        select(
            RUNS.c.catalog_name,
            RUNS.c.table_name,
            func.max(RUNS.c.started_at_ms).label("last_run_ms"),
        )
        .where(RUNS.c.job != INGEST_JOB)
        .group_by(RUNS.c.catalog_name, RUNS.c.table_name)
        .subquery("last_runs")
    )


@dataclass(frozen=True)
class FleetQuery:
    """What the fleet list shows: a search, a sort, a page; already validated (see the UI)."""

    search: str = ""
    sort: str = "score"
    descending: bool = False
    page: int = 1
    per_page: int = 50
    catalog: str | None = None
    band: int | None = None  # only tables whose score is in this band (0..9)


@dataclass(frozen=True)
class LastRun:
    job: str
    state: str
    started_at_ms: int
    finished_at_ms: int | None
    error: str | None

    @property
    def at(self) -> datetime:
        return datetime.fromtimestamp((self.finished_at_ms or self.started_at_ms) / 1000, tz=UTC)


@dataclass(frozen=True)
class FleetRow:
    check: HealthCheck
    last_run: LastRun | None


@dataclass(frozen=True)
class FleetPage:
    rows: list[FleetRow]
    total: int  # tables matching the search (all pages)
    page: int
    per_page: int

    @property
    def pages(self) -> int:
        return max(1, math.ceil(self.total / self.per_page))


def _like(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _band_of(score: Any) -> Any:
    """SQL for a score's band (0..9; 100 falls in the last): CASE, since casting a float to
    an integer truncates on SQLite but rounds on PostgreSQL."""
    whens = [(score < (band + 1) * BAND_WIDTH, band) for band in range(9)]
    return case(*whens, else_=9)


def _filtered(query: FleetQuery) -> tuple[Any, Any]:
    """The latest checks matching `query`'s search, catalog and band, joined to each table's
    last run; returns (select, the latest-check subquery)."""
    latest = _latest().subquery("latest")
    runs = _last_runs()
    conditions: list[ColumnElement[bool]] = []
    if query.search:
        conditions.append(latest.c.table_name.ilike(_like(query.search), escape="\\"))
    if query.catalog:
        conditions.append(latest.c.catalog == query.catalog)
    if query.band is not None:
        conditions.append(_band_of(latest.c.score) == query.band)
    joined = latest.outerjoin(
        runs,
        and_(runs.c.catalog_name == latest.c.catalog, runs.c.table_name == latest.c.table_name),
    )
    stmt = select(latest, runs.c.last_run_ms).select_from(joined).where(*conditions)
    return stmt, (latest, runs)


def _order(query: FleetQuery, latest: Any, runs: Any) -> list[Any]:
    """ORDER BY for a whitelisted sort key; absent values (no size recorded, never run) go
    last either way, and ties fall back to the table's name so pages never overlap."""
    keys: dict[str, Any] = {
        "score": latest.c.score,
        "size": latest.c.inputs_json["total_bytes"].as_float(),
        "due": func.json_array_length(latest.c.due_json),
        "last_run": runs.c.last_run_ms,
        "table": latest.c.table_name,
    }
    key = keys[query.sort]
    direction = key.desc() if query.descending else key.asc()
    return [case((key.is_(None), 1), else_=0), direction, latest.c.table_name, latest.c.catalog]


def fleet_page(engine: Engine, query: FleetQuery) -> FleetPage:
    """One page of the latest checks, sorted and searched in SQL (LIMIT/OFFSET)."""
    if query.sort not in SORT_KEYS:
        raise ValueError(f"unknown sort key {query.sort!r}: one of {', '.join(SORT_KEYS)}")
    per_page = max(1, min(MAX_PER_PAGE, query.per_page))
    stmt, (latest, runs) = _filtered(query)
    with engine.connect() as conn:
        total = conn.execute(select(func.count()).select_from(stmt.subquery())).scalar_one()
        page = max(1, min(query.page, max(1, math.ceil(total / per_page))))
        found = conn.execute(
            stmt.order_by(*_order(query, latest, runs))
            .limit(per_page)
            .offset((page - 1) * per_page)
        ).all()
        last = _last_run_rows(conn, [(r.catalog, r.table_name) for r in found])
    rows = [FleetRow(_check(r), last.get((r.catalog, r.table_name))) for r in found]
    return FleetPage(rows, total, page, per_page)


def _last_run_rows(conn: Any, tables: Sequence[tuple[str, str]]) -> dict[tuple[str, str], LastRun]:
    """The latest-started maintenance run of each of `tables` (one page's worth), the run the
    `last_run` sort orders by."""
    if not tables:
        return {}
    newest = (
        select(RUNS.c.catalog_name, RUNS.c.table_name, func.max(RUNS.c.started_at_ms).label("at"))
        .where(
            tuple_(RUNS.c.catalog_name, RUNS.c.table_name).in_(list(tables)),
            RUNS.c.job != INGEST_JOB,
        )
        .group_by(RUNS.c.catalog_name, RUNS.c.table_name)
        .subquery()
    )
    stmt = (
        select(RUNS)
        .join(
            newest,
            and_(
                RUNS.c.catalog_name == newest.c.catalog_name,
                RUNS.c.table_name == newest.c.table_name,
                RUNS.c.started_at_ms == newest.c.at,
            ),
        )
        .where(RUNS.c.job != INGEST_JOB)
        .order_by(RUNS.c.id)  # of runs started in one millisecond, the last recorded wins
    )
    return {
        (r.catalog_name, r.table_name): LastRun(
            r.job, r.state, r.started_at_ms, r.finished_at_ms, r.error
        )
        for r in conn.execute(stmt)
    }


def fleet_size(engine: Engine, catalog: str | None = None) -> int:
    """How many tables have at least one recorded check."""
    h = HEALTH_CHECKS.c
    tables = select(h.catalog, h.table_name).distinct()
    if catalog:
        tables = tables.where(h.catalog == catalog)
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(tables.subquery())).scalar_one())


def catalogs(engine: Engine) -> list[str]:
    """The catalogs with recorded checks, sorted."""
    with engine.connect() as conn:
        return sorted(conn.execute(select(HEALTH_CHECKS.c.catalog).distinct()).scalars())


def fleet_tables(engine: Engine, catalog: str) -> set[str]:
    """The tables of `catalog` whose latest check a fleet made (`source` fleet, or none: the
    fleet's rows before checks named their source): the page lists them from their checks,
    and reads the others live. Reads the latest row per table only."""
    latest = _latest().where(HEALTH_CHECKS.c.catalog == catalog).subquery("latest")
    source = latest.c.inputs_json["source"].as_string()
    stmt = select(latest.c.table_name).where(or_(source.is_(None), source == FLEET_SOURCE))
    with engine.connect() as conn:
        return set(conn.execute(stmt).scalars())


def table_catalogs(engine: Engine, table: str) -> list[str]:
    """The catalogs in which `table` has recorded checks, sorted."""
    h = HEALTH_CHECKS.c
    with engine.connect() as conn:
        rows = conn.execute(select(h.catalog).where(h.table_name == table).distinct())
        return sorted(rows.scalars())


def score_bands(engine: Engine, catalog: str | None = None, search: str = "") -> list[int]:
    """How many tables' latest score falls in each band: ten counts, 0-9 first."""
    latest = _latest().subquery("latest")
    band = _band_of(latest.c.score).label("band")
    stmt = select(band, func.count()).group_by(band)
    if catalog:
        stmt = stmt.where(latest.c.catalog == catalog)
    if search:
        stmt = stmt.where(latest.c.table_name.ilike(_like(search), escape="\\"))
    counts = [0] * 10
    with engine.connect() as conn:
        for index, count in conn.execute(stmt):
            counts[int(index)] = int(count)
    return counts


def table_checks(engine: Engine, catalog: str, table: str, limit: int = 500) -> list[HealthCheck]:
    """A table's latest `limit` checks, oldest first (the charts' time series)."""
    h = HEALTH_CHECKS.c
    stmt = (
        select(HEALTH_CHECKS)
        .where(h.catalog == catalog, h.table_name == table)
        .order_by(h.checked_at_ms.desc(), h.id.desc())
        .limit(limit)
    )
    with engine.connect() as conn:
        rows = conn.execute(stmt).all()
    return [_check(r) for r in reversed(rows)]


def bytes_rewritten_per_day(
    engine: Engine,
    catalog: str | None,
    table: str | None,
    *,
    days: int = 30,
    now_ms: int | None = None,
) -> list[tuple[str, int]]:
    """(UTC day, bytes) for each of the last `days` days, zero days included, from the
    successful runs' `rewritten_bytes` column; one table, or every table when `table` is
    None. Summed by day in SQL."""
    now = datetime.now(UTC) if now_ms is None else datetime.fromtimestamp(now_ms / 1000, tz=UTC)
    today = now.date().toordinal()
    since_ms = int(datetime.fromordinal(today - days + 1).replace(tzinfo=UTC).timestamp() * 1000)
    finished = func.coalesce(RUNS.c.finished_at_ms, RUNS.c.started_at_ms)
    day = (finished // DAY_MS).label("day")  # integer division on both databases
    stmt = (
        select(day, func.sum(RUNS.c.rewritten_bytes))
        .where(RUNS.c.state == "success", finished >= since_ms, RUNS.c.rewritten_bytes > 0)
        .group_by(day)
    )
    if catalog is not None:
        stmt = stmt.where(RUNS.c.catalog_name == catalog)
    if table is not None:
        stmt = stmt.where(RUNS.c.table_name == table)
    with engine.connect() as conn:
        totals = {int(d): int(b) for d, b in conn.execute(stmt)}
    epoch = date(1970, 1, 1).toordinal()
    return [
        (datetime.fromordinal(d).date().isoformat(), totals.get(d - epoch, 0))
        for d in range(today - days + 1, today + 1)
    ]


def band_label(band: int) -> str:
    low = band * BAND_WIDTH
    return f"{low}-{100 if band == 9 else low + BAND_WIDTH - 1}"
