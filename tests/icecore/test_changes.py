"""CatalogWatch on real SQLite and PostgreSQL catalogs: PyIceberg's commits (another engine)
are reported, oldest first, once each, across a restart from a JSON cursor; icefloe's own
job commits (the real rewrite_manifests job, in the driver) are reported as own and set
nothing off; created, dropped and renamed tables; a metadata file gone; one query per poll.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog as PyIcebergCatalog
from pyiceberg.schema import Schema
from pyiceberg.table import Table as PyTable
from pyiceberg.types import LongType, NestedField, StringType
from sqlalchemy import event

from icecore.actions.batch_ids import guard_batch
from icecore.catalog.sql import SqlCatalog
from icecore.changes import CatalogWatch, DueThresholds, TableChange, due_reasons
from icecore.errors import IcecoreError
from icecore.spec.schema import Schema as IcecoreSchema
from icecore.spec.types import LongType as IcecoreLong
from icecore.spec.types import NestedField as IcecoreField
from spark_jobs.rewrite_manifests import run as rewrite_manifests
from spark_jobs.specs.jobs import RewriteManifestsOptions
from tests.support.catalogs import append_rows

ARROW = pa.schema([("id", pa.int64()), ("part", pa.string())])
THRESHOLDS = DueThresholds(small_file_bytes=32 << 20)


@pytest.fixture
def engine(catalog: SqlCatalog, tmp_path: Path) -> Iterator[PyIcebergCatalog]:
    """PyIceberg's SqlCatalog on the same database and catalog name: another engine."""
    other = PyIcebergCatalog(
        catalog.name, uri=catalog.uri, warehouse=f"file://{tmp_path / 'warehouse'}"
    )
    other.create_namespace("db")
    yield other
    other.engine.dispose()


def create(engine: PyIcebergCatalog, name: str) -> PyTable:
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "part", StringType()))
    return engine.create_table(f"db.{name}", schema)


def append(table: PyTable, *ids: int) -> int:
    """One PyIceberg commit of `ids`; its snapshot id."""
    table.append(pa.Table.from_pylist([{"id": i, "part": "a"} for i in ids], ARROW))
    snapshot = table.current_snapshot()
    assert snapshot is not None
    return snapshot.snapshot_id


def by_name(changes: list[TableChange]) -> dict[str, TableChange]:
    names = [c.name for c in changes]
    assert len(names) == len(set(names)), names
    return {c.name: c for c in changes}


def statements(catalog: SqlCatalog) -> list[str]:
    """Every SQL statement the catalog sends from now on (SQLAlchemy's own event)."""
    sent: list[str] = []
    event.listen(catalog.engine, "before_cursor_execute", lambda *a: sent.append(a[2]))
    return sent


def test_other_engines_commits_once_each_and_own_commits_set_nothing_off(
    catalog: SqlCatalog, engine: PyIcebergCatalog
) -> None:
    events = create(engine, "events")
    append(events, 1)
    quiet = create(engine, "quiet")
    append(quiet, 1)
    watch = CatalogWatch(catalog)
    assert watch.poll() == [], "the first poll is the baseline"
    first, second = append(events, 2), append(events, 3)
    sent = statements(catalog)

    changes = watch.poll()

    assert len([s for s in sent if "iceberg_tables" in s]) == 1, sent
    assert [c.name for c in changes] == ["db.events"]
    change = changes[0]
    assert [c.snapshot_id for c in change.commits] == [first, second]
    assert change.foreign_commits == change.commits
    assert all(c.operation == "append" and c.added_data_files == 1 for c in change.commits)
    assert change.metadata_location == events.refresh().metadata_location
    assert not (change.created or change.dropped)
    assert due_reasons(change, THRESHOLDS) == ("2 small data file(s) added",)
    assert due_reasons(change, DueThresholds(small_file_bytes=10)) == ()
    assert watch.poll() == [], "nothing twice"

    result = rewrite_manifests(
        None, catalog, RewriteManifestsOptions("db.events", rewrite_all=True)
    )
    assert result.status == "committed"
    (own,) = watch.poll()
    assert watch.last_poll is not None
    assert (watch.last_poll.tables, watch.last_poll.metadata_reads) == (2, 1), "the new file only"
    assert [(c.snapshot_id, c.job, c.own) for c in own.commits] == [
        (result.snapshot_id, "rewrite_manifests", True)
    ]
    assert own.foreign_commits == ()
    assert due_reasons(own, THRESHOLDS) == ()
    json.dumps(own.to_json())

    manifests = DueThresholds(small_file_bytes=10, min_commits=3)
    assert change.commits_since_own == 3, "its first commit, then the two"
    assert due_reasons(change, manifests) == (
        "3 commit(s) since the last maintenance, each adding manifests",
    )
    assert own.commits_since_own == 0 and due_reasons(own, manifests) == ()
    append(events, 4)
    (after,) = watch.poll()
    assert after.commits_since_own == 1 and due_reasons(after, manifests) == ()


