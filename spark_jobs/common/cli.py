"""The command line of every job, and its contract with whoever runs it.

    spark-submit [--py-files dist/icefloe.zip] spark_jobs/main.py <job> \\
        --warehouse /data/wh --table db.events [job options]
    python -m spark_jobs <job> ...                                  # the same, locally
    SPARK_REMOTE=sc://host:15002 python -m spark_jobs <job> ...     # on a Spark Connect server
    python spark_jobs/main.py <job> --remote sc://host:15002 ...    # the same

`<job>` is a name of `icecore.jobs.jobs.JOBS`; its options come from the job's
declaration (`icecore.jobs.argv`), the catalog options every job shares from
`CatalogArgs`: `--catalog-uri` (default: `$ICEFLOE_CATALOG_URI`, else the SQLite file
`catalog.db` in the warehouse; the variable keeps a password off the command line, which
process listings and scheduler logs show), `--catalog-property K=V` (repeatable, e.g. FileIO's
`s3.endpoint`; credentials such as `s3.secret-access-key` belong in
`$ICEFLOE_CATALOG_PROPERTIES`, a JSON object, for the same reason), `--catalog-name` and
`--warehouse`.

Where the Spark work runs: with spark-submit, in the application spark-submit started; run with
Python (`python -m spark_jobs`, `python spark_jobs/main.py`), on a local Spark whose Python
workers run the interpreter the job was started with (unless `$PYSPARK_PYTHON` names another:
`spark_jobs.common.session`), or on the Spark Connect server `$SPARK_REMOTE` names (PySpark's
own variable) or `--remote sc://...` (which wins; a URL carrying a `token` belongs in the
variable, for the reason above). Over Spark Connect this process is the job's driver: it plans,
reads and writes metadata and commits here; the server runs the Spark tasks, with `icecore` and
`spark_jobs` shipped to it by the job (`spark_jobs.common.connect`), so the server needs only
the third-party packages (and this process's Python minor version). Everything below holds the
same on every path: a runner changes nothing but the variable (or the flag) to move a job from
spark-submit to a Connect server. Over Connect, besides: a server that does not answer fails
the job at once (exit 1, `JobError: no Spark Connect server answers at sc://...`); a malformed
`--remote` is a bad command line (exit 2); the job never connects when its work needs no Spark;
a client killed at any point leaves the table as it was (it commits, the server only writes
files); and the server session, shared by the jobs of one code version, stays open when the job
ends.

Order of work: the options are parsed and checked first (a bad value exits 2 with one line
naming the flag, and no Spark JVM is ever started nor any server contacted), then the catalog
is opened (a warehouse directory or SQLite catalog that does not exist is refused in one line
naming it, and nothing is created, except by `ingest --create`), then the job runs, given a
Spark session it starts (or connects) when its work needs one
(`spark_jobs.common.session.OnDemandSession`).

Output: the last line on stdout is one JSON object with the job's result counters, so a
scheduler can parse it whatever Spark printed before; a runner that sets
`$ICEFLOE_RESULT_FILE` also gets `{"result": ...}` or `{"cause": ...}` in that file (the
Airflow operator does: it needs no parsing of Spark's output). On failure the exit status is
non-zero (1; 2 for a bad command line) and the last line on stderr is a one-line cause
(`ExceptionType: message`), printed after the Spark session has stopped, so that no shutdown
log follows it. Tracebacks are printed above it only for failures that are bugs, not for bad
input or conflicts the user can act on. The jobs' own progress lines go to stderr through
`logging` (`icefloe.<job>`), and Spark's own logging is turned down to warnings (over Spark
Connect, Spark logs on the server, not here).
"""

from __future__ import annotations

import gc
import importlib
import json
import logging
import os
import sys
import traceback
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn, TextIO

from icecore.catalog import Catalog, catalog_from_settings
from icecore.errors import IcecoreError
from icecore.jobs.argv import (
    RESULT_FILE_ENV,
    CatalogArgs,
    catalog_settings,
    checked_remote,
    parse_job_args,
)
from icecore.jobs.errors import JobError
from icecore.jobs.jobs import JOBS
from icecore.jobs.options import OptionError

EXIT_FAILED = 1
EXIT_USAGE = 2
_MAX_CAUSE = 1000


def open_catalog(args: CatalogArgs, *, create: bool = False) -> Catalog:
    """The catalog the shared options describe; secrets only from the environment. A missing
    warehouse directory or SQLite catalog is refused naming the path, and nothing is created,
    unless `create` (only `ingest --create` makes a catalog: a mistyped path must not)."""
    try:
        settings = catalog_settings(args)
    except ValueError as exc:
        raise JobError(str(exc)) from None
    return catalog_from_settings(**settings, create=create)


def one_line(exc: BaseException) -> str:
    """`Type: first line of the message`, short enough for a log line and an Airflow UI."""
    text = str(exc).strip()
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    cause = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return cause if len(cause) <= _MAX_CAUSE else cause[: _MAX_CAUSE - 3] + "..."


