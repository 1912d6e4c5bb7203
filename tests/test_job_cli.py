"""The command line every Spark job shares: where the catalog comes from, and what it refuses
in one line: a catalog that does not exist (nothing is created; only `ingest --create` makes
one), an unknown flag (with the closest known one), a harmful value (with `--force`); and a
job run with Python from a plain shell, as documented, whose Spark workers need its packages."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyiceberg.table import StaticTable

from icecore.catalog import SqlCatalog
from icecore.jobs.argv import CATALOG_URI_ENV, CatalogArgs, parse_job_args
from icecore.jobs.errors import JobError
from icecore.jobs.jobs import JOBS
from spark_jobs.common.cli import main, open_catalog

ROOT = Path(__file__).resolve().parent.parent


def _args(*argv: str) -> CatalogArgs:
    return parse_job_args(JOBS["convert_equality_deletes"], ["--table", "db.t", *argv]).catalog


def test_catalog_uri_from_the_environment_keeps_it_off_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = tmp_path / "elsewhere.db"
    monkeypatch.setenv(CATALOG_URI_ENV, f"sqlite:///{database}")
    catalog = open_catalog(_args("--warehouse", str(tmp_path / "wh")), create=True)
    try:
        catalog.create_namespace("db")
    finally:
        catalog.close()
    assert database.exists()
    assert not (tmp_path / "wh" / "catalog.db").exists()


def test_the_flag_wins_over_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CATALOG_URI_ENV, f"sqlite:///{tmp_path / 'env.db'}")
    flag = tmp_path / "flag.db"
    catalog = open_catalog(_args("--catalog-uri", f"sqlite:///{flag}"), create=True)
    try:
        catalog.create_namespace("db")
    finally:
        catalog.close()
    assert flag.exists()
    assert not (tmp_path / "env.db").exists()


def test_catalog_properties_reach_the_catalog(tmp_path: Path) -> None:
    args = _args(
        "--warehouse",
        str(tmp_path),
        "--catalog-property",
        "s3.endpoint=http://minio:9000",
        "--catalog-property",
        "s3.path-style-access=true",
    )
    catalog = open_catalog(args, create=True)
    try:
        assert catalog.properties["s3.endpoint"] == "http://minio:9000"
        assert catalog.properties["s3.path-style-access"] == "true"
    finally:
        catalog.close()


def test_a_property_without_equals_sign_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as raised:
        _args("--catalog-property", "s3.endpoint")
    assert raised.value.code == (
        "convert_equality_deletes: argument --catalog-property: expected K=V, got 's3.endpoint'"
    )


def test_no_catalog_at_all_names_every_way_to_give_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CATALOG_URI_ENV, raising=False)
    with pytest.raises(JobError, match=CATALOG_URI_ENV):
        open_catalog(_args())


def job(*argv: str) -> tuple[int, str, str]:
    """A job's command line run in this process (no Spark starts before a refusal)."""
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_a_missing_warehouse_or_catalog_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    missing = tmp_path / "does-not-exist"
    code, out, err = job("rewrite_data_files", "--warehouse", str(missing), "--table", "db.t")
    assert (code, out) == (1, "")
    assert err.splitlines() == [f"CatalogError: warehouse directory {missing} does not exist"]
    assert not missing.exists()

    empty = tmp_path / "empty"  # a directory, but no catalog in it
    empty.mkdir()
    code, _, err = job("expire_snapshots", "--warehouse", str(empty), "--table", "db.t")
    assert code == 1
    assert err.splitlines() == [
        f"CatalogError: no catalog database {empty}/catalog.db: the file does not exist"
    ]
    typo = tmp_path / "catalgo.db"
    code, _, err = job("expire_snapshots", "--catalog-uri", f"sqlite:///{typo}", "--table", "db.t")
    assert code == 1 and str(typo) in err
    assert list(empty.iterdir()) == [] and not typo.exists()

    # ingest --create is the one way to a new catalog.
    created = open_catalog(_args("--warehouse", str(missing)), create=True)
    created.close()
    assert (missing / "catalog.db").is_file()


def test_an_unknown_flag_is_one_line_naming_the_closest_flag() -> None:
    code, _, err = job("rewrite_data_files", "--table", "db.t", "--target-size", "1MB")
    assert code == 2
    assert err.splitlines() == [
        "rewrite_data_files: unknown flag --target-size; did you mean --target-file-size-bytes?"
    ]
    code, _, err = job("expire_snapshots", "--table", "db.t", "--zzz")
    assert (code, err.splitlines()) == (
        2,
        ["expire_snapshots: unknown flag --zzz (--help lists the flags)"],
    )
    code, _, err = job("rewrite_data_files", "--table", "db.t", "--strategy")
    assert err.splitlines() == ["rewrite_data_files: argument --strategy: expected one argument"]


def test_a_harmful_value_names_the_flag_that_forces_it(tmp_path: Path) -> None:
    code, _, err = job(
        "rewrite_data_files", "--warehouse", str(tmp_path), "--table", "db.t",
        "--target-file-size-bytes", "64k",
    )  # fmt: skip
    assert code == 2
    assert err.splitlines() == [
        "OptionError: --target-file-size-bytes: files under 1MB multiply the table's file count "
        "and slow every reader; pass --force to do it anyway"
    ]
    code, _, err = job(
        "remove_orphan_files", "--warehouse", str(tmp_path), "--table", "db.t",
        "--older-than", "12h",
    )  # fmt: skip
    assert err.rstrip().endswith("pass --force if nothing else writes to the table")
    assert list(tmp_path.iterdir()) == []  # refused before the catalog was opened


@pytest.mark.spark_submit
def test_a_job_run_with_python_from_a_plain_shell_runs_its_workers_on_that_python(
    tmp_path: Path,
) -> None:
    """`.venv/bin/python spark_jobs/main.py ingest ...` with no virtualenv active: Spark is
    local and started by the job, whose Python workers (the ingest's writing tasks) ran
    `python3` from PATH, the system's, without the jobs' packages, and failed after the
    whole plan had run. They run the job's own interpreter."""
    source = tmp_path / "batch.csv"
    source.write_text("id,name\n1,alpha\n2,beta\n")
    warehouse = tmp_path / "wh"
    env = {
        "HOME": str(tmp_path),
        "PATH": "/usr/bin:/bin",  # a shell's: no virtualenv's bin, no PYSPARK_PYTHON
        "SPARK_CONF_DIR": os.environ["SPARK_CONF_DIR"],  # the suite's short-lived JVMs
    }
    done = subprocess.run(
        [
            sys.executable, str(ROOT / "spark_jobs" / "main.py"), "ingest",
            "--warehouse", str(warehouse), "--table", "db.events", "--source", str(source),
            "--create",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.splitlines()[-1])
    assert (result["status"], result["rows"]) == ("committed", 2)
    catalog = SqlCatalog("default", warehouse=warehouse)
    try:
        location = catalog.load_table("db.events").metadata_location
    finally:
        catalog.close()
    rows = StaticTable.from_metadata(location).scan().to_arrow().sort_by("id")
    assert rows.select(["id", "name"]).to_pylist() == [
        {"id": 1, "name": "alpha"},
        {"id": 2, "name": "beta"},
    ]
