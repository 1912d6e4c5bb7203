"""Scan planning end to end: real tables on disk, planned by `TableScan`, read back naively.

The worked example is the spec's row-level delete example ("Scan Planning"): three
snapshots mixing an equality delete and a position delete, where getting one sequence number
comparison wrong (< for <=, or forgetting that an equality delete never touches data of its
own or a later sequence number) changes the rows a reader returns.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import random
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from icecore.errors import ManifestError, NotFoundError
from icecore.expressions import (
    AlwaysTrue,
    And,
    BooleanExpression,
    Not,
    Or,
    equal,
    greater_than,
    greater_than_or_equal,
    is_in,
    is_null,
    less_than,
    less_than_or_equal,
    not_equal,
    not_in,
    not_null,
)
from icecore.scan import TableScan, snapshot_manifests
from icecore.spec.manifest import EntryStatus, read_manifest
from icecore.spec.manifest_list import ManifestContent, read_manifest_list
from icecore.spec.metadata import read_table_metadata
from icecore.spec.partitioning import PartitionSpec
from icecore.spec.refs import SnapshotRefType
from icecore.spec.transforms import BucketTransform, DayTransform
from icecore.spec.types import LongType, TimestamptzType
from tests.support.reader import scan_rows
from tests.support.samples import (
    EXAMPLE_PLANS,
    EXAMPLE_ROWS,
    EXAMPLE_SCHEMA,
    PSCHEMA,
    WorkedExample,
    spec_of,
    worked_example,
)
from tests.support.tables import LocalTable


def name(path: str) -> str:
    return Path(path).stem


def plan(table: LocalTable, **options: Any) -> dict[str, list[str]]:
    """Data file name -> names of the delete files planned with it."""
    tasks = TableScan(table.io, table.metadata, **options).plan_files()
    return {name(t.file.file_path): sorted(name(d.file_path) for d in t.deletes) for t in tasks}


def rows(table: LocalTable, *columns: str, **options: Any) -> set[tuple[Any, ...]]:
    columns = columns or ("id", "data")
    found = [tuple(r[c] for c in columns) for r in scan_rows(table.io, table.metadata, **options)]
    assert len(found) == len(set(found)), "the test data has no duplicate rows"
    return set(found)


@pytest.fixture
def example(tmp_path: Path) -> WorkedExample:
    return worked_example(tmp_path / "t")


def test_worked_example_sequence_numbers(example: WorkedExample) -> None:
    assert [s.sequence_number for s in example.snapshots] == [1, 2, 3]
    tasks = TableScan(example.table.io, example.table.metadata).plan_files()
    assert {name(t.file.file_path): t.data_sequence_number for t in tasks} == {
        "a": 1,
        "c": 2,
        "e": 3,
    }
    d = example.files["d"]
    c_path = example.files["c"].file_path.encode()
    assert d.lower_bounds[2147483546] == d.upper_bounds[2147483546] == c_path


@pytest.mark.parametrize("index", [0, 1, 2])
def test_worked_example_deletes_attach_by_sequence_number(
    example: WorkedExample, index: int
) -> None:
    snapshot_id = example.snapshots[index].snapshot_id
    assert plan(example.table, snapshot_id=snapshot_id) == EXAMPLE_PLANS[index]
    assert rows(example.table, snapshot_id=snapshot_id) == EXAMPLE_ROWS[index]


def test_current_snapshot_and_main_are_the_last_commit(example: WorkedExample) -> None:
    assert plan(example.table) == plan(example.table, ref="main") == EXAMPLE_PLANS[2]
    assert rows(example.table) == EXAMPLE_ROWS[2]


def test_position_delete_without_path_bounds_applies_to_the_whole_partition(
    example: WorkedExample,
) -> None:
    """Without bounds a position delete may name any file of its partition, so it is planned
    with every data file of sequence number <= its own, including its own snapshot's."""
    table = example.table
    d = example.files["d"]
    unbounded = table.write_position_deletes([(example.files["c"].file_path, 1)], name="d2")
    unbounded = dataclasses.replace(unbounded, lower_bounds=None, upper_bounds=None)
    f = table.write_data([{"id": 5, "data": "Z"}], name="f")
    table.commit(add=[unbounded, f])
    assert plan(table) == {"a": ["b", "d2"], "c": ["d", "d2"], "e": ["d2"], "f": ["d2"]}
    assert d.file_path != unbounded.file_path
    assert rows(table) == {(1, "X"), (4, "Y"), (5, "Z")}


