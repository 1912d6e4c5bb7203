"""A job whose work needs no Spark loads none of it: a conversion small enough to match in the
driver, run from the command line classic and as a Spark Connect client, never imports pyspark
(nor py4j or grpc, which only a session needs) and never contacts the server; nor pandas,
which pyarrow would import at its first conversion of a NumPy or Python value
(`icecore.data.arrow_numpy`). The process's start is most of such a run's time (issue 26's
conversion bar).

The job runs in a process of its own, through `spark_jobs.common.cli.main`, which then prints
the top-level modules the run imported."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from icecore.catalog import SqlCatalog
from icecore.spec.manifest import FileContent
from tests.spark.delete_tables import batch, commit_cdc, create, live
from tests.support.spark_connect import clean_environment

_RUN_AND_LIST_MODULES = """\
import json, sys
from spark_jobs.common.cli import main
code = main(sys.argv[1:])
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
sys.exit(code)
"""
NOT_NEEDED = {"pyspark", "py4j", "grpc", "pandas"}


@pytest.mark.parametrize(
    ("remote", "format_version"),
    [(None, 2), ("sc://127.0.0.1:9", 2), (None, 3)],  # port 9 discards: nothing answers there
    ids=["classic", "connect", "v3-dvs"],
)
def test_a_conversion_matched_in_the_driver_imports_no_spark_nor_pandas(
    catalog: SqlCatalog, warehouse: Path, remote: str | None, format_version: int
) -> None:
    """v3: an upgraded table's conversion writes DVs, merging the position delete files of
    its v2 commits (their reading, too, needs no pandas)."""
    table = create(catalog, None, "db.t")
    rnd = random.Random(5)
    for b in range(3):
        commit_cdc(table, batch(rnd, b, 20, False))
    if format_version == 3:
        table.update_properties().set("format-version", "3").commit()
    assert live(catalog.load_table("db.t"))[FileContent.EQUALITY_DELETES]
    args = ["convert_equality_deletes", "--warehouse", str(warehouse), "--table", "db.t"]
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _RUN_AND_LIST_MODULES,
            *args,
            *(["--remote", remote] if remote else []),
        ],
        env=clean_environment(),
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    *_, result_line, modules_line = done.stdout.strip().splitlines()
    result, modules = json.loads(result_line), set(json.loads(modules_line))
    assert result["status"] == "committed" and result["matched_in"] == "driver", result
    assert bool(result["added_deletion_vectors"]) == (format_version == 3), result
    assert not live(catalog.load_table("db.t"))[FileContent.EQUALITY_DELETES]
    assert {"icecore", "pyarrow", "sqlalchemy"} <= modules  # the list is the job's own
    assert not NOT_NEEDED & modules, sorted(NOT_NEEDED & modules)
