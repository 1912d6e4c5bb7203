"""The health report on real tables: exact counts, dangling deletes, and agreement with planning.

Dangling is defined as "scan planning pairs this delete file with no live data file", so
besides hand-computed scenarios every table here is also checked against `TableScan`: the
live delete files no task carries must be exactly the ones the report calls dangling.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from icecore.errors import NotFoundError, ValidationError
from icecore.health import HealthReport, table_health
from icecore.scan import TableScan, snapshot_manifests
from icecore.spec.manifest import DataFile, FileContent
from icecore.table import Table
from tests.support.samples import PSCHEMA, spec_of
from tests.support.tables import LocalTable

TARGET = 20_000  # bytes; small files are those below 15,000 (0.75 x target)


def new_table(tmp_path: Path, **properties: str) -> LocalTable:
    props = {"write.target-file-size-bytes": str(TARGET), **properties}
    spec = spec_of(("category", "identity", "category"))
    return LocalTable.create(tmp_path / "t", PSCHEMA, spec, props)


def rows(category: str, *ids: int) -> list[dict[str, Any]]:
    return [{"id": i, "category": category, "ts": 1_700_000_000_000_000 + i} for i in ids]


def big_rows(category: str, n: int, seed: int = 0) -> list[dict[str, Any]]:
    """Random ids compress badly, so the file ends up well above the small-file threshold."""
    rng = random.Random(seed)
    return rows(category, *(rng.getrandbits(62) for _ in range(n)))


def health(table: LocalTable, **options: Any) -> HealthReport:
    return table_health(table.io, table.metadata, **options)


def unbounded(delete_file: DataFile) -> DataFile:
    """A position delete without file_path bounds: it may name any file of its partition."""
    return dataclasses.replace(delete_file, lower_bounds=None, upper_bounds=None)


def planned_dangling(table: LocalTable, **options: Any) -> Counter[tuple[int, str, str]]:
    """(spec id, partition path, content) of every live delete file planning pairs with nothing."""
    metadata = table.metadata
    snapshot = (
        metadata.snapshot_by_id(options["snapshot_id"])
        if "snapshot_id" in options
        else metadata.current_snapshot()
    )
    used = {
        d.file_path
        for task in TableScan(table.io, metadata, **options).plan_files()
        for d in task.deletes
    }
    out: Counter[tuple[int, str, str]] = Counter()
    for entry in table.live_entries(snapshot):
        f = entry.data_file
        if f.content != FileContent.DATA and f.file_path not in used:
            path = metadata.spec_by_id(f.spec_id).partition_path(f.partition, metadata.schema())
            out[(f.spec_id, path, f.content.name)] += 1
    return out


def reported_dangling(report: HealthReport) -> Counter[tuple[int, str, str]]:
    out: Counter[tuple[int, str, str]] = Counter()
    for p in report.partitions:
        if p.dangling_position_deletes.files:
            out[(p.spec_id, p.path, "POSITION_DELETES")] = p.dangling_position_deletes.files
        if p.dangling_equality_deletes.files:
            out[(p.spec_id, p.path, "EQUALITY_DELETES")] = p.dangling_equality_deletes.files
    return out


class Scenario:
    """Five snapshots over partitions a, b, c of spec 0 and the unpartitioned spec 1.

    s1: data a1 (2 rows), a2 (3,000 rows, big), b1 (3 rows), c1 (1 row)
    s2: position delete pd_a1 (a1, file-scoped); equality delete eq_b (id 11 in b);
        position delete pd_c (c1, bounds removed: partition-scoped)
    s3: remove a1 and b1, add b2 and c2 -> pd_a1 and eq_b apply to nothing any more
    s4: equality delete eq_c (c); range position deletes pd_far (paths past every live
        file of a: dangling) and pd_a2 (a range covering a2)
    s5: spec 1 (unpartitioned): data d1 and global equality delete eq_g
    """

    def __init__(self, tmp_path: Path) -> None:
        t = self.table = new_table(tmp_path)
        f = self.files = {
            "a1": t.write_data(rows("a", 1, 2), name="a1"),
            "a2": t.write_data(big_rows("a", 3000), name="a2"),
            "b1": t.write_data(rows("b", 10, 11, 12), name="b1"),
            "c1": t.write_data(rows("c", 20), name="c1"),
        }
        s1 = t.commit(add=[f["a1"], f["a2"], f["b1"], f["c1"]])
        f["pd_a1"] = t.write_position_deletes([(f["a1"].file_path, 0)], name="pd_a1")
        f["eq_b"] = t.write_equality_deletes(rows("b", 11), ["id"], name="eq_b")
        f["pd_c"] = unbounded(t.write_position_deletes([(f["c1"].file_path, 0)], name="pd_c"))
        s2 = t.commit(add=[f["pd_a1"], f["eq_b"], f["pd_c"]])
        f["b2"] = t.write_data(rows("b", 10, 12), name="b2")
        f["c2"] = t.write_data(rows("c", 21), name="c2")
        s3 = t.commit(add=[f["b2"], f["c2"]], remove=[f["a1"], f["b1"]])
        a_dir = Path(f["a2"].file_path).parent
        f["eq_c"] = t.write_equality_deletes(rows("c", 21), ["id"], name="eq_c")
        f["pd_far"] = t.write_position_deletes(
            [(str(a_dir / "zz1.parquet"), 0), (str(a_dir / "zz2.parquet"), 3)],
            partition=("a",),
            name="pd_far",
        )
        f["pd_a2"] = t.write_position_deletes(
            [(f["a2"].file_path, 5), (f["a2"].file_path + "~", 0)], partition=("a",), name="pd_a2"
        )
        s4 = t.commit(add=[f["eq_c"], f["pd_far"], f["pd_a2"]])
        t.add_spec([])
        f["d1"] = t.write_data(rows("d", 30), spec_id=1, name="d1")
        f["eq_g"] = t.write_equality_deletes(rows("x", 3), ["id"], spec_id=1, name="eq_g")
        s5 = t.commit(add=[f["d1"], f["eq_g"]])
        self.snapshots = [s1, s2, s3, s4, s5]


@pytest.fixture
def scenario(tmp_path: Path) -> Scenario:
    return Scenario(tmp_path)


def test_per_partition_counts_of_the_current_snapshot(scenario: Scenario) -> None:
    f = scenario.files
    assert f["a2"].file_size_in_bytes > 0.75 * TARGET > f["a1"].file_size_in_bytes
    report = health(scenario.table)
    assert report.snapshot_id == scenario.snapshots[-1].snapshot_id
    assert report.sequence_number == 5
    assert report.target_file_size_bytes == TARGET
    assert report.small_file_threshold_bytes == 15_000
    assert [(p.spec_id, p.path) for p in report.partitions] == [
        (0, "category=a"),
        (0, "category=b"),
        (0, "category=c"),
        (1, ""),
    ]

    a = report.partition("category=a")
    assert a.values == {"category": "a"}
    assert a.data.to_dict() == {
        "files": 1,
        "bytes": f["a2"].file_size_in_bytes,
        "records": 3000,
    }
    assert a.small_data.files == 0
    assert a.position_deletes.to_dict() == {
        "files": 3,
        "bytes": sum(f[n].file_size_in_bytes for n in ("pd_a1", "pd_far", "pd_a2")),
        "records": 5,
    }
    assert a.dangling_position_deletes.to_dict() == {
        "files": 2,
        "bytes": f["pd_a1"].file_size_in_bytes + f["pd_far"].file_size_in_bytes,
        "records": 3,
    }
    assert a.equality_deletes.files == a.dangling_equality_deletes.files == 0
    assert a.delete_records == 5
    assert a.delete_ratio == pytest.approx(5 / 3000)

    b = report.partition("category=b")
    assert (b.data.files, b.data.records, b.small_data.files) == (1, 2, 1)
    assert b.small_data.bytes == f["b2"].file_size_in_bytes
    assert (b.equality_deletes.files, b.equality_deletes.records) == (1, 1)
    assert b.dangling_equality_deletes.files == 1
    assert b.position_deletes.files == 0
    assert b.delete_ratio == pytest.approx(0.5)

    c = report.partition("category=c")
    assert (c.data.files, c.data.records, c.small_data.files) == (2, 2, 2)
    assert (c.position_deletes.files, c.equality_deletes.files) == (1, 1)
    assert c.dangling_delete_files == 0
    assert c.delete_ratio == pytest.approx(1.0)

    g = report.partition("", spec_id=1)
    assert (g.data.files, g.equality_deletes.files, g.dangling_delete_files) == (1, 1, 0)

    t = report.totals
    assert (t.data.files, t.data.records, t.small_data.files) == (5, 3005, 4)
    assert (t.position_deletes.files, t.position_deletes.records) == (4, 6)
    assert (t.equality_deletes.files, t.equality_deletes.records) == (3, 3)
    assert (t.dangling_position_deletes.files, t.dangling_equality_deletes.files) == (2, 1)
    assert t.delete_ratio == pytest.approx(9 / 3005)
    # s1's manifest (rewritten by s3), s3's and s5's; deletes of s2, s4 and s5.
    assert (report.data_manifests, report.delete_manifests) == (3, 3)
    # Per spec: s5's manifests are spec 1's; each is small (a few KB, the target is 8 MiB).
    specs = report.manifests.specs
    assert {i: (s.data.manifests, s.deletes.manifests) for i, s in specs.items()} == {
        0: (2, 2),
        1: (1, 1),
    }
    assert report.manifests.small_manifests == 6
    assert report.to_dict()["manifests"]["bytes"] == sum(
        m.manifest_length
        for m in snapshot_manifests(scenario.table.io, scenario.snapshots[-1])
        if m.has_added_files or m.has_existing_files
    )
    assert reported_dangling(report) == planned_dangling(scenario.table)


@pytest.mark.parametrize(
    ("index", "dangling"),
    [
        (0, {}),
        (1, {}),  # every delete still has the data file it was written against
        (2, {(0, "category=a", "POSITION_DELETES"): 1, (0, "category=b", "EQUALITY_DELETES"): 1}),
    ],
)
def test_dangling_deletes_appear_when_their_data_goes(
    scenario: Scenario, index: int, dangling: dict[tuple[int, str, str], int]
) -> None:
    snapshot_id = scenario.snapshots[index].snapshot_id
    report = health(scenario.table, snapshot_id=snapshot_id)
    assert report.snapshot_id == snapshot_id
    assert reported_dangling(report) == Counter(dangling)
    assert reported_dangling(report) == planned_dangling(scenario.table, snapshot_id=snapshot_id)


def test_deletes_without_older_data_are_dangling(tmp_path: Path) -> None:
    """Equality deletes never touch data of their own or a later sequence number; position
    deletes touch their own. A global (unpartitioned-spec) equality delete counts every
    partition's data."""
    t = LocalTable.create(tmp_path / "t", PSCHEMA, properties={"write.target-file-size-bytes": "1"})
    eq = t.write_equality_deletes(rows("x", 1), ["id"], name="eq")
    pos = unbounded(t.write_position_deletes([("nowhere.parquet", 0)], partition=(), name="pos"))
    t.commit(add=[eq, pos])
    totals = health(t).totals
    assert totals.dangling_equality_deletes.files == totals.dangling_position_deletes.files == 1

    d1 = t.write_data(rows("x", 1), name="d1")
    t.commit(add=[d1])  # seq 2: newer than both deletes
    report = health(t)
    assert report.totals.dangling_delete_files == 2
    assert report.totals.small_data.files == 0  # a 1-byte target: nothing is small

    same = t.write_equality_deletes(rows("x", 1), ["id"], name="same")
    pos2 = unbounded(t.write_position_deletes([(d1.file_path, 0)], partition=(), name="pos2"))
    d2 = t.write_data(rows("x", 2), name="d2")
    t.commit(add=[same, pos2, d2])  # seq 3: `same` applies to d1 (seq 2), pos2 to d1 and d2
    report = health(t)
    assert report.totals.dangling_equality_deletes.files == 1  # only `eq`
    assert report.totals.dangling_position_deletes.files == 1  # only `pos`
    assert reported_dangling(report) == planned_dangling(t)


