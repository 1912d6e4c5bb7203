"""The health model on the health reports of real tables (Parquet data, Avro manifests,
position and equality delete files), registered in a real SQLite catalog and read back through
it, as the health operator does: which jobs are due, and the score with every point it lost
explained by the rule that takes it back (the same rules decide both)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from icefloe_airflow.health_model import (
    Assessment,
    JobDecision,
    assess,
    health_summary,
    measure_health,
)
from icefloe_airflow.policy import JOB_ORDER, MaintenancePolicy, parse_duration

from icecore.catalog import SqlCatalog
from icecore.health import HealthReport
from icecore.spec.deletion_vectors import write_dvs
from icecore.spec.manifest import DataFile, FileContent, FileFormat
from icecore.trash import Trash
from icecore.trash.records import ORPHAN
from tests.support.samples import PSCHEMA, spec_of
from tests.support.tables import LocalTable

NOW = datetime.now(UTC)
RECENT = {"expire_snapshots": NOW, "remove_orphan_files": NOW}  # cadence jobs just ran
SMALL_TARGET = 20_000  # bytes: our few-row files are all "small" (< 15,000)


@pytest.fixture
def sql_catalog(tmp_path: Path) -> Iterator[SqlCatalog]:
    catalog = SqlCatalog("default", warehouse=tmp_path / "warehouse")
    catalog.create_namespace("db")
    yield catalog
    catalog.close()


def new_table(tmp_path: Path, target: int | None = None) -> LocalTable:
    props = {} if target is None else {"write.target-file-size-bytes": str(target)}
    spec = spec_of(("category", "identity", "category"))
    return LocalTable.create(tmp_path / "t", PSCHEMA, spec, props)


def rows(category: str, *ids: int) -> list[dict[str, Any]]:
    return [{"id": i, "category": category, "ts": 1_700_000_000_000_000 + i} for i in ids]


def report_of(
    table: LocalTable, catalog: SqlCatalog, policy: MaintenancePolicy | None = None
) -> HealthReport:
    """Register the table (or move the pointer) and measure it through the catalog."""
    if catalog.table_exists("db.t"):
        catalog.drop_table("db.t", purge=False)
    catalog.register_table("db.t", table.metadata_location)
    return measure_health(catalog.load_table("db.t"), policy or MaintenancePolicy())


def explained(report: HealthReport, policy: MaintenancePolicy, last: Any = RECENT) -> Assessment:
    """The assessment, checked for what holds of every one: the points lost add up to the
    score, each in words; a rule that takes all its points has made its job due, and each due
    job (but the cadence-only orphan removal) is due by a rule that took its points."""
    assessment = assess(report, policy, last, NOW)
    assert assessment.score == 100 - sum(p.points for p in assessment.penalties)
    due = {d.job for d in assessment.due}
    for penalty in assessment.penalties:
        assert penalty.points > 0 and penalty.text.startswith(f"-{penalty.points}: ")
        assert penalty.job in penalty.text
        if penalty.due:
            assert penalty.job in due, penalty
    for job in due - {"remove_orphan_files"}:
        assert any(p.due and p.job == job for p in assessment.penalties), job
    return assessment


def due_jobs(
    report: HealthReport, policy: MaintenancePolicy, last: Any, now: datetime
) -> list[JobDecision]:
    assert now == NOW
    return explained(report, policy, last).due


def health_score(report: HealthReport, policy: MaintenancePolicy, last: Any = RECENT) -> int:
    return explained(report, policy, last).score


def lost(report: HealthReport, policy: MaintenancePolicy, last: Any = RECENT) -> list[str]:
    return explained(report, policy, last).explanation()


def jobs(report: HealthReport, policy: MaintenancePolicy, last: Any = RECENT) -> list[str]:
    return [d.job for d in due_jobs(report, policy, last, NOW)]


def test_compact_table_needs_nothing_and_scores_100(
    tmp_path: Path, sql_catalog: SqlCatalog
) -> None:
    table = new_table(tmp_path)
    table.commit(add=[table.write_data(rows("a", *range(100)))])
    report = report_of(table, sql_catalog)
    policy = MaintenancePolicy()
    assert due_jobs(report, policy, RECENT, NOW) == []
    assert health_score(report, policy) == 100
    summary = health_summary(report)
    assert (summary["data_files"], summary["data_records"], summary["snapshot_count"]) == (
        1,
        100,
        1,
    )


def test_twelve_small_files_in_a_partition_trigger_bin_packing(
    tmp_path: Path, sql_catalog: SqlCatalog
) -> None:
    table = new_table(tmp_path)  # 512 MiB target: a dozen tiny files never add up to one
    table.commit(add=[table.write_data(rows("a", i)) for i in range(11)])
    table.commit(add=[table.write_data(rows("b", 100 + i)) for i in range(11)])
    policy = MaintenancePolicy()
    assert jobs(report_of(table, sql_catalog), policy) == []  # 11 per partition: below 12

    table.commit(add=[table.write_data(rows("b", 200))])
    due = due_jobs(report_of(table, sql_catalog), policy, RECENT, NOW)
    assert [d.job for d in due] == ["rewrite_data_files"]
    assert "category=b: 12 small files >= 12" in due[0].reason
    assert "category=a" not in due[0].reason
    # A lower threshold set per table applies at once.
    assert jobs(report_of(table, sql_catalog), MaintenancePolicy(minor_file_count=11)) == [
        "rewrite_data_files"
    ]


def test_small_files_adding_up_to_a_target_file_trigger_bin_packing(
    tmp_path: Path, sql_catalog: SqlCatalog
) -> None:
    table = new_table(tmp_path, target=SMALL_TARGET)
    first = table.write_data(rows("a", *range(200)))
    table.commit(add=[first])
    report = report_of(table, sql_catalog)
    assert report.totals.small_data.files == 1
    assert jobs(report, MaintenancePolicy()) == []  # one small file: nothing to merge

    size = first.file_size_in_bytes
    count = SMALL_TARGET // size + 1  # just enough files to fill one target file
    table.commit(
        add=[
            table.write_data(rows("a", *range(i * 1000, i * 1000 + 200))) for i in range(count - 1)
        ]
    )
    report = report_of(table, sql_catalog)
    assert report.partition("category=a").small_data.bytes >= SMALL_TARGET
    due = due_jobs(report, MaintenancePolicy(), RECENT, NOW)
    assert [d.job for d in due] == ["rewrite_data_files"]
    small = report.partition("category=a").small_data
    kb = f"{small.bytes / 1024:.1f} KB"
    assert f"{small.files} small files add up to {kb} >= the 19.5 KB target" in due[0].reason
    # Due by small files: all of their 25 points, said with the trigger.
    assert lost(report, MaintenancePolicy()) == [
        f"-25: {small.files} small files in category=a ({kb}, each below 14.6 KB); "
        "rewrite_data_files is due (at 12 in one partition, or when they add up to 19.5 KB)"
    ]


def test_position_deletes_above_ten_percent_trigger_major_compaction(
    tmp_path: Path, sql_catalog: SqlCatalog
) -> None:
    table = new_table(tmp_path)
    data = table.write_data(rows("a", *range(100)))
    table.commit(add=[data])
    table.commit(add=[table.write_position_deletes([(data.file_path, p) for p in range(10)])])
    policy = MaintenancePolicy()
    report = report_of(table, sql_catalog)
    assert jobs(report, policy) == []  # exactly 10%: not above
    # Nothing due, and the score says why it is not 100: the ratio is at its trigger (30 x
    # 0.10 / 0.10) and one delete file of 12 (15 x 1/12, rounded).
    assert health_score(report, policy) == 100 - 30 - 1
    assert lost(report, policy) == [
        "-30: deletes are 10.0% of the rows of category=a; rewrite_data_files becomes due over 10%",
        "-1: 1 delete file, at most 1 in one partition (category=a); rewrite_position_deletes "
        "becomes due at 12 in one partition",
    ]

    table.commit(add=[table.write_position_deletes([(data.file_path, 50)])])
    due = due_jobs(report_of(table, sql_catalog), policy, RECENT, NOW)
    assert [d.job for d in due] == ["rewrite_data_files"]
    assert "category=a: deletes are 11% of rows > 10%" in due[0].reason
    assert jobs(report_of(table, sql_catalog), MaintenancePolicy(major_delete_ratio=0.2)) == []


def test_many_delete_files_trigger_minor_compaction_and_equality_deletes_conversion(
    tmp_path: Path, sql_catalog: SqlCatalog
) -> None:
    table = new_table(tmp_path)
    data = table.write_data(rows("a", *range(1000)))
    table.commit(add=[data])
    for pos in range(11):
        table.commit(add=[table.write_position_deletes([(data.file_path, pos)])])
    policy = MaintenancePolicy()
    assert jobs(report_of(table, sql_catalog), policy) == []  # 11 delete files, 1.1% deleted

    table.commit(add=[table.write_equality_deletes(rows("a", 500), ["id"])])
    report = report_of(table, sql_catalog)
    due = due_jobs(report, policy, RECENT, NOW)
    assert [d.job for d in due] == ["convert_equality_deletes", "rewrite_position_deletes"]
    assert due[0].reason == "1 live equality delete file(s) (1 keys)"
    assert "category=a with 12" in due[1].reason
    assert lost(report, policy) == [
        "-15: 12 delete files in category=a; rewrite_position_deletes is due (at 12)",
        "-10: 1 live equality delete file (1 key every reader joins); "
        "convert_equality_deletes is due (whenever one is live)",
        # 12 deleted rows of 1,000: 30 x 0.012 / 0.1 = 3.6
        "-4: deletes are 1.2% of the rows of category=a; rewrite_data_files becomes due over 10%",
    ]
    assert health_score(report, policy) == 100 - 15 - 10 - 4


def test_dangling_deletes_trigger_delete_compaction(
    tmp_path: Path, sql_catalog: SqlCatalog
) -> None:
    table = new_table(tmp_path)
    old = table.write_data(rows("a", *range(100)))
    table.commit(add=[old])
    table.commit(add=[table.write_position_deletes([(old.file_path, 1)])])
    table.commit(add=[table.write_data(rows("a", *range(100)))], remove=[old])
    report = report_of(table, sql_catalog)
    assert report.totals.dangling_delete_files == 1
    due = due_jobs(report, MaintenancePolicy(), RECENT, NOW)
    assert [d.job for d in due] == ["rewrite_position_deletes"]
    assert "1 dangling delete file(s)" in due[0].reason


def test_dvs_count_as_deletes_but_not_as_files_and_legacy_files_of_v3_are_due(
    tmp_path: Path, sql_catalog: SqlCatalog
) -> None:
    """A data file has at most one DV, which delete compaction cannot merge: twelve of them
    in a partition must not make it due (it would be due forever). A position delete file
    on a v3 table is legacy: delete compaction turns it into a DV."""
    table = new_table(tmp_path, target=1000)  # no data file is small
    files = [table.write_data(rows("a", *range(n * 100, n * 100 + 100))) for n in range(13)]
    table.commit(add=files)
    table.commit(add=[table.write_position_deletes([(files[12].file_path, 1)])])
    report_of(table, sql_catalog)  # registers db.t
    iceberg = sql_catalog.load_table("db.t")
    iceberg.update_properties().set("format-version", "3").commit()
    location = f"{iceberg.metadata.location}/data/dvs.puffin"
    written = write_dvs(iceberg.io, location, {f.file_path: [0] for f in files[:12]})
    delta = iceberg.new_row_delta()
    for w, f in zip(written, files, strict=False):
        delta.add_deletes(
            DataFile(
                w.file_path, FileFormat.PUFFIN, f.partition, w.record_count,
                w.file_size_in_bytes, FileContent.POSITION_DELETES, spec_id=f.spec_id,
                referenced_data_file=f.file_path, content_offset=w.content_offset,
                content_size_in_bytes=w.content_size_in_bytes,
            )
        )  # fmt: skip
    delta.commit()

    policy = MaintenancePolicy()
    report = measure_health(sql_catalog.load_table("db.t"), policy)
    assert (report.totals.deletion_vectors.files, report.totals.position_deletes.files) == (12, 1)
    assert report.totals.delete_records == 13
    # A DV's bytes are its blob's, not those of the Puffin file the twelve share.
    assert report.totals.deletion_vectors.bytes == sum(w.content_size_in_bytes for w in written)
    due = due_jobs(report, policy, RECENT, NOW)
    assert [d.job for d in due] == ["rewrite_position_deletes"]
    assert due[0].reason == "1 position delete file(s) of a v3 table to turn into deletion vectors"
    summary = health_summary(report)
    assert (summary["deletion_vectors"], summary["deletion_vector_records"]) == (12, 12)


def test_expiry_and_orphan_removal_follow_their_cadence(
    tmp_path: Path, sql_catalog: SqlCatalog
) -> None:
    table = new_table(tmp_path)
    table.commit(add=[table.write_data(rows("a", 1))])
    table.commit(add=[table.write_data(rows("a", *range(100)))])
    report = report_of(table, sql_catalog)
    policy = MaintenancePolicy(max_snapshot_age=timedelta(0))
    assert jobs(report, policy, {}) == ["expire_snapshots", "remove_orphan_files"]
    assert jobs(report, policy, RECENT) == []
    day_ago = {"expire_snapshots": NOW - timedelta(days=1), "remove_orphan_files": NOW}
    assert jobs(report, policy, day_ago) == ["expire_snapshots"]
    week_ago = {"expire_snapshots": NOW, "remove_orphan_files": NOW - timedelta(days=7)}
    assert jobs(report, policy, week_ago) == ["remove_orphan_files"]
    # Default retention: 5 days; these snapshots are seconds old, nothing to expire yet.
    assert jobs(report, MaintenancePolicy(), {}) == ["remove_orphan_files"]
    # retain_last keeps both snapshots: nothing to expire either.
    retained = MaintenancePolicy(max_snapshot_age=timedelta(0), retain_last=2)
    assert jobs(report, retained, {}) == ["remove_orphan_files"]
    kb = f"{report.totals.small_data.bytes / 1024:.1f} KB"
    # Expired a moment ago: the old snapshots still cost their 5 points, waiting for the
    # cadence, and two small files of one partition come 1/11 of the way to 12 (25 / 11).
    assert lost(report, policy) == [
        "-5: 2 snapshots, the oldest older than 0s, beyond the last 1 kept; expire_snapshots "
        "waits for its cadence (last success 0s ago, every 1d)",
        f"-2: 2 small files in category=a ({kb}, each below 384.0 MB); rewrite_data_files "
        "becomes due at 12 in one partition, or when they add up to 512.0 MB",
    ]
    assert health_score(report, policy) == 100 - 5 - 2


def test_a_trash_past_its_window_makes_expiry_due_until_a_run_purges_it(
    tmp_path: Path, sql_catalog: SqlCatalog
) -> None:
    """Files orphan removal took four days ago sit in the trash a day past its 3d window:
    expiry is due for them, cadence or not, unless one of the two purging jobs has run since
    the window ended (it purged them; the summary the report carries predates that run)."""
    table = new_table(tmp_path)
    table.commit(add=[table.write_data(rows("a", 1))])
    sql_catalog.register_table("db.t", table.metadata_location)
    registered = sql_catalog.load_table("db.t")
    trash = Trash.of(registered)
    stray = f"{registered.metadata.location}/data/stray.parquet"
    registered.io.write_bytes(stray, b"s" * 2048)
    removed_ms = int((NOW - timedelta(days=4)).timestamp() * 1000)
    record = trash.new_record("remove_orphan_files", [(stray, ORPHAN, 2048)], now_ms=removed_ms)
    registered.io.move_many(trash.begin(record))
    trash.write_summary(removed_ms)
    report = measure_health(registered, MaintenancePolicy())
    assert report.trash is not None and (report.trash.files, report.trash.bytes) == (1, 2048)
    assert health_summary(report)["trash_oldest_removed_ms"] == removed_ms

    policy = MaintenancePolicy()
    assert jobs(report, policy, RECENT) == []  # both ran just now: purged since
    before = {j: NOW - timedelta(days=2) for j in RECENT}  # ran before the window ended
    assert jobs(report, policy, before) == ["expire_snapshots"]
    assert lost(report, policy, before) == [
        "-5: 1 file (2.0 KB) in the trash past its 3d window for 1d; expire_snapshots is due "
        "(its next run purges the trash)"
    ]
    # Retention 0s: the window ended when the files went; runs two days ago purged them, and
    # with no run since, they are overdue for 4 days.
    report.trash_retention_ms = 0
    assert jobs(report, policy, before) == []
    assert "past its 0s window for 4d" in lost(report, policy, {})[0]


def test_due_jobs_come_in_job_order(tmp_path: Path, sql_catalog: SqlCatalog) -> None:
    table = new_table(tmp_path, target=SMALL_TARGET)
    data = [table.write_data(rows("a", *range(i * 100, i * 100 + 100))) for i in range(12)]
    table.commit(add=data)
    table.commit(add=[table.write_position_deletes([(d.file_path, 0)]) for d in data])
    table.commit(add=[table.write_equality_deletes(rows("a", 5), ["id"])])
    table.commit(add=[table.write_data(rows("b", 1))])  # a second data manifest: over 1
    policy = MaintenancePolicy(max_snapshot_age=timedelta(0), max_data_manifests=1)
    report = report_of(table, sql_catalog)
    assert jobs(report, policy, {}) == list(JOB_ORDER)
    assert 0 <= health_score(report, policy) < 50


def test_empty_table_needs_nothing(tmp_path: Path, sql_catalog: SqlCatalog) -> None:
    report = report_of(new_table(tmp_path), sql_catalog)
    assert jobs(report, MaintenancePolicy(max_snapshot_age=timedelta(0)), {}) == []
    assert health_score(report, MaintenancePolicy()) == 100


def test_policy_from_mapping() -> None:
    policy = MaintenancePolicy.from_mapping(
        {
            "minor-file-count": 8,
            "major_delete_ratio": 0.25,
            "max_snapshot_age": "1d12h",
            "orphan_older_than": "2h",
            "target_file_size_bytes": "128MB",
            "max-data-manifests": 250,
        }
    )
    assert policy.minor_file_count == 8
    assert policy.max_data_manifests == 250
    assert policy.major_delete_ratio == 0.25
    assert policy.max_snapshot_age == timedelta(days=1, hours=12)
    assert policy.orphan_older_than == timedelta(hours=2)
    assert policy.target_file_size_bytes == 134217728
    assert policy.expire_interval == timedelta(days=1)  # untouched default
    shown = policy.to_dict()
    assert (shown["max_snapshot_age"], shown["orphan_interval"]) == ("1d12h", "7d")  # readable
    assert MaintenancePolicy.from_mapping(shown) == policy
    assert MaintenancePolicy.from_mapping(None) == MaintenancePolicy()


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"minor_file_count": 12, "small_files": 3},
            r"unknown maintenance policy keys \['small_files'\]",
        ),
        ({"minor_file_count": "many"}, "minor_file_count: expected a number"),
        ({"minor_file_count": 2.5}, "minor_file_count: expected a whole number"),
        ({"minor_file_count": 0}, "minor_file_count=0"),
        ({"max_data_manifests": 0}, "max_data_manifests=0"),
        ({"max_data_manifests": "lots"}, "max_data_manifests: expected a number"),
        ({"major_delete_ratio": True}, "major_delete_ratio: expected a number"),
        ({"min_target_size_ratio": 1.5}, "min_target_size_ratio=1.5"),
        ({"expire_interval": "daily"}, "expire_interval: expected a duration such as 7d"),
        ({"max_snapshot_age": "-5d"}, "max_snapshot_age: expected a duration such as 7d"),
    ],
)
def test_policy_from_mapping_refuses_bad_values(values: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MaintenancePolicy.from_mapping(values)


def test_parse_duration() -> None:
    assert parse_duration("7d") == timedelta(days=7)
    assert parse_duration("90m") == timedelta(minutes=90)
    assert parse_duration("1w 2h") == timedelta(days=7, hours=2)
    assert parse_duration("250ms") == timedelta(milliseconds=250)
    with pytest.raises(ValueError, match="expected a duration such as 7d"):
        parse_duration(30)  # seconds or milliseconds? one grammar everywhere: refused
    with pytest.raises(ValueError, match=r"expected a duration such as 7d.*got '7'"):
        parse_duration("7")
