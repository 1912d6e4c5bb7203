"""Snapshots, summaries (Java's SnapshotSummary arithmetic), refs and log entries."""

import pytest

from icecore.errors import ValidationError
from icecore.spec.refs import MAIN_BRANCH, SnapshotRef, SnapshotRefType
from icecore.spec.snapshots import (
    MetadataLogEntry,
    Operation,
    Snapshot,
    SnapshotLogEntry,
    Summary,
    SummaryCounts,
    build_summary,
)

DATA, POSITION_DELETES, EQUALITY_DELETES = 0, 1, 2

# The spec's Appendix C example snapshot, with the v2 fields added.
SPEC_SNAPSHOT = {
    "sequence-number": 4,
    "snapshot-id": 3051729675574597004,
    "parent-snapshot-id": 3051729675574597003,
    "timestamp-ms": 1515100955770,
    "summary": {"operation": "append", "added-data-files": "4"},
    "manifest-list": "s3://b/wh/.../s1.avro",
    "schema-id": 0,
}


def test_snapshot_json_round_trip() -> None:
    snapshot = Snapshot.from_json(SPEC_SNAPSHOT)
    assert snapshot == Snapshot(
        snapshot_id=3051729675574597004,
        timestamp_ms=1515100955770,
        manifest_list="s3://b/wh/.../s1.avro",
        parent_snapshot_id=3051729675574597003,
        sequence_number=4,
        summary=Summary(Operation.APPEND, {"added-data-files": "4"}),
        schema_id=0,
    )
    assert snapshot.operation is Operation.APPEND
    assert snapshot.to_json() == SPEC_SNAPSHOT
    assert list(snapshot.to_json()) == list(SPEC_SNAPSHOT)


def test_v1_snapshot_defaults_and_inline_manifests() -> None:
    obj = {
        "snapshot-id": 1,
        "timestamp-ms": 10,
        "manifests": ["file:/t/m1.avro", "file:/t/m2.avro"],
    }
    snapshot = Snapshot.from_json(obj)
    assert snapshot.sequence_number == 0
    assert snapshot.manifest_list is None
    assert snapshot.manifests == ("file:/t/m1.avro", "file:/t/m2.avro")
    assert snapshot.summary is None
    assert snapshot.operation is None
    assert snapshot.parent_snapshot_id is None
    assert snapshot.schema_id is None
    # Written back as v2 needs a sequence number; the inline manifests stay, as in Java.
    assert snapshot.to_json() == {
        "sequence-number": 0,
        "snapshot-id": 1,
        "timestamp-ms": 10,
        "manifests": ["file:/t/m1.avro", "file:/t/m2.avro"],
    }


def test_manifest_list_wins_over_inline_manifests() -> None:
    obj = {**SPEC_SNAPSHOT, "manifests": ["ignored.avro"]}
    snapshot = Snapshot.from_json(obj)
    assert snapshot.manifests is None
    assert "manifests" not in snapshot.to_json()


def test_snapshot_without_any_manifests_is_refused() -> None:
    with pytest.raises(ValidationError, match="snapshot 7: has neither 'manifest-list'"):
        Snapshot.from_json({"snapshot-id": 7, "timestamp-ms": 1})
    with pytest.raises(ValidationError, match="exactly one of manifest-list and manifests"):
        Snapshot(1, 1, manifest_list="a", manifests=("b",))