def test_deletes_committed_with_their_data_apply_to_it(tmp_path: Path) -> None:
    """Same sequence number: position deletes apply (<=), equality deletes do not (<)."""
    t = LocalTable.create(tmp_path / "t", PSCHEMA)
    d = t.write_data(rows("x", 1, 2), name="m")
    scoped = t.write_position_deletes([(d.file_path, 0)], name="scoped")
    whole = unbounded(t.write_position_deletes([(d.file_path, 1)], name="whole"))
    ranged = t.write_position_deletes(  # d's path is exactly the upper bound
        [(d.file_path[:-9] + ".parquet", 0), (d.file_path, 1)], partition=(), name="ranged"
    )
    eq = t.write_equality_deletes(rows("x", 1), ["id"], name="eq")  # global: unpartitioned
    t.commit(add=[d, scoped, whole, ranged, eq])
    report = health(t)
    assert report.totals.position_deletes.files == 3
    assert report.totals.dangling_position_deletes.files == 0
    assert report.totals.dangling_equality_deletes.files == 1
    assert reported_dangling(report) == planned_dangling(t)


def test_small_file_threshold_is_exclusive(scenario: Scenario) -> None:
    size = scenario.files["a2"].file_size_in_bytes
    at = health(scenario.table, target_file_size_bytes=size, small_file_fraction=1.0)
    assert at.small_file_threshold_bytes == size
    assert at.partition("category=a").small_data.files == 0
    above = health(scenario.table, target_file_size_bytes=size + 1, small_file_fraction=1.0)
    assert above.partition("category=a").small_data.files == 1


