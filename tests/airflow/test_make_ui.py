"""The README's first hour, as written: `make ui` on the demo's Airflow home, from a shell with
no virtualenv and no variable the README does not set, then a job triggered through the REST
API (the README's own curl commands) and through the trigger form in headless Chromium; both
runs succeed, the table's history gets the checks the page charts, `icefloe health` agrees
with the page, and Ctrl-C leaves nothing running, the demo's database included.

Before those, the moment of issue 35: as soon as `make ui` says it is ready, the README's REST
trigger twenty times and the trigger form three times, side by side, while the scheduler runs
the table's self-optimizing DAG; not one answer is an error (on SQLite, the demo's database
until then, a few in every twenty were 500s: examples/demo_db.py says why).

The checkout is this one, seen through symlinks from a temporary directory with a warehouse of
its own (a developer's `./warehouse` is left alone). Its demo home and table are prepared
cheaply with the demo's own code (examples/demo_home.py, examples/demo_db.py: the same
airflow.cfg, tables.yaml, PostgreSQL metadata database and connections `make demo` writes),
and a small `demo.events` instead of the demo's four ingested batches. One `make ui` serves
the whole module; the two runs are the module's two real spark-submits, besides the
self-optimizing run's. Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from icefloe_airflow.self_optimizing import optimize_dag_id
from playwright.sync_api import Page, Response, sync_playwright

from examples import demo_db
from examples.demo_home import (
    TABLE,
    airflow_home,
    environment,
    migrate_metadata_db,
    write_config,
    write_demo_files,
)
from icecore.catalog import SqlCatalog
from tests.airflow.server import AirflowServer, free_port
from tests.airflow.test_trigger_forms import (
    CHROMIUM,
    CHROMIUM_ARGS,
    Stack,
    artifacts_dir,
    fill_trigger_form,
    small_files,
    trigger_with_form,
)

pytestmark = [pytest.mark.servers, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[2]
PLAIN_PATH = "/usr/bin:/bin"  # a shell's PATH: no virtualenv on it
README = ROOT / "README.md"
DAG_ID = "icefloe_rewrite_data_files"
READY_TIMEOUT_S = 600.0
REST_TRIGGERS = 20  # by two clients side by side, ten each
REST_CLIENTS = 2
FORM_TRIGGERS = 3
TOASTS = re.compile("^(Dag Run Triggered|Failed to Trigger Dag)$")  # Airflow UI's, en


def checkout(root: Path) -> Path:
    """This checkout, as a directory of symlinks to its entries, without its warehouse."""
    root.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in ("warehouse", "test-artifacts", ".git"):
            (root / entry.name).symlink_to(entry)
    return root


def shell_env(home: Path, **extra: str) -> dict[str, str]:
    """What a fresh shell has: HOME and a system PATH; nothing of this test session's."""
    return {"HOME": str(home), "PATH": PLAIN_PATH, **extra}


def airflow_processes(airflow_home: Path) -> list[int]:
    """Processes running with this AIRFLOW_HOME (what `make ui` started, and their children)."""
    wanted = f"AIRFLOW_HOME={airflow_home}".encode()
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if wanted in environ.read_bytes().split(b"\0"):
                found.append(int(environ.parent.name))
        except OSError:  # gone, or not ours to read
            continue
    return found


def database_processes(airflow_home: Path) -> list[int]:
    """Processes of the demo's PostgreSQL server (run on the home's data directory)."""
    data = str(demo_db.data_dir(airflow_home)).encode()
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if data in cmdline.read_bytes().split(b"\0"):
                found.append(int(cmdline.parent.name))
        except OSError:  # gone
            continue
    return found


def readme_section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"### {title}")
    return text[start : text.index("\n## ", start)]


def readme_curls(port: int) -> list[tuple[str, str, Any]]:
    """The README's REST example as (method, URL, JSON body), its port replaced by `port`."""
    section = readme_section("Open the demo in the Airflow UI")
    block = re.search(r"```sh\n(curl .*?)```", section, re.DOTALL)
    assert block, "the README's REST example is gone"
    commands = block.group(1).replace("\\\n", " ").strip().splitlines()
    calls = []
    for command in commands:
        words = shlex.split(command)
        method = words[words.index("-X") + 1]
        url = next(w for w in words if w.startswith("http://"))
        body = json.loads(words[words.index("-d") + 1])
        calls.append((method, url.replace("localhost:8080", f"127.0.0.1:{port}"), body))
    return calls


@dataclass
class Demo:
    root: Path
    warehouse: Path
    port: int
    make: subprocess.Popen[bytes]
    output: Path
    server: AirflowServer

    @property
    def airflow_home(self) -> Path:
        return self.warehouse / ".airflow"


