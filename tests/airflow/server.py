"""A real Airflow deployment for tests: `airflow api-server` (and on request `scheduler` and
`dag-processor`) as subprocesses on a free port, and an authenticated REST API v2 client.

Why subprocesses and not FastAPI's TestClient: the tests reproduce what a user's click does,
through the same processes, plugin loading, auth manager and JWTs a deployment runs.

Airflow 3 facts this relies on (checked against the installed 3.3 code):
- The scheduler no longer parses DAG files; only `airflow dag-processor` puts DAGs in the
  metadata database. A test that triggers a DAG needs `dag_processor=True`.
- Tasks started by the scheduler (LocalExecutor) call the api-server's Execution API with a
  JWT the scheduler signs, so every process gets the same `[api_auth] jwt_secret` and the
  Execution API URL of *this* server.
- Log servers (scheduler workers, triggerer) get free ports too: several test sessions may run
  on one machine and Airflow's fixed default ports would collide.
- The simple auth manager issues tokens: with users + a passwords file, `POST /auth/token`;
  with `all_admins`, `GET /auth/token` and `GET /auth/token/login?next=...`, which sets the
  `_token` cookie a browser needs to open UI pages (used by the headless-Chromium test).

Usage (tests/airflow/conftest.py has put the session's Airflow settings in os.environ, and
the processes inherit it; pass `env` to change it. Never import that conftest by module
name: a second import makes a second AIRFLOW_HOME and rewrites os.environ):

    with airflow_server(scheduler=True, dag_processor=True) as server:
        server.wait_for_dag("icefloe_ingest")
        run = server.post("/api/v2/dags/icefloe_ingest/dagRuns", json={...}).json()
        final = server.wait_for_dag_run("icefloe_ingest", run["dag_run_id"])
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx

ADMIN_USER = "admin"
FINISHED_RUN_STATES = frozenset({"success", "failed"})
# Between two looks at a run, a DAG or the deployment's health: each look is one GET on
# loopback, and a run's end is seen within this (at 2 s, runs of seconds waited up to 2 s more).
# Each look costs the api-server 10-20 ms of CPU: at 0.5 s, 3% of a core all the time a test
# waits on a run.
POLL_SECONDS = 1.0
_LOG_TAIL_LINES = 150


def free_port() -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class _Process:
    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    log_file: IO[bytes]


@dataclass
class AirflowServer:
    """A running api-server: `base_url` (no trailing slash), a JWT `token` for the REST API,
    and `get`/`post`/`patch`/`delete` that send it. Paths are relative to `base_url`
    ("/api/v2/...")."""

    base_url: str
    token: str
    log_dir: Path
    processes: list[_Process] = field(default_factory=list, repr=False)
    env: Mapping[str, str] = field(default_factory=dict, repr=False)  # every process's
    client: httpx.Client = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.client = httpx.Client(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=60.0,
        )

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.client.get(path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.client.post(path, **kwargs)

    def patch(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.client.patch(path, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.client.delete(path, **kwargs)

    def mapped_tasks(self, dag_id: str, run_id: str, group: str) -> list[dict[str, Any]]:
        """The task instances of a run's mapped task `group` (a fleet run's `table`: each
        table's jobs, `map_index` telling the table), as the REST API gives them."""
        response = self.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances")
        assert response.status_code == 200, response.text
        tasks = response.json()["task_instances"]
        return [t for t in tasks if t["task_id"].startswith(f"{group}.")]

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1) -> str:
        """A task's log as a person reads it in the UI: each line's event, then any errors."""
        response = self.get(
            f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}",
            headers={"Accept": "application/json"},
        )
        response.raise_for_status()
        lines = []
        for item in response.json()["content"]:
            if not isinstance(item, dict):
                lines.append(str(item))
                continue
            lines.append(str(item.get("event", "")))
            lines.extend(str(e.get("exc_value", "")) for e in item.get("error_detail") or ())
        return "\n".join(lines)

    @contextmanager
    def running(self, component: str, timeout: float = 300.0) -> Iterator[None]:
        """One more component of this deployment (`triggerer`), with the others' settings,
        while the block runs; healthy when the block starts, stopped when it ends."""
        proc = _start(component, [component], self.env, self.log_dir)
        self.processes.append(proc)
        try:
            _wait_healthy(self.base_url, self.processes, (component.replace("-", "_"),), timeout)
            yield
        except BaseException:
            _show_logs([proc])
            raise
        finally:
            self.processes.remove(proc)
            _stop(proc)

    def logs(self) -> dict[str, str]:
        """Each process's combined stdout/stderr so far."""
        return {proc.name: proc.log_path.read_text(errors="replace") for proc in self.processes}

    def check_alive(self) -> None:
        """Raise, naming the process and its exit code, if any Airflow process has died."""
        for proc in self.processes:
            code = proc.popen.poll()
            if code is not None:
                raise RuntimeError(f"airflow {proc.name} exited with code {code}")

    def wait_for_dag(self, dag_id: str, timeout: float = 180.0) -> dict[str, Any]:
        """Wait until the dag-processor has serialized `dag_id`; returns the DAG's JSON."""
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            response = self.get(f"/api/v2/dags/{dag_id}")
            if response.status_code == 200:
                return response.json()
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"DAG {dag_id!r} not known to the api-server after {timeout:.0f}s: "
                    f"{response.status_code} {response.text[:300]}"
                )
            time.sleep(POLL_SECONDS)

    def wait_for_dag_run(
        self, dag_id: str, dag_run_id: str, timeout: float = 600.0
    ) -> dict[str, Any]:
        """Wait until the run reaches success or failed; returns the run's final JSON."""
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            response = self.get(f"/api/v2/dags/{dag_id}/dagRuns/{dag_run_id}")
            response.raise_for_status()
            run = response.json()
            if run["state"] in FINISHED_RUN_STATES:
                return run
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"run {dag_id}/{dag_run_id} still {run['state']!r} after {timeout:.0f}s"
                )
            time.sleep(POLL_SECONDS)


