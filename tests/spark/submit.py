"""A real `spark-submit` of one of our jobs, shipping icecore and spark_jobs as a zip."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from icefloe_airflow.job_process import launcher

from spark_jobs.common.packaging import build_zip
from tests.support.spark import SHORT_LIVED_JVM

SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"


def submit_command(
    job: str, workdir: Path, args: Sequence[str]
) -> tuple[list[str], dict[str, str]]:
    """The command and environment that run `spark_jobs/main.py <job>` on local[2]: the
    launcher the operator and `icefloe run` submit (`icefloe_airflow.job_process`)."""
    package = build_zip(workdir / "dist" / "icefloe.zip")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    command = [
        str(SPARK_SUBMIT),
        "--master", "local[2]",
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.sql.shuffle.partitions=2",
        "--conf", f"spark.driver.extraJavaOptions={SHORT_LIVED_JVM}",
        "--py-files", str(package),
        str(launcher()),
        job,
        *args,
    ]  # fmt: skip
    return command, env


def spark_submit(job: str, workdir: Path, args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    command, env = submit_command(job, workdir, args)
    return subprocess.run(
        command, cwd=workdir, env=env, capture_output=True, text=True, timeout=300, check=False
    )
