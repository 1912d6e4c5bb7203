"""`tables.yaml`: which tables the self-optimizing DAG maintains, when, and with which policy.

    defaults:                      # optional, applied to every table
      schedule: "@daily"
      retention: {max_snapshot_age: 5d, retain_last: 1}
    tables:
      - table: db.events
        schedule: asset            # run after commits to db.events by any engine
        min_interval: 60s          # with asset: at most one run per minute, bursts held
        thresholds: {minor_file_count: 12, major_delete_ratio: 0.1, max_data_manifests: 100}
        retention: {max_snapshot_age: 2d}
        options:                   # per-job operator options (job flags without --)
          rewrite_data_files: {target-file-size-bytes: 134217728}
          rewrite_manifests: {sort-by: ts_day}
      - table: db.users            # schedule: a cron expression, a preset, or null (manual)
        schedule: "0 3 * * *"
      - table: db.orders           # both: after each ingest, and daily whatever happens
        schedule: [asset, "@daily"]
        spark_connect_conn_id: spark_connect_default  # its jobs on a Spark Connect server

`thresholds`, `retention` and `policy` are all `MaintenancePolicy` keys (split for
readability; a key may appear in only one of them); a table's keys and per-job options
override those of `defaults`. The file is read when DAGs are parsed, so
every mistake is reported with the file and the key, and none is guessed around.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml
from croniter import croniter

from icefloe_airflow.policy import JOB_ORDER, MaintenancePolicy, parse_duration
from icefloe_airflow.provider_info import CONFIG_SECTION, TABLES_CONFIG_OPTION

CONFIG_ENV = "ICEFLOE_TABLES_CONFIG"
ASSET_SCHEDULE = "asset"
# `schedule: asset`: another engine's commits set a table's maintenance off at most this often.
DEFAULT_MIN_INTERVAL = timedelta(seconds=60)
PRESETS = frozenset({"@once", "@continuous", "@hourly", "@daily", "@weekly", "@monthly", "@yearly"})
JOBS = (*JOB_ORDER, "ingest")
_POLICY_SECTIONS = ("policy", "thresholds", "retention")
_TABLE_KEYS = frozenset(
    {
        "table",
        "schedule",
        "options",
        "iceberg_conn_id",
        "catalog_name",
        "spark_connect_conn_id",
        "min_interval",
        *_POLICY_SECTIONS,
    }
)
_DEFAULT_KEYS = _TABLE_KEYS - {"table"}


class TablesConfigError(ValueError):
    """A mistake in tables.yaml, naming the file and the key."""


@dataclass(frozen=True)
class TableConfig:
    """One maintained table."""

    table: str
    schedule: str | tuple[str, str] | None = "@daily"
    policy: MaintenancePolicy = field(default_factory=MaintenancePolicy)
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    iceberg_conn_id: str = "iceberg_default"
    # The catalog's name in that connection: it names the table's ingest Asset, which the
    # ingest operator publishes under the connection's `catalog_name` extra.
    catalog_name: str = "default"
    # A Spark Connect connection: the table's jobs run as that server's clients.
    spark_connect_conn_id: str | None = None
    # With `schedule: asset`: the shortest time between two runs other engines' commits set
    # off (a burst of commits makes one run).
    min_interval: timedelta = DEFAULT_MIN_INTERVAL

    @property
    def on_assets(self) -> bool:
        """Whether maintenance runs on the table's Asset events: its ingest's, and those of
        its watcher, which any engine's commits set off."""
        return runs_on_assets(self.schedule)

    @property
    def clock(self) -> str | None:
        """The cron expression or preset of the schedule, if it has one."""
        return schedule_clock(self.schedule)

    def job_options(self, job: str) -> dict[str, Any]:
        """The options for `job`: what the policy implies, overridden by explicit options."""
        return {**self.policy.job_options(job), **self.options.get(job, {})}


