"""The page's fleet view: the tables whose health checks are recorded in the state store
(`icefloe_airflow.health_history`), paged, sorted and searched by the database, and the data
of the charts.

Query parameters come from URLs people type, edit and share, so none of them can fail a
request: an unknown sort key, a page that is not a number or out of range, a size too large,
each falls back to a sane value and says so in a message shown above the list (FastAPI's own
validation would answer 422 with a JSON body instead of the page).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlencode

from sqlalchemy import Engine

from icefloe_airflow import health_history as hh
from icefloe_airflow.catalog_watch.state import TableChangeSeen, WatchStore
from icefloe_airflow.state import MaintenanceStore
from icefloe_airflow.state_db import configured_state_uri, create_state_engine

DEFAULT_PER_PAGE = 50
PER_PAGE_CHOICES = (25, 50, 100, 200)
MAX_SEARCH = 200
# Each key's first direction: the worst, the biggest, the busiest, the least recently
# maintained first; clicking the header again reverses it.
DEFAULT_ORDER = {"score": "asc", "size": "desc", "due": "desc", "last_run": "asc", "table": "asc"}
SORT_LABELS = {
    "score": "health score",
    "size": "size",
    "due": "due jobs",
    "last_run": "last run",
    "table": "table name",
}


@dataclass
class FleetParams:
    """The validated view (as `FleetQuery`), the messages about what was corrected, and the
    URL parameters that reproduce it."""

    query: hh.FleetQuery
    messages: list[str] = field(default_factory=list)

    @property
    def order(self) -> str:
        return "desc" if self.query.descending else "asc"

    def params(self, **changes: Any) -> dict[str, str]:
        """This view's URL parameters (defaults left out), with `changes` applied."""
        q = self.query
        values: dict[str, Any] = {
            "q": q.search,
            "sort": q.sort,
            "order": self.order,
            "page": q.page,
            "per_page": q.per_page,
            "catalog": q.catalog,
            "band": q.band,
        }
        values.update(changes)
        defaults = {"q": "", "sort": "score", "page": 1, "per_page": DEFAULT_PER_PAGE}
        out = {}
        for key, value in values.items():
            if value is None or defaults.get(key) == value:
                continue
            if key == "order" and value == DEFAULT_ORDER[values["sort"]]:
                continue
            out[key] = str(value)
        return out

    def url(self, **changes: Any) -> str:
        """A relative link (`?sort=size&order=desc`) to this view with `changes`."""
        return "?" + urlencode(self.params(**changes))

    def sort_url(self, key: str) -> str:
        """The header link: sort by `key` in its first direction, or reverse the current."""
        if key == self.query.sort:
            order = "asc" if self.query.descending else "desc"
        else:
            order = DEFAULT_ORDER[key]
        return self.url(sort=key, order=order, page=1)


def _integer(value: str | None) -> int | None:
    try:
        return None if value is None else int(value.strip())
    except ValueError:
        return None


def parse_params(raw: Mapping[str, str]) -> FleetParams:
    """Validate the fleet list's query parameters; every problem becomes a message and a
    fallback, never an error."""
    messages: list[str] = []
    search = (raw.get("q") or "").strip()
    if len(search) > MAX_SEARCH:
        messages.append(f"search cut to its first {MAX_SEARCH} characters")
        search = search[:MAX_SEARCH]

    sort = (raw.get("sort") or "score").strip().lower()
    if sort not in hh.SORT_KEYS:
        messages.append(
            f"cannot sort by {raw.get('sort')!r}: sorted by health score instead "
            f"(sort by one of {', '.join(hh.SORT_KEYS)})"
        )
        sort = "score"

    order = (raw.get("order") or DEFAULT_ORDER[sort]).strip().lower()
    if order not in ("asc", "desc"):
        messages.append(
            f"order {raw.get('order')!r} is neither asc nor desc: {DEFAULT_ORDER[sort]}"
        )
        order = DEFAULT_ORDER[sort]

    page = _integer(raw.get("page", "1"))
    if page is None or page < 1:
        messages.append(f"page {raw.get('page')!r} is not a page number: showing page 1")
        page = 1

    per_page = _integer(raw.get("per_page", str(DEFAULT_PER_PAGE)))
    if per_page is None or not 1 <= per_page <= hh.MAX_PER_PAGE:
        fallback = DEFAULT_PER_PAGE if per_page is None or per_page < 1 else hh.MAX_PER_PAGE
        messages.append(
            f"{raw.get('per_page')!r} tables per page is not possible "
            f"(1 to {hh.MAX_PER_PAGE}): showing {fallback}"
        )
        per_page = fallback

    band: int | None = None
    if raw.get("band") not in (None, ""):
        band = _integer(raw.get("band"))
        if band is None or not 0 <= band <= 9:
            messages.append(f"score band {raw.get('band')!r} does not exist (0 to 9): all shown")
            band = None

    catalog = (raw.get("catalog") or "").strip() or None
    query = hh.FleetQuery(search, sort, order == "desc", page, per_page, catalog, band)
    return FleetParams(query, messages)


