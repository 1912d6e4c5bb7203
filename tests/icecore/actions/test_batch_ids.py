"""A batch committed once (`icecore.actions.batch_ids`), through a real catalog: the id goes
into the snapshot summary, and a commit of the same id racing one that went through fails
naming that snapshot, leaving the table as the first left it."""

from __future__ import annotations

from pathlib import Path

import pytest

from icecore.actions.batch_ids import BatchAlreadyCommitted, committed_batch, guard_batch
from icecore.spec.snapshots import BATCH_ID
from tests.support.committing import CatalogTable, ids, sqlite_catalog


@pytest.fixture
def t(tmp_path: Path) -> CatalogTable:
    return CatalogTable.create(sqlite_catalog(tmp_path), "batches")


def test_a_batch_id_is_found_on_the_branch_that_committed_it(t: CatalogTable) -> None:
    append = guard_batch(t.table.new_fast_append(), "2024-01-07")
    append.append_file(t.data([{"id": 1, "cat": "a"}])).commit()
    snapshot = t.table.refresh().metadata.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    assert snapshot.summary.get(BATCH_ID) == "2024-01-07"
    found = committed_batch(t.table.metadata, "2024-01-07")
    assert found is not None and found.snapshot_id == snapshot.snapshot_id
    assert committed_batch(t.table.metadata, "2024-01-08") is None
    assert committed_batch(t.table.metadata, "2024-01-07", branch="audit") is None


def test_a_second_commit_of_a_batch_fails_naming_the_first(t: CatalogTable) -> None:
    stale = t.load()  # planned before the first run committed
    first = guard_batch(t.table.new_fast_append(), "b1")
    first.append_file(t.data([{"id": 1, "cat": "a"}])).commit()
    second = guard_batch(stale.new_fast_append(), "b1")
    second.append_file(t.data([{"id": 2, "cat": "a"}]))

    with pytest.raises(BatchAlreadyCommitted, match="batch 'b1' was committed") as raised:
        second.commit()

    assert raised.value.snapshot_id == first.snapshot_id
    assert ids(t.table.refresh()) == [1]
    # Another batch commits on top.
    other = guard_batch(stale.new_fast_append(), "b2")
    other.append_file(t.data([{"id": 3, "cat": "b"}])).commit()
    assert ids(t.table.refresh()) == [1, 3]
