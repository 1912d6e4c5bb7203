"""The fleet's part of `tables.yaml`: which catalogs a fleet DAG maintains, with which budget,
and the per-namespace policy overrides.

    defaults:                       # every table, listed or discovered
      retention: {max_snapshot_age: 5d}
    namespaces:                     # namespace glob -> policy sections, in file order
      "raw_*": {thresholds: {minor_file_count: 20}}
    tables:                         # per-table DAGs; their policy applies in the fleet too
      - table: db.events
        thresholds: {minor_file_count: 8}
    fleets:                         # one fleet DAG each: icefloe_fleet__<iceberg_conn_id>
      - iceberg_conn_id: iceberg_default
        include: ["*"]              # namespace globs (fnmatch); a nested namespace is `a.b`
        exclude: ["tmp_*"]
        schedule: "@daily"          # or asset: when other engines' commits (or our ingest)
                                    # may make a table's maintenance due; a run covers the
                                    # tables that changed; or [asset, "@daily"]
        min_interval: 60s           # with asset: one run per table per minute at most
        max_tables: 50              # tables maintained per run
        max_bytes: 2TB              # bytes rewritten per run (estimated from metadata)
        spark_apps: 4               # a run's Spark applications at once
        pool: icefloe_spark         # optional: an Airflow pool the jobs share with other DAGs
                                    # (create it first; default: Airflow's default pool)
        spark_connect_conn_id: spark_connect_default  # optional: the jobs as clients of
                                    # this Spark Connect server, at most spark_apps at once

Policy layers, each overriding the one before: the `MaintenancePolicy` defaults, `defaults`,
every matching `namespaces` entry in file order, the table's `tables` entry, and finally the
table's own properties (`icefloe_airflow.fleet.layering`).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml

from icecore.jobs.grammar import parse_size
from icefloe_airflow.policy import MaintenancePolicy
from icefloe_airflow.tables_config import (
    DEFAULT_MIN_INTERVAL,
    TablesConfigError,
    default_config_path,
    min_interval,
    parse_schedule,
    parse_tables_config,
    policy_sections,
    runs_on_assets,
    schedule_clock,
)

_FLEET_KEYS = frozenset(
    {
        "iceberg_conn_id",
        "include",
        "exclude",
        "schedule",
        "max_tables",
        "max_bytes",
        "spark_apps",
        "pool",
        "conn_id",
        "spark_connect_conn_id",
        "min_interval",
    }
)


@dataclass(frozen=True)
class Budget:
    """How much one fleet run may do. `max_bytes` None: no limit on bytes rewritten."""

    max_tables: int = 50
    max_bytes: int | None = None
    spark_apps: int = 4

    def __post_init__(self) -> None:
        if self.max_tables < 0 or self.spark_apps < 1:
            raise ValueError(f"budget: max_tables >= 0 and spark_apps >= 1, got {self}")
        if self.max_bytes is not None and self.max_bytes < 0:
            raise ValueError(f"budget: max_bytes must not be negative, got {self.max_bytes}")

    def limited(self, max_tables: Any = None, max_bytes: Any = None) -> Budget:
        """This budget with one run's own limits (a hand trigger's form, `icefloe due`'s
        flags): None or "" keeps the configured one; `max_bytes` may be a size as text
        (`2TB`). ValueError for a size that does not parse."""
        return Budget(
            max_tables=self.max_tables if max_tables in (None, "") else int(max_tables),
            max_bytes=self.max_bytes if max_bytes in (None, "") else parse_size(max_bytes),
            spark_apps=self.spark_apps,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_tables": self.max_tables,
            "max_bytes": self.max_bytes,
            "spark_apps": self.spark_apps,
        }


@dataclass(frozen=True)
class FleetConfig:
    """One fleet: a catalog (through its Airflow connection), its namespaces, its budget."""

    iceberg_conn_id: str = "iceberg_default"
    include: tuple[str, ...] = ("*",)
    exclude: tuple[str, ...] = ()
    schedule: str | tuple[str, str] | None = "@daily"
    budget: Budget = field(default_factory=Budget)
    # A pool bounds Spark applications across every DAG using it; it must exist (Airflow's
    # scheduler never queues a task of a missing pool, and says so only in its own log).
    # None: Airflow's default pool, a run still bounded by `budget.spark_apps`.
    pool: str | None = None
    conn_id: str = "spark_default"
    # A Spark Connect connection: every job of the fleet runs as that server's client.
    spark_connect_conn_id: str | None = None
    # With `schedule: asset`: the shortest time between two runs one table's commits set off.
    min_interval: timedelta = DEFAULT_MIN_INTERVAL

    @property
    def dag_id(self) -> str:
        return f"icefloe_fleet__{self.iceberg_conn_id}"

    @property
    def on_assets(self) -> bool:
        """Whether the fleet runs when its tables change (`schedule: asset`)."""
        return runs_on_assets(self.schedule)

    @property
    def clock(self) -> str | None:
        """The cron expression or preset of the schedule, if it has one."""
        return schedule_clock(self.schedule)


@dataclass(frozen=True)
class PolicyLayers:
    """The policy values of every config level, kept apart so that they can be layered per
    table (with its properties on top) at each run."""

    defaults: dict[str, Any] = field(default_factory=dict)
    namespaces: tuple[tuple[str, dict[str, Any]], ...] = ()
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    options: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)

    def values_for(self, table: str) -> dict[str, Any]:
        """Defaults, then each namespace glob matching the table's namespace, then the table's
        own entry: the policy keys before the table's properties."""
        namespace = table.rpartition(".")[0]
        values = dict(self.defaults)
        for pattern, level in self.namespaces:
            if fnmatch.fnmatchcase(namespace, pattern):
                values.update(level)
        values.update(self.tables.get(table, {}))
        return values