def test_health_reads_no_data_file(scenario: Scenario) -> None:
    before = health(scenario.table, now_ms=0).to_dict()
    for path in Path(scenario.table.location, "data").rglob("*.parquet"):
        path.unlink()
    assert health(scenario.table, now_ms=0).to_dict() == before


def test_snapshot_ages_and_json_form(scenario: Scenario) -> None:
    s = scenario.snapshots
    now = s[-1].timestamp_ms + 60_000
    report = health(scenario.table, now_ms=now)
    assert report.snapshot_count == 5
    assert report.oldest_snapshot_ms == s[0].timestamp_ms
    assert report.newest_snapshot_ms == s[-1].timestamp_ms
    assert report.newest_snapshot_age_ms == 60_000
    assert report.oldest_snapshot_age_ms == now - s[0].timestamp_ms

    as_dict = report.to_dict()
    assert json.loads(json.dumps(as_dict)) == as_dict
    assert as_dict["totals"]["dangling_delete_files"] == 3
    assert as_dict["partitions"][0]["partition"] == {"category": "a"}
    assert as_dict["partitions"][0]["dangling_position_deletes"]["files"] == 2
    assert as_dict["partitions"][1]["delete_ratio"] == 0.5


def test_a_report_comes_back_from_its_json_form(scenario: Scenario) -> None:
    """The fleet caches reports as JSON: what comes back holds every figure the decisions
    read, and a new date ages its snapshots from then."""
    s = scenario.snapshots
    report = health(scenario.table, now_ms=s[-1].timestamp_ms + 60_000)
    stored = json.loads(json.dumps(report.to_dict()))

    back = HealthReport.from_dict(stored)
    assert back.to_dict() == report.to_dict()
    assert back.totals == report.totals and back.size_histogram == report.size_histogram
    assert [p.path for p in back.partitions] == [p.path for p in report.partitions]
    assert back.partition("category=a").dangling_position_deletes.files == 2
    later = HealthReport.from_dict(stored, computed_at_ms=s[-1].timestamp_ms + 120_000)
    assert later.newest_snapshot_age_ms == 120_000