def test_a_watch_restarted_from_its_json_cursor_misses_nothing_and_repeats_nothing(
    catalog: SqlCatalog, engine: PyIcebergCatalog
) -> None:
    events = create(engine, "events")
    append(events, 1)
    watch = CatalogWatch(catalog)
    watch.poll()
    before = append(events, 2)
    assert [c.snapshot_id for c in watch.poll()[0].commits] == [before]
    saved = json.dumps(watch.cursor)
    after = [append(events, 3), append(events, 4)]

    for _ in range(2):  # the same saved cursor, twice: a restart that died before saving
        restarted = CatalogWatch(catalog, json.loads(saved))
        (change,) = restarted.poll()
        assert [c.snapshot_id for c in change.commits] == after
    assert restarted.poll() == []
    assert CatalogWatch(catalog, json.loads(json.dumps(restarted.cursor))).poll() == []


def test_created_dropped_and_renamed_between_polls(
    catalog: SqlCatalog, engine: PyIcebergCatalog
) -> None:
    doomed = create(engine, "doomed")
    append(doomed, 1)
    moving = create(engine, "moving")
    append(moving, 1)
    still = create(engine, "still")
    append(still, 1)
    watch = CatalogWatch(catalog)
    watch.poll()
    engine.drop_table("db.doomed")
    fresh = create(engine, "fresh")
    created = [append(fresh, 1), append(fresh, 2)]
    engine.rename_table("db.moving", "db.moved")
    engine.rename_table("db.still", "db.stays")
    since_rename = append(engine.load_table("db.moved"), 2)

    changes = by_name(watch.poll())

    assert set(changes) == {
        "db.doomed",
        "db.fresh",
        "db.moved",
        "db.moving",
        "db.still",
        "db.stays",
    }
    assert changes["db.doomed"].dropped and changes["db.doomed"].commits == ()
    assert changes["db.fresh"].created
    assert [c.snapshot_id for c in changes["db.fresh"].commits] == created
    assert changes["db.moving"].dropped and changes["db.still"].dropped
    moved, stays = changes["db.moved"], changes["db.stays"]
    assert moved.created and moved.renamed_from == ("db", "moving")
    assert [c.snapshot_id for c in moved.commits] == [since_rename], "not its history again"
    assert stays.created and stays.renamed_from == ("db", "still") and stays.commits == ()
    assert watch.poll() == []
    assert set(watch.cursor) == {"db.fresh", "db.moved", "db.stays"}


def test_a_v1_table_whose_snapshots_are_all_numbered_0_is_followed_by_time(
    catalog: SqlCatalog, engine: PyIcebergCatalog
) -> None:
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "part", StringType()))
    events = engine.create_table("db.v1", schema, properties={"format-version": "1"})
    append(events, 1)
    watch = CatalogWatch(catalog)
    watch.poll()
    new = [append(events, 2), append(events, 3)]

    (change,) = watch.poll()
    assert [c.snapshot_id for c in change.commits] == new
    assert {c.sequence_number for c in change.commits} == {0}
    later = append(events, 4)
    (change,) = CatalogWatch(catalog, json.loads(json.dumps(watch.cursor))).poll()
    assert [c.snapshot_id for c in change.commits] == [later]


def test_a_table_recreated_under_its_name_reports_the_new_tables_commits(
    catalog: SqlCatalog, engine: PyIcebergCatalog
) -> None:
    old = create(engine, "events")
    append(old, 1)
    append(old, 2)
    watch = CatalogWatch(catalog)
    watch.poll()
    engine.drop_table("db.events")
    new = create(engine, "events")
    first = append(new, 9)

    (change,) = watch.poll()
    assert change.created and not change.dropped
    assert [c.snapshot_id for c in change.commits] == [first]


