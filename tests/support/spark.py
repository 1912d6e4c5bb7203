"""One local SparkSession for every test that needs Spark (tests/spark and tests/airflow).

Starting Spark costs seconds, so the session is shared by the whole pytest session (each of
`make test`'s two workers has its own; two cores, two shuffle partitions, no UI). Python
workers run the interpreter running the tests, so they import the same icecore and
spark_jobs (installed in the virtualenv).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_jobs.common.session import configure

# log4j2.properties for the Spark JVMs the tests start themselves (spark-submits, the Spark
# Connect server): warnings only, one line each, on stderr.
QUIET_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n
"""


# The spark-submits' spark-defaults.conf: short-lived JVMs (C1-only JIT and the serial
# collector start them about 3 s sooner, as the REST server fixture's JVM), no UI, two shuffle
# partitions.
SHORT_LIVED_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
_SPARK_DEFAULTS = f"""\
spark.driver.extraJavaOptions {SHORT_LIVED_JVM}
spark.ui.enabled false
spark.ui.showConsoleProgress false
spark.sql.shuffle.partitions 2
spark.default.parallelism 2
"""


@pytest.fixture(scope="session", autouse=True)
def spark_conf_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SPARK_CONF_DIR for every spark-submit the session starts, whichever test starts it
    and in whatever order (the processes inherit it: `dag.test()` operators, the session's
    Airflow deployment, `icefloe run`): the defaults above and warnings-only logs."""
    directory = tmp_path_factory.mktemp("spark-conf")
    (directory / "spark-defaults.conf").write_text(_SPARK_DEFAULTS)
    (directory / "log4j2.properties").write_text(QUIET_LOG4J2)
    os.environ["SPARK_CONF_DIR"] = str(directory)
    return directory


def local_session(app_name: str) -> SparkSession:
    """The tests' local Spark (also the benchmarks' that run jobs in process): local[2], no
    UI, two partitions, this interpreter for the Python workers."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "2g")
        # Full JIT for this long-lived JVM, whatever SPARK_CONF_DIR gives short-lived ones.
        .config("spark.driver.extraJavaOptions", "")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = local_session("icefloe-tests")
    # py4j logs at INFO from __del__ at interpreter exit, after pytest has closed the stream
    # Airflow's logging config handed the root logger: a "Logging error" traceback, not a bug.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    configure(session)
    yield session
    session.stop()
