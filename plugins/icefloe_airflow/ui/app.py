"""The FastAPI app behind the icefloe page, mounted by the api-server at `/icefloe`.

    GET /icefloe/                      the fleet (paged, sorted, searched) and every table
                                       checked live (HTML)
    GET /icefloe/tables/{table}        one table: charts of its history, partitions, due jobs,
                                       recent runs (HTML; ?catalog= picks among catalogs)
    GET /icefloe/api/tables            the live overview as JSON
    GET /icefloe/api/tables/{table}    one table as JSON, with partitions and runs
    GET /icefloe/api/fleet             one page of the fleet as JSON (the page's parameters)
    GET /icefloe/api/history/{table}   one table's recorded checks and bytes rewritten per day
    ?refresh=true on any of them skips the cache

Two sources, one page. The fleet is what the fleet DAG records in the state store, one health
check per table and run (`icefloe_airflow.health_history`): the page pages, sorts and searches
it in SQL and never opens those tables, so it stays fast with thousands. Tables listed in
tables.yaml, and tables with runs but no recorded check, are read live from their catalogs
(`ui.status`), as before the fleet existed. The charts are drawn by Chart.js, shipped in
static/ (deployments are often offline; see static/README.md), from JSON embedded in the page.

Plain server-rendered HTML with relative links only, so the page works wherever the
api-server is served from (behind a proxy, under a base path, inside the Airflow UI's iframe).
Jinja2 autoescaping is on for every template: table names, partition values, job results and
error messages all come from data users control.

Access: plugin apps are not protected by Airflow by default, and this page reveals table
layouts and maintenance errors, so every route requires a user the auth manager lets see the
Airflow website (a JWT in the Authorization header, or the UI's `_token` cookie). Only the
api-server imports this module (see `icefloe_airflow.plugin`), so Airflow's API security
layer is imported here freely.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.api_fastapi.auth.managers.models.resource_details import AccessView
from airflow.api_fastapi.core_api.security import requires_access_view
from fastapi import Depends, FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, FileSystemLoader, select_autoescape

from icecore.jobs.grammar import describe_size
from icefloe_airflow.catalog_watch.assets import commit_words
from icefloe_airflow.job_dags import job_dag_id
from icefloe_airflow.policy import JOB_ORDER
from icefloe_airflow.results import brief, describe
from icefloe_airflow.ui.fleet import DEFAULT_ORDER, PER_PAGE_CHOICES, SORT_LABELS, FleetHistory
from icefloe_airflow.ui.fleet import parse_params as parse_fleet_params
from icefloe_airflow.ui.status import Overview, StatusCache, describe_error, set_off_of

log = logging.getLogger(__name__)

TEMPLATES = Path(__file__).with_name("templates")
STATIC = Path(__file__).with_name("static")


def _when(value: datetime | None) -> str:
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M:%S UTC")


def _when_ms(value: int | None) -> str:
    """An instant in epoch milliseconds (the trash's records), as `when` writes datetimes."""
    return "" if value is None else _when(datetime.fromtimestamp(value / 1000, tz=UTC))


def _duration(value: timedelta | float | int | None) -> str:
    """`3d 4h`, `5m 12s`, `1.2s`: the two largest units are enough to read at a glance."""
    if value is None:
        return ""
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds < 60:
        return f"{seconds:.1f}s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{int(count)}{unit}")
    return " ".join(parts[:2])


def _score_class(score: int | None) -> str:
    if score is None:
        return "unknown"
    return "good" if score >= 80 else "fair" if score >= 50 else "poor"


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(["html"], default_for_string=True, default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        when=_when,
        when_ms=_when_ms,
        duration=_duration,
        brief=brief,
        size=describe_size,
        score_class=_score_class,
        as_json=lambda v: json.dumps(v, indent=1, sort_keys=True, default=str),
    )
    env.globals.update(
        JOB_ORDER=JOB_ORDER,
        describe=describe,
        commit_words=commit_words,
        job_dag_id=job_dag_id,
        SORT_LABELS=SORT_LABELS,
        DEFAULT_ORDER=DEFAULT_ORDER,
        PER_PAGE_CHOICES=PER_PAGE_CHOICES,
    )
    return env


