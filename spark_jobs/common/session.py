"""The Spark session settings the jobs need, and the session they run in.

Table files never go through Spark's Parquet reader or writer (`spark_jobs.reading`,
`spark_jobs.writing`: FileIO in the tasks); Spark reads only the user's ingestion source.
For that: dates and timestamps before 1582 are read as proleptic Gregorian, Iceberg's
calendar, not rebased as Spark's legacy files were; and a Parquet source's columns are
matched by field id where the file and the schema asked for both carry them, by name
otherwise.

All of them exist, with these names, in Spark 3.5 and 4.x, classic and Connect.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from pyspark.sql import SparkSession

ICEBERG_SQL_CONF = {
    "spark.sql.parquet.fieldId.read.enabled": "true",
    "spark.sql.parquet.fieldId.read.ignoreMissing": "true",
    "spark.sql.parquet.datetimeRebaseModeInRead": "CORRECTED",
    "spark.sql.parquet.int96RebaseModeInRead": "CORRECTED",
}


def configure(spark: SparkSession) -> SparkSession:
    """Set the settings on a session a caller already has (they are runtime SQL settings)."""
    for key, value in ICEBERG_SQL_CONF.items():
        spark.conf.set(key, value)
    return spark


# Set by the Airflow operator when it configured Spark's logging itself (warnings in the task
# log, everything in a file); otherwise a job turns Spark's own logging down to warnings.
SPARK_LOGGING_ENV = "ICEFLOE_SPARK_LOGGING"


def get_session(app_name: str) -> SparkSession:
    """The job's session: the one spark-submit configured, with the Iceberg settings on and
    Spark's own log at warnings (people read the job's lines; Spark's INFO drowned them)."""
    builder = SparkSession.builder.appName(app_name).config("spark.ui.showConsoleProgress", "false")
    session = configure(builder.getOrCreate())
    if os.environ.get(SPARK_LOGGING_ENV) != "configured":
        session.sparkContext.setLogLevel("WARN")
    return session


SessionSource = SparkSession | Callable[[], SparkSession]


class OnDemandSession:
    """The job's session, started the first time a job asks for it: a job whose work is
    small enough to do in the driver's own threads (a conversion of a small table, an expiry
    deleting a few files) never starts a SparkContext, the largest fixed cost of a run
    (seconds before the first task, on a cluster more while executors are allocated).

    In YARN's cluster mode the application master fails an application that never started
    a SparkContext, so there `job_session` starts it up front."""

    def __init__(self, app_name: str) -> None:
        self.app_name = app_name
        self._session: SparkSession | None = None

    def __call__(self) -> SparkSession:
        if self._session is None:
            self._session = get_session(self.app_name)
        return self._session


def job_session(app_name: str) -> SessionSource:
    """The session a job run from the command line is given."""
    source = OnDemandSession(app_name)
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
    return source if isinstance(source, SparkSession) else source()


def isolated_session(spark: SparkSession, settings: Mapping[str, str]) -> SparkSession:
    """A new session on `spark`'s context with a copy of its SQL settings plus `settings`,
    for work that needs settings nothing else running in `spark` should see.

    `SET` lists the settings the session has set (those given at start-up and at run time);
    the ones fixed at start-up (static, or SparkContext settings) are not copied: the new
    session already has them."""
    session = spark.newSession()
    for row in spark.sql("SET").collect():
        if spark.conf.isModifiable(row.key):
            session.conf.set(row.key, row.value)
    for key, value in settings.items():
        session.conf.set(key, value)
    return session