@pytest.mark.parametrize(
    ("obj", "problem"),
    [
        ({"timestamp-ms": 1, "manifest-list": "x"}, "'snapshot-id' is missing"),
        ({"snapshot-id": "1", "timestamp-ms": 1, "manifest-list": "x"}, "must be an integer"),
        ({"snapshot-id": 1, "manifest-list": "x"}, "'timestamp-ms' is missing"),
        ({"snapshot-id": 1, "timestamp-ms": True, "manifest-list": "x"}, "must be an integer"),
        (
            {"snapshot-id": 1, "timestamp-ms": 1, "manifest-list": "x", "sequence-number": -1},
            "negative sequence number",
        ),
        ({"snapshot-id": 1, "timestamp-ms": 1, "manifests": "x"}, "must be a JSON array"),
    ],
)
def test_malformed_snapshots(obj: dict, problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        Snapshot.from_json(obj)


def test_summary_json_is_flat() -> None:
    summary = Summary(Operation.DELETE, {"deleted-records": "5"})
    assert summary.to_json() == {"operation": "delete", "deleted-records": "5"}
    assert Summary.from_json(summary.to_json()) == summary
    assert summary.get("deleted-records") == "5"
    assert summary.get("absent") is None


def test_summary_reading_follows_java() -> None:
    # Java: a summary without an operation is read as an overwrite; an empty one as none.
    assert Summary.from_json({"x": "1"}) == Summary(Operation.OVERWRITE, {"x": "1"})
    snapshot = Snapshot.from_json({**SPEC_SNAPSHOT, "summary": {}})
    assert snapshot.summary is None
    with pytest.raises(ValidationError, match="unknown snapshot operation 'merge'"):
        Summary.from_json({"operation": "merge"})
    with pytest.raises(ValidationError, match="must be a string"):
        Summary.from_json({"operation": "append", "added-records": 5})
    with pytest.raises(ValidationError, match="must not repeat 'operation'"):
        Summary(Operation.APPEND, {"operation": "append"})


def test_first_append_starts_totals_at_zero() -> None:
    counts = SummaryCounts()
    counts.added_file(DATA, record_count=3, file_size_in_bytes=1268)
    summary = build_summary(Operation.APPEND, counts, None, changed_partition_count=1)
    # Exactly what PyIceberg 0.12 and Java write for this commit.
    assert summary == Summary(
        Operation.APPEND,
        {
            "added-data-files": "1",
            "added-records": "3",
            "added-files-size": "1268",
            "changed-partition-count": "1",
            "total-records": "3",
            "total-files-size": "1268",
            "total-data-files": "1",
            "total-delete-files": "0",
            "total-position-deletes": "0",
            "total-equality-deletes": "0",
        },
    )


def _snapshot(summary: Summary | None) -> Snapshot:
    return Snapshot(1, 1, manifest_list="m", summary=summary)


def test_totals_carry_on_from_the_previous_snapshot() -> None:
    previous = _snapshot(
        Summary(
            Operation.APPEND,
            {
                "total-records": "100",
                "total-files-size": "5000",
                "total-data-files": "4",
                "total-delete-files": "1",
                "total-position-deletes": "7",
                "total-equality-deletes": "0",
            },
        )
    )
    counts = SummaryCounts()
    counts.added_file(DATA, 10, 300)
    counts.removed_file(DATA, 40, 2000)
    counts.removed_file(POSITION_DELETES, 7, 100)
    counts.added_file(EQUALITY_DELETES, 2, 50)
    summary = build_summary(
        Operation.OVERWRITE, counts, previous, properties={"spark.app.id": "app-1"}
    )
    assert summary.properties == {
        "spark.app.id": "app-1",
        "added-data-files": "1",
        "deleted-data-files": "1",
        "added-equality-delete-files": "1",
        "removed-position-delete-files": "1",
        "added-delete-files": "1",
        "removed-delete-files": "1",
        "added-records": "10",
        "deleted-records": "40",
        "added-files-size": "350",
        "removed-files-size": "2100",
        "removed-position-deletes": "7",
        "added-equality-deletes": "2",
        "total-records": "70",
        "total-files-size": "3250",
        "total-data-files": "4",
        "total-delete-files": "1",
        "total-position-deletes": "0",
        "total-equality-deletes": "2",
    }
    # Java's order: own properties, then counters, then totals.
    assert list(summary.properties)[:2] == ["spark.app.id", "added-data-files"]
    assert list(summary.properties)[-6:] == [
        "total-records",
        "total-files-size",
        "total-data-files",
        "total-delete-files",
        "total-position-deletes",
        "total-equality-deletes",
    ]


def test_totals_are_dropped_rather_than_guessed() -> None:
    counts = SummaryCounts()
    counts.added_file(DATA, 5, 10)
    counts.removed_file(DATA, 50, 10)
    previous = _snapshot(
        Summary(
            Operation.APPEND,
            {"total-records": "20", "total-files-size": "x1", "total-data-files": " 3"},
        )
    )
    summary = build_summary(Operation.OVERWRITE, counts, previous)
    # 20 + 5 - 50 < 0: dropped. "x1" and " 3" are not Java longs: dropped. Absent ones: absent.
    assert not any(key.startswith("total-") for key in summary.properties)
    # A previous snapshot without any summary gives no totals either (Java: empty summary).
    without_summary = build_summary(Operation.APPEND, counts, _snapshot(None))
    assert not any(key.startswith("total-") for key in without_summary.properties)


def test_own_properties_cannot_shadow_computed_ones() -> None:
    counts = SummaryCounts()
    counts.added_file(DATA, 1, 1)
    for clash in ("added-records", "total-records", "operation"):
        with pytest.raises(ValidationError, match="collide"):
            build_summary(Operation.APPEND, counts, None, properties={clash: "9"})


def test_unknown_content_is_refused() -> None:
    with pytest.raises(ValidationError, match="unknown file content 3"):
        SummaryCounts().added_file(3, 1, 1)


def test_refs_json_and_rules() -> None:
    branch = SnapshotRef.from_json(
        {
            "snapshot-id": 9,
            "type": "branch",
            "min-snapshots-to-keep": 2,
            "max-snapshot-age-ms": 1000,
            "max-ref-age-ms": 5000,
        }
    )
    assert branch == SnapshotRef(9, SnapshotRefType.BRANCH, 2, 1000, 5000)
    assert branch.is_branch
    assert branch.to_json() == {
        "snapshot-id": 9,
        "type": "branch",
        "min-snapshots-to-keep": 2,
        "max-snapshot-age-ms": 1000,
        "max-ref-age-ms": 5000,
    }
    tag = SnapshotRef.from_json({"snapshot-id": 123456789000, "type": "tag", "max-ref-age-ms": 10})
    assert tag.to_json() == {"snapshot-id": 123456789000, "type": "tag", "max-ref-age-ms": 10}
    assert not tag.is_branch
    assert SnapshotRef(1, SnapshotRefType.BRANCH).to_json() == {"snapshot-id": 1, "type": "branch"}
    assert MAIN_BRANCH == "main"


@pytest.mark.parametrize(
    ("obj", "problem"),
    [
        ({"snapshot-id": 1, "type": "tag", "min-snapshots-to-keep": 1}, "tag cannot set min-"),
        ({"snapshot-id": 1, "type": "tag", "max-snapshot-age-ms": 1}, "tag cannot set max-snap"),
        ({"snapshot-id": 1, "type": "branch", "min-snapshots-to-keep": 0}, "greater than 0"),
        ({"snapshot-id": 1, "type": "branch", "max-ref-age-ms": -5}, "greater than 0"),
        ({"snapshot-id": 1, "type": "label"}, "'branch' or 'tag', got 'label'"),
        ({"type": "tag"}, "'snapshot-id' is missing"),
        ({"snapshot-id": 1}, "'type' is missing"),
        ([], "must be a JSON object"),
    ],
)
def test_bad_refs(obj: object, problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        SnapshotRef.from_json(obj)


def test_log_entries_json() -> None:
    entry = SnapshotLogEntry.from_json({"timestamp-ms": 1515100955770, "snapshot-id": 42})
    assert entry == SnapshotLogEntry(1515100955770, 42)
    assert entry.to_json() == {"timestamp-ms": 1515100955770, "snapshot-id": 42}
    meta = MetadataLogEntry.from_json(
        {"metadata-file": "s3://bucket/.../v1.json", "timestamp-ms": 1515100}
    )
    assert meta == MetadataLogEntry(1515100, "s3://bucket/.../v1.json")
    assert meta.to_json() == {"timestamp-ms": 1515100, "metadata-file": "s3://bucket/.../v1.json"}
    with pytest.raises(ValidationError, match="'metadata-file' is missing"):
        MetadataLogEntry.from_json({"timestamp-ms": 1})