def test_file_path_bounds_narrow_a_partition_scoped_position_delete(tmp_path: Path) -> None:
    table = LocalTable.create(tmp_path / "t", EXAMPLE_SCHEMA)
    files = {
        n: table.write_data([{"id": i, "data": n}], name=n)
        for i, n in enumerate(["a0", "m1", "m2", "m3", "z9"])
    }
    table.commit(add=files.values())
    spanning = table.write_position_deletes(
        [(files["m1"].file_path, 0), (files["m3"].file_path, 0)], name="pd"
    )
    table.commit(add=[spanning])
    # Bounds [m1, m3] cover m2 too, which is harmless: the reader finds no row of m2 in it.
    assert plan(table) == {"a0": [], "m1": ["pd"], "m2": ["pd"], "m3": ["pd"], "z9": []}
    assert rows(table) == {(0, "a0"), (2, "m2"), (4, "z9")}


def test_time_travel_by_snapshot_id_and_by_tag(example: WorkedExample) -> None:
    table = example.table
    s1, s2, _ = example.snapshots
    table.set_ref("first", s1.snapshot_id)
    table.set_ref("second", s2.snapshot_id)
    assert table.metadata.refs["first"].type is SnapshotRefType.TAG
    assert plan(table, ref="first") == plan(table, snapshot_id=s1.snapshot_id) == EXAMPLE_PLANS[0]
    assert rows(table, ref="second") == EXAMPLE_ROWS[1]
    with pytest.raises(NotFoundError, match="'nope'"):
        TableScan(table.io, table.metadata, ref="nope")
    with pytest.raises(NotFoundError, match="snapshot 42"):
        TableScan(table.io, table.metadata, snapshot_id=42)


def test_branch_plans_its_own_history(example: WorkedExample) -> None:
    table = example.table
    s2, s3 = example.snapshots[1], example.snapshots[2]
    table.set_ref("dev", s2.snapshot_id, SnapshotRefType.BRANCH)
    a = example.files["a"]
    on_dev = table.write_position_deletes([(a.file_path, 0)], name="dev_pd")
    f = table.write_data([{"id": 9, "data": "dev"}], name="f")
    dev = table.commit(add=[on_dev, f], branch="dev")

    assert dev.parent_snapshot_id == s2.snapshot_id
    assert dev.sequence_number == 4  # sequence numbers are table-wide, not per branch
    assert table.metadata.current_snapshot_id == s3.snapshot_id
    assert plan(table, ref="dev") == {"a": ["b", "dev_pd"], "c": [], "f": []}
    assert rows(table, ref="dev") == {(3, "Q"), (2, "B"), (9, "dev")}
    assert plan(table) == EXAMPLE_PLANS[2]
    assert rows(table) == EXAMPLE_ROWS[2]


def test_deleted_entries_are_not_planned(example: WorkedExample) -> None:
    table = example.table
    a, b = example.files["a"], example.files["b"]
    snapshot = table.commit(remove=[a, b])

    manifests = snapshot_manifests(table.io, snapshot)
    statuses = {
        (name(e.data_file.file_path), e.status)
        for m in manifests
        for e in read_manifest(table.io, m)
    }
    assert ("a", EntryStatus.DELETED) in statuses
    assert ("b", EntryStatus.DELETED) in statuses
    assert plan(table) == {"c": ["d"], "e": []}
    assert rows(table) == {(2, "B"), (4, "Y")}
    assert snapshot.summary is not None
    assert snapshot.summary.get("deleted-data-files") == "1"
    assert snapshot.summary.get("removed-equality-delete-files") == "1"
    assert snapshot.summary.get("total-data-files") == "2"


def test_v1_snapshot_with_inline_manifests(example: WorkedExample, tmp_path: Path) -> None:
    """v1 snapshots may name their manifests in the metadata instead of a manifest list;
    everything in them has sequence number 0 (spec Appendix E)."""
    table = example.table
    first = table.metadata.snapshot_by_id(example.snapshots[0].snapshot_id)
    data_manifests = [m.manifest_path for m in snapshot_manifests(table.io, first)]
    document = {
        "format-version": 1,
        "table-uuid": table.metadata.table_uuid,
        "location": table.location,
        "last-updated-ms": first.timestamp_ms,
        "last-column-id": 2,
        "schema": table.schema.to_json(),
        "partition-spec": [],
        "current-snapshot-id": first.snapshot_id,
        "snapshots": [
            {
                "snapshot-id": first.snapshot_id,
                "timestamp-ms": first.timestamp_ms,
                "manifests": data_manifests,
            }
        ],
    }
    location = tmp_path / "v1.metadata.json"
    location.write_text(json.dumps(document))
    metadata = read_table_metadata(table.io, str(location))
    tasks = list(TableScan(table.io, metadata).plan_files())
    assert [(name(t.file.file_path), t.data_sequence_number, t.deletes) for t in tasks] == [
        ("a", 0, ())
    ]