def default_config_path() -> Path:
    """`$ICEFLOE_TABLES_CONFIG`, else Airflow's `[icefloe] tables_config`, else `tables.yaml`
    in Airflow's dags folder."""
    configured = os.environ.get(CONFIG_ENV)
    if configured:
        return Path(configured)
    from airflow.sdk import conf  # noqa: PLC0415 (only when no path is configured)

    configured = conf.get(CONFIG_SECTION, TABLES_CONFIG_OPTION, fallback="").strip()
    if configured:
        return Path(configured)
    return Path(conf.get("core", "dags_folder")) / "tables.yaml"


def load_tables_config(path: str | os.PathLike[str] | None = None) -> list[TableConfig]:
    """Every table of the config file, in file order; TablesConfigError on any mistake."""
    source = Path(path) if path is not None else default_config_path()
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as exc:
        raise TablesConfigError(f"{source}: cannot read the tables config: {exc}") from exc
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise TablesConfigError(f"{source}: not valid YAML: {exc}") from exc
    return parse_tables_config(document, str(source))


def parse_tables_config(document: Any, source: str = "tables config") -> list[TableConfig]:
    """The tables of an already-loaded document (a mapping with `tables`, or a list)."""
    if document is None:
        return []
    defaults: Mapping[str, Any] = {}
    if isinstance(document, Mapping):
        # `namespaces` and `fleets` configure the fleet DAGs (icefloe_airflow.fleet.config).
        unknown = sorted(set(document) - {"defaults", "tables", "namespaces", "fleets"})
        if unknown:
            raise TablesConfigError(f"{source}: unknown top-level keys {unknown}")
        defaults = _mapping(document.get("defaults") or {}, source, "defaults")
        _check_keys(defaults, _DEFAULT_KEYS, source, "defaults")
        entries = document.get("tables") or []
    else:
        entries = document
    if not isinstance(entries, list):
        raise TablesConfigError(f"{source}: tables: expected a list of tables")
    configs = []
    seen: dict[str, int] = {}
    for index, entry in enumerate(entries):
        where = f"tables[{index}]"
        config = _table_config(_mapping(entry, source, where), defaults, source, where)
        if config.table in seen:
            raise TablesConfigError(
                f"{source}: {where}: table {config.table} is already listed at "
                f"tables[{seen[config.table]}]"
            )
        seen[config.table] = index
        configs.append(config)
    return configs


def _table_config(
    entry: Mapping[str, Any], defaults: Mapping[str, Any], source: str, where: str
) -> TableConfig:
    _check_keys(entry, _TABLE_KEYS, source, where)
    table = entry.get("table")
    if not isinstance(table, str) or len([p for p in table.split(".") if p]) < 2:
        raise TablesConfigError(f"{source}: {where}.table: expected NAMESPACE.NAME, got {table!r}")
    merged = {**defaults, **entry}
    schedule = parse_schedule(merged.get("schedule", "@daily"), source, f"{where}.schedule")

    policy_values: dict[str, Any] = {}
    for origin, label in ((defaults, "defaults"), (entry, where)):
        # the table's own keys override the defaults'
        policy_values.update(policy_sections(origin, source, label))
    try:
        policy = MaintenancePolicy.from_mapping(policy_values)
    except ValueError as exc:
        raise TablesConfigError(f"{source}: {where}: {exc}") from exc

    job_options: dict[str, dict[str, Any]] = {}
    for origin, label in ((defaults, "defaults"), (entry, where)):
        options = _mapping(origin.get("options") or {}, source, f"{label}.options")
        unknown_jobs = sorted(set(options) - set(JOBS))
        if unknown_jobs:
            raise TablesConfigError(
                f"{source}: {label}.options: unknown jobs {unknown_jobs}; known: {list(JOBS)}"
            )
        for job, value in options.items():
            values = _mapping(value or {}, source, f"{label}.options.{job}")
            job_options[job] = {**job_options.get(job, {}), **values}
    conn_id = merged.get("iceberg_conn_id", "iceberg_default")
    if not isinstance(conn_id, str) or not conn_id:
        raise TablesConfigError(f"{source}: {where}.iceberg_conn_id: expected a connection id")
    catalog_name = merged.get("catalog_name", "default")
    if not isinstance(catalog_name, str) or not catalog_name:
        raise TablesConfigError(f"{source}: {where}.catalog_name: expected a catalog name")
    connect = merged.get("spark_connect_conn_id")
    if connect is not None and (not isinstance(connect, str) or not connect):
        raise TablesConfigError(
            f"{source}: {where}.spark_connect_conn_id: expected a connection id"
        )
    return TableConfig(
        table,
        schedule,
        policy,
        job_options,
        conn_id,
        catalog_name,
        spark_connect_conn_id=connect,
        min_interval=min_interval(merged, source, f"{where}.min_interval"),
    )


