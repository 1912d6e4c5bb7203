"""What the `icefloe` command says to a person, run as users run it (the installed console
script, its own process, an environment with no Airflow variable): it finds the Iceberg
page's state store and tables config in the demo's Airflow home inside the warehouse, says
where it found them, prints a header and units, colours only on a terminal, says when nothing
is due, and refuses a warehouse that does not exist, or a mistyped flag, in one line; `run`
shows the job's own lines and its result, Spark's log going to a file.

The Airflow home is written by the demo's own code (examples/demo_home.py), so these are the
files `make demo` leaves behind.
"""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from icefloe_airflow.state import MaintenanceStore

from examples.demo_home import airflow_home, write_config, write_demo_files
from icecore.catalog import SqlCatalog
from tests.support.fleet_catalog import record_orphan_runs
from tests.support.samples import PSCHEMA, spec_of
from tests.support.tables import LocalTable

ICEFLOE = Path(sys.executable).parent / "icefloe"
TABLE = "demo.events"


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    """A warehouse with the demo's Airflow home in it and one table of 3 small files in one
    partition (nothing due but orphan removal, which never ran)."""
    warehouse = tmp_path / "warehouse"
    write_config(warehouse)
    write_demo_files(warehouse)
    table = LocalTable.create(
        warehouse / "demo" / "events", PSCHEMA, spec_of(("category", "identity", "category"))
    )
    rows = [[{"id": i, "category": "a", "ts": 1_700_000_000_000_000 + i}] for i in range(3)]
    table.commit(add=[table.write_data(r) for r in rows])
    catalog = SqlCatalog("default", warehouse=warehouse, create=True)
    catalog.create_namespace("demo")
    catalog.register_table(TABLE, table.metadata_location)
    catalog.close()
    return warehouse