def test_plan_files_streams(example: WorkedExample) -> None:
    """Tasks come out while data manifests are still unread; nothing is read up front."""
    table = example.table
    snapshot = table.metadata.current_snapshot()
    assert snapshot is not None and snapshot.manifest_list is not None
    manifests = read_manifest_list(table.io, snapshot.manifest_list)
    data = [m for m in manifests if m.content == ManifestContent.DATA]
    assert [m.added_snapshot_id for m in data] == [
        s.snapshot_id for s in reversed(example.snapshots)
    ]

    os.remove(data[-1].manifest_path)  # the oldest one, holding file a
    tasks = TableScan(table.io, table.metadata).plan_files()
    assert isinstance(tasks, types.GeneratorType)
    assert name(next(tasks).file.file_path) == "e"
    assert name(next(tasks).file.file_path) == "c"
    with pytest.raises(ManifestError, match=data[-1].manifest_path):
        next(tasks)

    os.remove(snapshot.manifest_list)
    lazy = TableScan(table.io, table.metadata).plan_files()  # must not touch the list yet
    with pytest.raises(ManifestError, match=snapshot.manifest_list):
        next(lazy)


# Partitioned tables ---------------------------------------------------------------------------


@pytest.mark.parametrize("partitioned", [False, True])
def test_equal_sequence_number_position_delete_applies_equality_does_not(
    tmp_path: Path, partitioned: bool
) -> None:
    """Spec: position deletes apply to data of a sequence number <= theirs, equality deletes
    only to strictly older data, so a commit can add a row and equality-delete older copies."""
    spec = spec_of(("category", "identity", "category")) if partitioned else spec_of()
    table = LocalTable.create(tmp_path / "t", PSCHEMA, spec)
    old = table.write_data([{"id": 7, "category": "c"}], name="old")
    table.commit(add=[old])
    new = table.write_data([{"id": 7, "category": "c"}, {"id": 8, "category": "c"}], name="new")
    by_position = table.write_position_deletes([(new.file_path, 1)], name="pos")
    by_key = table.write_equality_deletes(
        [{"id": 7, "category": "c"}, {"id": 8, "category": "c"}], ["id"], name="eq"
    )
    table.commit(add=[new, by_position, by_key])
    assert by_key.partition == (("c",) if partitioned else ())
    assert plan(table) == {"old": ["eq"], "new": ["pos"]}
    assert rows(table, "id", "category") == {(7, "c")}


def test_deletes_do_not_cross_partitions(tmp_path: Path) -> None:
    table = LocalTable.create(
        tmp_path / "t", PSCHEMA, spec_of(("category", "identity", "category"))
    )
    x = table.write_data([{"id": 1, "category": "x"}, {"id": 2, "category": "x"}], name="x")
    y = table.write_data([{"id": 1, "category": "y"}, {"id": 2, "category": "y"}], name="y")
    table.commit(add=[x, y])
    eq_x = table.write_equality_deletes(
        [{"id": 1, "category": "x"}], ["id"], partition=("x",), name="eq_x"
    )
    pos_x = table.write_position_deletes([(x.file_path, 1)], name="pos_x")
    # A position delete without path bounds may name any file, but only of its partition.
    pos_x = dataclasses.replace(pos_x, lower_bounds=None, upper_bounds=None)
    table.commit(add=[eq_x, pos_x])

    assert x.partition == ("x",) and pos_x.partition == ("x",)
    assert plan(table) == {"x": ["eq_x", "pos_x"], "y": []}
    assert rows(table, "id", "category") == {(1, "y"), (2, "y")}


