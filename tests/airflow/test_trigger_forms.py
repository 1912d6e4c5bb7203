"""Hand triggers as a person makes them: the jobs' trigger forms in Airflow 3's own UI, driven
by headless Chromium (Debian's, through Playwright) against a real api-server, dag-processor
and scheduler (the session's deployment, tests/airflow/deployment.py), and the Iceberg page's
"run now".

Checked: a size typed with its unit (`128MB`) and a decimal ratio reach the job unchanged and
the run is noted with its table in the run list; wrong values (`events`, `7 days`, `64` bytes,
a table that does not exist, a missing source) fail the task in one line naming the field as
the form shows it, in under 2 s, with no Spark started and no trace on the Iceberg page; the
task log of the compaction holds the job's plan and summary and few lines of Spark's own; a
fleet run's tasks, whichever tables and jobs, run at most `spark_apps` at once (the real
scheduler decides it). Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, sync_playwright

from icecore.catalog import SqlCatalog, catalog_from_settings
from tests.airflow.deployment import Deployment, icefloe_connection, state_store_uri
from tests.airflow.server import FINISHED_RUN_STATES, AirflowServer
from tests.support.samples import PSCHEMA, spec_of
from tests.support.tables import LocalTable

pytestmark = [pytest.mark.servers, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
MIB = 1024**2


def artifacts_dir() -> Path:
    path = Path(os.environ.get("ICEFLOE_TEST_ARTIFACTS") or ROOT / "test-artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass
class Stack:
    server: AirflowServer
    catalog: SqlCatalog
    page: Page
    warehouse: Path


def small_files(location: Path, files: int) -> LocalTable:
    table = LocalTable.create(location, PSCHEMA, spec_of(("category", "identity", "category")))
    table.commit(
        add=[
            table.write_data([{"id": i, "category": "a", "ts": 1_700_000_000_000_000 + i}])
            for i in range(files)
        ]
    )
    return table


@pytest.fixture(scope="module")
def stack(deployment: Deployment, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    warehouse = tmp_path_factory.mktemp("forms") / "warehouse"
    warehouse.mkdir()
    catalog = catalog_from_settings(uri=None, name="default", warehouse=str(warehouse))
    assert isinstance(catalog, SqlCatalog)
    catalog.create_namespace("db")
    events = small_files(warehouse / "db" / "events", files=6)
    catalog.register_table("db.events", events.metadata_location)
    # Its runs in a state store of their own, the connection's; the deployment's tables.yaml
    # also declares the fleet of `iceberg_default`.
    connection = icefloe_connection(warehouse, state_uri=state_store_uri(warehouse.parent))
    tables = [{"table": "db.events", "schedule": None}]
    with (
        deployment.configured(tables, connection) as server,
        sync_playwright() as playwright,
    ):
        server.wait_for_dag("icefloe_rewrite_data_files")
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{server.base_url}/auth/token/login?next={server.base_url}/")
        yield Stack(server, catalog, page, warehouse)
        browser.close()
    catalog.close()


def fill_trigger_form(
    page: Page, base_url: str, dag_id: str, fields: dict[str, Any], shot: str
) -> Locator:
    """Open the DAG, press Trigger, type `fields` as a person would (text into text fields,
    clicks on switches), screenshot the filled form; the form's dialog, not yet submitted."""
    page.goto(f"{base_url}/dags/{dag_id}")
    page.get_by_role("button", name="Trigger").first.click()
    dialog = page.get_by_role("dialog")
    dialog.locator(f"#element_{next(iter(fields))}").wait_for()
    for name, value in fields.items():
        if isinstance(value, bool):
            box = dialog.locator(f"input[name=element_{name}]")
            if box.is_checked() != value:
                dialog.locator(f"label:has(input[name=element_{name}])").click()
        else:
            dialog.locator(f"#element_{name}").fill(str(value))
    dialog.locator(f"#element_{next(iter(fields))}").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts_dir() / f"trigger-form-{shot}.png"))
    return dialog


def trigger_with_form(stack: Stack, dag_id: str, fields: dict[str, Any], shot: str) -> str:
    """`fill_trigger_form`, submitted; the new run's id."""
    page, server = stack.page, stack.server
    before = {r["dag_run_id"] for r in dag_runs(server, dag_id)}
    dialog = fill_trigger_form(page, server.base_url, dag_id, fields, shot)
    dialog.get_by_role("button", name="Trigger").click()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        new = [r for r in dag_runs(server, dag_id) if r["dag_run_id"] not in before]
        if new:
            return str(new[0]["dag_run_id"])
        time.sleep(0.5)
    raise AssertionError(f"no run of {dag_id} appeared after Trigger")


def dag_runs(server: AirflowServer, dag_id: str) -> list[dict[str, Any]]:
    response = server.get(f"/api/v2/dags/{dag_id}/dagRuns", params={"order_by": "-run_after"})
    assert response.status_code == 200, response.text
    return list(response.json()["dag_runs"])


