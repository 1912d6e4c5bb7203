"""The Iceberg page at fleet scale: 1,000 tables' recorded health history in a real SQLite
state store (tests/support/health_seed.py, no Spark), served by a real Airflow api-server
with the plugin loaded (the session's deployment, tests/airflow/deployment.py), driven by
headless Chromium (Debian's, through Playwright) as a person uses it: pages, sorts by clicking
headers, searches by typing, opens a table and its charts; URLs typed wrong are answered with
the page and a message, never an error.

Every list is checked against the seeded model's order (tests/support/health_seed.py), and
every chart against its data: the Chart.js instance exists with one point per recorded check
(or bucket, or day) and its canvas has pixels drawn. Screenshots go to test-artifacts/ (or
$ICEFLOE_TEST_ARTIFACTS); one page's response time is measured.
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from icefloe_airflow.health_history import (
    HEALTH_CHECKS,
    HealthCheck,
    band_label,
    ensure_schema,
    fleet_size,
    latest_check,
    record_checks,
)
from icefloe_airflow.state import RUNS
from icefloe_airflow.state_db import create_state_engine
from playwright.sync_api import Page, sync_playwright
from sqlalchemy import delete, text

from icecore.catalog import catalog_from_settings
from tests.airflow.deployment import Deployment, icefloe_connection, state_store_uri
from tests.airflow.server import AirflowServer
from tests.airflow.test_trigger_forms import CHROMIUM, CHROMIUM_ARGS, artifacts_dir
from tests.airflow.test_ui import build_events, parse
from tests.support.health_seed import (
    CATALOG,
    CHECKS_PER_TABLE,
    HISTOGRAM_BOUNDS,
    Seeded,
    inputs,
    seed_fleet,
)

pytestmark = [pytest.mark.servers, pytest.mark.browser]

LIVE = "db.events"
PAGE_BUDGET_S = 1.0  # one page of the 1,000-table fleet, as the api-server answers it


@dataclass
class Fleet:
    server: AirflowServer
    page: Page
    seeded: Seeded
    errors: list[str]  # the browser's JavaScript errors and failed loads, whole module

    @property
    def url(self) -> str:
        return f"{self.server.base_url}/icefloe/"

    def html(self, query: str = "") -> str:
        response = self.server.get(f"/icefloe/{query}")
        assert response.status_code == 200, response.text[:2000]
        return response.text


def live_warehouse(warehouse: Path) -> Path:
    """A SQLite-catalog warehouse holding the one real table, `LIVE`, read live by the page."""
    warehouse.mkdir()
    catalog = catalog_from_settings(uri=None, name="default", warehouse=str(warehouse))
    catalog.create_namespace("db")
    catalog.register_table(LIVE, build_events(warehouse / "db" / "events").metadata_location)
    catalog.close()
    return warehouse


@pytest.fixture(scope="module")
def fleet(deployment: Deployment, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    home = tmp_path_factory.mktemp("fleet")
    # Airflow's `[icefloe] state_uri` is the fleet's: the other modules keep what they record
    # in their connections' own stores, and this module empties it again when done.
    engine = create_state_engine(deployment.state_uri)
    ensure_schema(engine)
    assert fleet_size(engine) == 0, "another module recorded checks in the fleet's store"
    try:
        seeded = seed_fleet(engine, tables=999)
        # One real table beside the fleet, listed in tables.yaml: read live, and charted from
        # the checks recorded of it too.
        warehouse = live_warehouse(home / "warehouse")
        live = [
            HealthCheck(
                LIVE, seeded.now_ms - k * 3_600_000, 50.0 + k, [], inputs(999, k), None, CATALOG
            )
            for k in range(5)
        ]
        record_checks(engine, CATALOG, live)
        seeded.latest[LIVE] = live[0]  # the fleet: 999 seeded tables and this one
        tables = [{"table": LIVE, "schedule": None}]
        connection = icefloe_connection(warehouse, name=CATALOG)  # its runs: the fleet's store
        with (
            deployment.configured(tables, connection) as server,
            sync_playwright() as playwright,
        ):
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(f"{server.base_url}/auth/token/login?next={server.base_url}/icefloe/")
            # Reading the live table found it changed since its last recorded check (the
            # seeded ones name no metadata): the page recorded one, now the table's latest.
            page_check = latest_check(engine, CATALOG, LIVE)
            assert page_check is not None and page_check.inputs["source"] == "page"
            seeded.latest[LIVE] = page_check
            yield Fleet(server, page, seeded, errors)
            browser.close()
    finally:
        with engine.begin() as conn:
            conn.execute(delete(HEALTH_CHECKS))
            conn.execute(delete(RUNS))
        engine.dispose()


def listed(html: str) -> list[str]:
    return list(parse(html, "data-fleet-table").rows)


def shown(page: Page) -> list[str]:
    return page.locator("#fleet tbody tr[data-fleet-table]").evaluate_all(
        "rows => rows.map(r => r.dataset.fleetTable)"
    )


def messages(html: str) -> list[str]:
    """The page's messages about its URL, as a person reads them."""
    found = re.findall(r'<div class="message" data-field="message">(.*?)</div>', html, re.S)
    return [unescape(m) for m in found]