def test_global_equality_delete_after_spec_evolution(tmp_path: Path) -> None:
    """An equality delete of an unpartitioned spec is global: it applies to data of every
    spec and partition; a position delete of that spec stays with spec-0 files."""
    table = LocalTable.create(tmp_path / "t", PSCHEMA)
    u = table.write_data([{"id": 1, "category": "x"}, {"id": 2, "category": "y"}], name="u")
    table.commit(add=[u])
    spec = table.add_spec([("category", "identity", "category")])
    assert spec.spec_id == 1 and spec.fields[0].field_id == 1000
    x = table.write_data([{"id": 1, "category": "x"}, {"id": 3, "category": "x"}], name="x")
    y = table.write_data([{"id": 1, "category": "y"}, {"id": 4, "category": "y"}], name="y")
    table.commit(add=[x, y])
    globally = table.write_equality_deletes([{"id": 1}], ["id"], spec_id=0, name="global")
    in_x = table.write_equality_deletes([{"id": 3}], ["id"], partition=("x",), name="in_x")
    pos0 = table.write_position_deletes([(u.file_path, 1)], name="pos0")
    pos0 = dataclasses.replace(pos0, lower_bounds=None, upper_bounds=None)
    table.commit(add=[globally, in_x, pos0])

    assert (globally.spec_id, globally.partition) == (0, ())
    assert plan(table) == {"u": ["global", "pos0"], "x": ["global", "in_x"], "y": ["global"]}
    assert rows(table, "id", "category") == {(4, "y")}


def test_bucket_partition_values_and_deletes(tmp_path: Path) -> None:
    table = LocalTable.create(tmp_path / "t", PSCHEMA, spec_of(("id", "bucket[4]", "id_bucket")))
    # Spec test vector: bucket hash of long 34 is 2017239379, so bucket[4] is 3.
    f34 = table.write_data([{"id": 34}], name="f34")
    ids = [i for i in range(40) if BucketTransform(4).apply(i, LongType()) != 3][:3]
    others = [table.write_data([{"id": i}], name=f"f{i}") for i in ids]
    table.commit(add=[f34, *others])
    assert f34.partition == (3,)
    entries = {name(e.data_file.file_path): e.data_file.partition for e in table.live_entries()}
    assert entries["f34"] == (3,)

    eq = table.write_equality_deletes(
        [{"id": 34}, *({"id": i} for i in ids)], ["id"], partition=(3,), name="eq"
    )
    table.commit(add=[eq])
    assert plan(table) == {"f34": ["eq"], **{f"f{i}": [] for i in ids}}
    assert rows(table, "id") == {(i,) for i in ids}


def test_manifests_pruned_by_partition_summaries_are_never_opened(tmp_path: Path) -> None:
    table = LocalTable.create(
        tmp_path / "t", PSCHEMA, spec_of(("category", "identity", "category"))
    )
    x = table.write_data([{"id": 1, "category": "x"}], name="x")
    table.commit(add=[x])
    y = table.write_data([{"id": 2, "category": "y"}], name="y")
    snapshot = table.commit(add=[y])
    y_manifest = next(
        m
        for m in snapshot_manifests(table.io, snapshot)
        if m.added_snapshot_id == snapshot.snapshot_id
    )
    os.remove(y_manifest.manifest_path)

    assert plan(table, row_filter=equal("category", "x")) == {"x": []}
    with pytest.raises(ManifestError, match=y_manifest.manifest_path):
        plan(table)


# Pruning against brute force --------------------------------------------------------------------

BASE_TS = int(dt.datetime(2024, 3, 1, tzinfo=dt.UTC).timestamp() * 1_000_000)
DAY = 86_400_000_000
CATEGORIES = ["a", "b", "c", "d", None]

PRUNING_SPECS = {
    "unpartitioned": (),
    "identity": (("category", "identity", "category"),),
    "bucket": (("id", "bucket[8]", "id_bucket"),),
    "day": (("ts", "day", "ts_day"),),
}

Tri = bool | None  # SQL's three-valued logic: None is "unknown", which does not match


def _compare(op: str, value: Any, literal: Any) -> Tri:
    if value is None:
        return None
    return {
        "=": value == literal,
        "!=": value != literal,
        "<": value < literal,
        "<=": value <= literal,
        ">": value > literal,
        ">=": value >= literal,
    }[op]


_BUILDERS: dict[str, Callable[[str, Any], BooleanExpression]] = {
    "=": equal,
    "!=": not_equal,
    "<": less_than,
    "<=": less_than_or_equal,
    ">": greater_than,
    ">=": greater_than_or_equal,
}


