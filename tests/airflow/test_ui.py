"""The icefloe page, served by a real Airflow api-server with the plugin loaded from plugins/
(the session's deployment, tests/airflow/deployment.py), over real tables whose health icecore
computes, opened in headless Chromium.

The tables are written without Spark (tests/support/tables.py writes real Parquet data,
position and equality delete files and commits them), registered in a SQLite catalog, and
the `iceberg_default` connection is created through the REST API, as a user would in the UI,
so the page reads it from Airflow's metadata database. Every number the page shows is checked
against `table.health()` on the same table, cell by cell.

The screenshots are kept in test-artifacts/ (or $ICEFLOE_TEST_ARTIFACTS).
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest
from icefloe_airflow.health_model import Assessment, assess
from icefloe_airflow.policy import JOB_ORDER, MaintenancePolicy
from icefloe_airflow.state import MaintenanceStore

from icecore.catalog import SqlCatalog, catalog_from_settings
from icecore.catalog.sql import TABLES
from icecore.health import HealthReport
from icecore.jobs.grammar import describe_size
from icecore.table import Table
from icecore.trash import Trash
from icecore.trash.records import ORPHAN
from tests.airflow.deployment import Deployment, icefloe_connection, state_store_uri
from tests.airflow.server import AirflowServer
from tests.support.samples import PSCHEMA, spec_of
from tests.support.tables import LocalTable

pytestmark = [pytest.mark.servers, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
TARGET = 20_000  # bytes: every file these tests write is small (< 0.75 x TARGET)
EVENTS_POLICY = {"minor_file_count": 2}
HOSTILE_ERROR = "ValueError: partition <script>alert('x')</script> & \"quotes\""


def artifacts_dir() -> Path:
    path = Path(os.environ.get("ICEFLOE_TEST_ARTIFACTS") or ROOT / "test-artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


def rows(category: str, *ids: int) -> list[dict[str, Any]]:
    return [{"id": i, "category": category, "ts": 1_700_000_000_000_000 + i} for i in ids]


def build_events(location: Path) -> LocalTable:
    """Partitions a and b; 5 small data files, two position delete files in a, an equality
    delete in b; 3 snapshots."""
    props = {"write.target-file-size-bytes": str(TARGET)}
    t = LocalTable.create(location, PSCHEMA, spec_of(("category", "identity", "category")), props)
    a1, a2 = t.write_data(rows("a", 1, 2)), t.write_data(rows("a", 3, 4))
    t.commit(add=[a1, a2, t.write_data(rows("b", 10, 11, 12))])
    t.commit(add=[t.write_data(rows("a", 5)), t.write_data(rows("b", 13))])
    t.commit(
        add=[
            t.write_position_deletes([(a1.file_path, 0)]),
            t.write_position_deletes([(a2.file_path, 1)]),
            t.write_equality_deletes(rows("b", 11), ["id"]),
        ]
    )
    return t


def build_users(location: Path) -> LocalTable:
    """One data file above the small-file threshold: a healthy table."""
    t = LocalTable.create(location, PSCHEMA, properties={"write.target-file-size-bytes": "1000"})
    t.commit(add=[t.write_data(rows("u", 1, 2, 3))])
    return t


def trash_a_stray_file(table: Table) -> int:
    """Orphan removal's doing, by hand: one file moved into the table's trash (its summary
    written, as every run writes it); the file's size."""
    trash = Trash.of(table)
    stray = f"{table.metadata.location}/data/stray.parquet"
    table.io.write_bytes(stray, b"s" * 3000)
    now_ms = int(time.time() * 1000)
    record = trash.new_record("remove_orphan_files", [(stray, ORPHAN, 3000)], now_ms=now_ms)
    assert table.io.move_many(trash.begin(record)) == {}
    trash.finish(record.run)
    trash.write_summary(now_ms)
    return 3000


