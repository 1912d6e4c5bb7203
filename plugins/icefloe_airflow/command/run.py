"""`icefloe run JOB TABLE [job flags]`: one job on one table, as the fleet would run it.

The job is spark-submitted (`spark_jobs/main.py <job>`), like the Airflow operator does, and
not run inside the `icefloe` process: the same launcher, the same checks and result contract
(`icefloe_airflow.job_process`), a JVM that goes away with the job, and `--master` to send it
to a cluster. With `--remote sc://...` (or `SPARK_REMOTE` set, and no `--master`) it runs as a
client of that Spark Connect server instead, `python -m spark_jobs <job>`, the URL in its
environment, as the operator does with a Spark Connect connection. Like the operator, it holds
the table's maintenance lock in the state store (when there is one) and records the run there,
so a hand-run job and the fleet DAG never work on one table at once and the policy sees the
run. The catalog URI and secrets travel in the environment, never on a command line.

The terminal shows what the operator's task log shows: the job's own lines (`icefloe.<job>`)
and Spark's warnings, the JSON result, then the result in words; Spark's whole driver log
(INFO and above) goes to a file named on the first line, as the task log names its own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from icecore.jobs.argv import (
    CATALOG_URI_ENV,
    REMOTE_ENV,
    RESULT_FILE_ENV,
    CatalogArgs,
    OneLineParser,
    checked_remote,
)
from icecore.jobs.jobs import JOBS
from icefloe_airflow.command.common import Invocation, Subcommand, open_store
from icefloe_airflow.job_process import (
    connect_command,
    connect_environment,
    launcher,
    read_outcome,
    spark_log,
)
from icefloe_airflow.results import describe

if TYPE_CHECKING:
    from icefloe_airflow.state import MaintenanceStore

LOCK_TTL = timedelta(minutes=10)


def _arguments(parser: OneLineParser) -> None:
    parser.add_argument("job")
    parser.add_argument("table")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--master", help="spark-submit to this Spark master (default local[*])")
    where.add_argument(
        "--remote",
        metavar="sc://HOST:PORT",
        help=f"run as a client of this Spark Connect server (default: ${REMOTE_ENV}); a URL "
        f"with a token belongs in ${REMOTE_ENV}",
    )


def run(invocation: Invocation) -> int:
    """`icefloe run`: the job, under the table's lease when there is a state store."""
    args = invocation.args
    master, remote = _where(args.master, args.remote)
    with open_store(invocation.state, invocation.catalog.name) as store:
        return run_job(
            args.job,
            args.table,
            invocation.catalog,
            invocation.extra,
            master=master,
            remote=remote,
            store=store,
        )


def _where(master: str | None, remote: str | None) -> tuple[str, str | None]:
    """`icefloe run`'s Spark: the `--master` to spark-submit to, or the Spark Connect server
    (`--remote`, else `$SPARK_REMOTE` when no `--master` is given) to run the job against."""
    if remote is not None:
        try:
            return "", checked_remote(remote)
        except ValueError as exc:
            raise SystemExit(f"icefloe run: {exc}") from None
    if master is None and os.environ.get(REMOTE_ENV):
        return "", os.environ[REMOTE_ENV]
    return master or "local[*]", None


def spark_submit() -> str:
    """`spark-submit` beside this Python (pyspark's), else on PATH."""
    beside = Path(sys.executable).parent / "spark-submit"
    found = str(beside) if beside.is_file() else shutil.which("spark-submit")
    if found is None:
        raise SystemExit("spark-submit not found: pip install pyspark, or put Spark on PATH")
    return found


def job_arguments(job: str, table: str, catalog: CatalogArgs, job_argv: Sequence[str]) -> list[str]:
    """`<job> --table ... [catalog flags] [job flags]`: no catalog URI (see `run_job`)."""
    command = [job, "--table", table, "--catalog-name", catalog.name]
    if catalog.type:
        command += ["--catalog-type", catalog.type]
    if catalog.warehouse:
        command += ["--warehouse", catalog.warehouse]
    for key, value in catalog.properties.items():
        command += ["--catalog-property", f"{key}={value}"]
    return [*command, *job_argv]