def _literal(rng: random.Random, column: str) -> Any:
    if column == "id":
        return rng.randrange(-5, 210)
    if column == "category":
        return rng.choice(["a", "b", "c", "d", "e", "0", "z"])
    return BASE_TS + rng.randrange(-DAY, 11 * DAY)


Predicate = tuple[BooleanExpression, Callable[[dict[str, Any]], Tri]]


def _random_predicate(rng: random.Random, depth: int = 0) -> Predicate:
    kind = rng.random()
    if depth < 2 and kind < 0.3:
        (left, lf), (right, rf) = (
            _random_predicate(rng, depth + 1),
            _random_predicate(rng, depth + 1),
        )
        if rng.random() < 0.5:
            return And(left, right), lambda r: _and(lf(r), rf(r))
        return Or(left, right), lambda r: _or(lf(r), rf(r))
    if depth < 2 and kind < 0.4:
        child, cf = _random_predicate(rng, depth + 1)
        return Not(child), lambda r: None if cf(r) is None else not cf(r)
    column = rng.choice(["id", "category", "ts"])
    op = rng.choice([*_BUILDERS, "in", "not in", "is null", "not null"])
    if op == "is null":
        return is_null(column), lambda r: r[column] is None
    if op == "not null":
        return not_null(column), lambda r: r[column] is not None
    if op in ("in", "not in"):
        values = {_literal(rng, column) for _ in range(rng.randrange(1, 4))}
        if op == "in":
            return is_in(
                column, values
            ), lambda r: None if r[column] is None else r[column] in values
        return not_in(
            column, values
        ), lambda r: None if r[column] is None else r[column] not in values
    literal = _literal(rng, column)
    return _BUILDERS[op](column, literal), lambda r: _compare(op, r[column], literal)


def _and(a: Tri, b: Tri) -> Tri:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _or(a: Tri, b: Tri) -> Tri:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def _random_table(
    tmp_path: Path, spec: PartitionSpec, rng: random.Random
) -> tuple[LocalTable, dict[str, list[dict[str, Any]]]]:
    table = LocalTable.create(tmp_path / "t", PSCHEMA, spec)
    by_partition: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for i in range(240):
        row = {
            "id": rng.randrange(200) if spec.fields else i,  # sorted ids give tight metrics
            "category": rng.choice(CATEGORIES),
            "ts": None if rng.random() < 0.05 else BASE_TS + rng.randrange(10 * DAY),
        }
        by_partition.setdefault(table.partition_of(row), []).append(row)
    contents: dict[str, list[dict[str, Any]]] = {}
    pending = []
    for group in by_partition.values():
        for start in range(0, len(group), 6):
            chunk = group[start : start + 6]
            data_file = table.write_data(chunk, name=f"f{len(contents):03d}")
            contents[name(data_file.file_path)] = chunk
            pending.append(data_file)
    rng.shuffle(pending)
    for part in (pending[:10], pending[10:25], pending[25:]):  # several manifests
        table.commit(add=part)
    return table, contents


@pytest.mark.parametrize("kind", list(PRUNING_SPECS))
def test_row_filter_keeps_every_matching_file(tmp_path: Path, kind: str) -> None:
    rng = random.Random(f"pruning-{kind}")
    table, contents = _random_table(tmp_path, spec_of(*PRUNING_SPECS[kind]), rng)
    everything = set(contents)
    assert set(plan(table)) == everything
    skipped = 0
    for _ in range(150):
        expr, matches = _random_predicate(rng)
        planned = set(plan(table, row_filter=expr))
        matching = {f for f, file_rows in contents.items() if any(matches(r) for r in file_rows)}
        assert matching <= planned, f"{expr!r} lost {sorted(matching - planned)}"
        skipped += len(everything - planned)
    assert skipped > 0


def _partition_values(table: LocalTable) -> dict[str, tuple[Any, ...]]:
    return {name(e.data_file.file_path): e.data_file.partition for e in table.live_entries()}


def test_row_filter_skips_other_partitions_identity(tmp_path: Path) -> None:
    table, _ = _random_table(tmp_path, spec_of(*PRUNING_SPECS["identity"]), random.Random(1))
    partitions = _partition_values(table)
    planned = set(plan(table, row_filter=equal("category", "b")))
    assert planned == {f for f, p in partitions.items() if p == ("b",)}
    planned = set(plan(table, row_filter=is_null("category")))
    assert planned == {f for f, p in partitions.items() if p == (None,)}