def test_small_file_fraction_and_target_override(scenario: Scenario) -> None:
    everything_small = health(scenario.table, target_file_size_bytes=10**9)
    assert everything_small.totals.small_data.files == 5
    nothing_small = health(scenario.table, small_file_fraction=0.01)
    assert nothing_small.small_file_threshold_bytes == 200
    assert nothing_small.totals.small_data.files == 0
    with pytest.raises(ValidationError, match="small_file_fraction"):
        health(scenario.table, small_file_fraction=0)


def test_day_partitions_are_named_like_their_directories(tmp_path: Path) -> None:
    spec = spec_of(("ts", "day", "ts_day"), ("id", "bucket[4]", "id_bucket"))
    t = LocalTable.create(tmp_path / "t", PSCHEMA, spec)
    row = {"id": 7, "category": "x", "ts": 1_700_000_000_000_000}
    t.commit(add=[t.write_data([row])])
    (partition,) = health(t).partitions
    bucket = partition.partition[1]
    assert partition.path == f"ts_day=2023-11-14/id_bucket={bucket}"
    assert partition.values == {"ts_day": "2023-11-14", "id_bucket": str(bucket)}
    assert partition.partition == (19675, bucket)


def test_table_without_snapshots_branches_and_bad_refs(tmp_path: Path) -> None:
    t = new_table(tmp_path)
    empty = health(t)
    assert (empty.snapshot_id, empty.snapshot_count, empty.partitions) == (None, 0, [])
    assert empty.oldest_snapshot_age_ms is None
    assert empty.totals.delete_ratio is None

    s1 = t.commit(add=[t.write_data(rows("a", 1))])
    t.set_ref("audit", s1.snapshot_id)
    t.commit(add=[t.write_data(rows("b", 2))])
    assert health(t, ref="audit").totals.data.files == 1
    assert health(t).totals.data.files == 2
    with pytest.raises(NotFoundError, match="'nope'"):
        health(t, ref="nope")
    with pytest.raises(ValidationError, match="by id or by ref"):
        health(t, ref="audit", snapshot_id=s1.snapshot_id)