def create_app(history: FleetHistory | None = None) -> FastAPI:
    """The page's app, over a short-lived cache of the live tables' status and the fleet's
    recorded history (`history`: the configured state store by default)."""
    status = StatusCache()
    fleet = history or FleetHistory()
    templates = _environment()
    app = FastAPI(
        title="icefloe",
        description="Health and maintenance of the Iceberg tables icefloe maintains.",
        # Airflow's own check that the caller may see the Airflow website.
        dependencies=[Depends(requires_access_view(AccessView.WEBSITE))],
        docs_url=None,
        redoc_url=None,
    )

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    def render(name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        html = templates.get_template(name).render(**context)
        return HTMLResponse(html, status_code=status_code)

    @app.get("/", response_class=HTMLResponse)
    def index(request: Request, refresh: bool = False) -> HTMLResponse:
        overview = status.get(refresh=refresh)
        try:
            view, problem = fleet.view(parse_fleet_params(request.query_params)), None
        except Exception as exc:  # the live tables still show
            log.warning("icefloe UI: cannot read the fleet's history: %s", exc, exc_info=True)
            view, problem = (
                None,
                f"the fleet's health history cannot be read: {describe_error(exc)}",
            )
        return render("index.html", overview=overview, fleet=view, problem=problem, root="./")

    @app.get("/tables/{table}", response_class=HTMLResponse)
    def table_page(table: str, catalog: str | None = None, refresh: bool = False) -> HTMLResponse:
        overview = status.get(refresh=refresh)
        found = overview.find(table)
        history, runs, problem, seen = None, [], None, found.last_seen if found else None
        try:
            history = fleet.table(table, catalog or (found.catalog_name if found else None))
            if found is None and history is not None:
                runs = fleet.recent_runs(history.catalog, table)
                seen = fleet.last_seen(history.catalog, table)
        except Exception as exc:
            log.warning("icefloe UI: cannot read %s's history: %s", table, exc, exc_info=True)
            problem = f"the table's health history cannot be read: {describe_error(exc)}"
        if found is None and history is None:
            context = {"overview": overview, "table": table, "problem": problem}
            return render("missing.html", 404, **context, root="../")
        set_off = found.set_off if found else set_off_of(runs)
        context = {"overview": overview, "t": found, "history": history, "runs": runs}
        context.update(last_seen=seen, causes=lambda r: set_off.get(f"{r.dag_id}/{r.run_id}", []))
        return render("table.html", **context, problem=problem, root="../")

    @app.get("/api/tables")
    def tables_json(refresh: bool = False) -> JSONResponse:
        return JSONResponse(status.get(refresh=refresh).to_dict())

    @app.get("/api/tables/{table}")
    def table_json(table: str, refresh: bool = False) -> JSONResponse:
        overview: Overview = status.get(refresh=refresh)
        found = overview.find(table)
        if found is None:
            return JSONResponse({"detail": f"table {table} is not maintained"}, 404)
        return JSONResponse(found.to_dict(detail=True))

    @app.get("/api/fleet")
    def fleet_json(request: Request) -> JSONResponse:
        try:
            view = fleet.view(parse_fleet_params(request.query_params))
        except Exception as exc:
            log.warning("icefloe UI: cannot read the fleet's history: %s", exc, exc_info=True)
            return JSONResponse({"detail": describe_error(exc)}, 503)
        return JSONResponse(view.to_dict())

    @app.get("/api/history/{table}")
    def history_json(table: str, catalog: str | None = None) -> JSONResponse:
        try:
            history = fleet.table(table, catalog)
        except Exception as exc:
            log.warning("icefloe UI: cannot read %s's history: %s", table, exc, exc_info=True)
            return JSONResponse({"detail": describe_error(exc)}, 503)
        if history is None:
            return JSONResponse({"detail": f"no recorded health check of {table}"}, 404)
        return JSONResponse(history.to_dict())

    return app