def _server_settings(env: Mapping[str, str], base_url: str, log_dir: Path) -> dict[str, str]:
    """Settings every process of this deployment shares (see the module docstring)."""
    return {
        "AIRFLOW__API__BASE_URL": base_url,
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{base_url}/execution/",
        "AIRFLOW__API_AUTH__JWT_SECRET": env.get(
            "AIRFLOW__API_AUTH__JWT_SECRET", secrets.token_urlsafe(64)
        ),
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN_USER}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(log_dir / "passwords.json"),
    }


def _start(name: str, args: list[str], env: Mapping[str, str], log_dir: Path) -> _Process:
    log_path = log_dir / f"{name}.log"
    log_file = log_path.open("wb")
    airflow = Path(sys.executable).with_name("airflow")
    popen = subprocess.Popen(
        [str(airflow), *args],
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        # Own process group: stopping it also stops the workers, task supervisors and
        # spark-submit JVMs the process started.
        start_new_session=True,
    )
    return _Process(name, popen, log_path, log_file)


def _stop(proc: _Process, grace: float = 20.0) -> None:
    """SIGTERM the process group, wait for a clean shutdown, then SIGKILL what is left."""
    pgid = proc.popen.pid
    with suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    with suppress(subprocess.TimeoutExpired):
        proc.popen.wait(timeout=grace)
    with suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    proc.popen.wait(timeout=grace)
    proc.log_file.close()


def _token(base_url: str, password: str | None) -> str:
    """A JWT from the simple auth manager: password login, or the all-admins endpoint."""
    if password is None:
        response = httpx.get(f"{base_url}/auth/token", timeout=30.0)
    else:
        response = httpx.post(
            f"{base_url}/auth/token",
            json={"username": ADMIN_USER, "password": password},
            timeout=30.0,
        )
    if response.status_code != 201:
        raise RuntimeError(
            f"no token from {base_url}/auth/token: {response.status_code} {response.text}"
        )
    return str(response.json()["access_token"])


def _wait_healthy(
    base_url: str, processes: list[_Process], wanted: tuple[str, ...], timeout: float
) -> None:
    """Poll the public health endpoint until the database and every `wanted` component
    (scheduler, dag_processor, triggerer) report healthy; fail fast if a process dies."""
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    while time.monotonic() < deadline:
        for proc in processes:
            code = proc.popen.poll()
            if code is not None:
                raise RuntimeError(f"airflow {proc.name} exited with code {code} while starting")
        try:
            response = httpx.get(f"{base_url}/api/v2/monitor/health", timeout=5.0)
        except httpx.TransportError as exc:
            last = f"{type(exc).__name__}: {exc}"
        else:
            last = f"{response.status_code} {response.text[:500]}"
            if response.status_code == 200:
                health = response.json()
                components = ("metadatabase", *wanted)
                if all(health[c]["status"] == "healthy" for c in components):
                    return
        time.sleep(POLL_SECONDS)
    raise TimeoutError(f"Airflow at {base_url} not healthy after {timeout:.0f}s; last: {last}")


def _show_logs(processes: list[_Process]) -> None:
    """Print the tail of each process's log; pytest shows it with the failing test."""
    for proc in processes:
        proc.log_file.flush()
        lines = proc.log_path.read_text(errors="replace").splitlines()
        print(
            f"\n===== airflow {proc.name} log ({proc.log_path}), last {_LOG_TAIL_LINES} lines",
            file=sys.stderr,
        )
        print("\n".join(lines[-_LOG_TAIL_LINES:]), file=sys.stderr)


@contextmanager
def airflow_server(
    env: Mapping[str, str] | None = None,
    *,
    scheduler: bool = False,
    dag_processor: bool = False,
    all_admins: bool = False,
    startup_timeout: float = 300.0,
) -> Iterator[AirflowServer]:
    """Start an api-server (plus scheduler / dag-processor) with `env` and yield a client.

    `env` (default: os.environ) must hold the session's Airflow settings (AIRFLOW_HOME with
    a migrated metadata database: the `airflow_db` fixture). `all_admins` turns off
    password login (every caller is admin), which lets a headless browser log in through
    `/auth/token/login`. The processes are always stopped on exit; if the block (or startup)
    fails, their logs are printed.
    """
    env = dict(os.environ if env is None else env)
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    log_dir = Path(env["AIRFLOW_HOME"]) / f"server-{port}"
    log_dir.mkdir(parents=True)
    password: str | None = None
    settings = _server_settings(env, base_url, log_dir)
    if all_admins:
        settings["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS"] = "True"
    else:
        password = secrets.token_urlsafe(16)
        (log_dir / "passwords.json").write_text(json.dumps({ADMIN_USER: password}))
    full_env = {**env, **settings}

    processes: list[_Process] = []
    try:
        processes.append(
            _start(
                "api-server",
                ["api-server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                full_env,
                log_dir,
            )
        )
        wanted: list[str] = []
        if scheduler:
            processes.append(_start("scheduler", ["scheduler"], full_env, log_dir))
            wanted.append("scheduler")
        if dag_processor:
            processes.append(_start("dag-processor", ["dag-processor"], full_env, log_dir))
            wanted.append("dag_processor")
        _wait_healthy(base_url, processes, tuple(wanted), startup_timeout)
        server = AirflowServer(base_url, _token(base_url, password), log_dir, processes, full_env)
        try:
            yield server
        finally:
            server.client.close()
    except BaseException:
        _show_logs(processes)
        raise
    finally:
        for proc in reversed(processes):
            _stop(proc)
