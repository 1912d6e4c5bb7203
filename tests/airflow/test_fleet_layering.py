"""A table's policy in the fleet: defaults, then namespaces, then its tables.yaml entry, then
its own properties; the fleets' budgets and pools; mistakes named, per table or per config
key."""

from __future__ import annotations

from datetime import timedelta

import pytest
from icefloe_airflow.fleet.config import Budget, FleetConfig, parse_fleet_settings
from icefloe_airflow.fleet.discovery import namespace_matches
from icefloe_airflow.fleet.layering import PolicyError, table_policy
from icefloe_airflow.fleet_dag.dag import fleet_dag
from icefloe_airflow.tables_config import TablesConfigError

DOCUMENT = {
    "defaults": {"thresholds": {"minor_file_count": 20}, "retention": {"retain_last": 2}},
    "namespaces": {
        "raw_*": {"thresholds": {"minor_file_count": 30, "major_delete_ratio": "20%"}},
        "raw_events": {"retention": {"max_snapshot_age": "2d"}},
    },
    "tables": [
        {"table": "raw_events.clicks", "schedule": None, "thresholds": {"minor_file_count": 8}}
    ],
    "fleets": [
        {
            "iceberg_conn_id": "lake",
            "include": ["raw_*", "gold"],
            "exclude": ["raw_tmp"],
            "max_tables": 3,
            "max_bytes": "2TB",
            "spark_apps": 2,
        }
    ],
}


def test_layers_apply_in_order() -> None:
    layers = parse_fleet_settings(DOCUMENT).layers
    assert layers.values_for("gold.orders") == {"minor_file_count": 20, "retain_last": 2}
    assert layers.values_for("raw_events.views") == {
        "minor_file_count": 30,
        "major_delete_ratio": "20%",
        "retain_last": 2,
        "max_snapshot_age": "2d",
    }
    clicks = layers.values_for("raw_events.clicks")
    assert clicks["minor_file_count"] == 8 and clicks["max_snapshot_age"] == "2d"

    # The table's properties have the last word.
    resolved = table_policy(
        clicks,
        {
            "icefloe.minor.file-count": "4",
            "icefloe.expire.max-snapshot-age": "12h",
            "icefloe.target-file-size-bytes": "128MB",
            "icefloe.manifests.max-data-count": "250",
            "icefloe.job": "rewrite_data_files",  # written by the jobs: not policy
        },
    )
    assert resolved.enabled
    assert resolved.policy.minor_file_count == 4
    assert resolved.policy.major_delete_ratio == 0.2
    assert resolved.policy.max_snapshot_age == timedelta(hours=12)
    assert resolved.policy.target_file_size_bytes == 128 * 1024 * 1024
    assert resolved.policy.retain_last == 2
    assert resolved.policy.max_data_manifests == 250
    assert "icefloe.manifests.max-data-count" in resolved.from_properties
    assert not table_policy({}, {"icefloe.maintenance.enabled": "FALSE"}).enabled


@pytest.mark.parametrize(
    ("properties", "named"),
    [
        ({"icefloe.maintenance.enabled": "no"}, "icefloe.maintenance.enabled"),
        ({"icefloe.minor.file-cout": "4"}, "icefloe.minor.file-cout"),
        ({"icefloe.minor.file-count": "many"}, "icefloe.minor.file-count"),
        ({"icefloe.minor.file-count": "0"}, "icefloe.minor.file-count"),
        ({"icefloe.expire.max-snapshot-age": "5"}, "max_snapshot_age"),
        ({"icefloe.manifests.max-count": "50"}, "icefloe.manifests.max-count"),
        ({"icefloe.manifests.max-data-count": "1.5"}, "icefloe.manifests.max-data-count"),
        ({"icefloe.manifests.max-data-count": "0"}, "icefloe.manifests.max-data-count"),
    ],
)
def test_a_bad_property_is_an_error_of_that_table(properties: dict[str, str], named: str) -> None:
    with pytest.raises(PolicyError, match=named.replace(".", r"\.")):
        table_policy({}, properties)


