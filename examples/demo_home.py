"""The demo's Airflow home, `<warehouse>/.airflow`: written by `make demo` (examples/demo.py),
opened by `make ui` (examples/ui.py), and by hand with `AIRFLOW_HOME=$PWD/warehouse/.airflow
airflow ...` (README: "Open the demo in the Airflow UI").

Everything the demo's Airflow processes must agree on is in the home's `airflow.cfg`, so that
processes started by hand see the same Airflow as `make ui`:
- the DAG and plugin folders (this checkout's dags/ and plugins/), the metadata database (the
  demo's PostgreSQL server, examples/demo_db.py, on the port it has this time), and the
  demo's `tables.yaml` (`[icefloe] tables_config`) and state store;
- one `[api_auth] jwt_secret` and `[api] secret_key`, generated once and kept: the
  scheduler signs the tokens its tasks show the api-server's Execution API, and the
  api-server signs the requests it makes to the log servers;
- `[core] execution_api_server_url` and the log servers' ports, for the port the api-server
  listens on (`make ui` rewrites them for `UI_PORT`);
- DAGs start unpaused (only by-hand and after-ingest DAGs exist here) and every visitor is
  admin (`simple_auth_manager_all_admins`), on 127.0.0.1 only.

A settings file is merged, never replaced: keys someone added by hand stay.
"""

from __future__ import annotations

import configparser
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HOME_DIR = ".airflow"
TABLE = "demo.events"
DEFAULT_PORT = 8080
SAY_EVERY_S = 15.0  # the longest a long step stays silent
LOG_SERVER_PORTS = {"worker_log_server_port": 8793, "trigger_log_server_port": 8794}
CONNECTIONS = {
    "iceberg_default": lambda warehouse: {
        "conn_type": "icefloe",
        "extra": {"warehouse": str(warehouse)},
    },
    "spark_default": lambda warehouse: {"conn_type": "spark", "host": "local[2]"},
}
_TABLES_YAML = f"""\
# Written by `make demo`; dags/tables.yaml documents the format.
tables:
  - table: {TABLE}
    schedule: asset
"""
# The demo's jobs are short local spark-submits: a C1-only JIT and the serial collector start
# each JVM seconds sooner (prepended to whatever extraJavaOptions a job sets).
_SPARK_DEFAULTS = """\
spark.driver.defaultJavaOptions -XX:TieredStopAtLevel=1 -XX:+UseSerialGC
spark.ui.enabled false
spark.ui.showConsoleProgress false
spark.sql.shuffle.partitions 4
"""
_HEADER = "# The demo's Airflow (examples/demo_home.py): written by make demo, opened by make ui.\n"


def airflow_home(warehouse: Path) -> Path:
    return warehouse / HOME_DIR


def settings(
    warehouse: Path, port: int, log_ports: Mapping[str, int], database_url: str | None = None
) -> dict[str, dict[str, str]]:
    """The settings the demo owns, by section (secrets are added by `write_config`); the
    metadata database's URL when one is given (it changes with the server's port)."""
    home = airflow_home(warehouse)
    database = {"sql_alchemy_conn": database_url} if database_url else {}
    return {
        "core": {
            "dags_folder": str(ROOT / "dags"),
            "plugins_folder": str(ROOT / "plugins"),
            "load_examples": "False",
            "simple_auth_manager_all_admins": "True",
            "dags_are_paused_at_creation": "False",
            "execution_api_server_url": f"http://127.0.0.1:{port}/execution/",
        },
        "database": database,
        "api": {"host": "127.0.0.1", "port": str(port)},
        "logging": {key: str(value) for key, value in log_ports.items()},
        "icefloe": {
            "tables_config": str(home / "tables.yaml"),
            "state_uri": f"sqlite:///{home}/icefloe_state.db",
        },
    }


