"""How a runner starts a job and learns how it went: the one contract the Airflow operator
and `icefloe run` share. Standard library only (and the jobs' declarations), so the `icefloe`
command imports no Airflow and an Airflow worker needs no Spark to build a command.

A job runs either under spark-submit (`launcher()` is its application) or as a client of a
Spark Connect server: `python -m spark_jobs <job> ...` with the server's URL in `SPARK_REMOTE`
(`connect_command`, `connect_environment`), never on the command line, where a URL's token
would show in process listings and logs. Either way the runner names a result file in the
job's environment (`RESULT_FILE_ENV`) and reads the job's outcome back from it
(`read_outcome`), never from its output. A spark-submitted job's driver logs through
`spark_log`: Spark's warnings beside the job's own lines, all of Spark's log in a file.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from icecore.jobs.argv import REMOTE_ENV

# Tells the job that its runner configured Spark's logging (`spark_log`), so it leaves Spark's
# levels alone; run by hand, a job turns Spark down to warnings itself
# (`spark_jobs.common.session`).
SPARK_LOGGING_ENV = "ICEFLOE_SPARK_LOGGING"
SPARK_LOG_DIR_ENV = "ICEFLOE_SPARK_LOG_DIR"
SPARK_LOG4J2 = """\
rootLogger.level = info
rootLogger.appenderRef.console.ref = console
rootLogger.appenderRef.file.ref = file
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{HH:mm:ss}} %p %c{{1}}: %m%n%ex
appender.console.filter.threshold.type = ThresholdFilter
appender.console.filter.threshold.level = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log_file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n%ex
"""


def launcher() -> Path:
    """`spark_jobs/main.py` of the installed spark_jobs package: every job's entry point under
    spark-submit (`main.py <job> [options]`); only its path, nothing of it runs here."""
    spec = importlib.util.find_spec("spark_jobs")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the spark_jobs package is not installed (pip install icefloe)")
    path = Path(next(iter(spec.submodule_search_locations))) / "main.py"
    if not path.is_file():
        raise RuntimeError(f"no job launcher {path}")
    return path


@dataclass(frozen=True)
class SparkLog:
    """Spark's own log for one run: warnings where the job's lines go (a task log, a
    terminal), everything from INFO up in `file`, for when a Spark problem needs it."""

    file: Path
    java_option: str  # for the driver's JVM: `-Dlog4j2.configurationFile=file:...`

    @property
    def env(self) -> dict[str, str]:
        """The job's environment for it: the job then leaves Spark's levels as configured."""
        return {SPARK_LOGGING_ENV: "configured"}

    @property
    def announcement(self) -> str:
        """The line that tells the reader where the full log is."""
        return f"full Spark driver log (INFO and above): {self.file}"


def spark_log(name: str) -> SparkLog:
    """A log4j2 configuration for one run `name` (a task try, an `icefloe run`), written
    under `$ICEFLOE_SPARK_LOG_DIR` (else the temporary directory's `icefloe-spark-logs-<uid>`)
    beside the log file it names: people read the job's lines, and Spark's INFO (a hundred
    lines of BlockManager, SharedState, ...) drowned them."""
    directory = Path(
        os.environ.get(SPARK_LOG_DIR_ENV)
        or Path(tempfile.gettempdir()) / f"icefloe-spark-logs-{os.getuid()}"
    )
    directory.mkdir(parents=True, exist_ok=True)
    safe = re.sub(r"[^A-Za-z0-9_.=-]+", "_", name)
    log_file = directory / f"{safe}.log"
    properties = directory / f"{safe}.log4j2.properties"
    properties.write_text(SPARK_LOG4J2.format(log_file=log_file))
    return SparkLog(log_file, f"-Dlog4j2.configurationFile=file:{properties}")


def read_outcome(path: Path) -> dict[str, Any]:
    """The job's `{"result": {...}}` or `{"cause": "Type: message"}` from its result file;
    {} when it wrote none (it was killed, or never started)."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def connect_command(job_argv: Sequence[str]) -> list[str]:
    """`python -m spark_jobs <job> [flags]` with this interpreter: the job as a Spark Connect
    client (the server named by `connect_environment`)."""
    return [sys.executable, "-m", "spark_jobs", *job_argv]


def connect_environment(remote: str, base: Mapping[str, str]) -> dict[str, str]:
    """`base` with the server's URL in `SPARK_REMOTE` (where its token, if any, stays out of
    the command line)."""
    return {**base, REMOTE_ENV: remote}


def shown_remote(url: str) -> str:
    """The server's address for a log line: `sc://host:port`, without the URL's parameters
    (a token, a user id)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.split(';', 1)[0]}"


def start_job(command: Sequence[str], env: Mapping[str, str]) -> subprocess.Popen[str]:
    """The job's process, its stderr merged into its stdout (read them with `stream_lines`),
    in a process group of its own so that `stop_job` ends whatever it started."""
    return subprocess.Popen(
        list(command),
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        start_new_session=True,
    )


def stream_lines(process: subprocess.Popen[str], on_line: Callable[[str], None]) -> int:
    """Hand each output line of the job to `on_line` as it comes; its exit status."""
    assert process.stdout is not None
    with process.stdout:
        for line in process.stdout:
            on_line(line.rstrip("\n"))
    return process.wait()


def stop_job(process: subprocess.Popen[str], grace: float = 30.0) -> None:
    """SIGTERM to the job's process group, SIGKILL after `grace` seconds. A Connect client
    killed at any point leaves the table as it was (it commits; the server only writes)."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
