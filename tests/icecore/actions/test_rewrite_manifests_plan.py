"""The manifest rewrite planner (`icecore.actions.rewrite_manifests`) on real tables, the
clustering key it sorts by, and how it judges manifests' partition ranges."""

from __future__ import annotations

import math
import random
import uuid
from decimal import Decimal
from pathlib import Path

import pytest

from icecore.actions.manifest_ranges import overlapping
from icecore.actions.partition_order import tuple_key
from icecore.actions.rewrite_manifests import ManifestRewritePlan, plan_manifest_rewrite
from icecore.catalog.sql import SqlCatalog
from icecore.errors import ValidationError
from icecore.spec.manifest_list import ManifestContent
from icecore.spec.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
    UUIDType,
)
from icecore.table import Table
from tests.support.committing import CatalogTable, manifests, sqlite_catalog

TARGET = "commit.manifest.target-size-bytes"


@pytest.fixture
def catalog(tmp_path: Path) -> SqlCatalog:
    return sqlite_catalog(tmp_path)


def append(t: CatalogTable, *cats: str) -> None:
    """One commit, one manifest, a file per category."""
    op = t.table.new_fast_append()
    for cat in cats:
        op.append_file(t.data([{"id": random.randrange(10**9), "cat": cat, "v": 1}]))
    op.commit()


def plan(table: Table, **options: object) -> ManifestRewritePlan:
    snapshot = table.metadata.current_snapshot()
    assert snapshot is not None
    found = manifests(table)
    return plan_manifest_rewrite(
        table.io,
        table.metadata,
        snapshot.snapshot_id,
        found,
        **options,  # type: ignore[arg-type]
    )


def set_target(t: CatalogTable, size: int) -> None:
    t.table.update_properties().set(TARGET, str(size)).commit()


def test_small_manifests_are_rewritten_into_as_few_as_the_target_allows(
    catalog: SqlCatalog,
) -> None:
    t = CatalogTable.create(catalog, "events")
    for _ in range(30):
        append(t, "a", "b", "c")
    result = plan(t.table)
    assert len(result.groups) == 1 and not result.kept
    group = result.groups[0]
    assert (group.spec_id, group.content) == (0, ManifestContent.DATA)
    assert group.live_files == 90 and group.outputs == 1  # 90 entries fit in 8 MiB
    assert group.sort_positions == (0,)
    # At a target a few entries large, the measured entry size decides how many.
    target = group.entry_size.header + int(group.entry_size.entry * 20)
    set_target(t, target)
    assert plan(t.table).groups[0].outputs == math.ceil(90 / 20)


def test_manifests_near_the_target_and_alone_in_their_range_are_kept(
    catalog: SqlCatalog,
) -> None:
    t = CatalogTable.create(catalog, "events")
    for cat in ("a", "b", "c", "d"):
        append(t, cat)  # one category each: no range overlaps another
    lengths = [m.manifest_length for m in manifests(t.table)]
    set_target(t, int(max(lengths) / 0.8))  # every manifest near the target
    assert plan(t.table).groups == ()
    forced = plan(t.table, rewrite_all=True)
    assert [len(g.manifests) for g in forced.groups] == [4] and not forced.kept

    append(t, "a", "c")  # overlaps b strictly: [a, c] starts below b and ends above it
    result = plan(t.table)
    rewritten = {m.manifest_path for m in result.rewritten}
    by_cat = {m.partitions[0].lower_bound: m.manifest_path for m in manifests(t.table)[1:]}  # type: ignore[index]
    new = manifests(t.table)[0].manifest_path
    assert rewritten == {new, by_cat[b"b"]}  # [a, a] and [c, c] only touch [a, c]
    assert {m.manifest_path for m in result.kept} == {by_cat[b"a"], by_cat[b"c"], by_cat[b"d"]}


def test_a_kept_manifest_splits_the_rewrite_into_runs(catalog: SqlCatalog) -> None:
    """Small manifests on both sides of a kept one are rewritten as two runs, so that no
    manifest written spans the kept one's range (which would make it overlap)."""
    t = CatalogTable.create(catalog, "events")
    for cat in ("a", "a", "m", "z", "z"):
        append(t, *[cat] * (40 if cat == "m" else 1))
    middle = max(manifests(t.table), key=lambda m: m.manifest_length)
    set_target(t, int(middle.manifest_length / 0.8))  # only "m" is near the target
    result = plan(t.table)
    assert [m.manifest_path for m in result.kept] == [middle.manifest_path]
    runs = [{m.partitions[0].lower_bound for m in g.manifests} for g in result.groups]  # type: ignore[index]
    assert runs == [{b"a"}, {b"z"}]


def test_one_small_manifest_alone_is_left_alone(catalog: SqlCatalog) -> None:
    t = CatalogTable.create(catalog, "events")
    append(t, "a", "b")
    assert plan(t.table).groups == ()
    assert plan(t.table, rewrite_all=True).groups == ()  # one manifest into one: Java's rule