def record_runs(state_uri: str) -> None:
    store = MaintenanceStore.open(state_uri)
    failed = store.start_run(
        "db.events",
        "convert_equality_deletes",
        dag_id="icefloe_convert_equality_deletes",
        run_id="manual__2026-01-02T03:04:05+00:00",
        task_id="convert_equality_deletes",
        try_number=1,
    )
    store.finish_run(failed, state="failed", error=HOSTILE_ERROR)
    done = store.start_run(
        "db.users",
        "rewrite_data_files",
        dag_id="icefloe_rewrite_data_files",
        run_id="manual__2026-01-02T05:00:00+00:00",
        task_id="rewrite_data_files",
        try_number=1,
    )
    store.finish_run(
        done,
        state="success",
        result={"rewritten_data_files": 3, "added_data_files": 1, "rewritten_bytes": 4242},
    )
    ingested = store.start_run(  # after the compaction: not the "last maintenance" run
        "db.users",
        "ingest",
        dag_id="icefloe_ingest",
        run_id="manual__2026-01-02T06:00:00+00:00",
        task_id="ingest",
        try_number=1,
    )
    store.finish_run(ingested, state="success", result={"mode": "append", "rows": 3})
    store.close()


class Cells(HTMLParser):
    """`<tr data-table|data-partition=KEY>` rows -> {KEY: {data-field: (text, data-value)}};
    also collects every href."""

    def __init__(self, row_attr: str = "data-table") -> None:
        super().__init__()
        self.row_attr = row_attr
        self.rows: dict[str, dict[str, tuple[str, str | None]]] = {}
        self.hrefs: list[str] = []
        self._row: str | None = None
        self._cell: tuple[str, str | None] | None = None
        self._text: list[str] = []
        self._depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("href") is not None:
            self.hrefs.append(a["href"] or "")
        if tag == "tr" and a.get(self.row_attr) is not None:
            self._row = a[self.row_attr]
            self.rows[self._row or ""] = {}
        elif tag == "td" and self._row is not None and a.get("data-field"):
            self._cell = (a["data-field"] or "", a.get("data-value"))
            self._text = []
            self._depth = 0
        elif tag == "td" and self._cell is not None:
            self._depth += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None:
            if self._depth:
                self._depth -= 1
                return
            assert self._row is not None
            text = " ".join(" ".join(self._text).split())
            self.rows[self._row][self._cell[0]] = (text, self._cell[1])
            self._cell = None
        elif tag == "tr":
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._text.append(data)


def assessed(report: HealthReport, policy: MaintenancePolicy) -> Assessment:
    """What the page must say of a table none of whose jobs ever ran."""
    return assess(report, policy, {}, datetime.now(UTC))


def parse(html: str, row_attr: str = "data-table") -> Cells:
    cells = Cells(row_attr)
    cells.feed(html)
    return cells


@dataclass
class UI:
    server: AirflowServer
    catalog: SqlCatalog
    before_connection: dict[str, Any]

    def expected(
        self, table: str, policy: dict[str, Any] | None = None
    ) -> tuple[HealthReport, MaintenancePolicy]:
        report = self.catalog.load_table(table).health()
        return report, MaintenancePolicy.from_mapping(policy)


@pytest.fixture(scope="module")
def ui(deployment: Deployment, tmp_path_factory: pytest.TempPathFactory) -> Iterator[UI]:
    warehouse = tmp_path_factory.mktemp("ui") / "warehouse"
    warehouse.mkdir()
    catalog = catalog_from_settings(uri=None, name="default", warehouse=str(warehouse))
    assert isinstance(catalog, SqlCatalog)
    catalog.create_namespace("db")
    events_table = catalog.register_table(
        "db.events", build_events(warehouse / "db" / "events").metadata_location
    )
    trash_a_stray_file(events_table)
    users = catalog.register_table(
        "db.users", build_users(warehouse / "db" / "users").metadata_location
    )
    # Another engine registered a second table on db.users's metadata (icecore refuses to).
    with catalog.engine.begin() as conn:
        conn.execute(
            TABLES.insert().values(
                catalog_name="default",
                table_namespace="db",
                table_name="users_copy",
                metadata_location=users.metadata_location,
                iceberg_type="TABLE",
            )
        )
    # The runs live in a state store of their own (a SQLite file beside the catalog's), the
    # connection's.
    state_uri = state_store_uri(warehouse.parent)
    record_runs(state_uri)
    events = {"table": "db.events", "schedule": "@daily", "thresholds": EVENTS_POLICY}
    ghost = {"table": "db.ghost", "schedule": None}
    # The page first answers with no connection; then the REST API defines it, as a user
    # would in the UI.
    tables = [events, ghost]
    with deployment.configured(tables, connection=None) as server:
        before = server.get("/icefloe/api/tables")
        assert before.status_code == 200, before.text
        connection = icefloe_connection(warehouse, state_uri=state_uri)
        with deployment.configured(tables, connection):
            yield UI(server, catalog, before.json())
    catalog.close()