@dataclass
class FleetView:
    """Everything the fleet section of the page shows."""

    params: FleetParams
    page: hh.FleetPage
    size: int  # tables with a recorded check, before the search
    bands: list[int]
    rewritten: list[tuple[str, int]]
    catalogs: list[str]

    def charts(self) -> dict[str, Any]:
        """The charts' data, embedded in the page as JSON (see static/charts.js)."""
        return {
            "bands": {
                "labels": [hh.band_label(b) for b in range(10)],
                "counts": self.bands,
                "links": [self.params.url(band=b, page=1) for b in range(10)],
            },
            "fleet_rewritten": {
                "days": [day for day, _ in self.rewritten],
                "bytes": [value for _, value in self.rewritten],
            },
        }

    def to_dict(self) -> dict[str, Any]:
        q = self.params.query
        return {
            "total": self.page.total,
            "fleet_size": self.size,
            "page": self.page.page,
            "pages": self.page.pages,
            "per_page": self.page.per_page,
            "sort": q.sort,
            "order": self.params.order,
            "search": q.search,
            "catalog": q.catalog,
            "band": q.band,
            "messages": list(self.params.messages),
            "score_bands": {hh.band_label(b): n for b, n in enumerate(self.bands)},
            "tables": [
                {
                    **row.check.to_dict(),
                    "last_run": None
                    if row.last_run is None
                    else {
                        "job": row.last_run.job,
                        "state": row.last_run.state,
                        "at": row.last_run.at.isoformat(),
                        "error": row.last_run.error,
                    },
                }
                for row in self.page.rows
            ],
        }


@dataclass
class TableHistory:
    """One table's recorded checks and rewrites, for its page's charts."""

    catalog: str
    table: str
    checks: list[hh.HealthCheck]
    rewritten: list[tuple[str, int]]
    other_catalogs: list[str]

    @property
    def latest(self) -> hh.HealthCheck | None:
        return self.checks[-1] if self.checks else None

    def charts(self) -> dict[str, Any]:
        latest = self.latest
        histogram = (latest.inputs.get("size_histogram") if latest else None) or []
        return {
            "score": [[c.checked_at_ms, c.score] for c in self.checks],
            "deletes": [
                [c.checked_at_ms, c.number("delete_files"), c.number("delete_records")]
                for c in self.checks
            ],
            "manifests": [
                [
                    c.checked_at_ms,
                    c.number("data_manifests"),
                    c.number("delete_manifests"),
                    c.number("small_manifests"),
                ]
                for c in self.checks
                if c.number("data_manifests") is not None  # checks before manifests counted
            ],
            "histogram": [
                list(pair)
                for pair in histogram
                if isinstance(pair, list | tuple) and len(pair) == 2
            ],
            "rewritten": {
                "days": [day for day, _ in self.rewritten],
                "bytes": [value for _, value in self.rewritten],
            },
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "catalog": self.catalog,
            "table": self.table,
            "checks": [c.to_dict() for c in self.checks],
            "bytes_rewritten_per_day": dict(self.rewritten),
        }


class FleetHistory:
    """The state store the page reads the fleet from: Airflow's `[icefloe] state_uri` (a
    connection's own `state_uri` keeps its run history apart, but the fleet DAG records its
    checks in the shared store). The engine is made on first use and kept."""

    def __init__(self, uri: str | None = None) -> None:
        self._uri = uri
        self._engine: Engine | None = None
        self._lock = threading.Lock()

    @property
    def engine(self) -> Engine:
        with self._lock:
            if self._engine is None:
                engine = create_state_engine(self._uri or configured_state_uri())
                try:
                    hh.ensure_schema(engine)  # with the run history's, which the queries join
                except Exception:
                    engine.dispose()  # tried again at the next request
                    raise
                self._engine = engine
            return self._engine

    def view(self, params: FleetParams) -> FleetView:
        engine = self.engine
        page = hh.fleet_page(engine, params.query)
        q = params.query
        if page.page != q.page:
            params.messages.append(
                f"there {'is' if page.pages == 1 else 'are'} only {page.pages} "
                f"page{'s' if page.pages != 1 else ''}: showing page {page.page}"
            )
            params.query = replace(q, page=page.page)
        return FleetView(
            params,
            page,
            hh.fleet_size(engine),
            hh.score_bands(engine, q.catalog, q.search),
            hh.bytes_rewritten_per_day(engine, q.catalog, None),
            hh.catalogs(engine),
        )

    def table(self, table: str, catalog: str | None) -> TableHistory | None:
        """The table's checks and rewrites in `catalog` (default: the first catalog with a
        check of it); None when there is neither."""
        engine = self.engine
        found = hh.table_catalogs(engine, table)
        if catalog is None:
            if not found:
                return None
            catalog = found[0]
        checks = hh.table_checks(engine, catalog, table)
        rewritten = hh.bytes_rewritten_per_day(engine, catalog, table)
        if not checks and not any(value for _, value in rewritten):
            return None
        return TableHistory(catalog, table, checks, rewritten, [c for c in found if c != catalog])

    def recent_runs(self, catalog: str, table: str, limit: int = 20) -> list[Any]:
        return MaintenanceStore(self.engine, catalog).recent_runs(table, limit=limit)

    def last_seen(self, catalog: str, table: str) -> TableChangeSeen | None:
        """When a watcher last saw the table change (`icefloe_airflow.catalog_watch`)."""
        return WatchStore(self.engine, catalog).last_seen(table)