def wait_ready(make: subprocess.Popen[bytes], output: Path) -> float:
    """Seconds until `make ui` says it is ready; fails with its output if it exits first."""
    started = time.monotonic()
    while time.monotonic() - started < READY_TIMEOUT_S:
        text = output.read_text(errors="replace")
        if "ui: ready" in text:
            return time.monotonic() - started
        if make.poll() is not None:
            raise AssertionError(f"make ui exited ({make.returncode}):\n{text}")
        time.sleep(1.0)
    raise AssertionError(f"make ui not ready after {READY_TIMEOUT_S}s:\n{output.read_text()}")


def prepare_demo(root: Path) -> Path:
    """The demo's Airflow home and database, made by the demo's code, and a small
    `demo.events`."""
    warehouse = root / "warehouse"
    home = airflow_home(warehouse)
    with demo_db.running(home, home / "logs" / "postgres.log") as database:
        write_config(warehouse, database_url=database.url)
        write_demo_files(warehouse)
        migrate_metadata_db(warehouse, environment(warehouse, shell_env(root)))
    catalog = SqlCatalog("default", warehouse=warehouse, create=True)
    catalog.create_namespace("demo")
    events = small_files(warehouse / "demo" / "events", files=6)
    catalog.register_table(TABLE, events.metadata_location)
    catalog.close()
    return warehouse


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    root = checkout(tmp_path_factory.mktemp("first-hour") / "icefloe")
    warehouse = prepare_demo(root)
    port = free_port()
    output = root.parent / "make-ui.log"
    with output.open("wb") as log:
        make = subprocess.Popen(
            ["make", "ui"],  # the README's command, in the checkout
            cwd=root,
            env=shell_env(root.parent, UI_PORT=str(port)),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: the test's "Ctrl-C" reaches all of it
        )
    try:
        seconds = wait_ready(make, output)
        print(f"make ui ready after {seconds:.0f}s", file=sys.stderr)
        base = f"http://127.0.0.1:{port}"
        token = httpx.get(f"{base}/auth/token", timeout=30).json()["access_token"]
        yield Demo(root, warehouse, port, make, output, AirflowServer(base, token, root.parent))
    finally:
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGINT)  # Ctrl-C at the terminal
            make.wait(timeout=120)
        sys.stderr.write(output.read_text(errors="replace")[-3000:])


def test_make_ui_refuses_without_a_demo(tmp_path: Path) -> None:
    root = checkout(tmp_path / "icefloe")
    done = subprocess.run(
        ["make", "ui"],
        cwd=root,
        env=shell_env(tmp_path),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert "make ui: no demo in ./warehouse yet: run make demo first" in done.stderr
    assert not (root / "warehouse").exists()


@dataclass(frozen=True)
class Answer:
    """One response the demo's api-server gave: to what, its status, and its body."""

    request: str
    status: int
    body: str


def answer(request: str, response: httpx.Response) -> Answer:
    return Answer(request, response.status_code, response.text)


def cancel(demo: Demo, run_id: str, cancels: list[Answer]) -> None:
    """The run marked failed, as the UI's "Mark as failed" does, so that two dozen triggered
    runs cost no spark-submit: marked at once, a run ends before its task starts. Each
    attempt's answer goes to `cancels`; a 500 is tried again, up to three times. Airflow's
    "Mark as failed" locks the run's task instances and then the run, its scheduler the other
    way round: when both touch a new run at once, PostgreSQL ends the deadlock by failing the
    API's transaction (rolled back whole). Airflow's lock order, not the demo's database (the
    test counts them)."""
    path = f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}"
    for _ in range(3):
        cancels.append(answer(f"PATCH {path}", demo.server.patch(path, json={"state": "failed"})))
        if cancels[-1].status != 500:
            return


def readme_triggers(demo: Demo, times: int, answers: list[Answer], cancels: list[Answer]) -> None:
    """The README's two curl commands, `times` over, each new run cancelled."""
    for _ in range(times):
        for method, url, body in readme_curls(demo.port):
            response = httpx.request(method, url, json=body, timeout=60)
            answers.append(answer(f"{method} {url}", response))
            if method == "POST" and response.status_code == 200:
                cancel(demo, response.json()["dag_run_id"], cancels)


