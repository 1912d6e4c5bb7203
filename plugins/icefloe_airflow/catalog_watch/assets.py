"""`schedule: asset` in tables.yaml: the Assets a table's DAG or a fleet runs on, with the
watcher (`TableChangesTrigger`) that any engine's commits set off.

- A table's DAG runs on the table's Asset (`icefloe_airflow.assets.table_asset`), which
  icefloe's ingest publishes after each batch and whose watcher fires when other engines'
  commits may make the table's maintenance due.
- A fleet runs on its fleet's Asset (`fleet_asset`): one watcher for the fleet's namespaces
  fires one event per changed table (its `payload` names it), ingest publishes there too,
  and the run covers the tables of the events that set it off (`changed_tables`).

Both watchers of one catalog share the triggerer's one poll loop for it. The poll interval
is Airflow's `[icefloe] watch_poll_interval` (20 s by default: a commit sets off its run well
within a minute); each table's or fleet's `min_interval` (60 s) bounds its runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from airflow.sdk import Asset, AssetWatcher

from icecore.spec.properties import WRITE_TARGET_FILE_SIZE_BYTES
from icefloe_airflow.assets import fleet_asset, table_asset
from icefloe_airflow.catalog_watch.trigger import TableChangesTrigger
from icefloe_airflow.fleet.config import FleetConfig
from icefloe_airflow.policy import MaintenancePolicy, parse_duration
from icefloe_airflow.provider_info import CONFIG_SECTION, DEFAULT_WATCH_POLL, WATCH_POLL_OPTION
from icefloe_airflow.tables_config import TableConfig


def poll_seconds() -> float:
    """`[icefloe] watch_poll_interval` in seconds; ValueError naming the option if it is not
    a positive duration."""
    from airflow.sdk import conf  # noqa: PLC0415 - read when a DAG file is parsed

    value = conf.get(CONFIG_SECTION, WATCH_POLL_OPTION, fallback="").strip() or DEFAULT_WATCH_POLL
    seconds = parse_duration(value, f"[{CONFIG_SECTION}] {WATCH_POLL_OPTION}").total_seconds()
    if seconds <= 0:
        raise ValueError(f"[{CONFIG_SECTION}] {WATCH_POLL_OPTION} must be above 0, got {value!r}")
    return seconds


def due_thresholds(policy: MaintenancePolicy) -> dict[str, Any]:
    """The `icecore.changes.DueThresholds` of a policy: a commit adding data files smaller
    on average than the policy's small-file bound may make compaction due (the table's own
    target size is unknown without loading it: Iceberg's default stands in when the policy
    sets none, which errs towards looking), and `max_data_manifests` commits since icefloe's
    last (one manifest each, at least) a manifest rewrite."""
    target = policy.target_file_size_bytes or WRITE_TARGET_FILE_SIZE_BYTES.default
    return {
        "small_file_bytes": int(target * policy.min_target_size_ratio),
        "min_commits": policy.max_data_manifests,
    }


def table_watcher(config: TableConfig, poll: float | None = None) -> AssetWatcher:
    """The watcher of one table's Asset."""
    trigger = TableChangesTrigger(
        config.iceberg_conn_id,
        tables=[config.table],
        poll_seconds=poll_seconds() if poll is None else poll,
        min_interval_seconds=config.min_interval.total_seconds(),
        thresholds=due_thresholds(config.policy),
    )
    return AssetWatcher(name=f"icefloe-watch-{config.table}", trigger=trigger)


def watched_table_asset(config: TableConfig) -> Asset:
    """The table's Asset, watched: what `schedule: asset` schedules a table's DAG on. Use
    it (not `table_asset`) to schedule your own DAGs on a watched table: Airflow keeps the
    watchers of the last DAG file it parsed that names the asset."""
    asset = table_asset(config.table, config.catalog_name)
    return Asset(name=asset.name, uri=asset.uri, watchers=[table_watcher(config)])


def watched_fleet_asset(fleet: FleetConfig, defaults: Mapping[str, Any]) -> Asset:
    """The fleet's Asset, watched for changes to every table of its namespaces; `defaults`:
    the tables config's default policy keys (what the fleet's thresholds start from)."""
    trigger = TableChangesTrigger(
        fleet.iceberg_conn_id,
        include=list(fleet.include),
        exclude=list(fleet.exclude),
        poll_seconds=poll_seconds(),
        min_interval_seconds=fleet.min_interval.total_seconds(),
        thresholds=due_thresholds(MaintenancePolicy.from_mapping(defaults)),
    )
    asset = fleet_asset(fleet.iceberg_conn_id)
    watcher = AssetWatcher(name=f"icefloe-watch-{fleet.iceberg_conn_id}", trigger=trigger)
    return Asset(name=asset.name, uri=asset.uri, watchers=[watcher])


def event_table(extra: Mapping[str, Any]) -> str | None:
    """The table an asset event is about: a watcher's (`extra["payload"]["table"]`) or an
    ingest's (`extra["table"]`)."""
    payload = extra.get("payload")
    if isinstance(payload, Mapping) and isinstance(payload.get("table"), str):
        return str(payload["table"])
    table = extra.get("table")
    return table if isinstance(table, str) else None


def changed_tables(events: Iterable[Any]) -> list[str]:
    """The tables named by a run's triggering asset events (objects with `extra`), sorted,
    each once."""
    return sorted({t for e in events if (t := event_table(e.extra or {})) is not None})


def commit_words(snapshot: Mapping[str, Any]) -> str:
    """A snapshot an event names, in words: `append 123 by spark (app local-1)`."""
    engine = snapshot.get("engine") or "an engine that names none"
    app = f" (app {snapshot['app_id']})" if snapshot.get("app_id") else ""
    return f"{snapshot.get('operation')} {snapshot.get('snapshot_id')} by {engine}{app}"