def test_delete_manifests_are_rewritten_apart(catalog: SqlCatalog) -> None:
    t = CatalogTable.create(catalog, "events")
    for n in range(4):
        data = t.data([{"id": n, "cat": "a", "v": 1}])
        deletes = t.position_deletes([(data.file_path, 0)], partition=("a",))
        t.table.new_row_delta().add_rows(data).add_deletes(deletes).commit()
    groups = {(g.spec_id, g.content): len(g.manifests) for g in plan(t.table).groups}
    assert groups == {(0, ManifestContent.DATA): 4, (0, ManifestContent.DELETES): 4}


def test_specs_are_planned_apart_and_spec_id_chooses_one(catalog: SqlCatalog) -> None:
    t = CatalogTable.create(catalog, "events")
    for _ in range(3):
        append(t, "a", "b")
    t.table.update_spec().add_field("id", "bucket[4]", "id_bucket").commit()
    new_spec = t.table.metadata.default_spec_id
    for _ in range(3):
        append(t, "a", "b")
    specs = {g.spec_id: len(g.manifests) for g in plan(t.table).groups}
    assert specs == {0: 3, new_spec: 3}
    only = plan(t.table, spec_id=new_spec)
    assert [g.spec_id for g in only.groups] == [new_spec] and len(only.kept) == 3
    sorted_by = plan(t.table, spec_id=new_spec, sort_by=["id_bucket"])
    assert sorted_by.groups[0].sort_positions == (1, 0)
    with pytest.raises(ValidationError, match="'id_bucket' is not a partition field of spec 0"):
        plan(t.table, sort_by=["id_bucket"])
    with pytest.raises(ValidationError, match="partition spec 7 does not exist"):
        plan(t.table, spec_id=7)


def test_overlap_of_ranges() -> None:
    def keys(*ranges: str) -> dict[str, tuple[bytes, bytes]]:
        return {r: (r[0].encode(), r[-1].encode()) for r in ranges}

    assert overlapping(keys("ab", "bc", "cd")) == set()  # touching only
    assert overlapping(keys("aa", "aa", "bb")) == set()  # one value each
    assert overlapping(keys("ac", "bd", "ef")) == {"ac", "bd"}
    assert overlapping(keys("ad", "bb")) == {"ad", "bb"}  # a value inside a range
    assert overlapping(keys("ad", "aa", "dd")) == set()  # values at its ends
    assert overlapping(keys("aa", "ab", "az", "bc")) == {"ab", "az", "bc"}


SAMPLES: list[tuple[IcebergType, list[object]]] = [
    (BooleanType(), [True, False]),
    (IntegerType(), [-(2**31), -1, 0, 1, 7, 2**31 - 1]),
    (LongType(), [-(2**63), -5, 0, 3, 2**63 - 1]),
    (DateType(), [-3, 0, 19000]),
    (TimestampType(), [-1, 0, 1_700_000_000_000_000]),
    (FloatType(), [-math.inf, -1.5, -0.0, 0.0, 2.25, math.inf]),
    (DoubleType(), [-1e300, -2.0, -0.0, 0.0, 1e-300, 3.0, 1e300]),
    (DecimalType(9, 2), [Decimal("-10.50"), Decimal("-0.01"), Decimal("0.00"), Decimal("3.14")]),
    (StringType(), ["", "a", "a\x00", "a\x00b", "ab", "b", "é", "\U0001f600"]),
    (BinaryType(), [b"", b"\x00", b"\x00\x00", b"\x00\xff", b"\x01", b"\xff"]),
    (UUIDType(), [uuid.UUID(int=0), uuid.UUID(int=5), uuid.UUID(int=2**127)]),
]


@pytest.mark.parametrize(("t", "values"), SAMPLES, ids=lambda v: str(v)[:20])
def test_clustering_keys_sort_as_the_values(t: IcebergType, values: list[object]) -> None:
    """Tuples of (value or null, string) sort by their keys as by the values (nulls first,
    -0.0 before 0.0, strings by code point): checks each type's encoding and that a key is
    never a prefix that reorders the field after it."""
    key = tuple_key([t, StringType()], [0, 1])
    rnd = random.Random(7)
    tuples = [(v, s) for v in [None, *values] for s in ("", "x", "x\x00")]
    rnd.shuffle(tuples)

    def natural(item: tuple[object, str]) -> tuple[object, ...]:
        value, text = item
        if value is None:
            return (0, 0, text.encode())
        if isinstance(value, float):
            return (1, (value, math.copysign(1, value)), text.encode())
        if isinstance(value, str):
            return (1, value.encode(), text.encode())
        return (1, value, text.encode())

    assert sorted(tuples, key=key) == sorted(tuples, key=natural)