def icefloe(
    cwd: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> tuple[int, str, str]:
    """The command in `cwd` with a shell's bare environment (plus `env`)."""
    plain = {"HOME": str(cwd), "PATH": "/usr/bin:/bin", "ICEFLOE_CACHE_DIR": str(cwd / "cache")}
    done = subprocess.run(
        [str(ICEFLOE), *args],
        cwd=cwd,
        env={**plain, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def record_orphan_removal(warehouse: Path) -> None:
    """A successful remove_orphan_files run a minute ago, in the state store the demo's
    airflow.cfg names."""
    uri = f"sqlite:///{airflow_home(warehouse)}/icefloe_state.db"
    record_orphan_runs(uri, [TABLE], int(time.time() * 1000) - 60_000)


def test_due_reads_the_run_history_the_page_reads(warehouse: Path) -> None:
    cwd = warehouse.parent
    code, out, _ = icefloe(cwd, "due", "--warehouse", "warehouse")
    assert code == 0
    lines = out.splitlines()
    # Where it looked: the demo's home in the warehouse, with no AIRFLOW_HOME set.
    assert lines[0] == (
        "# run history: warehouse/.airflow/icefloe_state.db (from warehouse/.airflow/airflow.cfg"
        " [icefloe] state_uri); policy: warehouse/.airflow/tables.yaml (from "
        "warehouse/.airflow/airflow.cfg [icefloe] tables_config)"
    )
    assert lines[1].split() == [
        "RANK", "TABLE", "SCORE", "BENEFIT", "(FILE", "OPENS)", "REWRITES", "MANIFESTS", "JOBS,",
        "IN", "ORDER"
    ]  # fmt: skip
    assert lines[2].split() == ["1", TABLE, "95", "1.0", "0", "B", "1", "remove_orphan_files"]
    assert lines[3].strip() == "remove_orphan_files: never ran successfully"
    assert lines[-1] == "1 of 1 table checked would be maintained now"

    record_orphan_removal(warehouse)
    code, out, _ = icefloe(cwd, "due", "--warehouse", "warehouse")
    assert (code, out.splitlines()[1:]) == (0, ["nothing is due (1 table checked)"])

    # An AIRFLOW_HOME of its own wins: that deployment never ran anything on the table.
    other = cwd / "elsewhere"
    other.mkdir()
    code, out, _ = icefloe(cwd, "due", "--warehouse", "warehouse", env={"AIRFLOW_HOME": str(other)})
    assert out.splitlines()[0] == "# run history: none; policy: defaults"
    assert "remove_orphan_files: never ran successfully" in out


def test_health_prints_a_header_units_and_every_point_lost(warehouse: Path) -> None:
    code, out, _ = icefloe(warehouse.parent, "health", TABLE, "--warehouse", "warehouse")
    assert code == 0
    header, row, *why = out.splitlines()[1:]
    assert header.split() == [
        "TABLE", "SCORE", "DATA", "FILES", "SIZE", "SMALL", "FILES", "DELETE", "FILES",
        "MANIFESTS", "DUE"
    ]  # fmt: skip
    cells = row.split()
    assert cells[:3] == [TABLE, "95", "3"]
    # One commit: one data manifest.
    assert cells[4] == "KB" and cells[5:] == ["3", "0", "1", "remove_orphan_files"]
    assert [line.strip() for line in why] == [
        "-5: 3 small files in category=a ("
        + cells[3]
        + " KB, each below 384.0 MB); rewrite_data_files becomes due at 12 in one partition, "
        "or when they add up to 512.0 MB"
    ]
    assert "\033[" not in out  # not a terminal: no colour


def test_colour_only_on_a_terminal(warehouse: Path) -> None:
    primary, secondary = pty.openpty()
    env = {"HOME": str(warehouse.parent), "PATH": "/usr/bin:/bin"}
    process = subprocess.Popen(
        [str(ICEFLOE), "health", TABLE, "--warehouse", "warehouse"],
        cwd=warehouse.parent,
        env={**env, "ICEFLOE_CACHE_DIR": str(warehouse.parent / "cache")},
        stdout=secondary,
        stderr=subprocess.DEVNULL,
    )
    os.close(secondary)
    output = b""
    while True:
        try:
            chunk = os.read(primary, 4096)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        output += chunk
    assert process.wait(timeout=120) == 0
    os.close(primary)
    text = output.decode()
    assert "\033[1mTABLE" in text  # a bold header
    assert "\033[32m" in text  # the score in the page's green (95 >= 80)


def test_a_missing_warehouse_or_a_mistyped_flag_is_one_line(tmp_path: Path) -> None:
    code, out, err = icefloe(tmp_path, "due", "--warehouse", "does-not-exist")
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"icefloe: warehouse directory {tmp_path / 'does-not-exist'} does not exist"
    ]
    assert list(tmp_path.iterdir()) == []  # nothing created

    code, _, err = icefloe(tmp_path, "health", "--all", "--warehose", "wh")
    assert (code, err.splitlines()) == (
        2,
        ["icefloe health: unknown flag --warehose; did you mean --warehouse?"],
    )
    code, _, err = icefloe(tmp_path, "dew", "--warehouse", "wh")
    assert code == 2 and err.rstrip().endswith("did you mean due?")
    assert len(err.splitlines()) == 1


def test_the_state_store_named_by_airflows_variable(warehouse: Path) -> None:
    record_orphan_removal(warehouse)
    uri = f"sqlite:///{airflow_home(warehouse)}/icefloe_state.db"
    env = {"AIRFLOW__ICEFLOE__STATE_URI": uri}
    args = ("due", "--warehouse", "warehouse")
    code, out, _ = icefloe(warehouse.parent, *args, env=env)
    assert out.splitlines() == [
        "# run history: warehouse/.airflow/icefloe_state.db (from $AIRFLOW__ICEFLOE__STATE_URI);"
        " policy: warehouse/.airflow/tables.yaml (from warehouse/.airflow/airflow.cfg [icefloe] "
        "tables_config)",
        "nothing is due (1 table checked)",
    ]
    code, out, _ = icefloe(warehouse.parent, *args, "--json", env=env)
    assert (code, out) == (0, "")  # scripts get one line per due table: none


@pytest.mark.spark_submit
def test_run_shows_the_jobs_lines_and_keeps_sparks_log_in_a_file(
    warehouse: Path, spark_conf_dir: Path
) -> None:
    """`icefloe run` where Spark logs as a fresh install does (INFO to the console: a hundred
    lines of SparkContext, BlockManager, SharedState, ...): the terminal shows what the
    operator's task log shows, the job's own lines and its result, and Spark's log is in the
    file the first line names. The run holds the lease and is recorded, as the fleet's are."""
    conf = warehouse.parent / "spark-conf"  # the suite's short-lived JVMs; no log4j2 config
    conf.mkdir()
    shutil.copy(spark_conf_dir / "spark-defaults.conf", conf)
    logs = warehouse.parent / "spark-logs"
    code, out, err = icefloe(
        warehouse.parent,
        "run", "rewrite_data_files", TABLE, "--warehouse", "warehouse", "--rewrite-all",
        "--master", "local[1]",
        env={"SPARK_CONF_DIR": str(conf), "ICEFLOE_SPARK_LOG_DIR": str(logs)},
        timeout=600,
    )  # fmt: skip
    assert code == 0, err[-3000:]
    terminal = out.splitlines() + err.splitlines()
    assert [line for line in terminal if " INFO " in line] == []
    job_lines = [line for line in terminal if " icefloe.rewrite_data_files: " in line]
    assert any("plan: 3 data files" in line for line in job_lines), terminal
    assert any("committed 1 of the groups" in line for line in job_lines), terminal
    result = json.loads(out.splitlines()[-1])
    assert (result["rewritten_data_files"], result["added_data_files"]) == (3, 1)
    assert err.splitlines()[-1].startswith(f"rewrite_data_files on {TABLE}: rewrote 3 data files")

    first = err.splitlines()[0]
    assert first.startswith("full Spark driver log (INFO and above): "), err[-3000:]
    log = Path(first.split(": ", 1)[1])
    assert log.parent == logs
    text = log.read_text()
    assert " INFO SparkContext: Running Spark version" in text
    assert " INFO BlockManagerMasterEndpoint: " in text

    store = MaintenanceStore.open(f"sqlite:///{airflow_home(warehouse)}/icefloe_state.db")
    try:
        run = store.last_runs(TABLE)["rewrite_data_files"]
        assert store.lock_holder(TABLE) is None
    finally:
        store.close()
    assert (run.state, run.result) == ("success", result)