def test_a_metadata_file_that_cannot_be_read_skips_the_table_for_one_poll(
    catalog: SqlCatalog, engine: PyIcebergCatalog, caplog: pytest.LogCaptureFixture
) -> None:
    broken, fine = create(engine, "broken"), create(engine, "fine")
    append(broken, 1)
    watch = CatalogWatch(catalog)
    watch.poll()
    lost = append(broken, 2)
    moved = append(fine, 1)
    hidden = Path(broken.metadata_location.removeprefix("file://"))
    kept = hidden.read_bytes()
    hidden.unlink()

    with caplog.at_level(logging.WARNING, logger="icecore.changes"):
        changes = watch.poll()

    assert [c.name for c in changes] == ["db.fine"]
    assert [c.snapshot_id for c in changes[0].commits] == [moved]
    assert "db.broken" in caplog.text and "skipped this poll" in caplog.text
    hidden.write_bytes(kept)
    later = append(broken, 3)
    (change,) = watch.poll()
    assert [c.snapshot_id for c in change.commits] == [lost, later]


def test_a_baseline_whose_metadata_file_is_gone_learns_from_the_metadata_log(
    catalog: SqlCatalog, engine: PyIcebergCatalog
) -> None:
    """The baseline keeps locations only; the file it named is read when the table moves,
    and if it is gone, the new metadata's log dates it."""
    events = create(engine, "events")
    append(events, 1)
    append(events, 2)
    watch = CatalogWatch(catalog)
    watch.poll()
    baseline = Path(events.metadata_location.removeprefix("file://"))
    new = append(events, 3)
    baseline.unlink()

    (change,) = watch.poll()
    assert [c.snapshot_id for c in change.commits] == [new]


def test_icecores_own_commits_are_seen_and_the_ingests_batch_is_named(
    catalog: SqlCatalog, engine: PyIcebergCatalog
) -> None:
    """A commit through icecore itself without `icefloe.job` (e.g. a user's script) is not
    own: only the job's signature makes a commit own. Our ingest's signature (the batch id,
    as `guard_batch` records it) is reported for the caller to recognise."""
    schema = IcecoreSchema((IcecoreField(1, "id", IcecoreLong()),))
    table = catalog.create_table("db.events", schema)
    watch = CatalogWatch(catalog, {})
    (created,) = watch.poll()
    assert created.created and created.commits == ()
    append_rows(table, [{"id": 1}])
    (change,) = watch.poll()
    assert [(c.own, c.batch_id) for c in change.commits] == [(False, None)]

    table = table.refresh()
    (first,) = [t.file for t in table.scan().plan_files()]
    copy = first.file_path.replace(".parquet", "-batch-7.parquet")
    shutil.copyfile(first.file_path, copy)
    appended = table.new_fast_append().append_file(dataclasses.replace(first, file_path=copy))
    guard_batch(appended, "batch-7").commit()
    (ingest,) = watch.poll()
    assert [(c.own, c.batch_id) for c in ingest.commits] == [(False, "batch-7")]

    # Another engine's compaction (a replace, unsigned): files rearranged, nothing due.
    table = table.refresh()
    old = next(t.file for t in table.scan().plan_files())
    rewritten = old.file_path.replace(".parquet", "-rewritten.parquet")
    shutil.copyfile(old.file_path, rewritten)
    rewrite = table.new_rewrite().delete_file(old)
    rewrite.add_file(dataclasses.replace(old, file_path=rewritten)).commit()
    (compacted,) = watch.poll()
    assert [(c.operation, c.own) for c in compacted.commits] == [("replace", False)]
    assert due_reasons(compacted, THRESHOLDS) == ()
    assert due_reasons(ingest, THRESHOLDS) == ("1 small data file(s) added",)


def test_table_versions_of_a_namespace_and_below(
    catalog: SqlCatalog, engine: PyIcebergCatalog
) -> None:
    for namespace in ("db.sub", "db_x", "dbx"):
        engine.create_namespace(namespace)
    for name in ("db.a", "db.sub.b", "db_x.c", "dbx.d"):
        engine.create_table(name, Schema(NestedField(1, "id", LongType())))
    sent = statements(catalog)

    assert set(catalog.table_versions("db")) == {("db", "a"), ("db", "sub", "b")}
    assert set(catalog.table_versions()) == {
        ("db", "a"), ("db", "sub", "b"), ("db_x", "c"), ("dbx", "d")
    }  # fmt: skip
    assert catalog.table_versions("nowhere") == {}
    assert len(sent) == 3
    watch = CatalogWatch(catalog, {}, namespace="db")
    assert {c.name for c in watch.poll()} == {"db.a", "db.sub.b"}


def test_a_malformed_cursor_is_refused_naming_the_entry(catalog: SqlCatalog) -> None:
    with pytest.raises(IcecoreError, match=r"db\.t"):
        CatalogWatch(catalog, {"db.t": "seven 1 u file:///m.json"})
    with pytest.raises(IcecoreError, match=r"db\.t"):
        CatalogWatch(catalog, {"db.t": "file:///m.json"})
