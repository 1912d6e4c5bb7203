"""One local SparkSession for every Spark test, and a real SQLite catalog per test.

Starting Spark costs seconds, so the session is shared by the whole run (two cores, two
shuffle partitions, no UI). Python workers run the interpreter running the tests, so they
import the same icecore and spark_jobs (installed in the virtualenv).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icecore.catalog import SqlCatalog
from spark_jobs.common.session import configure


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("icefloe-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    configure(session)
    yield session
    session.stop()


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    return tmp_path / "warehouse"


@pytest.fixture
def catalog(warehouse: Path) -> Iterator[SqlCatalog]:
    catalog = SqlCatalog("default", warehouse=warehouse)
    yield catalog
    catalog.close()