def form_trigger(
    demo: Demo, page: Page, shot: str, answers: list[Answer], cancels: list[Answer]
) -> str:
    """The trigger form filled and submitted, its run cancelled; the toast the UI showed."""
    fields = {"table": TABLE, "target_file_size_bytes": "256MB"}
    dialog = fill_trigger_form(page, demo.server.base_url, DAG_ID, fields, shot)
    with page.expect_response(
        lambda r: r.request.method == "POST" and r.url.endswith(f"/dags/{DAG_ID}/dagRuns"),
        timeout=60_000,
    ) as submitted:
        dialog.get_by_role("button", name="Trigger").click()
    response = submitted.value
    answers.append(Answer(f"POST {response.url} (the form)", response.status, response.text()))
    if response.ok:
        cancel(demo, response.json()["dag_run_id"], cancels)
    toast = page.get_by_text(TOASTS).last
    toast.wait_for(timeout=30_000)
    return str(toast.text_content())


def first_task_running(demo: Demo, dag_id: str, run_id: str) -> None:
    """Wait until a task of the run is running."""
    deadline = time.monotonic() + 120
    path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances"
    while True:
        states = [t["state"] for t in demo.server.get(path).json()["task_instances"]]
        if "running" in states:
            return
        assert time.monotonic() < deadline, f"no task of {dag_id} running after 120 s: {states}"
        time.sleep(0.2)


@pytest.mark.spark_submit
def test_triggers_never_fail_while_a_dag_runs(demo: Demo) -> None:
    """Right after `make ui` is ready, while the scheduler runs the self-optimizing DAG's
    tasks: the README's REST trigger and the trigger form, side by side, repeated; every
    answer a success, every toast the success's, and the UI's own requests never a 5xx."""
    optimize = optimize_dag_id(TABLE)
    demo.server.wait_for_dag(DAG_ID)
    demo.server.wait_for_dag(optimize)
    started = demo.server.post(f"/api/v2/dags/{optimize}/dagRuns", json={"logical_date": None})
    assert started.status_code == 200, started.text
    optimize_run = started.json()["dag_run_id"]
    first_task_running(demo, optimize, optimize_run)

    answers: list[Answer] = []  # to the README's requests and the form
    cancels: list[Answer] = []
    ui_failures: list[Answer] = []  # the UI's own requests (its pages' polling), 5xx
    toasts = []
    rest = [
        threading.Thread(
            target=readme_triggers, args=(demo, REST_TRIGGERS // REST_CLIENTS, answers, cancels)
        )
        for _ in range(REST_CLIENTS)
    ]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})

        def note_failure(response: Response) -> None:
            if response.status >= 500:
                ui_failures.append(Answer(response.url, response.status, ""))

        page.on("response", note_failure)
        base = demo.server.base_url
        page.goto(f"{base}/auth/token/login?next={base}/")
        for client in rest:
            client.start()
        try:
            toasts = [
                form_trigger(demo, page, f"make-ui-busy-{i}", answers, cancels)
                for i in range(FORM_TRIGGERS)
            ]
        finally:
            for client in rest:
                client.join()
            browser.close()
    optimize_state = demo.server.get(f"/api/v2/dags/{optimize}/dagRuns/{optimize_run}").json()
    failed = [a for a in answers if a.status != 200]
    retried = sum(c.status == 500 for c in cancels)
    print(
        f"{len(answers)} answers, {len(failed)} failed, {len(ui_failures)} of the UI's own; "
        f"{len(cancels)} cancels, {retried} of them a 500 tried again; "
        f"the self-optimizing run {optimize_state['state']} by then"
    )
    assert failed == []
    assert ui_failures == []
    assert toasts == ["Dag Run Triggered"] * FORM_TRIGGERS
    triggers = [a for a in answers if a.request.startswith("POST")]
    assert len(triggers) == REST_TRIGGERS + FORM_TRIGGERS
    # Every run was cancelled in the end, its last attempt answered 200.
    cancelled = {c.request: c.status for c in cancels}
    assert list(cancelled.values()) == [200] * len(triggers), cancels
    final = demo.server.wait_for_dag_run(optimize, optimize_run, timeout=600)
    assert final["state"] == "success", final


@pytest.mark.spark_submit
def test_the_readmes_rest_example_runs_a_job(demo: Demo) -> None:
    assert "make ui\n" in readme_section("Open the demo in the Airflow UI")
    health = httpx.get(f"{demo.server.base_url}/api/v2/monitor/health", timeout=30).json()
    components = ("scheduler", "triggerer", "dag_processor")
    assert [health[name]["status"] for name in components] == ["healthy"] * 3
    demo.server.wait_for_dag(DAG_ID)
    responses = [
        httpx.request(method, url, json=body, timeout=60)
        for method, url, body in readme_curls(demo.port)
    ]
    assert [r.status_code for r in responses] == [200, 200], [r.text for r in responses]
    run_id = responses[-1].json()["dag_run_id"]
    run = demo.server.wait_for_dag_run(DAG_ID, run_id, timeout=600)
    log = demo.server.task_log(DAG_ID, run_id, "rewrite_data_files")
    assert run["state"] == "success", log[-3000:]
    assert "rewrite_data_files on demo.events: rewrote 6 data files" in log
    assert run["note"] == "demo.events · rewrite_data_files"


