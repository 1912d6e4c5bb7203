"""The command line every Spark job shares: where the catalog comes from."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_jobs.common.cli import open_catalog
from spark_jobs.common.errors import JobError
from spark_jobs.specs.argv import CATALOG_URI_ENV, CatalogArgs, parse_job_args
from spark_jobs.specs.jobs import JOBS


def _args(*argv: str) -> CatalogArgs:
    return parse_job_args(JOBS["convert_equality_deletes"], ["--table", "db.t", *argv]).catalog


def test_catalog_uri_from_the_environment_keeps_it_off_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = tmp_path / "elsewhere.db"
    monkeypatch.setenv(CATALOG_URI_ENV, f"sqlite:///{database}")
    catalog = open_catalog(_args("--warehouse", str(tmp_path / "wh")))
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
    catalog = open_catalog(_args("--catalog-uri", f"sqlite:///{flag}"))
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
    catalog = open_catalog(args)
    try:
        assert catalog.properties["s3.endpoint"] == "http://minio:9000"
        assert catalog.properties["s3.path-style-access"] == "true"
    finally:
        catalog.close()


def test_a_property_without_equals_sign_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as raised:
        _args("--catalog-property", "s3.endpoint")
    assert raised.value.code == 2
    assert "expected K=V, got 's3.endpoint'" in capsys.readouterr().err


def test_no_catalog_at_all_names_every_way_to_give_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CATALOG_URI_ENV, raising=False)
    with pytest.raises(JobError, match=CATALOG_URI_ENV):
        open_catalog(_args())
