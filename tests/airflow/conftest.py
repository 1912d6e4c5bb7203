"""Airflow for tests: a private AIRFLOW_HOME with a SQLite metadata database, our dags/ and
plugins/ folders, and the two connections (`iceberg_default`, `spark_default`) as env vars.

The environment is set when this module is imported, before anything imports airflow:
Airflow reads its configuration once, at import, so setting it in a fixture would be too late.
Subprocesses (api-server, scheduler, spark-submit) get the same settings from `airflow_env()`
(or simply inherit os.environ). Tests use the fixtures; importing this module by another name
(`tests.airflow.conftest`) finds the same settings again, but is best avoided.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from icefloe_airflow.state_db import STATE_URI_ENV  # imports no Airflow: the settings hold

from tests.airflow.deployment import (
    Deployment,
    icefloe_connection,
    start_deployment,
    state_store_uri,
)
from tests.support.spark_connect import SparkConnectServer

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
# One home per test session, even if this module is imported twice under two names.
_HOME_ENV = "ICEFLOE_TEST_AIRFLOW_HOME"
AIRFLOW_HOME = Path(os.environ.get(_HOME_ENV) or tempfile.mkdtemp(prefix="icefloe-airflow-"))
os.environ[_HOME_ENV] = str(AIRFLOW_HOME)
SPARK_CONNECTION = json.dumps({"conn_type": "spark", "host": "local[2]"})

_SETTINGS = {
    "AIRFLOW_HOME": str(AIRFLOW_HOME),
    "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
    "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"),
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{AIRFLOW_HOME}/airflow.db",
    "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(AIRFLOW_HOME / "logs"),
    "AIRFLOW_CONN_SPARK_DEFAULT": SPARK_CONNECTION,
    # spark-submit runs Python workers with the interpreter running the tests (icecore,
    # pyarrow and friends are installed there).
    "PYSPARK_PYTHON": sys.executable,
    "PYSPARK_DRIVER_PYTHON": sys.executable,
    "PATH": os.environ.get("PATH", "")
    if str(VENV_BIN) in os.environ.get("PATH", "").split(os.pathsep)
    else os.pathsep.join([str(VENV_BIN), os.environ.get("PATH", "")]),
    # Spark binds to loopback: no hostname lookups, nothing exposed on the network.
    "SPARK_LOCAL_IP": "127.0.0.1",
    # Airflow's processes import this checkout's packages, as pytest does (pyproject's
    # `pythonpath`): an editable install of another checkout (a git worktree's main one)
    # would otherwise win, and a deployment would run that checkout's plugin.
    "PYTHONPATH": os.pathsep.join(
        [str(ROOT), str(ROOT / "plugins"), *filter(None, [os.environ.get("PYTHONPATH")])]
    ),
}
os.environ.update(_SETTINGS)


def airflow_env(**extra: str) -> dict[str, str]:
    """The environment for Airflow or Spark subprocesses: this session's Airflow settings,
    the current connections (including a test's `iceberg_default`), plus `extra`."""
    return {**os.environ, **_SETTINGS, **extra}


def iceberg_connection_json(warehouse: Path, uri: str | None = None, name: str = "default") -> str:
    """The JSON form of an `iceberg` connection (AIRFLOW_CONN_<ID> accepts it)."""
    return json.dumps(icefloe_connection(warehouse, uri=uri, name=name))


# A copy of the metadata database as `airflow db migrate` left it, before any test wrote to it:
# the deployment starts on a copy of its own (`deployment`).
MIGRATED_DB = AIRFLOW_HOME / "airflow-migrated.db"


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """Airflow's metadata database, migrated once per session; returns AIRFLOW_HOME."""
    result = subprocess.run(
        [str(VENV_BIN / "airflow"), "db", "migrate"],
        env=airflow_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"airflow db migrate failed:\n{result.stdout}\n{result.stderr}")
    shutil.copyfile(AIRFLOW_HOME / "airflow.db", MIGRATED_DB)
    return AIRFLOW_HOME


@pytest.fixture(scope="session")
def deployment(airflow_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """The session's one api-server, scheduler and dag-processor (tests/airflow/deployment.py),
    started when a test first asks for it, on a metadata database of its own: the `dag.test()`
    runs of other modules write theirs, and a scheduler sharing it would run their tasks too."""
    home = tmp_path_factory.mktemp("deployment")
    metadata = shutil.copyfile(MIGRATED_DB, home / "airflow.db")
    with start_deployment(home, metadata) as started:
        yield started


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    path = tmp_path / "warehouse"
    path.mkdir()
    return path


@pytest.fixture
def iceberg_connection(warehouse: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point `iceberg_default` at this test's warehouse (SQLite catalog in it), and icefloe's
    state store at a SQLite file of this test's, beside the warehouse."""
    monkeypatch.setenv("AIRFLOW_CONN_ICEBERG_DEFAULT", iceberg_connection_json(warehouse))
    monkeypatch.setenv(STATE_URI_ENV, state_store_uri(warehouse.parent))
    yield warehouse


def _run_dag(dag: Any, **kwargs: Any) -> Any:
    """`dag.test(**kwargs)` for a DAG defined outside the dags folder (in a test module).

    Airflow 3.3's `dag.test()` only runs DAGs that a DAG bundle has serialized to the metadata
    database; this writes `dag` there first (as the dag-processor would, in the dags-folder
    bundle), so tests can build DAGs in code. Needs the `airflow_db` fixture.
    """
    from airflow.dag_processing.bundles.manager import DagBundlesManager  # noqa: PLC0415
    from airflow.dag_processing.collection import (  # noqa: PLC0415
        update_dag_parsing_results_in_db,
    )
    from airflow.serialization.serialized_objects import LazyDeserializedDAG  # noqa: PLC0415
    from airflow.utils.session import create_session  # noqa: PLC0415

    with create_session() as session:
        DagBundlesManager().sync_bundles_to_db(session=session)
    with create_session() as session:
        update_dag_parsing_results_in_db(
            "dags-folder", None, [LazyDeserializedDAG.from_dag(dag)], {}, None, set(), session
        )
    return dag.test(**kwargs)


@pytest.fixture
def run_dag(airflow_db: Path) -> Callable[..., Any]:
    """`run_dag(dag, **dag_test_kwargs) -> DagRun`: dag.test() for a DAG built in a test."""
    return _run_dag


# The Spark Connect connection to the session's stock server (tests/support/spark_connect.py),
# with a token that must never show on a command line. The connection names `localhost`, where
# PySpark sends a token without TLS (its local channel credentials).
SPARK_CONNECT_CONN_ID = "spark_connect_tests"
SPARK_CONNECT_TOKEN = "tok-3f9a1c7e-not-for-argv"
JOBS_ON_CONNECT_ENV = "AIRFLOW__ICEFLOE__SPARK_CONNECT_CONN_ID"


def spark_connect_connection_json(server_url: str) -> str:
    """`spark_connect` connection JSON (the Spark provider's type) for the server at the URL."""
    connection = {
        "conn_type": "spark_connect",
        "host": "localhost",
        "port": urlsplit(server_url).port,
        "login": "icefloe-tests",
        "password": SPARK_CONNECT_TOKEN,
    }
    return json.dumps(connection)


def jobs_on_connect_env(server_url: str) -> dict[str, str]:
    """The settings that send every job operator of a process to the server at the URL (the
    deployment's `[icefloe] spark_connect_conn_id`), for api-server and scheduler processes."""
    return {
        f"AIRFLOW_CONN_{SPARK_CONNECT_CONN_ID.upper()}": spark_connect_connection_json(server_url),
        JOBS_ON_CONNECT_ENV: SPARK_CONNECT_CONN_ID,
    }


@pytest.fixture
def spark_connect_conn(spark_connect: SparkConnectServer, monkeypatch: pytest.MonkeyPatch) -> str:
    """The id of a `spark_connect` connection to the session's server (user id and token)."""
    variable = f"AIRFLOW_CONN_{SPARK_CONNECT_CONN_ID.upper()}"
    monkeypatch.setenv(variable, spark_connect_connection_json(spark_connect.url))
    return SPARK_CONNECT_CONN_ID


@pytest.fixture
def jobs_on_connect(spark_connect_conn: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every job operator built in the test (a DAG loaded, a fleet built) runs its job as a
    client of the session's warm server, not by spark-submit: what the DAG tests check is the
    DAG, and a few tests pay for spark-submit's shapes (see CONTRIBUTING)."""
    monkeypatch.setenv(JOBS_ON_CONNECT_ENV, spark_connect_conn)
    return spark_connect_conn
