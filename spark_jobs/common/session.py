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
from collections.abc import Mapping

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
