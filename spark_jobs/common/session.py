"""The Spark session a job runs in: classic (spark-submit, local, an in-process caller's) or a
client of a Spark Connect server, and the settings the jobs need either way.

A job run with `SPARK_REMOTE=sc://host:15002` (PySpark's own variable) or `--remote
sc://host:15002` gets a Spark Connect session (`spark_jobs.common.connect`): the job's driver
part (planning, commits, icecore) runs in the calling process, its Spark work on the server,
with `icecore` and `spark_jobs` shipped to it by the job, so a stock server whose Python has the
third-party packages serves it. The jobs never use the SparkContext (no RDDs, broadcast
variables, accumulators or JVM gateway calls), so the same code runs on both kinds of session;
what differs is here (`parallelism`, `isolated_session`) and in `connect`.

Table files never go through Spark's Parquet reader or writer (`spark_jobs.reading`,
`spark_jobs.writing`: FileIO in the tasks); Spark reads only the user's ingestion source.
For that: dates and timestamps before 1582 are read as proleptic Gregorian, Iceberg's
calendar, not rebased as Spark's legacy files were; and a Parquet source's columns are
matched by field id where the file and the schema asked for both carry them, by name
otherwise.

All of them exist, with these names, in Spark 3.5 and 4.x, classic and Connect.

Nothing here imports pyspark until a session is started or used: a job whose work needs no
Spark (`OnDemandSession`, never called) runs without loading it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from icecore.jobs.argv import REMOTE_ENV
from icecore.jobs.errors import JobError
from spark_jobs.common.connect import is_connect, private_session, shared_session

if TYPE_CHECKING:
    from typing import TypeAlias

    from pyspark.sql import SparkSession

    SessionSource: TypeAlias = SparkSession | Callable[[], SparkSession]
else:
    SessionSource = Any  # a session or what starts one; named for type checkers only

ICEBERG_SQL_CONF = {
    "spark.sql.parquet.fieldId.read.enabled": "true",
    "spark.sql.parquet.fieldId.read.ignoreMissing": "true",
    "spark.sql.parquet.datetimeRebaseModeInRead": "CORRECTED",
    "spark.sql.parquet.int96RebaseModeInRead": "CORRECTED",
}
# Set by a runner that configured Spark's logging itself (the Airflow operator, `icefloe run`:
# warnings beside the job's lines, everything in a file; icefloe_airflow.job_process.spark_log);
# otherwise a job turns Spark's own logging down to warnings.
SPARK_LOGGING_ENV = "ICEFLOE_SPARK_LOGGING"


def configure(spark: SparkSession) -> SparkSession:
    """Set the settings on a session a caller already has (they are runtime SQL settings)."""
    for key, value in ICEBERG_SQL_CONF.items():
        spark.conf.set(key, value)
    return spark


def get_session(app_name: str, remote: str | None = None) -> SparkSession:
    """The job's session: on the Spark Connect server `remote` (else `$SPARK_REMOTE`) names,
    with icefloe's packages shipped to it; else the one spark-submit configured (or a local
    one started here, its Python workers on this interpreter: `_workers_python`), with Spark's
    own log at warnings (people read the job's lines; Spark's INFO drowned them). The Iceberg
    settings are on either way."""
    url = remote or os.environ.get(REMOTE_ENV)
    if url:
        return shared_session(url, ICEBERG_SQL_CONF)
    from pyspark.sql import SparkSession  # noqa: PLC0415 (a session is started here)

    builder = SparkSession.builder.appName(app_name).config("spark.ui.showConsoleProgress", "false")
    session = configure(builder.getOrCreate())
    context = session.sparkContext
    if os.environ.get(SPARK_LOGGING_ENV) != "configured":
        context.setLogLevel("WARN")
    python = _workers_python(str(context.master))
    if python is not None:  # taken when a task's function is built: no task has run yet
        context.pythonExec = python
        os.environ["PYSPARK_PYTHON"] = python  # and any session started after this one
    return session


def _workers_python(master: str) -> str | None:
    """The interpreter a job's local Spark should run its Python workers on, if not what
    PySpark chose.

    Spark's Python workers run `$PYSPARK_PYTHON`, else `python3` from PATH. Under
    spark-submit the launcher sets the variable (from `spark.pyspark.python` or the
    environment); a job run with Python (`python spark_jobs/main.py`, `python -m spark_jobs`)
    starts Spark itself, and from a plain shell `python3` is the system's, without the jobs'
    packages: every task failed after the whole plan had run (`No module named 'fastavro'`).
    So on a local master, whose workers run on this machine, they run this interpreter
    unless the user named one. The master is Spark's own (spark-defaults.conf,
    `PYSPARK_SUBMIT_ARGS`), hence read once the context exists, before any task. A cluster's
    executors keep `python3` (or what the user set): this machine's path means nothing
    there."""
    if os.environ.get("PYSPARK_GATEWAY_PORT") or os.environ.get("PYSPARK_PYTHON"):
        return None  # spark-submit started this driver, or the user chose
    if not master.startswith("local"):
        return None
    if not sys.executable:
        raise JobError(
            "cannot tell which Python Spark's workers should run (this interpreter does not "
            "know its own path): set PYSPARK_PYTHON to a Python with icefloe installed"
        )
    return sys.executable


class OnDemandSession:
    """The job's session, started the first time a job asks for it: a job whose work is
    small enough to do in the driver's own threads (a conversion of a small table, an expiry
    deleting a few files) never starts a SparkContext, the largest fixed cost of a run
    (seconds before the first task, on a cluster more while executors are allocated), nor
    connects to a Spark Connect server.

    In YARN's cluster mode the application master fails an application that never started
    a SparkContext, so there `job_session` starts it up front."""

    def __init__(self, app_name: str, remote: str | None = None) -> None:
        self.app_name = app_name
        self.remote = remote
        self._session: SparkSession | None = None

    def __call__(self) -> SparkSession:
        if self._session is None:
            self._session = get_session(self.app_name, self.remote)
        return self._session


def job_session(app_name: str, remote: str | None = None) -> SessionSource:
    """The session a job run from the command line is given."""
    source = OnDemandSession(app_name, remote)
    return source() if _yarn_cluster_driver() else source


def _yarn_cluster_driver() -> bool:
    """Whether this driver runs inside YARN's application master (spark-submit's settings
    are the JVM's system properties there; the gateway is spark-submit's own JVM)."""
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):
        return False
    from pyspark.java_gateway import launch_gateway  # noqa: PLC0415

    system = launch_gateway().jvm.java.lang.System
    master = str(system.getProperty("spark.master") or "")
    mode = str(system.getProperty("spark.submit.deployMode") or "")
    return master.startswith("yarn") and mode == "cluster"


def session_of(source: SessionSource) -> SparkSession:
    """The session itself, started now if `source` starts it on demand."""
    return source() if callable(source) else source


_PARALLELISM: dict[str, int] = {}  # per Connect session id


def parallelism(spark: SparkSession) -> int:
    """How many tasks the cluster runs at once by default (Spark's default parallelism), to
    size the jobs' task lists. A Connect client has no SparkContext to ask: there it is the
    number of partitions a range gets by default (Spark's leaf-node parallelism, the default
    parallelism unless set apart), counted by a small JVM-only query once per session, unless
    the server sets `spark.default.parallelism`."""
    if not is_connect(spark):
        return int(spark.sparkContext.defaultParallelism)
    from pyspark.sql import functions as F  # noqa: PLC0415 (a session exists: pyspark is loaded)

    found = _PARALLELISM.get(spark.session_id)
    if found is None:
        configured = spark.conf.get("spark.default.parallelism", None)
        if configured:
            found = int(configured)
        else:
            ids = spark.range(0, 1 << 20).select(F.spark_partition_id().alias("p"))
            last = ids.agg(F.max("p")).first()
            found = int(last[0]) + 1 if last else 1
        _PARALLELISM[spark.session_id] = found
    return found


@contextmanager
def isolated_session(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[SparkSession]:
    """A session with `spark`'s SQL settings plus `settings`, for work that needs settings
    nothing else running in `spark` should see.

    Classic: a new session on `spark`'s context holding a copy of its settings. `SET` lists
    the settings the session has set (those given at start-up and at run time); the ones
    fixed at start-up (static, or SparkContext settings) are not copied: the new session
    already has them.

    Connect: a session of the job's own on the same server (`connect.private_session`), with
    the Iceberg settings and `settings` (the shared session is other jobs' too, and PySpark's
    Connect client has no `newSession`), released after the block."""
    if is_connect(spark):
        with private_session(spark, {**ICEBERG_SQL_CONF, **settings}) as session:
            yield session
        return
    session = spark.newSession()
    for row in spark.sql("SET").collect():
        if spark.conf.isModifiable(row.key):
            session.conf.set(row.key, row.value)
    for key, value in settings.items():
        session.conf.set(key, value)
    yield session
