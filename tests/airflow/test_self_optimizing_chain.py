"""The self-optimizing chain decides the manifest rewrite on the table as the data rewrite
left it, not from its first health check: a data rewrite replaces the manifests of the files
it rewrites, and its commit merges small manifests as Iceberg's do
(`commit.manifest.min-count-to-merge`), so a table whose manifests were many may need no
manifest rewrite after it, while one whose manifests the data rewrite leaves alone still does.

Every check of the chain uses the policy the Iceberg page and `icefloe` use (tables.yaml's
layers and the table's properties), and its jobs the options that policy implies.

The chain's own tasks run in this process (the DAG built by `self_optimizing_group`, its
health task and gates executed as they are, on a real SQLite catalog and state store); the
data rewrite between them runs in-process too, on the shared SparkSession, as its operator
would run it by spark-submit.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import DAG
from icefloe_airflow.fleet.config import load_fleet_settings
from icefloe_airflow.fleet.survey import survey
from icefloe_airflow.self_optimizing import self_optimizing_group
from icefloe_airflow.table_health import table_policy_of
from pyspark.sql import SparkSession

from icecore.catalog import catalog_from_settings
from spark_jobs.common.cli import main
from tests.support.committing import BY_CAT, SCHEMA, CatalogTable
from tests.support.tables import LocalTable

TABLE = "db.events"
GROUP = "self_optimizing."


def streamed_table(warehouse: Path, properties: dict[str, str]) -> None:
    """db.events as a streaming writer leaves it: twelve one-row files of partition a in one
    commit, then a hundred commits of one file each, in partitions of their own: 101 data
    manifests, and a data rewrite due for partition a alone (a lone small file costs
    nothing)."""
    catalog = catalog_from_settings(warehouse=str(warehouse))
    catalog.create_namespace("db")
    table = catalog.create_table(TABLE, SCHEMA, spec=BY_CAT, properties=properties)
    t = CatalogTable(table, LocalTable(table.io, table.metadata))
    append = table.new_fast_append()
    for i in range(12):
        append.append_file(t.data([{"id": i, "cat": "a", "v": i}]))
    append.commit()
    for i in range(100):
        row = {"id": 100 + i, "cat": f"b{i:02d}", "v": i}
        table.new_fast_append().append_file(t.data([row])).commit()
    catalog.close()


def chain() -> Any:
    with DAG("optimize_events", schedule=None) as dag:
        self_optimizing_group(TABLE)
    return dag


def due(health: dict[str, Any]) -> list[str]:
    return [d["job"] for d in health["due"]]


@pytest.mark.parametrize(
    ("properties", "rewritten"),
    [
        pytest.param({}, False, id="the data rewrite merges the manifests"),
        pytest.param(
            {"commit.manifest-merge.enabled": "false"}, True, id="the manifests stay many"
        ),
    ],
)
def test_the_manifest_rewrite_is_decided_after_the_data_rewrite(
    spark: SparkSession,
    iceberg_connection: Path,
    properties: dict[str, str],
    rewritten: bool,
) -> None:
    streamed_table(iceberg_connection, properties)
    dag = chain()

    health = dag.get_task(GROUP + "health").execute({})
    # At the first check both rewrites are due.
    assert due(health) == ["rewrite_data_files", "rewrite_manifests", "remove_orphan_files"]
    assert health["health"]["data_manifests"] == 101
    assert dag.get_task(GROUP + "rewrite_data_files_due").python_callable(health) is True

    # The data rewrite, as the chain's operator runs it (its job, its default options).
    out = io.StringIO()
    argv = ["rewrite_data_files", "--warehouse", str(iceberg_connection), "--table", TABLE]
    assert main(argv, stdout=out) == 0

    catalog = catalog_from_settings(warehouse=str(iceberg_connection))
    left = catalog.load_table(TABLE).health().manifests.data_manifests
    catalog.close()
    assert (left > 100) is rewritten
    gate = dag.get_task(GROUP + "rewrite_manifests_due")
    assert gate.python_callable(health) is rewritten


def test_the_chain_checks_and_runs_with_the_policy_the_page_and_icefloe_use(
    iceberg_connection: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A namespace layer of tables.yaml, the table's entry, the group's own policy and the
    table's properties, in that order: the health task decides with what the page and
    `icefloe health` decide with (but the key the DAG's own code sets, which only the DAG
    knows), and the jobs get the options that policy implies."""
    config = tmp_path / "tables.yaml"
    config.write_text(
        "namespaces:\n  db: {retention: {retain_last: 3, max_snapshot_age: 4d}}\n"
        "tables:\n  - table: db.events\n    thresholds: {minor_file_count: 5}\n"
    )
    monkeypatch.setenv("ICEFLOE_TABLES_CONFIG", str(config))
    streamed_table(iceberg_connection, {"icefloe.expire.max-snapshot-age": "2d"})
    with DAG("optimize_events", schedule=None) as dag:
        self_optimizing_group(TABLE, policy={"minor_file_count": 8, "max_snapshot_age": "1d"})

    health = dag.get_task(GROUP + "health").execute({})

    expected = {"retain_last": 3, "minor_file_count": 8, "max_snapshot_age": "2d"}
    assert {k: health["policy"][k] for k in expected} == expected
    catalog = catalog_from_settings(warehouse=str(iceberg_connection))
    try:
        table = catalog.load_table(TABLE)
        layers = load_fleet_settings(config).layers
        # The page's policy (the config's and the table's, no DAG of its own) ...
        page = table_policy_of(TABLE, table.metadata.properties, layers)
        assert (page.retain_last, page.minor_file_count, page.max_snapshot_age.days) == (3, 5, 2)
        # ... is the command's, for the same table.
        [checked] = survey(catalog, layers, names=[TABLE]).checks
        assert checked.policy == page
        assert {**health["policy"], "minor_file_count": 5} == page.to_dict()
    finally:
        catalog.close()
    # The chain's jobs take the options of the health task's policy when they run (Airflow
    # renders the health task's XCom into them), beneath the group's own options.
    expire = dag.get_task(GROUP + "expire_snapshots")
    expire.health = health
    assert expire.job_options({}) == {"older-than": "2d", "retain-last": 3}
    assert expire.checked_options({}).retain_last == 3
