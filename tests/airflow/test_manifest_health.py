"""The health model's manifest rule (`rewrite_manifests`) on real tables: a table PyIceberg
wrote in 101 appends (one manifest per commit), and small manifests of one spec adding up to a
target manifest. The same rule makes the job due and takes the points, says both in words,
follows the policy (tables.yaml keys, table properties) and ranks the table in the fleet by
the manifest opens a rewrite saves; after the job, the points are back."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from pathlib import Path

from icefloe_airflow.fleet.config import PolicyLayers
from icefloe_airflow.fleet.ranking import benefit, rewrite_bytes
from icefloe_airflow.health_model import (
    Assessment,
    JobDecision,
    Penalty,
    assess,
    health_summary,
    measure_health,
)
from icefloe_airflow.policy import MaintenancePolicy
from icefloe_airflow.table_health import table_policy_of

from icecore.catalog import SqlCatalog
from icecore.health import HealthReport
from icecore.jobs.grammar import describe_size
from spark_jobs.common.cli import main
from tests.support.committing import CatalogTable, manifests, sqlite_catalog
from tests.support.pyiceberg_appends import pyiceberg_appends

NOW = datetime.now(UTC)
RECENT = {"expire_snapshots": NOW, "remove_orphan_files": NOW}  # cadence jobs just ran
JOB = "rewrite_manifests"
DEFAULT_TRIGGER = "over 100 data manifests, or when small ones of one spec add up to 8.0 MB"


def verdict(report: HealthReport, policy: MaintenancePolicy) -> tuple[JobDecision, list[Penalty]]:
    """The manifest rule's decision and penalty, checked for what holds of every assessment:
    the points lost add up to the score."""
    assessment: Assessment = assess(report, policy, RECENT, NOW)
    assert assessment.score == 100 - sum(p.points for p in assessment.penalties)
    decision = next(d for d in assessment.decisions if d.job == JOB)
    return decision, [p for p in assessment.penalties if p.rule == "manifests"]


def test_a_table_of_101_appends_needs_its_manifests_rewritten(tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    catalog = SqlCatalog("default", warehouse=warehouse)
    name = pyiceberg_appends(warehouse, catalog, 101)
    table = catalog.load_table(name)
    report = measure_health(table, MaintenancePolicy())
    stats = report.manifests
    assert (stats.data_manifests, stats.delete_manifests, stats.small_manifests) == (101, 0, 101)
    size = describe_size(stats.bytes)

    decision, lost = verdict(report, MaintenancePolicy())
    assert (decision.due, decision.reason) == (True, "101 data manifests > 100")
    assert [p.text for p in lost] == [
        f"-10: 101 data manifests ({size}) opened to plan every scan; rewrite_manifests is due "
        f"({DEFAULT_TRIGGER})"
    ]
    # Below a higher limit: not due, and the share of the way there (101 / 200 of 10 points).
    decision, lost = verdict(report, MaintenancePolicy(max_data_manifests=200))
    assert not decision.due
    assert decision.reason == (
        "101 data manifests (due over 200), and no spec's small manifests add up to the 8.0 MB "
        "target"
    )
    assert [p.text for p in lost] == [
        f"-5: 101 data manifests ({size}) opened to plan every scan; rewrite_manifests becomes "
        "due over 200 data manifests, or when small ones of one spec add up to 8.0 MB"
    ]
    # The limit from tables.yaml's layers, then from the table's own property, over them.
    layers = PolicyLayers(namespaces=(("py", {"max_data_manifests": 150}),))
    assert table_policy_of(name, table.metadata.properties, layers).max_data_manifests == 150
    table.update_properties().set("icefloe.manifests.max-data-count", "101").commit()
    policy = table_policy_of(name, table.metadata.properties, layers)
    assert policy.max_data_manifests == 101
    assert not verdict(measure_health(table, policy), policy)[0].due  # 101 is not over 101

    # What the DAGs log and the page shows, and what the fleet ranks it by: 100 manifest
    # opens saved (they add up to far less than 8 MiB: one manifest after), rewriting them.
    summary = health_summary(report)
    assert (summary["data_manifests"], summary["small_manifests"]) == (101, 101)
    assert summary["manifest_bytes"] == stats.bytes
    assert benefit(report, MaintenancePolicy(), [JOB]) == 100
    assert rewrite_bytes(report, MaintenancePolicy(), [JOB]) == stats.bytes
    score_before = assess(report, MaintenancePolicy(), RECENT, NOW).score

    # The job, as a user runs it (in the driver's threads: no Spark for a table this small).
    out = io.StringIO()
    assert (
        main(["rewrite_manifests", "--warehouse", str(warehouse), "--table", name], stdout=out) == 0
    )
    assert json.loads(out.getvalue().splitlines()[-1])["data_manifests_after"] == 1
    after = measure_health(catalog.load_table(name), MaintenancePolicy())
    decision, lost = verdict(after, MaintenancePolicy())
    assert not decision.due and lost == []
    assert decision.reason.startswith("1 data manifest (due over 100)")
    # Nothing else changed (same files, fresh snapshots): the rule's 10 points are back.
    assert assess(after, MaintenancePolicy(), RECENT, NOW).score == score_before + 10
    assert benefit(after, MaintenancePolicy(), [JOB]) == 0
    catalog.close()


def test_small_manifests_of_one_spec_adding_up_to_a_target_manifest(tmp_path: Path) -> None:
    catalog = sqlite_catalog(tmp_path)
    t = CatalogTable.create(catalog, "events")

    def append(n: int) -> None:
        t.table.new_fast_append().append_file(t.data([{"id": n, "cat": "a", "v": n}])).commit()

    append(0)
    append(1)
    length = max(m.manifest_length for m in manifests(t.table))
    # A target of 2.9 manifests: each is small (below 0.75 x 2.9), three add up to it.
    target = int(length * 2.9)
    t.table.update_properties().set("commit.manifest.target-size-bytes", str(target)).commit()
    policy = MaintenancePolicy()
    report = measure_health(t.table, policy)
    small = report.manifests.specs[0].data
    assert (small.manifests, small.small_manifests) == (2, 2)
    decision, lost = verdict(report, policy)
    assert not decision.due
    # Two thirds of the way to a target manifest (2 / 2.9 of 10 points), much more than the
    # count's 2 / 100: the words say the nearer half of the trigger.
    group = f"2 small data manifests of spec 0 ({describe_size(small.small_bytes)}, each below"
    trigger = f"{describe_size(target)}"
    assert [p.text for p in lost] == [
        f"-{round(10 * small.small_bytes / target)}: {group} "
        f"{describe_size(int(target * 0.75))}); rewrite_manifests becomes due over 100 data "
        f"manifests, or when small ones of one spec add up to {trigger}"
    ]

    append(2)
    report = measure_health(t.table, policy)
    small = report.manifests.specs[0].data
    decision, lost = verdict(report, policy)
    assert decision.due
    assert decision.reason == (
        f"3 small data manifests of spec 0 add up to {describe_size(small.small_bytes)} >= the "
        f"{trigger} target"
    )
    assert [p.points for p in lost] == [10]
    # The fleet: just over one target manifest's bytes in three manifests, two after the
    # rewrite: one open saved.
    assert target < small.bytes < 2 * target
    assert benefit(report, policy, [JOB]) == 1
    catalog.close()