def test_the_fleet_pages_on_the_server(fleet: Fleet) -> None:
    """Page 1 is the 50 worst tables, "next" shows the next 50, the last page the rest; the
    tables of the fleet are not read live (no section of live tables, no catalog errors)."""
    expected = fleet.seeded.order("score")
    page = fleet.page
    page.goto(fleet.url)
    assert page.locator("#fleet-size").inner_text() == "(1000 tables)"
    assert page.locator("#fleet-count").get_attribute("data-total") == "1000"
    assert shown(page) == expected[:50]
    follow(page, page.locator(".pager a[rel=next]").first.click, "/icefloe/?page=2")
    assert shown(page) == expected[50:100]
    assert page.locator(".pager .current").first.inner_text() == "page 2 of 20"
    follow(page, page.locator(".pager a[rel=last]").first.click, "/icefloe/?page=20")
    assert shown(page) == expected[950:]
    # Below the fleet, the tables.yaml table read live; the fleet's tables with runs are not
    # read live (they are not even in the catalog: each would show an error).
    html = fleet.html()
    assert "Checked live" in html and list(parse(html).rows) == [LIVE]
    assert 'data-field="error"' not in html
    assert listed(fleet.html("?per_page=200&page=3")) == expected[400:600]


def test_clicking_headers_sorts_both_ways(fleet: Fleet) -> None:
    page = fleet.page
    page.goto(fleet.url)
    score, size = page.locator("th[data-sort=score] a"), page.locator("th[data-sort=size] a")
    follow(page, score.click, "/icefloe/?order=desc")  # from worst first to best first
    assert shown(page) == fleet.seeded.order("score", descending=True)[:50]
    scores = [
        float(s)
        for s in page.locator("#fleet td[data-field=score]").evaluate_all(
            "cells => cells.map(c => c.dataset.value)"
        )
    ]
    assert scores == sorted(scores, reverse=True) and scores[0] == 100.0
    follow(page, score.click, "/icefloe/?")
    assert shown(page) == fleet.seeded.order("score")[:50]

    follow(page, size.click, "/icefloe/?sort=size")  # biggest first, then reversed
    assert shown(page) == fleet.seeded.order("size", descending=True)[:50]
    follow(page, size.click, "/icefloe/?sort=size&order=asc")
    assert shown(page) == fleet.seeded.order("size")[:50]
    for sort, order in (("due", "desc"), ("last_run", "desc"), ("last_run", "asc")):
        html = fleet.html(f"?sort={sort}&order={order}&page=2&per_page=10")
        assert listed(html) == fleet.seeded.order(sort, order == "desc")[10:20], (sort, order)


def test_typing_a_search_narrows_the_list_and_keeps_the_sort(fleet: Fleet) -> None:
    page = fleet.page
    page.goto(fleet.url + "?sort=size")  # biggest first (size's first direction)
    page.locator("#fleet-search input[name=q]").fill("t012")
    follow(page, page.locator("#fleet-search button[type=submit]").click, "?q=t012&sort=size")
    expected = [t for t in fleet.seeded.order("size", descending=True) if "t012" in t]
    assert shown(page) == expected and len(expected) == 10
    assert page.locator("#fleet-count").get_attribute("data-total") == "10"
    follow(page, page.locator("a", has_text="show all").click, "/icefloe/?sort=size")
    assert page.locator("#fleet-count").get_attribute("data-total") == "1000"
    assert listed(fleet.html("?q=no-such-table")) == []
    assert "No table matches" in fleet.html("?q=no-such-table")


@pytest.mark.parametrize(
    ("query", "message", "first"),
    [
        ("?sort=scroe", "cannot sort by 'scroe': sorted by health score", ("score", False, 0)),
        ("?sort=size&order=sideways", "'sideways' is neither asc nor desc", ("size", True, 0)),
        ("?page=-3", "page '-3' is not a page number: showing page 1", ("score", False, 0)),
        ("?page=2x", "page '2x' is not a page number: showing page 1", ("score", False, 0)),
        ("?page=999", "there are only 20 pages: showing page 20", ("score", False, 950)),
        ("?per_page=100000", "'100000' tables per page is not possible", ("score", False, 0)),
        ("?band=42", "score band '42' does not exist", ("score", False, 0)),
    ],
)
def test_a_url_typed_wrong_gets_the_page_and_a_message(
    fleet: Fleet, query: str, message: str, first: tuple[str, bool, int]
) -> None:
    html = fleet.html(query)
    assert any(message in m for m in messages(html)), messages(html)
    sort, descending, start = first
    assert listed(html)[:5] == fleet.seeded.order(sort, descending)[start : start + 5]
    as_json = fleet.server.get(f"/icefloe/api/fleet{query}")
    assert as_json.status_code == 200
    assert any(message in m for m in as_json.json()["messages"])