def test_plugin_is_registered_with_its_nav_entry(ui: UI) -> None:
    plugins = ui.server.get("/api/v2/plugins").json()["plugins"]
    (plugin,) = [p for p in plugins if p["name"] == "icefloe"]
    assert [(a["name"], a["url_prefix"]) for a in plugin["fastapi_apps"]] == [
        ("icefloe", "/icefloe")
    ]
    (view,) = plugin["external_views"]
    assert (view["href"], view["url_route"], view["destination"]) == ("icefloe/", "icefloe", "nav")
    assert "icefloe_airflow.plugin" in plugin["source"]  # the package's entry point
    # The package itself is hidden from the folder scan, so nothing was imported twice.
    assert ui.server.get("/api/v2/plugins/importErrors").json()["import_errors"] == []


def test_plugin_loads_once_and_cheaply_outside_the_api_server() -> None:
    """Every Airflow process (scheduler, dag-processor, task workers) loads plugins: ours must
    come in by its package name only (no `hook`/`state` modules from a folder scan) and
    without importing the web app, which only the api-server needs."""
    probe = (
        "import sys\n"
        "from airflow import plugins_manager\n"
        "plugins, errors = plugins_manager._get_plugins()\n"
        "print([p.name for p in plugins], errors)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('hook', 'state', 'policy', 'plugin', 'app', 'status', 'icefloe_airflow')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    names_and_errors, modules = result.stdout.strip().splitlines()[-2:]
    assert names_and_errors == "['icefloe'] {}"
    # The run-note listener is one small module; the web app stays out.
    assert modules == (
        "['icefloe_airflow', 'icefloe_airflow.plugin', 'icefloe_airflow.provider_info', "
        "'icefloe_airflow.run_notes']"
    )


def test_the_connection_form_shows_icefloes_fields(ui: UI) -> None:
    """The api-server's metadata for the connection form, as the UI fetches it: icefloe's
    fields and behaviour, from the provider info."""
    meta = ui.server.get("/ui/connections/hook_meta")
    assert meta.status_code == 200, meta.text
    [icefloe] = [m for m in meta.json() if m["connection_type"] == "icefloe"]
    assert icefloe["hook_name"] == "Iceberg catalog (icefloe)"
    fields = icefloe["extra_fields"]
    assert {name.rsplit("__", 1)[-1] for name in fields} == {
        "catalog_type",
        "uri",
        "warehouse",
        "catalog_name",
        "properties",
        "token",
    }
    standard = icefloe["standard_fields"]
    assert standard["password"]["title"] == "Database password / REST client secret"
    assert standard["login"]["title"] == "REST client ID"
    assert standard["host"]["hidden"] is True


def test_page_is_behind_airflow_auth(ui: UI) -> None:
    """The server runs in all-admins mode (Airflow adds an admin token to every request that
    has none), so what shows the check is wired in is a bad token being refused."""
    for path in ("/icefloe/", "/icefloe/api/tables", "/icefloe/tables/db.events"):
        response = httpx.get(
            ui.server.base_url + path, headers={"Authorization": "Bearer not-a-jwt"}
        )
        assert response.status_code == 403, (path, response.text)
        assert response.json() == {"detail": "Invalid JWT token"}


def test_overview_shows_the_health_report_numbers(ui: UI) -> None:
    response = ui.server.get("/icefloe/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    page = parse(response.text)
    assert list(page.rows) == ["db.events", "db.ghost", "db.users"]  # config order, then runs

    for table, policy_values in (("db.events", EVENTS_POLICY), ("db.users", None)):
        report, policy = ui.expected(table, policy_values)
        totals = report.totals
        cells = page.rows[table]
        text = {field: value[0] for field, value in cells.items()}
        assert text["data_files"] == str(totals.data.files)
        assert text["data_records"] == str(totals.data.records)
        assert text["position_delete_files"] == str(totals.position_deletes.files)
        assert text["equality_delete_files"] == str(totals.equality_deletes.files)
        assert text["small_files"] == str(totals.small_data.files)
        assert text["snapshots"] == str(report.snapshot_count)
        assert cells["data_bytes"][1] == str(totals.data.bytes)
        deletes = totals.position_deletes.bytes + totals.equality_deletes.bytes
        assert cells["delete_bytes"][1] == str(deletes)
        manifests = report.manifests
        assert cells["manifests"][1] == str(manifests.data_manifests + manifests.delete_manifests)
        assessment = assessed(report, policy)
        score, due = assessment.score, assessment.due
        # The score, then every point it lost in words (or that nothing costs anything).
        assert cells["score"][1] == str(score)
        words = " ".join([str(score), *assessment.explanation()])
        if not assessment.penalties:
            words = f"{score} Nothing costs readers anything."
        assert cells["score"][0].startswith(words), cells["score"][0]
        shown = [w for w in text["due"].split() if w not in ("run", "now")]  # its buttons
        assert shown == ([d.job for d in due] or ["nothing"])
        assert text["due"].count("run now") == len(due)

    # The trash: size and oldest entry; db.users has none.
    trash = page.rows["db.events"]
    assert trash["trash_bytes"][1] == "3000" and "oldest" in trash["trash_bytes"][0]
    assert page.rows["db.users"]["trash_bytes"] == ("empty", "0")

    events = ui.expected("db.events")[0].totals
    # The table really is unhealthy in every way the page reports.
    assert (events.data.files, events.small_data.files) == (5, 5)
    assert (events.position_deletes.files, events.equality_deletes.files) == (2, 1)
    assert int(page.rows["db.events"]["score"][1]) < int(page.rows["db.users"]["score"][1])

    last = {t: page.rows[t]["last_run"][0] for t in ("db.events", "db.users")}
    assert last["db.events"].startswith("convert_equality_deletes failed")
    assert HOSTILE_ERROR in last["db.events"]  # shown whole, as text
    assert last["db.users"].startswith("rewrite_data_files success")  # not the later ingest
    assert "rewrote 3 data files (4.1 KB) into 1, removed 0 delete files" in last["db.users"]
    assert "last ingest" in last["db.users"]


def test_tables_sharing_a_location_are_flagged(ui: UI) -> None:
    """db.users_copy shares db.users's location: both are flagged (orphan removal refuses to
    run on either), db.events is not."""
    overview = {t["table"]: t for t in ui.server.get("/icefloe/api/tables").json()["tables"]}
    assert overview["db.users"]["location_overlaps"] == [
        {"other": "db.users_copy", "problem": True, "detail": "same location as db.users_copy"}
    ]
    assert overview["db.events"]["location_overlaps"] == []
    page = parse(ui.server.get("/icefloe/").text)
    assert "location overlaps db.users_copy" in page.rows["db.users"]["table"][0]
    assert "overlaps" not in page.rows["db.events"]["table"][0]
    detail = ui.server.get("/icefloe/tables/db.users").text
    assert "Location conflict with db.users_copy: same location as db.users_copy" in detail


def test_one_broken_table_shows_its_error_and_nothing_else_breaks(ui: UI) -> None:
    ghost = parse(ui.server.get("/icefloe/").text).rows["db.ghost"]
    assert "db.ghost" in ghost["error"][0]
    assert set(ghost) == {"table", "score", "error", "last_run"}
    detail = ui.server.get("/icefloe/tables/db.ghost")
    assert detail.status_code == 200
    assert "db.ghost" in detail.text
    assert ui.server.get("/icefloe/tables/db.nowhere").status_code == 404


def test_page_survives_a_missing_connection(ui: UI) -> None:
    """Before the connection existed the page still answered, naming the problem."""
    before = ui.before_connection
    assert any("iceberg_default" in notice for notice in before["notices"])
    assert [t["table"] for t in before["tables"]] == ["db.events", "db.ghost"]
    assert all("iceberg_default" in t["error"] for t in before["tables"])


def test_everything_is_escaped_and_links_are_relative(ui: UI) -> None:
    html = ui.server.get("/icefloe/").text
    assert "<script>" not in html
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &#34;quotes&#34;" in html
    for path in ("/icefloe/", "/icefloe/tables/db.events"):
        hrefs = parse(ui.server.get(path).text).hrefs
        assert hrefs
        assert not [h for h in hrefs if h.startswith(("/", "http:", "https:"))], hrefs


def test_table_view_shows_partitions_due_jobs_and_runs(ui: UI) -> None:
    report, policy = ui.expected("db.events", EVENTS_POLICY)
    html = ui.server.get("/icefloe/tables/db.events").text
    partitions = parse(html, "data-partition").rows
    assert list(partitions) == [p.path for p in report.partitions] == ["category=a", "category=b"]
    for p in report.partitions:
        text = {field: value[0] for field, value in partitions[p.path].items()}
        assert text == {
            "data_files": str(p.data.files),
            "data_bytes": text["data_bytes"],
            "data_records": str(p.data.records),
            "small_files": str(p.small_data.files),
            "position_delete_files": str(p.position_deletes.files),
            "position_delete_records": str(p.position_deletes.records),
            "equality_delete_files": str(p.equality_deletes.files),
            "equality_delete_records": str(p.equality_deletes.records),
            "dangling_delete_files": str(p.dangling_delete_files),
        }
        assert partitions[p.path]["data_bytes"][1] == str(p.data.bytes)

    expected = assessed(report, policy).due
    for job in JOB_ORDER:  # every job, due or not, with why
        due = "yes" if job in [d.job for d in expected] else "no"
        assert f'<tr data-job="{job}" data-due="{due}"><td class="job">{job}</td>' in html
        assert f'data-dag="icefloe_{job}" data-job="{job}"' in html  # its "run now"
    assert "rewrite_position_deletes" in [d.job for d in expected]  # minor_file_count: 2
    # The manifests every scan's planning opens, per spec and content, small ones apart.
    manifests = parse(html, "data-manifests").rows
    assert {key: {f: v[0] for f, v in row.items()} for key, row in manifests.items()} == {
        f"{spec}/{kind}": {
            "manifests": str(counts.manifests),
            "bytes": describe_size(counts.bytes),
            "small_manifests": str(counts.small_manifests),
            "small_bytes": describe_size(counts.small_bytes),
        }
        for spec, kind, counts in report.manifests.groups()
    }
    assert list(manifests) == ["0/data", "0/delete"]  # two data commits, one of deletes
    assert manifests["0/data"]["manifests"][0] == "2"
    # Its trash, run by run, with when each is purged (3 days after it was removed).
    [(run, cells)] = parse(html, "data-run").rows.items()
    assert run.split("-", 1)[1].startswith("remove_orphan_files-")
    assert (cells["files"][0], cells["bytes"][1]) == ("1", "3000")
    removed, due = int(cells["removed"][1]), int(cells["purge_due"][1])
    assert due - removed == 3 * 86_400_000
    assert "no live equality delete files" not in html  # db.events has one: due, with why
    assert 'data-state="failed"' in html


def test_json_matches_the_health_report(ui: UI) -> None:
    overview = ui.server.get("/icefloe/api/tables").json()
    assert [t["table"] for t in overview["tables"]] == ["db.events", "db.ghost", "db.users"]
    report, policy = ui.expected("db.events", EVENTS_POLICY)
    detail = ui.server.get("/icefloe/api/tables/db.events").json()
    assessment = assessed(report, policy)
    assert detail["score"] == assessment.score
    assert detail["penalties"] == [p.to_dict() for p in assessment.penalties]
    assert [d["job"] for d in detail["due"]] == [d.job for d in assessment.due]
    assert detail["report"]["totals"] == report.totals.to_dict()
    assert detail["report"]["partitions"] == [p.to_dict() for p in report.partitions]
    assert detail["report"]["manifests"] == report.manifests.to_json()
    assert detail["health"]["data_manifests"] == report.manifests.data_manifests == 2
    assert detail["policy"]["minor_file_count"] == 2
    assert detail["last_run"]["error"] == HOSTILE_ERROR
    assert [r["job"] for r in detail["recent_runs"]] == ["convert_equality_deletes"]
    assert ui.server.get("/icefloe/api/tables/db.nowhere").status_code == 404


def chromium(url: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Headless Debian Chromium (`make browser` installs it: not a reason to skip)."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: run `make browser` (apt-get install chromium)")
    command = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        *args,
        url,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)


def png_size_and_colours(path: Path) -> tuple[int, int, int]:
    """(width, height, distinct byte values in the image data): a blank page has few."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    idat, offset = b"", 8
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        if kind == b"IDAT":
            idat += data[offset + 8 : offset + 8 + length]
        offset += 12 + length
    return width, height, len(set(zlib.decompress(idat)))


def test_page_renders_in_headless_chromium(ui: UI, tmp_path: Path) -> None:
    page_url = f"{ui.server.base_url}/icefloe/"
    dom = chromium(page_url, tmp_path / "profile", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-3000:]
    page = parse(dom.stdout)
    report = ui.expected("db.events")[0]
    events = page.rows["db.events"]
    assert events["data_files"][0] == str(report.totals.data.files)
    assert events["position_delete_files"][0] == str(report.totals.position_deletes.files)
    assert events["equality_delete_files"][0] == str(report.totals.equality_deletes.files)
    assert "db.ghost" in page.rows["db.ghost"]["error"][0]

    screenshot = artifacts_dir() / "icefloe-ui-tables.png"
    screenshot.unlink(missing_ok=True)
    shot = chromium(
        page_url, tmp_path / "profile", f"--screenshot={screenshot}", "--window-size=1600,900"
    )
    assert shot.returncode == 0, shot.stderr[-3000:]
    width, height, colours = png_size_and_colours(screenshot)
    assert (width, height) == (1600, 900)
    assert colours > 50, "the screenshot is (nearly) blank"

    detail_shot = artifacts_dir() / "icefloe-ui-table-db.events.png"
    detail_shot.unlink(missing_ok=True)
    detail = chromium(
        page_url + "tables/db.events",
        tmp_path / "profile",
        f"--screenshot={detail_shot}",
        "--window-size=1600,2000",  # down to the manifests and partitions
    )
    assert detail.returncode == 0, detail.stderr[-3000:]
    assert png_size_and_colours(detail_shot)[:2] == (1600, 2000)
    shutil.rmtree(tmp_path / "profile", ignore_errors=True)


class Tags(HTMLParser):
    """The attributes of every `tag` element of a document."""

    def __init__(self, tag: str) -> None:
        super().__init__()
        self.tag = tag
        self.found: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == self.tag:
            self.found.append(dict(attrs))


def tags(html: str, tag: str) -> list[dict[str, str | None]]:
    parser = Tags(tag)
    parser.feed(html)
    return parser.found


def test_airflow_ui_shows_the_page_from_its_nav(ui: UI, tmp_path: Path) -> None:
    """Airflow's own React UI, rendered by the browser: the nav entry, and the page in it."""
    url = f"{ui.server.base_url}/plugin/icefloe"
    budget = "--virtual-time-budget=20000"  # let the UI's scripts fetch and render
    dom = chromium(url, tmp_path / "profile", budget, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-3000:]
    nav = [a for a in tags(dom.stdout, "a") if a.get("href") == "/plugin/icefloe"]
    assert [a.get("aria-label") for a in nav] == ["Iceberg"]
    frames = tags(dom.stdout, "iframe")
    assert [(f.get("src"), f.get("title")) for f in frames] == [("icefloe/", "Iceberg")]

    screenshot = artifacts_dir() / "airflow-ui-icefloe.png"
    screenshot.unlink(missing_ok=True)
    shot = chromium(
        url, tmp_path / "profile", budget, f"--screenshot={screenshot}", "--window-size=1600,900"
    )
    assert shot.returncode == 0, shot.stderr[-3000:]
    assert png_size_and_colours(screenshot)[:2] == (1600, 900)