def submit_command(
    job: str,
    table: str,
    catalog: CatalogArgs,
    job_argv: Sequence[str],
    *,
    master: str,
    py_files: str,
) -> list[str]:
    """spark-submit's command line."""
    try:
        application = str(launcher())
    except RuntimeError as exc:
        raise SystemExit(str(exc)) from None
    command = [spark_submit(), "--master", master]
    if py_files:
        command += ["--py-files", py_files]
    return [*command, application, *job_arguments(job, table, catalog, job_argv)]


def run_job(
    job: str,
    table: str,
    catalog: CatalogArgs,
    job_argv: Sequence[str],
    *,
    master: str = "local[*]",
    remote: str | None = None,
    store: MaintenanceStore | None = None,
    lock_wait: timedelta = timedelta(hours=1),
) -> int:
    """Run the job (on the Spark Connect server `remote`, else spark-submitted to `master`);
    its exit status. The terminal gets what a task log gets: the job's own lines, Spark's
    warnings, the job's JSON result as its last stdout line, then the result in words (on
    stderr); Spark's whole log goes to the file a first line names."""
    if job not in JOBS:
        raise SystemExit(f"unknown job {job!r}; the jobs are: {', '.join(JOBS)}")
    env = {k: v for k, v in os.environ.items() if k != REMOTE_ENV}
    if catalog.uri:
        env[CATALOG_URI_ENV] = catalog.uri
    with ExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="icefloe-")))
        env[RESULT_FILE_ENV] = str(directory / "result.json")
        if remote is not None:  # Spark logs on the server: nothing of it comes here
            command = connect_command(job_arguments(job, table, catalog, job_argv))
            env = connect_environment(remote, env)
        else:
            env.setdefault("PYSPARK_PYTHON", sys.executable)
            env.update(_quiet_spark(job, table, env))
            py_files = ""
            if not master.startswith("local"):  # executors elsewhere need icecore + spark_jobs
                from spark_jobs.common.packaging import build_zip  # noqa: PLC0415

                py_files = str(build_zip(directory / "icefloe.zip"))
            command = submit_command(
                job, table, catalog, job_argv, master=master, py_files=py_files
            )
        run_pk = None
        if store is not None and JOBS[job].maintenance:
            owner = f"icefloe-cli/{os.getpid()}@{os.uname().nodename}"
            stack.enter_context(store.lock(table, owner, ttl=LOCK_TTL, wait=lock_wait, poll=5.0))
            run_pk = store.start_run(
                table, job, dag_id=None, run_id=None, task_id=None, try_number=None
            )
        try:
            code = subprocess.run(command, env=env, check=False).returncode
        except BaseException as exc:
            if run_pk is not None:
                store.finish_run(run_pk, state="failed", error=f"{type(exc).__name__}: {exc}")
            raise
        outcome = read_outcome(directory / "result.json")
        result = outcome.get("result") if code == 0 else None
        if isinstance(result, dict):
            print(f"{job} on {table}: {describe(job, result)}", file=sys.stderr, flush=True)
        if run_pk is None:
            return code
        if isinstance(result, dict):
            store.finish_run(run_pk, state="success", result=result)
        else:
            cause = outcome.get("cause") or f"the job exited with {code}"
            store.finish_run(run_pk, state="failed", error=str(cause))
        return code


def _quiet_spark(job: str, table: str, env: dict[str, str]) -> dict[str, str]:
    """The environment that keeps Spark's INFO off the terminal, as the operator keeps it
    off the task log (`job_process.spark_log`), and says where it goes. The log4j2 setting
    travels in `SPARK_SUBMIT_OPTS`, which spark-submit's JVM (the driver, in client mode)
    takes besides `spark.driver.extraJavaOptions`: the command has no Spark settings of its
    own to add it to, and must not replace the ones spark-defaults.conf gives."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    log = spark_log(f"icefloe-run__{job}__{table}__{stamp}__{os.getpid()}")
    print(log.announcement, file=sys.stderr, flush=True)
    options = " ".join(o for o in (env.get("SPARK_SUBMIT_OPTS"), log.java_option) if o)
    return {"SPARK_SUBMIT_OPTS": options, **log.env}


SUBCOMMANDS = (
    Subcommand(
        "run",
        "run a job on a table (spark-submit or Spark Connect, under its lease)",
        _arguments,
        run,
        pass_on=True,
    ),
)