def test_the_fleet_chart_counts_tables_by_score_band(fleet: Fleet) -> None:
    page = fleet.page
    page.goto(fleet.url)
    chart = chart_data(page, "chart-bands")
    assert chart["labels"] == [band_label(b) for b in range(10)]
    assert chart["data"] == fleet.seeded.bands() and sum(chart["data"]) == 1000
    assert chart["painted"] > 2000
    screenshot(page, "icefloe-ui-fleet.png")
    box = page.locator("#chart-bands").bounding_box()
    assert box is not None
    # A click on the first bar lists that band's tables.
    x, y = box["x"] + box["width"] * 0.12, box["y"] + box["height"] * 0.5
    follow(page, lambda: page.mouse.click(x, y), "/icefloe/?band=0")
    total = int(page.locator("#fleet-count").get_attribute("data-total") or -1)
    assert total == fleet.seeded.bands()[0]
    worst = [t for t in fleet.seeded.order("score") if fleet.seeded.latest[t].score < 10]
    assert shown(page) == worst[:50]


def test_a_table_page_draws_its_history(fleet: Fleet) -> None:
    table = "sales.t0000"  # in the worst band, with rewrites on three days
    page = fleet.page
    page.goto(fleet.url + "?q=sales.t0000")
    # The fleet list shows its manifests with its other figures, from its latest check.
    latest_inputs = fleet.seeded.latest[table].inputs
    row = parse(fleet.html("?q=sales.t0000"), "data-fleet-table").rows[table]
    assert row["manifests"][0] == str(
        latest_inputs["data_manifests"] + latest_inputs["delete_manifests"]
    )
    link = page.get_by_role("link", name=table, exact=True)
    follow(page, link.click, f"/icefloe/tables/{table}?catalog=default")
    score = chart_data(page, "chart-score")
    assert score["data"] == [[x, y] for x, y in score["data"]] and len(score["data"]) == (
        CHECKS_PER_TABLE
    )
    assert score["data"][-1][1] == fleet.seeded.latest[table].score
    histogram = chart_data(page, "chart-histogram")
    latest = fleet.seeded.latest[table].inputs["size_histogram"]
    assert histogram["data"] == [count for _, count in latest]
    # Sizes as the jobs' options write them: KB, MB, GB are powers of 1024.
    assert len(histogram["labels"]) == len(HISTOGRAM_BOUNDS) and histogram["labels"][0] == "≤ 1 MB"
    deletes = chart_data(page, "chart-deletes")
    assert len(deletes["data"]) == CHECKS_PER_TABLE
    manifests = chart_data(page, "chart-manifests")  # data manifests, one point per check
    assert [y for _, y in manifests["data"]] == [
        inputs(0, k)["data_manifests"] for k in range(CHECKS_PER_TABLE)
    ]
    assert manifests["data"][-1][1] == fleet.seeded.latest[table].inputs["data_manifests"]
    rewritten = chart_data(page, "chart-rewritten")
    assert len(rewritten["data"]) == 30
    by_day = dict(zip(rewritten["labels"], rewritten["data"], strict=True))
    expected = {d: b for (t, d), b in fleet.seeded.rewritten.items() if t == table}
    assert {d: b for d, b in by_day.items() if b} == expected and len(expected) == 3
    for chart in (score, histogram, deletes, manifests, rewritten):
        assert chart["painted"] > 2000, chart
    assert page.locator("#facts dd[data-field=total_bytes]").get_attribute("data-value") == str(
        fleet.seeded.latest[table].inputs["total_bytes"]
    )
    assert page.locator("#due tr[data-due=yes]").count() == 2
    assert page.locator("#runs tr[data-state=failed]").count() == 1
    screenshot(page, "icefloe-ui-fleet-table.png")
    as_json = fleet.server.get(f"/icefloe/api/history/{table}").json()
    assert (as_json["catalog"], len(as_json["checks"])) == (CATALOG, CHECKS_PER_TABLE)
    assert as_json["checks"][-1]["score"] == fleet.seeded.latest[table].score


def test_a_live_tables_page_has_its_charts_and_its_partitions(fleet: Fleet) -> None:
    page = fleet.page
    page.goto(fleet.url + f"tables/{LIVE}")
    latest = fleet.seeded.latest[LIVE]  # the page's own check, after the five recorded
    assert chart_data(page, "chart-score")["data"] == [
        *([fleet.seeded.now_ms - k * 3_600_000, 50.0 + k] for k in reversed(range(5))),
        [latest.checked_at_ms, latest.score],
    ]
    assert page.locator("#partitions tr[data-partition]").count() == 2