def test_fleets_and_their_budget() -> None:
    (fleet,) = parse_fleet_settings(DOCUMENT).fleets
    assert fleet.dag_id == "icefloe_fleet__lake"
    assert fleet.budget == Budget(max_tables=3, max_bytes=2 * 1024**4, spark_apps=2)
    assert namespace_matches("raw_events", fleet.include, fleet.exclude)
    assert namespace_matches("gold", fleet.include, fleet.exclude)
    assert not namespace_matches("raw_tmp", fleet.include, fleet.exclude)
    assert not namespace_matches("silver", fleet.include, fleet.exclude)
    assert namespace_matches("a.b", ("a.*",))


def _job_pools(fleet: FleetConfig) -> set[str]:
    return {t.pool for t in fleet_dag(fleet).tasks if t.task_id.startswith("table.")}


def test_a_fleet_on_its_asset_runs_when_its_tables_change() -> None:
    """`schedule: asset`: the fleet's Asset, watched by one trigger for its namespaces (the
    catalog's shared poll loop), `min_interval` its; with a clock too, either sets it off."""
    from airflow.sdk import Asset  # noqa: PLC0415

    on_asset = {"schedule": "asset", "min_interval": "2m"}
    settings = parse_fleet_settings({**DOCUMENT, "fleets": [{**DOCUMENT["fleets"][0], **on_asset}]})
    (fleet,) = settings.fleets
    assert fleet.on_assets and fleet.clock is None
    [asset] = fleet_dag(fleet).timetable.asset_condition.objects
    assert isinstance(asset, Asset) and asset.uri == "x-icefloe-fleet://lake"
    [watcher] = asset.watchers
    classpath, kwargs = watcher.trigger.serialize()
    assert classpath == "icefloe_airflow.catalog_watch.trigger.TableChangesTrigger"
    assert kwargs["include"] == list(fleet.include) and kwargs["exclude"] == list(fleet.exclude)
    assert kwargs["min_interval_seconds"] == 120.0
    assert kwargs["iceberg_conn_id"] == "lake" and kwargs["tables"] == []
    both = {"schedule": ["asset", "@daily"]}
    settings = parse_fleet_settings({**DOCUMENT, "fleets": [{**DOCUMENT["fleets"][0], **both}]})
    (fleet,) = settings.fleets
    assert (fleet.on_assets, fleet.clock) == (True, "@daily")
    assert "AssetOrTimeSchedule" in type(fleet_dag(fleet).timetable).__name__


def test_a_fleet_without_a_pool_runs_in_airflows_own_bounded_per_run() -> None:
    """No `pool`: Airflow's default pool (a pool nobody created would keep every job queued
    for ever), the run still bounded by spark_apps; a named pool is every job's."""
    (fleet,) = parse_fleet_settings(DOCUMENT).fleets
    assert fleet.pool is None
    assert _job_pools(fleet) == {"default_pool"}
    assert fleet_dag(fleet).max_active_tasks == 2
    pooled = {**DOCUMENT, "fleets": [{**DOCUMENT["fleets"][0], "pool": " icefloe_spark "}]}
    (fleet,) = parse_fleet_settings(pooled).fleets
    assert _job_pools(fleet) == {"icefloe_spark"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"fleets": [{"iceberg_conn_id": "x", "max_tabels": 3}]}, "unknown keys"),
        ({"fleets": [{"max_bytes": "lots"}]}, r"fleets\[0\]"),
        ({"fleets": [{}, {}]}, "one fleet per connection"),
        ({"fleets": [{"pool": ""}]}, r"fleets\[0\]: pool: expected an Airflow pool name"),
        ({"fleets": [{"schedule": "often"}]}, r"fleets\[0\]\.schedule: 'often' is not a cron"),
        ({"fleets": [{"min_interval": "x"}]}, r"fleets\[0\]\.min_interval: .*got 'x'"),
        ({"namespaces": {"raw": {"policy": {"minor_file_count": 1}, "schedule": "@daily"}}}, "raw"),
        ({"namespaces": {"raw": {"policy": {"nope": 1}}}}, r"namespaces\['raw'\].*nope"),
    ],
)
def test_config_mistakes_are_named(change: dict[str, object], message: str) -> None:
    with pytest.raises(TablesConfigError, match=message):
        parse_fleet_settings({**DOCUMENT, **change})
