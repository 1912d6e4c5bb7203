"""tables.yaml: parsed into TableConfigs with their policies, and every mistake reported with
the file and the key."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from icefloe_airflow.policy import MaintenancePolicy
from icefloe_airflow.tables_config import (
    CONFIG_ENV,
    TableConfig,
    TablesConfigError,
    load_tables_config,
)

from icecore.jobs.argv import parse_job_args
from icecore.jobs.jobs import JOBS

CONFIG = """
defaults:
  schedule: "@daily"
  retention: {max_snapshot_age: 2d}
  options:
    rewrite_data_files: {max-concurrent-file-group-rewrites: 2}
tables:
  - table: db.events
    schedule: asset
    thresholds: {minor_file_count: 8, major_delete_ratio: 0.2, max_data_manifests: 40}
    retention: {retain_last: 3}
    options:
      rewrite_data_files: {target-file-size-bytes: 134217728}
      rewrite_manifests: {sort-by: category}
  - table: db.users
    schedule: "0 3 * * *"
    iceberg_conn_id: iceberg_prod
  - table: db.audit
    schedule: null
    retention: {max_snapshot_age: 30m}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tables.yaml"
    path.write_text(text)
    return path


def test_tables_with_defaults_and_overrides(tmp_path: Path) -> None:
    events, users, audit = load_tables_config(write(tmp_path, CONFIG))
    assert events == TableConfig(
        table="db.events",
        schedule="asset",
        policy=MaintenancePolicy(
            minor_file_count=8,
            major_delete_ratio=0.2,
            max_data_manifests=40,
            retain_last=3,
            max_snapshot_age=timedelta(days=2),
        ),
        options={
            "rewrite_data_files": {
                "max-concurrent-file-group-rewrites": 2,
                "target-file-size-bytes": 134217728,
            },
            "rewrite_manifests": {"sort-by": "category"},
        },
    )
    assert events.on_assets
    assert (users.schedule, users.iceberg_conn_id, users.on_assets) == (
        "0 3 * * *",
        "iceberg_prod",
        False,
    )
    assert users.policy == MaintenancePolicy(max_snapshot_age=timedelta(days=2))
    assert users.options == {"rewrite_data_files": {"max-concurrent-file-group-rewrites": 2}}
    assert audit.schedule is None
    assert audit.policy.max_snapshot_age == timedelta(minutes=30)


def test_job_options_merge_policy_and_explicit_options(tmp_path: Path) -> None:
    _, _, audit = load_tables_config(write(tmp_path, CONFIG))
    options = audit.job_options("expire_snapshots")
    assert options == {"older-than": "30m", "retain-last": 1, "min-age": "30m"}
    flags = [f"--{k}={v}" for k, v in options.items()]
    argv = ["--warehouse", "/w", "--table", "db.audit", *flags]
    args = parse_job_args(JOBS["expire_snapshots"], argv).options
    assert (args.older_than, args.retain_last, args.min_age) == ("30m", 1, 1_800_000)
    events, _, _ = load_tables_config(write(tmp_path, CONFIG))
    assert events.job_options("rewrite_data_files") == {
        "max-concurrent-file-group-rewrites": 2,
        "target-file-size-bytes": 134217728,
    }
    # The manifest rewrite takes its options from tables.yaml like the others, as its job
    # reads them.
    assert events.job_options("rewrite_manifests") == {"sort-by": "category"}
    argv = ["--warehouse", "/w", "--table", "db.events", "--sort-by=category"]
    assert parse_job_args(JOBS["rewrite_manifests"], argv).options.sort_by == ["category"]


def test_path_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, "tables:\n  - table: db.t\n")
    monkeypatch.setenv(CONFIG_ENV, str(path))
    [config] = load_tables_config()
    assert config == TableConfig("db.t")  # schedule @daily, default policy


def test_plain_list_and_empty_file(tmp_path: Path) -> None:
    assert [
        c.table for c in load_tables_config(write(tmp_path, "- table: a.b\n- table: c.d\n"))
    ] == [
        "a.b",
        "c.d",
    ]
    assert load_tables_config(write(tmp_path, "")) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tables:\n  - table: events\n", r"tables\[0\]\.table: expected NAMESPACE\.NAME"),
        (
            "tables:\n  - table: db.t\n    schedule: sometimes\n",
            r"tables\[0\]\.schedule: 'sometimes'",
        ),
        (
            "tables:\n  - table: db.t\n    schedule: ['@daily', '@hourly']\n",
            r"tables\[0\]\.schedule: a list schedule is \[asset, <cron or preset>\]",
        ),
        (
            "tables:\n  - table: db.t\n    catalog_name: ''\n",
            r"tables\[0\]\.catalog_name: expected a catalog name",
        ),
        (
            "tables:\n  - table: db.t\n    shedule: '@daily'\n",
            r"tables\[0\]: unknown keys \['shedule'\]",
        ),
        (
            "tables:\n  - table: db.t\n  - table: db.u\n    thresholds: {minor_files: 3}\n",
            r"tables\[1\]: unknown maintenance policy keys \['minor_files'\]",
        ),
        (
            "tables:\n  - table: db.t\n    retention: {max_snapshot_age: soon}\n",
            r"tables\[0\]: max_snapshot_age: expected a duration such as 7d.*, got 'soon'",
        ),
        (
            "tables:\n  - table: db.t\n"
            "    thresholds: {retain_last: 2}\n    retention: {retain_last: 3}\n",
            r"tables\[0\]\.retention: \['retain_last'\] set twice",
        ),
        (
            "tables:\n  - table: db.t\n    options: {compact: {}}\n",
            r"tables\[0\]\.options: unknown jobs \['compact'\]",
        ),
        (
            "tables:\n  - table: db.t\n  - table: db.t\n",
            r"tables\[1\]: table db\.t is already listed at tables\[0\]",
        ),
        (
            "tables:\n  - table: db.t\n    schedule: asset\n    min_interval: 60\n",
            r"tables\[0\]\.min_interval: min_interval: expected a duration such as 7d.*, got 60",
        ),
        ("defaults: {table: db.x}\n", r"defaults: unknown keys \['table'\]"),
        ("tables: {table: db.t}\n", "tables: expected a list"),
        ("tables: [\n", "not valid YAML"),
        ("version: 2\n", r"unknown top-level keys \['version'\]"),
    ],
)
def test_mistakes_name_the_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(TablesConfigError, match=rf"^{path}: .*{message}"):
        load_tables_config(path)


def test_min_interval_of_a_table_its_defaults_or_a_minute(tmp_path: Path) -> None:
    text = (
        "defaults: {min_interval: 5m}\ntables:\n  - table: db.t\n    min_interval: 90s\n"
        "  - table: db.u\n"
    )
    t, u = load_tables_config(write(tmp_path, text))
    assert (t.min_interval, u.min_interval) == (timedelta(seconds=90), timedelta(minutes=5))
    (v,) = load_tables_config(write(tmp_path, "tables:\n  - table: db.v\n"))
    assert v.min_interval == timedelta(seconds=60)


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(TablesConfigError, match=rf"{tmp_path}/absent.yaml: cannot read"):
        load_tables_config(tmp_path / "absent.yaml")