def test_the_browser_saw_no_script_errors(fleet: Fleet) -> None:
    """After the browser's tests: every page they opened loaded its scripts and ran them."""
    assert fleet.errors == []


def test_unknown_table_is_a_404_page(fleet: Fleet) -> None:
    response = fleet.server.get("/icefloe/tables/sales.nowhere")
    assert response.status_code == 404 and "sales.nowhere" in response.text
    assert fleet.server.get("/icefloe/api/history/sales.nowhere").status_code == 404


def test_a_page_of_the_1000_table_fleet_answers_fast(fleet: Fleet) -> None:
    """The whole response of the api-server (auth, the queries, the template) for pages deep
    in the list and searched, measured from the client."""
    timings = []
    for query in ("?page=7", "?sort=size&order=desc&page=12", "?q=ops.&sort=last_run", "?page=2"):
        fleet.html(query)  # warm
        for _ in range(3):
            start = time.perf_counter()
            fleet.html(query)
            timings.append(time.perf_counter() - start)
    median = statistics.median(timings)
    (artifacts_dir() / "icefloe-ui-fleet-timing.txt").write_text(
        f"1000 tables, {len(timings)} page views: median {median * 1000:.0f} ms, "
        f"max {max(timings) * 1000:.0f} ms\n"
    )
    assert max(timings) < PAGE_BUDGET_S, timings


def follow(page: Page, click: Callable[[], None], url_end: str) -> None:
    """`click` a link (or a button, a chart), and wait until the page it opens has loaded."""
    with page.expect_navigation(wait_until="load"):
        click()
    assert page.url.endswith(url_end), page.url


def chart_data(page: Page, canvas_id: str) -> dict[str, Any]:
    """The Chart.js instance on a canvas: labels, the first dataset's data, and how many of
    the canvas's pixels are painted (a blank canvas has none)."""
    page.wait_for_function("window.Chart !== undefined")
    return page.evaluate(
        """(id) => {
          const canvas = document.getElementById(id);
          const chart = Chart.getChart(canvas);
          if (!chart) return null;
          const pixels = canvas.getContext("2d")
              .getImageData(0, 0, canvas.width, canvas.height).data;
          let painted = 0;
          for (let i = 3; i < pixels.length; i += 4) if (pixels[i] > 0) painted += 1;
          const data = chart.data.datasets[0].data.map(
              (p) => (p !== null && typeof p === "object" ? [p.x, p.y] : p));
          return {labels: chart.data.labels || [], data, painted};
        }""",
        canvas_id,
    )


def screenshot(page: Page, name: str) -> None:
    path = artifacts_dir() / name
    path.unlink(missing_ok=True)
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000


def test_an_unreadable_history_leaves_the_live_tables(
    deployment: Deployment, tmp_path: Path
) -> None:
    """Airflow's `[icefloe] state_uri` answers, but the fleet's history cannot be read from it
    (its table is gone; the connection keeps its own store, so its tables are still read
    live): the page answers with a notice naming the problem, the fleet's JSON endpoints say
    503, a live table's page still opens; with the table back, the fleet is read again."""
    warehouse = live_warehouse(tmp_path / "warehouse")
    own_store = state_store_uri(tmp_path)
    connection = icefloe_connection(warehouse, name=CATALOG, state_uri=own_store)
    tables = [{"table": LIVE, "schedule": None}]
    engine = create_state_engine(deployment.state_uri)
    history, away = HEALTH_CHECKS.name, f"{HEALTH_CHECKS.name}_away"
    with deployment.configured(tables, connection) as server:
        assert server.get("/icefloe/api/fleet").status_code == 200  # the store is read
        with engine.begin() as conn:
            conn.execute(text(f"ALTER TABLE {history} RENAME TO {away}"))
        try:
            index = server.get("/icefloe/")
            assert index.status_code == 200, index.text[:2000]
            assert "the fleet&#39;s health history cannot be read: OperationalError" in index.text
            assert list(parse(index.text).rows) == [LIVE]
            assert 'data-field="error"' not in index.text
            for path in ("/icefloe/api/fleet", f"/icefloe/api/history/{LIVE}"):
                response = server.get(path)
                assert response.status_code == 503
                assert "OperationalError" in response.json()["detail"]
            table = server.get(f"/icefloe/tables/{LIVE}")
            assert table.status_code == 200
            assert "the table&#39;s health history cannot be read" in table.text
            assert 'id="partitions"' in table.text
        finally:
            with engine.begin() as conn:
                conn.execute(text(f"ALTER TABLE {away} RENAME TO {history}"))
            engine.dispose()
        assert server.get("/icefloe/api/fleet").status_code == 200
