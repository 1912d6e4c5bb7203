"""`make ui`: the demo's Airflow, in the foreground until Ctrl-C.

    python examples/ui.py [--port 8080] [warehouse]       # default ./warehouse

Starts the demo's metadata database (PostgreSQL, examples/demo_db.py) and the four processes
a working Airflow needs, on the demo's home (examples/demo_home.py, written by `make demo`):
the api-server (the UI, the REST API and the Iceberg page, on 127.0.0.1:PORT), the scheduler
(runs the triggered tasks), the dag-processor (reads dags/) and the triggerer. They share the
home's `airflow.cfg`, which this updates first (the database's port, the Execution API's URL
for PORT, free log-server ports) and which keeps one JWT secret, so the tasks the scheduler
starts are accepted by the api-server; they run with this virtualenv's tools first on PATH
(spark-submit), whatever the calling shell's PATH.

Each process logs to `<home>/logs/ui/<process>.log`; this prints when the UI is ready (the
four healthy, the api-server's Execution API built), and stops everything on Ctrl-C or
SIGTERM (each process's group: its workers, task processes and spark-submits too; the
database last, once nothing uses it). If a process dies, the tail of its log is printed and
the others are stopped. Exit status: 0 after Ctrl-C, 1 when a process
died or the UI did not come up, 2 when there is no demo to open or the port is taken.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO

import demo_db  # beside this file
from demo_home import (
    DEFAULT_PORT,
    LOG_SERVER_PORTS,
    airflow_home,
    environment,
    write_config,
)

PROCESSES = {
    "api-server": ["api-server", "--workers", "1"],
    "scheduler": ["scheduler"],
    "dag-processor": ["dag-processor"],
    "triggerer": ["triggerer"],
}
HEALTH_COMPONENTS = ("metadatabase", "scheduler", "dag_processor", "triggerer")
READY_TIMEOUT_S = 600.0
SAY_EVERY_S = 15.0
STOP_GRACE_S = 20.0
EXIT_USAGE = 2


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    log: IO[bytes]


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def log_server_ports(ui_port: int) -> dict[str, int]:
    """Airflow's default log-server ports when free, else free ones (another Airflow on this
    machine must not make the scheduler's log server fail)."""
    chosen: dict[str, int] = {}
    for key, port in LOG_SERVER_PORTS.items():
        taken = port == ui_port or port in chosen.values() or not port_free(port)
        chosen[key] = free_port() if taken else port
    return chosen


def start(name: str, env: Mapping[str, str], log_dir: Path) -> Process:
    log_path = log_dir / f"{name}.log"
    log = log_path.open("ab")
    airflow = str(Path(sys.executable).parent / "airflow")
    popen = subprocess.Popen(
        [airflow, *PROCESSES[name]],
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # a group of its own: stopping it stops what it started
    )
    return Process(name, popen, log_path, log)


def stop(processes: list[Process]) -> None:
    """SIGTERM every process group, wait for them, SIGKILL what is left after the grace."""
    for proc in processes:
        if proc.popen.poll() is None:
            _signal_group(proc, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    for proc in processes:
        try:
            proc.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            print(f"ui: {proc.name} did not stop within {STOP_GRACE_S:.0f}s: killed", flush=True)
        _signal_group(proc, signal.SIGKILL)  # stragglers of its group (task processes, JVMs)
        proc.popen.wait()
        proc.log.close()


def _signal_group(proc: Process, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.popen.pid, sig)


def health(port: int) -> dict[str, str]:
    """Each component's status from the api-server's public health endpoint (empty while it
    does not answer)."""
    url = f"http://127.0.0.1:{port}/api/v2/monitor/health"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            body = json.load(response)
    except (OSError, urllib.error.URLError, ValueError):
        return {}
    return {name: str((body.get(name) or {}).get("status")) for name in HEALTH_COMPONENTS}


def warm_execution_api(port: int) -> None:
    """Have the api-server build its Execution API now. It does so on that API's first
    request (Cadwyn generating a route and schema copy per API version), seconds of work on
    the server's one event loop, 20 s on a busy 2-core machine, during which no request is
    answered: the first task's start, and a user's first trigger with it. Any answer will do
    (`/execution/health` needs no token)."""
    url = f"http://127.0.0.1:{port}/execution/health"
    with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=READY_TIMEOUT_S):
        pass


