"""A real Spark Connect server for tests: the pinned pyspark's own
(`org.apache.spark.sql.connect.service.SparkConnectServer`, spark-submitted on local[2]) on
127.0.0.1 and a port the OS picks, started once per test session when a test asks for it.

    from tests.support.spark_connect import spark_connect_fixture  # noqa: F401

    def test_x(spark_connect: SparkConnectServer, tmp_path: Path) -> None:
        done = spark_connect.run_job("rewrite_data_files", ["--warehouse", ..., "--table", ...])
        assert done.returncode == 0, done.stderr

It is a stock server, as a user's is: its Python workers run an interpreter that has the
project's third-party packages (a small virtualenv whose `.pth` names this virtualenv's
site-packages) but not the project itself (the editable install's finder is a `.pth` inside
that directory, which Python does not process for a directory named this way), and its working
directory is a temporary one. So a job's tasks run only because the job shipped `icecore` and
`spark_jobs` itself; the fixture checks that the workers' Python cannot import them.

Jobs run as the README writes them, `python -m spark_jobs <job> ...` with `SPARK_REMOTE` set,
in a process of their own (a process is either a classic or a Connect PySpark client, and the
tests' shared classic session lives in this one).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import re
import signal
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from icefloe_airflow.job_process import connect_command, connect_environment

from icecore.jobs import JobOptions
from icecore.jobs.argv import REMOTE_ENV
from icecore.jobs.results import JobResult
from icecore.jobs.results import result_of as read_result
from tests.support.spark import QUIET_LOG4J2

ROOT = Path(__file__).resolve().parents[2]
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
_STARTED = re.compile(r"Spark Connect server started at: (\S+):(\d+)")
# Variables of this process that must not reach the server or a job's client.
# SPARK_CONF_DIR too: the Airflow tests' quiet log4j2 (WARN) would hide the server's "started".
_PRIVATE = ("PYTHONPATH", REMOTE_ENV, "SPARK_CONNECT_MODE_ENABLED", "PYSPARK_GATEWAY_PORT",
            "PYSPARK_GATEWAY_SECRET", "SPARK_LOCAL_REMOTE", "SPARK_CONF_DIR")  # fmt: skip
# The server's log: warnings, and the line that says where it listens.
_LOG4J2 = f"""{QUIET_LOG4J2}\
logger.server.name = org.apache.spark.sql.connect.service.SparkConnectServer
logger.server.level = info
"""


def _pyspark_home() -> Path:
    import pyspark  # noqa: PLC0415

    return Path(pyspark.__file__).resolve().parent


def connect_jar() -> Path:
    """The server's jar in the pinned pyspark (`jars/spark-connect_2.13-<version>.jar`)."""
    found = sorted((_pyspark_home() / "jars").glob("spark-connect_*.jar"))
    if not found:
        raise RuntimeError(f"no spark-connect jar in {_pyspark_home() / 'jars'}")
    return found[-1]


def clean_environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _PRIVATE}
    env.update(extra)
    return env