def peak_of_running_jobs(server: AirflowServer, dag_id: str, run_id: str) -> tuple[int, set[int]]:
    """Watch a fleet run until it ends: the most job tasks running or queued at one look (what
    the DAG's `max_active_tasks` bounds; a look is one query), and the tables whose jobs ran.
    A look every 0.5 s: a job task is queued or running for seconds at least (its process
    imports Airflow), so two at once would be seen."""
    path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}"
    peak, tables = 0, set()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        finished = server.get(path).json()["state"] in FINISHED_RUN_STATES
        jobs = server.mapped_tasks(dag_id, run_id, "table")
        peak = max(peak, sum(t["state"] in ("running", "queued") for t in jobs))
        tables |= {t["map_index"] for t in jobs if t["state"] in ("success", "skipped")}
        if finished:
            return peak, tables
        time.sleep(0.5)
    raise AssertionError(f"{dag_id} run {run_id} not finished after 300 s")


def refusal_seconds(server: AirflowServer, dag_id: str, run_id: str, task_id: str) -> float:
    """From the operator's first line to its refusal, by the task log's own timestamps (the
    task's whole duration also holds Airflow's start of a task process: importing Airflow
    alone takes ~1.6 s on the 2-core test machine)."""
    response = server.get(
        f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/1",
        headers={"Accept": "application/json"},
    )
    stamps = {}
    for item in response.json()["content"]:
        if isinstance(item, dict) and item.get("timestamp"):
            event = str(item.get("event", ""))
            if event.startswith("checking the options of"):
                stamps["start"] = datetime.fromisoformat(item["timestamp"])
            elif event.startswith("refused: "):
                stamps["refused"] = datetime.fromisoformat(item["timestamp"])
    return (stamps["refused"] - stamps["start"]).total_seconds()


@pytest.mark.spark_submit
def test_typed_values_reach_the_job_and_the_run_names_its_table(stack: Stack) -> None:
    dag_id = "icefloe_rewrite_data_files"
    run_id = trigger_with_form(
        stack,
        dag_id,
        {
            "table": "db.events",
            "target_file_size_bytes": "128MB",
            "delete_ratio_threshold": "0.15",
            "min_input_files": "2",
            "rewrite_all": True,
        },
        "rewrite-data-files",
    )
    run = stack.server.wait_for_dag_run(dag_id, run_id, timeout=600)
    log = stack.server.task_log(dag_id, run_id, "rewrite_data_files")
    assert run["state"] == "success", log[-3000:]
    conf = run["conf"]
    # A text field; the UI sends a number where the text is one (the job reads both alike).
    assert conf["target_file_size_bytes"] == "128MB"
    assert str(conf["delete_ratio_threshold"]) == "0.15"
    assert conf["rewrite_all"] is True
    assert "--target-file-size-bytes 128MB" in log  # parsed by the job: 134217728 bytes
    assert "--delete-ratio-threshold 0.15" in log
    assert run["note"] == "db.events · rewrite_data_files"
    files = list(stack.catalog.load_table("db.events").scan().plan_files())
    assert len(files) == 1 and files[0].file.record_count == 6  # rewritten, rows kept

    # What a person reads: the job's plan and summary, a sentence, little of Spark's own log.
    assert "rewrite_data_files on db.events: rewrote 6 data files" in log
    spark_lines = [line for line in log.splitlines() if " INFO " in line or " WARN " in line]
    assert len(spark_lines) < 50, spark_lines[:60]
    assert "full Spark driver log (INFO and above): " in log

    # The task's extra link opens the table's page on the Iceberg UI.
    links = stack.server.get(
        f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/rewrite_data_files/links"
    ).json()["extra_links"]
    assert "Iceberg table" in links, links
    link = links["Iceberg table"]
    assert link.endswith("/icefloe/tables/db.events")
    page = stack.server.get(link.removeprefix(stack.server.base_url))
    assert page.status_code == 200 and "db.events" in page.text

    # Airflow 3.3's run list has no note column: the run's own page shows the note.
    stack.page.goto(f"{stack.server.base_url}/dags/{dag_id}/runs/{run_id}")
    stack.page.get_by_text("db.events · rewrite_data_files").first.wait_for(timeout=30_000)
    stack.page.screenshot(path=str(artifacts_dir() / "trigger-run-page.png"))