@pytest.mark.spark_submit
def test_the_trigger_form_runs_a_job_and_the_page_charts_it(demo: Demo) -> None:
    catalog = SqlCatalog("default", warehouse=demo.warehouse, create=False)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        base = demo.server.base_url
        page.goto(f"{base}/auth/token/login?next={base}/")
        page.get_by_text("Triggerer").first.wait_for(timeout=60_000)
        page.screenshot(path=str(artifacts_dir() / "make-ui-home.png"))
        stack = Stack(demo.server, catalog, page, demo.warehouse)
        fields = {"table": TABLE, "target_file_size_bytes": "128MB"}
        run_id = trigger_with_form(stack, DAG_ID, fields, "make-ui")
        run = demo.server.wait_for_dag_run(DAG_ID, run_id, timeout=600)
        log = demo.server.task_log(DAG_ID, run_id, "rewrite_data_files")
        assert run["state"] == "success", log[-3000:]
        assert run["conf"]["target_file_size_bytes"] == "128MB"

        # Each job recorded the table's health when it ended: the page has points to chart.
        history = demo.server.get(f"/icefloe/api/history/{TABLE}").json()
        sources = [c["inputs"].get("source") for c in history["checks"]]
        assert sources.count("job") >= 2, sources
        page.goto(f"{base}/icefloe/tables/{TABLE}?refresh=true")
        page.locator("#chart-score").wait_for()
        drawn = page.evaluate(
            "['chart-score', 'chart-deletes', 'chart-histogram', 'chart-rewritten']"
            ".map(id => Chart.getChart(document.getElementById(id)).data.datasets[0].data.length)"
        )
        assert drawn[0] >= 2 and drawn[1] >= 2 and drawn[2] == 6 and drawn[3] == 30, drawn
        assert page.locator(".chart .empty").count() == 0
        page.screenshot(path=str(artifacts_dir() / "make-ui-table.png"), full_page=True)
        browser.close()
    catalog.close()


def icefloe(demo: Demo, *args: str) -> str:
    """The README's `.venv/bin/icefloe ... --warehouse warehouse`, from the checkout in a bare
    shell; its output."""
    return subprocess.run(
        [str(demo.root / ".venv" / "bin" / "icefloe"), *args, "--warehouse", "warehouse"],
        cwd=demo.root,
        env=shell_env(demo.root.parent),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout


def test_icefloe_health_agrees_with_the_page(demo: Demo) -> None:
    page = demo.server.get(f"/icefloe/api/tables/{TABLE}", params={"refresh": "true"}).json()
    [line] = [json.loads(line) for line in icefloe(demo, "health", TABLE, "--json").splitlines()]
    assert [d["job"] for d in line["due"]] == [d["job"] for d in page["due"]]
    assert line["score"] == page["score"]
    assert [p["text"] for p in line["penalties"]] == [p["text"] for p in page["penalties"]]
    # The figures, manifests included, are the page's.
    figures = ("data_files", "small_files", "data_manifests", "delete_manifests")
    figures += ("small_manifests", "manifest_bytes", "manifest_target_size_bytes")
    assert {k: line["health"][k] for k in figures} == {k: page["health"][k] for k in figures}
    assert line["health"]["data_manifests"] >= 1
    # It read the page's state store, which the demo's airflow.cfg names.
    assert icefloe(demo, "health", TABLE).startswith(
        "# run history: warehouse/.airflow/icefloe_state.db (from warehouse/.airflow/airflow.cfg"
    )


def test_ctrl_c_stops_everything(demo: Demo) -> None:
    assert airflow_processes(demo.airflow_home)  # running until now
    assert database_processes(demo.airflow_home)
    os.killpg(demo.make.pid, signal.SIGINT)
    demo.make.wait(timeout=120)
    text = demo.output.read_text(errors="replace")
    assert "ui: SIGINT: stopping Airflow" in text and "ui: stopped" in text
    deadline = time.monotonic() + 30
    while airflow_processes(demo.airflow_home) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert airflow_processes(demo.airflow_home) == []
    assert database_processes(demo.airflow_home) == []
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{demo.server.base_url}/api/v2/monitor/health", timeout=5)
