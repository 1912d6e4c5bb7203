"""Jobs as clients of a Spark Connect server (tests/support/spark_connect.py: a stock server
from the pinned pyspark whose Python workers cannot import the project).

The job tests parametrized over both sessions (`job_runner`) live with the jobs; here: the
shipping of the packages, the command line's contract over Connect, ingestion from files in
its modes, and a client killed mid-job.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from icecore.catalog import SqlCatalog
from tests.spark.delete_tables import TABLE, build, rows
from tests.support.duckdb import duck_connection  # noqa: F401 - provides the `duck` fixture
from tests.support.spark_connect import SparkConnectServer, clean_environment, result_of

_SHIPPING = """\
import sys
from pyspark.sql import SparkSession
from spark_jobs.common.session import ship_packages

def tasks_import(batches):
    import icecore.spec.manifest  # what every job's tasks import
    for batch in batches:
        yield batch

spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
def run():
    return spark.range(0, 2, 1, 2).mapInArrow(tasks_import, "id long").count()
try:
    run()
except Exception as exc:
    print("before:", str(exc).splitlines()[-1] if str(exc).strip() else type(exc).__name__)
else:
    print("before: imported")
ship_packages(spark)
ship_packages(spark)  # once per session: the second call uploads nothing
print("after:", run())
spark.stop()
"""


def test_tasks_import_the_project_only_because_the_job_shipped_it(
    spark_connect: SparkConnectServer, tmp_path: Path
) -> None:
    """The same task on the same server fails to import icecore in a session that has not
    shipped the packages, and runs once `ship_packages` added them (as a job does)."""
    script = tmp_path / "shipping.py"
    script.write_text(_SHIPPING)
    done = subprocess.run(
        [sys.executable, str(script), spark_connect.url],
        cwd=tmp_path, env=clean_environment(), capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    lines = done.stdout.strip().splitlines()
    assert "No module named 'icecore'" in lines[0], lines
    assert lines[-1] == "after: 2"


def test_command_line_contract_over_connect(
    spark: SparkSession, catalog: SqlCatalog, warehouse: Path, spark_connect: SparkConnectServer
) -> None:
    """`--remote` as well as the variable; the result file, the job's log lines on stderr,
    a bad `--remote` refused (exit 2) before anything runs, a failure's one-line cause last,
    and a server nobody listens on named at once."""
    build(spark, catalog, 2, None, seed=3)
    before = rows(catalog.load_table(TABLE), None)
    workdir = warehouse.parent
    result_file = workdir / "result.json"
    command, env = spark_connect.job_command(
        "rewrite_data_files",
        ["--warehouse", str(warehouse), "--table", TABLE, "--rewrite-all",
         "--remote", spark_connect.url],
        {"ICEFLOE_RESULT_FILE": str(result_file)},
    )  # fmt: skip
    del env["SPARK_REMOTE"]  # the flag alone
    done = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    result = result_of(done)
    assert json.loads(result_file.read_text()) == {"result": result}
    assert result["added_data_files"] == 1 and result["failed_groups"] == []
    assert "icefloe.rewrite_data_files: plan: " in done.stderr
    assert rows(catalog.load_table(TABLE), None) == before

    def run(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return spark_connect.run_job(
            "rewrite_data_files", ["--warehouse", str(warehouse), *args], cwd=workdir, env=extra
        )

    bad = run("--table", TABLE, "--remote", "localhost:15002")
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1] == (
        "--remote: 'localhost:15002' is not a Spark Connect URL (sc://host:port)"
    )
    secret = run("--table", TABLE, "--remote", "sc://h:1/;token=abc")
    assert secret.returncode == 2 and "set $SPARK_REMOTE instead" in secret.stderr
    missing = run("--table", "db.nothing")
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines()[-1].startswith("NoSuchTableError: ")
    nobody = run("--table", TABLE, "--rewrite-all", SPARK_REMOTE="sc://127.0.0.1:9")
    assert nobody.returncode == 1
    assert (
        nobody.stderr.strip()
        .splitlines()[-1]
        .startswith("JobError: no Spark Connect server answers at sc://127.0.0.1:9: ")
    )