def test_row_filter_skips_other_partitions_bucket(tmp_path: Path) -> None:
    table, contents = _random_table(tmp_path, spec_of(*PRUNING_SPECS["bucket"]), random.Random(2))
    partitions = _partition_values(table)
    for value in (17, 34, 123):
        bucket = BucketTransform(8).apply(value, LongType())
        planned = set(plan(table, row_filter=equal("id", value)))
        with_value = {f for f, rs in contents.items() if any(r["id"] == value for r in rs)}
        assert with_value <= planned
        assert planned <= {f for f, p in partitions.items() if p == (bucket,)}


def test_row_filter_skips_other_partitions_day(tmp_path: Path) -> None:
    table, _ = _random_table(tmp_path, spec_of(*PRUNING_SPECS["day"]), random.Random(3))
    partitions = _partition_values(table)
    start = BASE_TS + 3 * DAY + 5
    first_day = DayTransform().apply(start, TimestamptzType())
    assert first_day == (start // DAY)
    planned = set(
        plan(
            table, row_filter=And(greater_than_or_equal("ts", start), less_than("ts", start + DAY))
        )
    )
    allowed = {
        f for f, p in partitions.items() if p[0] is not None and first_day <= p[0] <= first_day + 1
    }
    assert planned and planned <= allowed


@pytest.mark.parametrize("metrics", [True, False], ids=["metrics", "partitions-only"])
@pytest.mark.parametrize("boundary", [0, BASE_TS], ids=["epoch", "2024"])
def test_row_filter_on_day_boundaries_keeps_the_edge_rows(
    tmp_path: Path, boundary: int, metrics: bool
) -> None:
    """Rows one microsecond either side of midnight (also the epoch's, where days go negative).

    Each filter must keep the file of every matching row. Metrics make the answer exact;
    without them the day projection alone must still be exact after 1970, and may only be
    wider before it (pre-0.11 writers put negative times one day too high).
    """
    spec = spec_of(("ts", "day", "ts_day"))
    table = LocalTable.create(tmp_path / "t", PSCHEMA, spec)
    files = [
        table.write_data([{"id": 1, "ts": boundary - 1}], name="before"),
        table.write_data([{"id": 2, "ts": boundary}], name="after"),
    ]
    if not metrics:
        files = [dataclasses.replace(f, lower_bounds=None, upper_bounds=None) for f in files]
    table.commit(add=files)
    assert [f.partition[0] for f in files] == [boundary // DAY - 1, boundary // DAY]
    cases = {
        greater_than("ts", boundary - 1): {"after"},
        greater_than_or_equal("ts", boundary - 1): {"before", "after"},
        less_than("ts", boundary): {"before"},
        less_than_or_equal("ts", boundary - 1): {"before"},
        less_than_or_equal("ts", boundary): {"before", "after"},
        equal("ts", boundary - 1): {"before"},
        equal("ts", boundary): {"after"},
        greater_than("ts", boundary - 2): {"before", "after"},
        less_than("ts", boundary + 1): {"before", "after"},
    }
    for expr, expected in cases.items():
        planned = set(plan(table, row_filter=expr))
        if metrics or boundary > 0:
            assert planned == expected, expr
        else:
            assert planned >= expected, expr


def test_metrics_prune_exactly_on_tight_bounds(tmp_path: Path) -> None:
    """Unpartitioned files of consecutive ids: only the file whose [min, max] holds it."""
    table, contents = _random_table(tmp_path, spec_of(), random.Random(4))
    for value in (0, 5, 6, 100, 239):
        holder = {
            f
            for f, rs in contents.items()
            if min(r["id"] for r in rs) <= value <= max(r["id"] for r in rs)
        }
        assert len(holder) == 1
        assert set(plan(table, row_filter=equal("id", value))) == holder
    assert plan(table, row_filter=greater_than("id", 239)) == {}
    assert set(plan(table, row_filter=AlwaysTrue())) == set(contents)


def test_delete_files_are_not_pruned_by_row_filter(example: WorkedExample) -> None:
    """A filter on data columns keeps the deletes of the files it keeps: a delete file's
    metrics describe deleted keys, not the rows a query asks for."""
    assert plan(example.table, row_filter=equal("id", 1)) == {"a": ["b"]}
    assert plan(example.table, row_filter=equal("id", 3)) == {"c": ["d"]}