def test_table_facade(scenario: Scenario) -> None:
    table = Table(("db", "events"), scenario.table.metadata, scenario.table.io)
    report = table.health(now_ms=0)
    assert report.table == "db.events"
    assert report.to_dict() == {**health(scenario.table, now_ms=0).to_dict(), "table": "db.events"}


@pytest.mark.parametrize("seed", range(6))
def test_random_histories_agree_with_planning(tmp_path: Path, seed: int) -> None:
    """Random appends, deletes of every kind and removals: after each commit, the deletes the
    report calls dangling are exactly the live ones planning pairs with no data file."""
    rng = random.Random(seed)
    t = new_table(tmp_path)
    t.add_spec([])  # spec 1, unpartitioned: its equality deletes are global
    categories = ["a", "b", "c"]
    live: list[DataFile] = []
    live_deletes: list[DataFile] = []
    next_id = 0
    for _ in range(14):
        add: list[DataFile] = []
        remove: list[DataFile] = []
        for _ in range(rng.randint(1, 4)):
            kind = rng.choice(["data", "data", "eq", "global_eq", "pos", "pos_unbounded", "range"])
            category = rng.choice(categories)
            next_id += 1
            if kind == "data" or not live:
                f = t.write_data(rows(category, next_id, next_id + 1000), spec_id=0)
            elif kind == "eq":
                f = t.write_equality_deletes(rows(category, rng.randint(0, next_id)), ["id"],
                                             spec_id=0)  # fmt: skip
            elif kind == "global_eq":
                f = t.write_equality_deletes(rows("x", rng.randint(0, next_id)), ["id"], spec_id=1)
            else:
                target = rng.choice(live + [g for g in add if g.content == FileContent.DATA])
                if kind == "range":
                    paths = [target.file_path, target.file_path[:-8] + "~.parquet"]
                    f = t.write_position_deletes(
                        [(p, 0) for p in paths], partition=target.partition, spec_id=0
                    )
                else:
                    f = t.write_position_deletes([(target.file_path, 1)])
                    f = unbounded(f) if kind == "pos_unbounded" else f
            add.append(f)
        if live and rng.random() < 0.4:
            remove.append(live.pop(rng.randrange(len(live))))
        if live_deletes and rng.random() < 0.2:
            remove.append(live_deletes.pop(rng.randrange(len(live_deletes))))
        live.extend(f for f in add if f.content == FileContent.DATA)
        live_deletes.extend(f for f in add if f.content != FileContent.DATA)
        t.commit(add=add, remove=remove)
        report = health(t)
        assert reported_dangling(report) == planned_dangling(t)
        assert report.totals.data.files == len(live)
        assert report.totals.position_deletes.files + report.totals.equality_deletes.files == len(
            live_deletes
        )


def test_size_histogram_counts_live_data_files_by_size(tmp_path: Path) -> None:
    """Buckets are upper bounds, inclusive (a file of exactly 1 MiB is in the first); the last
    bucket holds what is above 512 MiB. Metadata only: the sizes are the manifests'."""
    mib = 1024 * 1024
    t = new_table(tmp_path)
    base = t.write_data(rows("a", 1), name="s0")
    sizes = [10, mib, mib + 1, 8 * mib, 100 * mib, 600 * mib]
    files = [
        dataclasses.replace(base, file_path=f"{base.file_path}.{i}", file_size_in_bytes=size)
        for i, size in enumerate(sizes)
    ]
    t.commit(add=files)
    t.commit(add=[], remove=[files[2]])  # only live files count
    report = health(t)
    expected = [[mib, 2], [8 * mib, 1], [32 * mib, 0], [128 * mib, 1], [512 * mib, 0], [None, 1]]
    assert report.size_histogram_bounds() == expected
    assert report.to_dict()["size_histogram"] == expected