def tail(path: Path, lines: int = 25) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


class Stop(Exception):
    """Ctrl-C or SIGTERM."""


def _raise_stop(signum: int, _frame: FrameType | None) -> None:
    raise Stop(signal.Signals(signum).name)


def run(warehouse: Path, port: int) -> int:
    home = airflow_home(warehouse)
    if not (home / "airflow.cfg").is_file() or not demo_db.initialized(home):
        print(f"ui: no demo Airflow home in {home}: run `make demo` first", file=sys.stderr)
        return EXIT_USAGE
    if not port_free(port):
        print(
            f"ui: port {port} is in use (another Airflow?): UI_PORT={port + 1} make ui",
            file=sys.stderr,
        )
        return EXIT_USAGE
    log_dir = home / "logs" / "ui"
    log_dir.mkdir(parents=True, exist_ok=True)

    signal.signal(signal.SIGINT, _raise_stop)
    signal.signal(signal.SIGTERM, _raise_stop)
    database: demo_db.Server | None = None
    processes: list[Process] = []
    db_log_path = log_dir / "postgres.log"
    db_log = db_log_path.open("ab")
    try:
        print(f"ui: starting postgres, {', '.join(PROCESSES)} (logs in {log_dir})", flush=True)
        started = time.monotonic()
        database = demo_db.start(home, db_log)
        write_config(warehouse, port, log_server_ports(port), database.url)
        env = environment(warehouse)
        # The database is watched with the others: Airflow is nothing without it.
        processes.append(Process("postgres", database.popen, db_log_path, db_log))
        # The api-server first: the others' tasks call its Execution API from their start.
        processes.append(start("api-server", env, log_dir))
        if watch(processes, port, started, until=("metadatabase",)) != 0:
            return 1
        warm_execution_api(port)
        processes.extend(start(name, env, log_dir) for name in PROCESSES if name != "api-server")
        return watch(processes, port, started)
    except Stop as stopped:
        print(f"ui: {stopped}: stopping Airflow", flush=True)
        return 0
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the stop
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        # Airflow first, then its database, which they use until they exit.
        stop([proc for proc in processes if proc.name in PROCESSES])
        if database is not None:
            database.stop()
        db_log.close()
        print("ui: stopped", flush=True)


def watch(processes: list[Process], port: int, started: float, until: tuple[str, ...] = ()) -> int:
    """Say when the UI is ready (or what it still waits for, every `SAY_EVERY_S`); then wait
    for Ctrl-C, or for a process to die. With `until`, return 0 once those components are
    healthy instead. `started`: when the first process started (monotonic)."""
    said = time.monotonic()
    ready = False
    wanted = until or HEALTH_COMPONENTS
    while True:
        for proc in processes:
            code = proc.popen.poll()
            if code is not None:
                proc.log.flush()
                print(
                    f"ui: {proc.name} exited ({code}); the end of {proc.log_path}:\n"
                    f"{tail(proc.log_path)}",
                    file=sys.stderr,
                    flush=True,
                )
                return 1
        if not ready:
            status = health(port)
            waiting = [name for name in wanted if status.get(name) != "healthy"]
            now = time.monotonic()
            if not waiting and until:
                return 0
            if not waiting:
                ready = True
                print(
                    f"ui: ready after {now - started:.0f}s: http://localhost:{port}/ "
                    f"(the Iceberg page: http://localhost:{port}/icefloe/); Ctrl-C stops it",
                    flush=True,
                )
            elif now - started > READY_TIMEOUT_S:
                print(f"ui: not ready after {READY_TIMEOUT_S:.0f}s: {waiting}", file=sys.stderr)
                return 1
            elif now - said >= SAY_EVERY_S:
                said = now
                print(f"ui: waiting for {', '.join(waiting)} ({now - started:.0f}s)", flush=True)
        time.sleep(1.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make ui", description=__doc__.split("\n\n")[0])
    parser.add_argument("warehouse", nargs="?", default="warehouse")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    args = parser.parse_args(argv)
    return run(Path(args.warehouse).absolute(), args.port)


if __name__ == "__main__":
    sys.exit(main())