def workers_python(directory: Path) -> Path:
    """An interpreter with this virtualenv's packages but not the project: a virtualenv
    (no pip) whose site-packages has one `.pth` line naming this one's site-packages."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(directory)], check=True, timeout=120
    )
    python = directory / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout.strip()  # fmt: skip
    Path(purelib, "icefloe-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    for module, importable in (("pyarrow", True), ("icecore", False), ("spark_jobs", False)):
        probe = subprocess.run(
            [str(python), "-c", f"import {module}"],
            cwd=directory, env=clean_environment(), capture_output=True, timeout=60, check=False,
        )  # fmt: skip
        if (probe.returncode == 0) != importable:
            raise RuntimeError(
                f"the workers' Python {'cannot' if importable else 'can'} import {module}"
            )
    return python


_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded here: the child only calls into it


def _die_with_parent() -> None:
    """In the server's process (before exec): SIGTERM when the test process ends, however
    it ends, so no server outlives its run (spark-class execs the JVM in this process)."""
    _LIBC.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@dataclass
class SparkConnectServer:
    """A running server: `url` is what `SPARK_REMOTE` takes."""

    url: str
    process: subprocess.Popen[bytes] = field(repr=False)
    log: Path
    workers_python: Path
    startup_seconds: float

    def log_tail(self, lines: int = 60) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def job_command(
        self, job: str, args: Sequence[str], env: Mapping[str, str] | None = None
    ) -> tuple[list[str], dict[str, str]]:
        """`python -m spark_jobs <job> <args>` as a client of this server, launched as the
        operator and `icefloe run` launch it (`icefloe_airflow.job_process`)."""
        environment = {**connect_environment(self.url, clean_environment()), **(env or {})}
        return connect_command([job, *args]), environment

    def run_job(
        self,
        job: str,
        args: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str] | None = None,
        timeout: float = 300,
    ) -> subprocess.CompletedProcess[str]:
        command, environment = self.job_command(job, args, env)
        return subprocess.run(
            command, cwd=cwd, env=environment, capture_output=True, text=True,
            timeout=timeout, check=False,
        )  # fmt: skip

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


@contextlib.contextmanager
def start_spark_connect(
    workdir: Path, *, settings: Mapping[str, str] | None = None, timeout: float = 120
) -> Iterator[SparkConnectServer]:
    """A server on local[2] whose files live under `workdir`; stopped on exit."""
    workdir.mkdir(parents=True, exist_ok=True)
    python = workers_python(workdir / "workers-python")
    cwd = workdir / "server"
    cwd.mkdir(exist_ok=True)
    conf_dir = workdir / "conf"
    conf_dir.mkdir(exist_ok=True)
    (conf_dir / "log4j2.properties").write_text(_LOG4J2)
    conf = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": "0",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.pyspark.python": str(python),
        **(settings or {}),
    }
    command = [
        str(Path(sys.executable).parent / "spark-submit"),
        "--master", "local[2]",
        "--driver-memory", "1g",
        "--class", SERVER_CLASS,
        *(item for key, value in conf.items() for item in ("--conf", f"{key}={value}")),
        str(connect_jar()),
    ]  # fmt: skip
    env = clean_environment(PYSPARK_PYTHON=str(python), SPARK_CONF_DIR=str(conf_dir))
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    log = workdir / "spark-connect.log"
    started = time.monotonic()
    with open(log, "wb") as out:
        process = subprocess.Popen(
            command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 (a foreign call, no Python locks)
        )  # fmt: skip
    server = SparkConnectServer("", process, log, python, 0.0)
    try:
        while True:
            found = _STARTED.search(log.read_text(errors="replace"))
            if found:
                break
            if process.poll() is not None:
                raise RuntimeError(
                    f"the Spark Connect server exited with {process.returncode}:\n"
                    f"{server.log_tail()}"
                )
            if time.monotonic() - started > timeout:
                raise RuntimeError(
                    f"no Spark Connect server after {timeout:.0f} s:\n{server.log_tail()}"
                )
            time.sleep(0.1)
        server.url = f"sc://{found.group(1)}:{found.group(2)}"
        server.startup_seconds = time.monotonic() - started
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session", name="spark_connect")
def spark_connect_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkConnectServer]:
    """`spark_connect`: one server for the whole run (see the module's docstring)."""
    with start_spark_connect(tmp_path_factory.mktemp("spark_connect")) as server:
        yield server


JobRun = Callable[[str, JobOptions], JobResult]


def result_of(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The JSON result a successful job printed last on stdout."""
    assert done.returncode == 0, f"exit {done.returncode}:\n{done.stderr[-4000:]}"
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.fixture(params=["classic", "connect"])
def job_runner(request: pytest.FixtureRequest, warehouse: Path) -> JobRun:
    """`job_runner(job, options)`: the job's result (its class, read back from the JSON a
    Connect run prints), run on the tests' shared local session
    in this process, or as a client of the `spark_connect` server (`python -m spark_jobs`
    with `SPARK_REMOTE`, on the SQLite catalog in `warehouse`). A test that takes it runs
    once each way; `job_runner.kind` says which (the server starts only for a Connect run)."""
    if request.param == "classic":
        spark = request.getfixturevalue("spark")
        catalog = request.getfixturevalue("catalog")

        def classic(job: str, options: JobOptions) -> JobResult:
            job_module = importlib.import_module(f"spark_jobs.{job}")
            return job_module.run(spark, catalog, options)  # type: ignore[no-any-return]

        run: Any = classic
    else:
        server: SparkConnectServer = request.getfixturevalue("spark_connect")

        def connect(job: str, options: JobOptions) -> JobResult:
            args = ["--warehouse", str(warehouse), *options.to_argv()]
            printed = result_of(server.run_job(job, args, cwd=warehouse.parent))
            typed = read_result(job, printed)
            assert typed is not None, job
            return typed

        run = connect
    run.kind = request.param
    return run  # type: ignore[no-any-return]