@pytest.mark.parametrize(
    ("dag_id", "fields", "message"),
    [
        (
            "icefloe_rewrite_data_files",
            {"table": "events"},
            "\"Table\": expected NAMESPACE.NAME such as db.events, got 'events'",
        ),
        (
            "icefloe_expire_snapshots",
            {"table": "db.events", "older_than": "7 days"},
            '"Older than": expected an age such as 3d or 12h, or an ISO timestamp',
        ),
        (
            "icefloe_rewrite_position_deletes",
            {"table": "db.events", "target_file_size_bytes": "64"},
            '"Target file size": files under 1MB',
        ),
        (
            "icefloe_convert_equality_deletes",
            {"table": "db.nope"},
            "table db.nope does not exist in catalog 'default'",
        ),
        (
            "icefloe_ingest",
            {"table": "db.events", "source": "/nowhere/batch.parquet"},
            '"Source": /nowhere/batch.parquet does not exist',
        ),
        (
            "icefloe_remove_orphan_files",
            {"table": "db.events", "older_than": "12h"},
            '"Older than": 12h is later than 1d ago',
        ),
    ],
    ids=lambda v: v if isinstance(v, str) and v.startswith("icefloe") else "",
)
def test_wrong_values_are_refused_in_words_before_spark(
    stack: Stack, dag_id: str, fields: dict[str, Any], message: str
) -> None:
    shot = dag_id.removeprefix("icefloe_") + "-refused"
    run_id = trigger_with_form(stack, dag_id, fields, shot)
    run = stack.server.wait_for_dag_run(dag_id, run_id, timeout=300)
    task_id = dag_id.removeprefix("icefloe_")
    log = stack.server.task_log(dag_id, run_id, task_id)
    assert run["state"] == "failed"
    assert message in log, log[-3000:]
    assert "spark-submit" not in log and "SparkContext" not in log  # no Spark started
    assert refusal_seconds(stack.server, dag_id, run_id, task_id) < 2
    tables = stack.server.get("/icefloe/api/tables", params={"refresh": "true"}).json()
    assert "db.nope" not in [t["table"] for t in tables["tables"]]  # no trace on the page


@pytest.mark.spark_submit
def test_run_now_from_the_iceberg_page(stack: Stack) -> None:
    """The table page says why each job is or is not due, and "run now" triggers the job's
    DAG with the viewer's own session, noted with the table; the run succeeds."""
    page, server = stack.page, stack.server
    dag_id = "icefloe_convert_equality_deletes"
    before = {r["dag_run_id"] for r in dag_runs(server, dag_id)}
    page.goto(f"{server.base_url}/icefloe/tables/db.events?refresh=true")
    row = page.locator('tr[data-job="convert_equality_deletes"]')
    assert "no live equality delete files" in row.inner_text()  # not due, and why
    for path in ("/icefloe/", "/icefloe/tables/db.events"):  # no horizontal scroll at 1400px
        page.goto(f"{server.base_url}{path}")
        width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert width[0] <= width[1] == 1400, (path, width)
    page.goto(f"{server.base_url}/icefloe/tables/db.events")
    row.get_by_role("button", name="run now").click()
    started = row.locator("a.run-message")
    started.wait_for(timeout=30_000)
    page.screenshot(path=str(artifacts_dir() / "iceberg-page-run-now.png"), full_page=True)
    [run_id] = [r["dag_run_id"] for r in dag_runs(server, dag_id) if r["dag_run_id"] not in before]
    assert started.inner_text() == f"started {run_id}"
    run = server.wait_for_dag_run(dag_id, run_id, timeout=600)
    assert run["state"] == "success", server.task_log(dag_id, run_id, "convert_equality_deletes")
    assert run["conf"] == {"table": "db.events"}
    assert run["note"] == "db.events · convert_equality_deletes (Iceberg page)"
    assert run_id.startswith("manual__db.events__")  # the run list shows run ids


def test_the_fleet_form_plans_a_dry_run_and_refuses_a_bad_budget(stack: Stack) -> None:
    """The fleet DAG's hand trigger: a namespace and a budget typed with its unit plan a dry
    run that names the due tables and runs no job, one task at a time (the deployment's fleet
    has `spark_apps: 1`), whichever tables and jobs they are; a budget in words is refused
    naming the field, before any table is read."""
    dag_id = "icefloe_fleet__iceberg_default"
    stack.server.wait_for_dag(dag_id)  # no pool created: the fleet's jobs use Airflow's own
    assert stack.server.get(f"/api/v2/dags/{dag_id}").json()["max_active_tasks"] == 1
    users = small_files(stack.warehouse / "db" / "users", files=6)
    stack.catalog.register_table("db.users", users.metadata_location)
    fields = {"namespace": "db", "max_bytes": "2TB", "dry_run": True}
    run_id = trigger_with_form(stack, dag_id, fields, "fleet")
    peak, tables = peak_of_running_jobs(stack.server, dag_id, run_id)
    run = stack.server.wait_for_dag_run(dag_id, run_id, timeout=300)
    log = stack.server.task_log(dag_id, run_id, "plan")
    assert run["state"] == "success", log[-3000:]
    assert "db.events" in log and "db.users" in log and "dry run" in log
    assert "'max_bytes': 2199023255552" in log  # 2TB, as the budget the run used
    assert tables == {0, 1}  # both tables' jobs ran
    assert peak == 1, f"{peak} job tasks ran at once with spark_apps 1"

    run_id = trigger_with_form(stack, dag_id, {"max_bytes": "2 terabytes"}, "fleet-refused")
    run = stack.server.wait_for_dag_run(dag_id, run_id, timeout=300)
    log = stack.server.task_log(dag_id, run_id, "plan")
    assert run["state"] == "failed"
    assert '"Bytes rewritten per run": expected a size such as' in log, log[-3000:]