def min_interval(entry: Mapping[str, Any], source: str, where: str) -> timedelta:
    """An entry's `min_interval` (a duration such as `60s` or `5m`), else the default."""
    value = entry.get("min_interval")
    if value is None:
        return DEFAULT_MIN_INTERVAL
    try:
        return parse_duration(value, "min_interval")
    except ValueError as exc:
        raise TablesConfigError(f"{source}: {where}: {exc}") from None


def policy_sections(origin: Mapping[str, Any], source: str, label: str) -> dict[str, Any]:
    """The `MaintenancePolicy` keys of one level (`policy`, `thresholds` and `retention`
    merged); a key set in two of them is refused."""
    level: dict[str, Any] = {}
    for section in _POLICY_SECTIONS:
        values = _mapping(origin.get(section) or {}, source, f"{label}.{section}")
        clash = sorted(set(values) & set(level))
        if clash:
            raise TablesConfigError(f"{source}: {label}.{section}: {clash} set twice")
        level.update(values)
    return level


def parse_schedule(schedule: Any, source: str, where: str) -> str | tuple[str, str] | None:
    """One of: null, `asset`, a cron expression or preset, or `[asset, <cron or preset>]`."""
    if isinstance(schedule, list):
        clocks = [p for p in schedule if p != ASSET_SCHEDULE]
        if len(schedule) != 2 or len(clocks) != 1 or not _is_clock(clocks[0]):
            raise TablesConfigError(
                f"{source}: {where}: a list schedule is [{ASSET_SCHEDULE}, <cron or preset>], "
                f"got {schedule!r}"
            )
        return (ASSET_SCHEDULE, clocks[0])
    if schedule is None or schedule == ASSET_SCHEDULE or _is_clock(schedule):
        return schedule
    raise TablesConfigError(
        f"{source}: {where}: {schedule!r} is not a cron expression, a preset "
        f"({', '.join(sorted(PRESETS))}), {ASSET_SCHEDULE!r}, [{ASSET_SCHEDULE}, <cron>] or null"
    )


def runs_on_assets(schedule: str | tuple[str, str] | None) -> bool:
    """Whether a parsed schedule runs on Asset events (`asset`, alone or with a clock)."""
    parts = schedule if isinstance(schedule, tuple) else (schedule,)
    return ASSET_SCHEDULE in parts


def schedule_clock(schedule: str | tuple[str, str] | None) -> str | None:
    """The cron expression or preset of a parsed schedule, if it has one."""
    parts = schedule if isinstance(schedule, tuple) else (schedule,)
    return next((p for p in parts if p is not None and p != ASSET_SCHEDULE), None)


def _is_clock(schedule: Any) -> bool:
    return isinstance(schedule, str) and (schedule in PRESETS or croniter.is_valid(schedule))


def _mapping(value: Any, source: str, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TablesConfigError(f"{source}: {where}: expected a mapping, got {value!r}")
    return value


def _check_keys(entry: Mapping[str, Any], known: frozenset[str], source: str, where: str) -> None:
    unknown = sorted(set(entry) - known)
    if unknown:
        raise TablesConfigError(
            f"{source}: {where}: unknown keys {unknown}; known: {sorted(known)}"
        )
