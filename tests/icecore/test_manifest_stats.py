"""Manifest figures of a snapshot and the default manifest-rewrite trigger
(`icecore.manifest_stats`), from the manifest lists of real tables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from icecore.catalog.sql import SqlCatalog
from icecore.manifest_stats import ManifestStats, table_manifest_stats
from icecore.spec.manifest_list import ManifestContent
from tests.support.committing import CatalogTable, manifests, sqlite_catalog

TARGET = "commit.manifest.target-size-bytes"


@pytest.fixture
def catalog(tmp_path: Path) -> SqlCatalog:
    return sqlite_catalog(tmp_path)


def append(t: CatalogTable, n: int, cat: str = "a") -> None:
    t.table.new_fast_append().append_file(t.data([{"id": n, "cat": cat, "v": n}])).commit()


def test_more_than_a_hundred_data_manifests_make_a_rewrite_due(catalog: SqlCatalog) -> None:
    t = CatalogTable.create(catalog, "events")
    for n in range(100):
        append(t, n)
    stats = table_manifest_stats(t.table.metadata, manifests(t.table))
    assert (stats.data_manifests, stats.delete_manifests) == (100, 0)
    assert stats.small_manifests == 100  # a few KB each, the target is 8 MiB
    assert stats.specs[0].data.small_bytes == sum(m.manifest_length for m in manifests(t.table))
    assert stats.rewrite_reason() is None  # 100 is not more than 100, and 400 KB < 8 MiB
    append(t, 100)
    stats = table_manifest_stats(t.table.metadata, manifests(t.table))
    assert stats.rewrite_reason() == "101 data manifests (more than 100)"
    assert stats.rewrite_due()
    # The figures survive their JSON form (a health report's, the fleet's cache).
    assert ManifestStats.from_json(json.loads(json.dumps(stats.to_json()))) == stats
    assert stats.rewrite_reason(max_data_manifests=200) is None


def test_small_manifests_of_one_spec_adding_up_to_a_target_make_a_rewrite_due(
    catalog: SqlCatalog,
) -> None:
    t = CatalogTable.create(catalog, "events")
    append(t, 0)
    append(t, 1)
    length = max(m.manifest_length for m in manifests(t.table))
    # Three manifests reach the target; two do not. Each is below 0.75 x the target.
    t.table.update_properties().set(TARGET, str(int(length * 2.9))).commit()
    stats = table_manifest_stats(t.table.metadata, manifests(t.table))
    assert stats.small_manifests == 2 and not stats.rewrite_due()

    t.table.update_spec().add_field("id", "bucket[4]").commit()
    append(t, 2)  # a third small manifest, but of the new spec: specs are counted apart
    stats = table_manifest_stats(t.table.metadata, manifests(t.table))
    assert sorted(stats.specs) == [0, 1] and stats.specs[1].data.manifests == 1
    assert not stats.rewrite_due()

    append(t, 3)
    append(t, 4)
    stats = table_manifest_stats(t.table.metadata, manifests(t.table))
    reason = stats.rewrite_reason()
    assert reason is not None
    assert reason.startswith("3 small data manifests of partition spec 1 add up to")


def test_delete_manifests_are_counted_apart_and_dead_manifests_not_at_all(
    catalog: SqlCatalog,
) -> None:
    t = CatalogTable.create(catalog, "events")
    kept = t.data([{"id": 1, "cat": "a", "v": 1}])
    gone = t.data([{"id": 2, "cat": "b", "v": 1}])
    t.table.new_fast_append().append_file(kept).commit()
    t.table.new_fast_append().append_file(gone).commit()
    t.table.new_row_delta().add_deletes(t.position_deletes([(kept.file_path, 0)])).commit()
    t.table.new_delete().delete_file(gone).commit()
    listed = manifests(t.table)
    live = [m for m in listed if m.has_added_files or m.has_existing_files]
    assert len(listed) > len(live)  # the manifest of `gone` only records its removal now
    stats = table_manifest_stats(t.table.metadata, listed)
    assert (stats.data_manifests, stats.delete_manifests) == (1, 1)
    assert stats.specs[0].of(ManifestContent.DELETES).manifests == 1
    data = next(m for m in live if m.content == ManifestContent.DATA)
    assert stats.to_json()["specs"] == {
        "0": {
            "data": {
                "manifests": 1,
                "bytes": data.manifest_length,
                "small_manifests": 1,
                "small_bytes": data.manifest_length,
            },
            "deletes": stats.specs[0].deletes.to_json(),
        }
    }
