"""The health-check history's queries on a real state store (SQLite, and PostgreSQL when a
server answers) holding 1,000 tables' checks (tests/support/health_seed.py): the latest check
per table, sorts and their tie-breaks, search (with LIKE's wildcards taken literally), score
bands, series and bytes rewritten per day. JSON is read differently by each database
(JSON_EXTRACT, `->>`), hence both.

The UI test (test_ui_fleet.py) shows the same through the api-server and a browser; here each
query is checked against the seeded model for every sort key, both directions, cheaply.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from icefloe_airflow import health_history as hh
from icefloe_airflow.state import RUNS
from icefloe_airflow.state_db import create_state_engine
from sqlalchemy import Engine, delete, inspect

from tests.support.catalogs import POSTGRES_URI, postgres_unavailable, unique_catalog_name
from tests.support.health_seed import (
    CHECKS_PER_TABLE,
    Seeded,
    inputs,
    seed_fleet,
    table_name,
)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def fleet(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Engine, Seeded]]:
    """1,000 tables' history under a catalog name of its own (PostgreSQL outlives the test,
    and other tests share it: every query below names the catalog)."""
    if request.param == "sqlite":
        uri = f"sqlite:///{tmp_path_factory.mktemp('history') / 'icefloe_state.db'}"
    elif reason := postgres_unavailable():
        pytest.skip(reason)
    else:
        uri = POSTGRES_URI
    engine = create_state_engine(uri)
    seeded = seed_fleet(engine, catalog=unique_catalog_name())
    yield engine, seeded
    with engine.begin() as conn:
        conn.execute(delete(hh.HEALTH_CHECKS).where(hh.HEALTH_CHECKS.c.catalog == seeded.catalog))
        conn.execute(delete(RUNS).where(RUNS.c.catalog_name == seeded.catalog))
    engine.dispose()


def names(page: hh.FleetPage) -> list[str]:
    return [row.check.table for row in page.rows]


def test_the_table_and_its_index_are_created(fleet: tuple[Engine, Seeded]) -> None:
    engine, _ = fleet
    indexes = inspect(engine).get_indexes(hh.HEALTH_CHECKS.name)
    assert [(i["name"], i["column_names"]) for i in indexes] == [
        ("ix_icefloe_health_checks_table_time", ["catalog", "table_name", "checked_at_ms"])
    ]
    hh.ensure_schema(engine)  # again: nothing to do, no error


@pytest.mark.parametrize("sort", hh.SORT_KEYS)
@pytest.mark.parametrize("descending", [False, True])
def test_every_sort_pages_through_the_latest_checks(
    fleet: tuple[Engine, Seeded], sort: str, descending: bool
) -> None:
    engine, seeded = fleet
    c = seeded.catalog
    expected = seeded.order(sort, descending)
    for page in (1, 2, 20):
        query = hh.FleetQuery(sort=sort, descending=descending, page=page, per_page=50, catalog=c)
        found = hh.fleet_page(engine, query)
        assert (found.total, found.pages, found.page) == (1000, 20, page)
        assert names(found) == expected[(page - 1) * 50 : page * 50]
    # The rows carry the latest check, not an earlier one that scored differently.
    row = found.rows[0]
    assert row.check == seeded.latest[row.check.table]


def test_the_last_run_is_the_latest_maintenance_not_ingest(fleet: tuple[Engine, Seeded]) -> None:
    engine, seeded = fleet
    found = hh.fleet_page(
        engine, hh.FleetQuery(sort="last_run", descending=True, per_page=25, catalog=seeded.catalog)
    )
    ran = [row for row in found.rows if row.last_run is not None]
    assert len(ran) == len(seeded.last_run_ms) == 20
    for row in ran:
        assert row.last_run is not None
        assert row.last_run.job != "ingest"
        assert row.last_run.started_at_ms == seeded.last_run_ms[row.check.table]
    assert all(row.last_run is None for row in found.rows[20:])  # never run: last


def test_search_narrows_and_takes_wildcards_literally(fleet: tuple[Engine, Seeded]) -> None:
    engine, seeded = fleet
    c = seeded.catalog
    found = hh.fleet_page(engine, hh.FleetQuery(search="T012", catalog=c))  # any case
    expected = [n for n in seeded.order("score") if "t012" in n]
    assert names(found) == expected and found.total == 10
    assert hh.fleet_page(engine, hh.FleetQuery(search="%", catalog=c)).total == 0
    assert (
        hh.fleet_page(engine, hh.FleetQuery(search="s_t", catalog=c)).total == 0
    )  # `_` is not "any"
    assert hh.fleet_page(engine, hh.FleetQuery(search="sales.", catalog=c)).total == 250
    nothing = hh.fleet_page(engine, hh.FleetQuery(search="nowhere", page=3, catalog=c))
    assert (nothing.total, nothing.pages, nothing.page, nothing.rows) == (0, 1, 1, [])


def test_score_bands_count_the_latest_scores(fleet: tuple[Engine, Seeded]) -> None:
    engine, seeded = fleet
    c = seeded.catalog
    bands = hh.score_bands(engine, c)
    assert bands == seeded.bands() and sum(bands) == 1000
    assert hh.score_bands(engine, c, search="sales.") == [
        sum(1 for n, c in seeded.latest.items() if n.startswith("sales.") and c.score // 10 == b)
        + (1 if b == 9 else 0)
        * sum(1 for n, c in seeded.latest.items() if n.startswith("sales.") and c.score == 100)
        for b in range(10)
    ]
    band = hh.fleet_page(engine, hh.FleetQuery(band=0, per_page=200, catalog=c))
    assert band.total == seeded.bands()[0]
    assert all(row.check.score < 10 for row in band.rows)


def test_a_tables_series_and_bytes_rewritten_per_day(fleet: tuple[Engine, Seeded]) -> None:
    engine, seeded = fleet
    checks = hh.table_checks(engine, seeded.catalog, table_name(50))
    assert len(checks) == CHECKS_PER_TABLE
    assert [c.inputs for c in checks] == [inputs(50, k) for k in range(CHECKS_PER_TABLE)]
    assert checks == sorted(checks, key=lambda c: c.checked_at_ms)
    assert checks[-1] == seeded.latest[table_name(50)]

    days = hh.bytes_rewritten_per_day(engine, seeded.catalog, table_name(50), now_ms=seeded.now_ms)
    assert len(days) == 30 and days == sorted(days)
    expected = {day: b for (table, day), b in seeded.rewritten.items() if table == table_name(50)}
    assert {day: b for day, b in days if b} == expected and len(expected) == 3
    fleet_days = dict(
        hh.bytes_rewritten_per_day(engine, seeded.catalog, None, now_ms=seeded.now_ms)
    )
    assert sum(fleet_days.values()) == sum(seeded.rewritten.values())


def test_the_latest_of_two_checks_in_one_millisecond_is_the_last_recorded(
    tmp_path: Path,
) -> None:
    engine = create_state_engine(f"sqlite:///{tmp_path / 'state.db'}")
    first = hh.HealthCheck("db.t", 1000, 10.0, [], {"total_bytes": 1})
    hh.record_checks(engine, "c", [first, hh.HealthCheck("db.t", 1000, 90.0, ["x"], {})])
    hh.record_checks(engine, "other", [hh.HealthCheck("db.t", 5000, 50.0)])
    (row,) = hh.fleet_page(engine, hh.FleetQuery(catalog="c")).rows
    assert (row.check.score, row.check.due, row.check.catalog) == (90.0, ["x"], "c")
    assert hh.fleet_size(engine) == 2 and hh.catalogs(engine) == ["c", "other"]
    assert hh.table_catalogs(engine, "db.t") == ["c", "other"]
    with pytest.raises(ValueError, match="unknown sort key"):
        hh.fleet_page(engine, hh.FleetQuery(sort="score; DROP TABLE x"))
    engine.dispose()


def test_a_page_of_a_1000_table_fleet_is_fast(fleet: tuple[Engine, Seeded]) -> None:
    """The queries one page view runs (page + count, bands, the fleet's rewrites), well under
    the UI's budget; the api-server's whole response is timed in test_ui_fleet.py."""
    engine, seeded = fleet
    c = seeded.catalog
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        hh.fleet_page(engine, hh.FleetQuery(sort="size", descending=True, page=7, catalog=c))
        hh.score_bands(engine, c)
        hh.bytes_rewritten_per_day(engine, c, None)
        best = min(best, time.perf_counter() - start)
    assert best < 0.5, f"{best:.3f}s"