def _logging() -> None:
    """The jobs' own lines, one per event, on stderr (where the operator reads them)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s", "%H:%M:%S"))
    logger = logging.getLogger("icefloe")
    if not logger.handlers:
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def split_remote(argv: Sequence[str]) -> tuple[str | None, list[str]]:
    """`--remote URL` (or `--remote=URL`) taken out of a job's arguments: the Spark Connect
    server, checked for its form (sc://host[:port][/;param=value...]) before anything runs
    (a usage error, as argparse's are)."""
    rest: list[str] = []
    remote = None
    args = iter(argv)
    for arg in args:
        if arg == "--remote":
            remote = next(args, "")
        elif arg.startswith("--remote="):
            remote = arg.split("=", 1)[1]
        else:
            rest.append(arg)
    if remote is None:
        return None, rest
    try:
        return checked_remote(remote), rest
    except ValueError as exc:
        raise SystemExit(str(exc)) from None


def run_job(job: str, argv: Sequence[str]) -> Mapping[str, Any]:
    """Parse and check `argv` for `job`, then run it on a fresh session; its result."""
    remote, argv = split_remote(argv)
    spec = JOBS.get(job)
    if spec is None:
        raise SystemExit(
            f"unknown job {job!r}; the jobs are: {', '.join(JOBS)} (usage: <job> --help)"
        )
    args = parse_job_args(spec, argv)
    from spark_jobs.common.session import job_session  # noqa: PLC0415 (after the check)

    module = importlib.import_module(f"spark_jobs.{job}")
    catalog = open_catalog(args.catalog, create=bool(getattr(args.options, "create", False)))
    try:
        return module.run(job_session(f"icefloe-{job}", remote), catalog, args.options).to_dict()
    finally:
        catalog.close()


def _record(outcome: Mapping[str, Any]) -> None:
    """The outcome in `$ICEFLOE_RESULT_FILE`, when a runner asked for it: written whole or
    not at all (a temporary file renamed)."""
    target = os.environ.get(RESULT_FILE_ENV)
    if not target:
        return
    partial = f"{target}.{os.getpid()}.tmp"
    with open(partial, "w", encoding="utf-8") as handle:
        json.dump(dict(outcome), handle, sort_keys=True, default=str)
    os.replace(partial, target)


def _say_cause(cause: str, err: TextIO) -> None:
    """The one-line cause, last on stderr. Under spark-submit, Python's own stderr is merged
    into spark-submit's stdout (its PythonRunner redirects the error stream), so the line goes
    to the spark-submit JVM's stderr instead, through the gateway spark-submit opened: that
    stream is the stderr Airflow and a terminal see, and with Spark's logging at warnings
    nothing follows the line when the JVM exits."""
    if err is sys.stderr and os.environ.get("PYSPARK_GATEWAY_PORT"):
        try:
            from pyspark.java_gateway import launch_gateway  # noqa: PLC0415

            stream = launch_gateway().jvm.java.lang.System.err
            stream.println(cause)
            stream.flush()
            _record({"cause": cause})
            return
        except Exception:  # no gateway after all: Python's stderr is the next best place
            pass
    print(cause, file=err, flush=True)
    _record({"cause": cause})


def _stop_spark(before: object) -> None:
    """Stop the session the job built, if any, before its cause is printed: what Spark logs
    while stopping must come before the cause, which is the last line. A session that was
    there before (a caller's, in-process) is left running."""
    if "pyspark" not in sys.modules:
        return
    from pyspark.sql import SparkSession  # noqa: PLC0415

    session = SparkSession.getActiveSession()
    if session is not None and session is not before:
        session.stop()


def _release_connect_session(before: object) -> None:
    """Over Spark Connect, end the session the job opened once its work is done: the server
    then drops the session's state and shipped files (it keeps them for an hour otherwise).
    A classic session ends with the process, as spark-submit's always has."""
    session = _active_session()
    if session is not None and session is not before:
        from spark_jobs.common.connect import is_connect  # noqa: PLC0415 (pyspark loaded)

        if is_connect(session):  # type: ignore[arg-type]
            session.stop()  # type: ignore[attr-defined]


def _active_session() -> object:
    if "pyspark" not in sys.modules:
        return None
    from pyspark.sql import SparkSession  # noqa: PLC0415

    return SparkSession.getActiveSession()


def main(
    argv: Sequence[str] | None = None,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """`<job> [options]`: run it; print its counters or its cause; the exit status."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(
            f"usage: main.py <job> [--remote sc://host:port] [options]; jobs: {', '.join(JOBS)}",
            file=out,
        )
        return 0 if args else EXIT_USAGE
    _logging()
    before = _active_session()
    try:
        result = run_job(args[0], args[1:])
    except SystemExit as exc:  # argparse: usage errors and --help; an unknown job
        if isinstance(exc.code, str):
            _say_cause(exc.code, err)
            return EXIT_USAGE
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    except OptionError as exc:
        _say_cause(one_line(exc), err)
        return EXIT_USAGE
    except (JobError, IcecoreError) as exc:
        _stop_spark(before)
        _say_cause(one_line(exc), err)
        return EXIT_FAILED
    except Exception as exc:
        traceback.print_exc(file=err)
        _stop_spark(before)
        _say_cause(one_line(exc), err)
        return EXIT_FAILED
    _release_connect_session(before)
    print(json.dumps(dict(result), sort_keys=True, default=str), file=out, flush=True)
    _record({"result": result})
    return 0


def exit_process(code: int) -> NoReturn:
    """End a job's own process (the command line's) with `code`. Its objects are frozen
    first, so the interpreter's shutdown does not walk every one of them in a last cyclic
    collection: about 0.1 s after a job, a tenth of a small conversion's whole run, for memory
    the operating system takes back anyway. Shutdown still runs its exit handlers and
    releases what is not in a cycle; never called inside a caller's process (Airflow's)."""
    gc.freeze()
    sys.exit(code)