@dataclass(frozen=True)
class FleetSettings:
    fleets: tuple[FleetConfig, ...] = ()
    layers: PolicyLayers = field(default_factory=PolicyLayers)


def load_fleet_settings(path: str | Path | None = None) -> FleetSettings:
    """The fleets and policy layers of the tables config (`$ICEFLOE_TABLES_CONFIG`, else
    `tables.yaml` in the dags folder); TablesConfigError naming the key on any mistake."""
    source = Path(path) if path is not None else default_config_path()
    try:
        document = yaml.safe_load(source.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise TablesConfigError(f"{source}: cannot read the tables config: {exc}") from exc
    return parse_fleet_settings(document, str(source))


def parse_fleet_settings(document: Any, source: str = "tables config") -> FleetSettings:
    """The fleet settings of an already-loaded document (checks the `tables` part too)."""
    tables = parse_tables_config(document, source)
    if not isinstance(document, Mapping):
        return FleetSettings(layers=PolicyLayers(options={t.table: t.options for t in tables}))
    defaults = policy_sections(document.get("defaults") or {}, source, "defaults")
    namespaces = []
    for pattern, level in _mapping(document.get("namespaces") or {}, source, "namespaces").items():
        where = f"namespaces[{pattern!r}]"
        entry = _mapping(level or {}, source, where)
        unknown = sorted(set(entry) - {"policy", "thresholds", "retention"})
        if unknown:
            raise TablesConfigError(f"{source}: {where}: unknown keys {unknown}")
        namespaces.append((str(pattern), policy_sections(entry, source, where)))
    for pattern, level in namespaces:  # a bad key or value is named now, not per table later
        try:
            MaintenancePolicy.from_mapping({**defaults, **level})
        except ValueError as exc:
            raise TablesConfigError(f"{source}: namespaces[{pattern!r}]: {exc}") from None
    table_values = {}
    for index, entry in enumerate(document.get("tables") or []):
        table_values[entry["table"]] = policy_sections(entry, source, f"tables[{index}]")
    fleets = document.get("fleets") or []
    if not isinstance(fleets, list):
        raise TablesConfigError(f"{source}: fleets: expected a list of fleets")
    configs = tuple(_fleet(f, source, f"fleets[{i}]") for i, f in enumerate(fleets))
    ids = [c.dag_id for c in configs]
    if len(set(ids)) != len(ids):
        raise TablesConfigError(f"{source}: fleets: one fleet per connection, got {ids}")
    return FleetSettings(
        fleets=configs,
        layers=PolicyLayers(
            defaults=defaults,
            namespaces=tuple(namespaces),
            tables=table_values,
            options={t.table: t.options for t in tables},
        ),
    )


def _fleet(entry: Any, source: str, where: str) -> FleetConfig:
    entry = _mapping(entry, source, where)
    unknown = sorted(set(entry) - _FLEET_KEYS)
    if unknown:
        raise TablesConfigError(
            f"{source}: {where}: unknown keys {unknown}; known: {sorted(_FLEET_KEYS)}"
        )
    schedule = parse_schedule(entry.get("schedule", "@daily"), source, f"{where}.schedule")
    interval = min_interval(entry, source, f"{where}.min_interval")
    try:
        max_bytes = entry.get("max_bytes")
        budget = Budget(
            max_tables=int(entry.get("max_tables", Budget.max_tables)),
            max_bytes=None if max_bytes is None else parse_size(max_bytes),
            spark_apps=int(entry.get("spark_apps", Budget.spark_apps)),
        )
        return FleetConfig(
            iceberg_conn_id=str(entry.get("iceberg_conn_id", "iceberg_default")),
            include=_globs(entry.get("include", ["*"])),
            exclude=_globs(entry.get("exclude", [])),
            schedule=schedule,
            budget=budget,
            pool=_optional_text(entry, "pool", "an Airflow pool name"),
            conn_id=str(entry.get("conn_id", "spark_default")),
            spark_connect_conn_id=_optional_text(entry, "spark_connect_conn_id", "a connection id"),
            min_interval=interval,
        )
    except (TypeError, ValueError) as exc:
        raise TablesConfigError(f"{source}: {where}: {exc}") from None


def _optional_text(entry: Mapping[str, Any], key: str, expected: str) -> str | None:
    value = entry.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{key}: expected {expected}, got {value!r}")
    return value.strip()


def _globs(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"expected a list of namespace globs, got {value!r}")
    return tuple(value)


def _mapping(value: Any, source: str, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TablesConfigError(f"{source}: {where}: expected a mapping, got {value!r}")
    return value