def write_config(
    warehouse: Path,
    port: int = DEFAULT_PORT,
    log_ports: Mapping[str, int] = LOG_SERVER_PORTS,
    database_url: str | None = None,
) -> Path:
    """Write (or update) the home's `airflow.cfg`; the secrets already in it are kept, and so
    is the database URL when none is given. Returns the file."""
    home = airflow_home(warehouse)
    home.mkdir(parents=True, exist_ok=True)
    path = home / "airflow.cfg"
    config = configparser.ConfigParser(interpolation=None)
    if path.exists():
        config.read(path, encoding="utf-8")
    for section, values in settings(warehouse, port, log_ports, database_url).items():
        if not config.has_section(section):
            config.add_section(section)
        for key, value in values.items():
            config.set(section, key, value)
    for section, key in (("api_auth", "jwt_secret"), ("api", "secret_key")):
        if not config.has_section(section):
            config.add_section(section)
        if not config.get(section, key, fallback=""):
            config.set(section, key, secrets.token_urlsafe(48))
    partial = path.with_name(f".{path.name}.tmp")
    with partial.open("w", encoding="utf-8") as handle:
        handle.write(_HEADER)
        config.write(handle)
    partial.chmod(0o600)  # it holds the secrets
    os.replace(partial, path)
    return path


def write_demo_files(warehouse: Path) -> None:
    """The demo's tables.yaml and Spark settings (rewritten by each `make demo`)."""
    home = airflow_home(warehouse)
    spark_conf = home / "spark-conf"
    spark_conf.mkdir(parents=True, exist_ok=True)
    (spark_conf / "spark-defaults.conf").write_text(_SPARK_DEFAULTS)
    (home / "tables.yaml").write_text(_TABLES_YAML)


def environment(warehouse: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of the demo's processes: `base` (default: this process's) with the
    demo's AIRFLOW_HOME, this virtualenv's tools first on PATH (spark-submit, airflow), and
    Spark on loopback with this interpreter for its Python workers."""
    env = dict(os.environ if base is None else base)
    home = airflow_home(warehouse)
    bin_dir = str(Path(sys.executable).parent)
    path = env.get("PATH", "")
    if bin_dir not in path.split(os.pathsep):
        path = os.pathsep.join([bin_dir, path]) if path else bin_dir
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "PATH": path,
            "SPARK_CONF_DIR": str(home / "spark-conf"),
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
    )
    return env


def migrate_metadata_db(warehouse: Path, env: Mapping[str, str]) -> None:
    """`airflow db migrate` (idempotent: a second demo run reuses the database), and the
    demo's connections stored in it (replacing earlier ones), for the processes `make ui`
    starts."""
    airflow = str(Path(sys.executable).parent / "airflow")
    connections = airflow_home(warehouse) / "connections.json"
    connections.write_text(
        json.dumps({conn_id: make(warehouse) for conn_id, make in CONNECTIONS.items()})
    )
    plain = {k: v for k, v in env.items() if not k.startswith("AIRFLOW_CONN_")}
    for command in (["db", "migrate"], ["connections", "import", "--overwrite", str(connections)]):
        code, output = _run_saying(f"airflow {' '.join(command[:2])}", [airflow, *command], plain)
        if code != 0:
            raise SystemExit(f"demo: airflow {' '.join(command[:2])} failed:\n{output}")
    connections.unlink()


def _run_saying(what: str, command: list[str], env: Mapping[str, str]) -> tuple[int, str]:
    """Run `command`, saying every `SAY_EVERY_S` that it still runs; its exit code and
    output."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as output:
        process = subprocess.Popen(command, env=dict(env), stdout=output, stderr=subprocess.STDOUT)
        while True:
            try:
                code = process.wait(timeout=SAY_EVERY_S)
                break
            except subprocess.TimeoutExpired:
                print(f"  {what}: running ({time.monotonic() - started:.0f}s)", flush=True)
        output.seek(0)
        return code, output.read().decode(errors="replace")


def connection_env(warehouse: Path) -> dict[str, str]:
    """The connections as AIRFLOW_CONN_ variables: a process that uses a hook outside a task
    (the demo's own health checks) reads them there, not in the metadata database."""
    return {
        f"AIRFLOW_CONN_{conn_id.upper()}": json.dumps(make(warehouse))
        for conn_id, make in CONNECTIONS.items()
    }
