"""The conflict-retry loop every re-planning action runs (`committing.with_replanning`),
against a real second writer.

The action here is shaped as the jobs are: each attempt plans from the current snapshot
(every live data file, grouped by partition; only the partitions `Attempt.only` names after
a conflict with partial progress), writes each group's rows into one new Parquet file, then
commits -- one `replace` commit per group with partial progress, else one for all -- each
validated from the planning snapshot. Between the write and the commit, a second table object
commits a position delete on a file a group replaces: Iceberg's "found new position delete
for replaced data file", a conflict naming that writer's snapshot. The interleaving is
deterministic: the second writer commits inside the attempt, as the jobs' `before_commit`
hooks do.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest

from icecore.actions.committing import (
    Attempt,
    Attempted,
    FailedBatch,
    commit_batches,
    with_replanning,
)
from icecore.errors import CommitConflictError
from icecore.spec.manifest import DataFile
from icecore.table import Table
from tests.support.committing import CatalogTable, Row, rows, sqlite_catalog

CATS = ("a", "b", "c")


@pytest.fixture
def t(tmp_path: Path) -> CatalogTable:
    """Partitions a, b and c of two data files each (ids 1-6, 11-16, 21-26)."""
    t = CatalogTable.create(sqlite_catalog(tmp_path), "loop")
    append = t.table.new_fast_append()
    for n, cat in enumerate(CATS):
        for part in range(2):
            ids = range(10 * n + 3 * part + 1, 10 * n + 3 * part + 4)
            append.append_file(t.data([{"id": i, "cat": cat, "v": i} for i in ids]))
    append.commit()
    return t


class Compaction:
    """The action under the loop (see the module doc); `race(attempt, table)` is the second
    writer, run between the attempt's write and its commit."""

    def __init__(
        self, t: CatalogTable, *, partial: bool, race: Callable[[Attempt[str], Table], None]
    ) -> None:
        self.t = t
        self.partial = partial
        self.race = race
        self.planned: list[list[str]] = []  # the partitions each attempt planned
        self.afters: list[int | None] = []  # the conflicting snapshot each attempt was told of
        self.commits: list[int] = []

    def __call__(self, attempt: Attempt[str]) -> Attempted[list[int], str]:
        table = self.t.load()
        snapshot_id = table.metadata.current_snapshot_id
        assert snapshot_id is not None
        groups: dict[str, list[DataFile]] = defaultdict(list)
        for task in table.scan().plan_files():
            cat = task.file.partition[0]
            if attempt.only is None or cat in attempt.only:
                groups[cat].append(task.file)
        self.planned.append(sorted(groups))
        self.afters.append(None if attempt.after is None else attempt.after.snapshot_id)
        live = rows(table)
        written = {cat: self.t.data([r for r in live if r["cat"] == cat]) for cat in groups}
        self.race(attempt, table)
        failed: list[FailedBatch[str]] = []
        made = 0
        for batch in commit_batches(sorted(groups), self.partial, len(CATS)):
            rewrite = table.new_rewrite().validate_from_snapshot(snapshot_id)
            for cat in batch:
                rewrite.rewrite_files(groups[cat], [written[cat]])
            rewrite.use_starting_sequence_number()
            try:
                rewrite.commit()
            except CommitConflictError as exc:
                if not self.partial:
                    raise
                failed.append(
                    FailedBatch(tuple(batch), tuple(f"partition {c}" for c in batch), exc)
                )
                continue
            self.commits.append(rewrite.snapshot_id)
            made += 1
        return Attempted(list(self.commits), made, failed)


class SecondWriter:
    """Deletes the first row of a data file of each of `cats` (a position delete, as another
    engine's merge-on-read DELETE) in the attempts numbered in `attempts`; `rows` are the
    table's rows after its last commit, which no compaction may change."""

    def __init__(self, t: CatalogTable, cats: tuple[str, ...], attempts: tuple[int, ...]) -> None:
        self.t = t
        self.cats = cats
        self.attempts = attempts
        self.snapshots: list[int] = []
        self.rows: list[Row] = []

    def __call__(self, attempt: Attempt[str], planned: Table) -> None:
        if attempt.number not in self.attempts:
            return
        other = self.t.load()
        delta = other.new_row_delta()
        files = [task.file for task in other.scan().plan_files()]
        for cat in self.cats:
            data_file = next(f for f in files if f.partition == (cat,))
            delta.add_deletes(self.t.position_deletes([(data_file.file_path, 0)]))
        delta.commit()
        self.snapshots.append(delta.snapshot_id)
        self.rows = rows(other.refresh())


def _data_files(table: Table) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for task in table.scan().plan_files():
        counts[task.file.partition[0]] += 1
    return dict(counts)


def test_partial_progress_plans_only_the_conflicting_partition_again(t: CatalogTable) -> None:
    writer = SecondWriter(t, ("b",), attempts=(1,))
    action = Compaction(t, partial=True, race=writer)

    done = with_replanning("compaction", action, max_attempts=3)

    # a and c committed in the first attempt and stand; only b was planned again.
    assert action.planned == [["a", "b", "c"], ["b"]]
    assert action.afters == [None, writer.snapshots[0]]
    assert done.attempts == 2 and done.failed_groups == []
    assert len(done.conflicts) == 1 and done.conflicts[0].startswith("partition b: ")
    assert f"conflicting snapshot {writer.snapshots[0]}" in done.conflicts[0]
    assert done.value == action.commits and len(action.commits) == 3
    table = t.table.refresh()
    assert _data_files(table) == {"a": 1, "b": 1, "c": 1}
    assert rows(table) == writer.rows


def test_partial_progress_reports_the_groups_that_still_conflict(t: CatalogTable) -> None:
    writer = SecondWriter(t, ("b",), attempts=(1,))
    action = Compaction(t, partial=True, race=writer)

    done = with_replanning("compaction", action, max_attempts=1)

    assert done.attempts == 1 and len(action.commits) == 2
    assert len(done.failed_groups) == 1 and done.failed_groups[0].startswith("partition b: ")
    assert f"conflicting snapshot {writer.snapshots[0]}" in done.failed_groups[0]
    assert done.conflicts == done.failed_groups
    table = t.table.refresh()
    assert _data_files(table) == {"a": 1, "b": 2, "c": 1}  # b left as it was
    assert rows(table) == writer.rows


def test_partial_progress_fails_when_no_commit_went_through(t: CatalogTable) -> None:
    writer = SecondWriter(t, CATS, attempts=(1, 2))
    action = Compaction(t, partial=True, race=writer)

    with pytest.raises(CommitConflictError, match="every commit conflicted on each of 2") as exc:
        with_replanning("compaction", action, max_attempts=2)

    assert exc.value.snapshot_id == writer.snapshots[1]
    assert action.planned == [list(CATS), list(CATS)] and action.commits == []
    assert _data_files(t.table.refresh()) == {"a": 2, "b": 2, "c": 2}


def test_without_partial_progress_everything_is_planned_again(t: CatalogTable) -> None:
    writer = SecondWriter(t, ("b",), attempts=(1,))
    action = Compaction(t, partial=False, race=writer)

    done = with_replanning("compaction", action, max_attempts=2)

    # Nothing of the first attempt committed: the second plans every partition.
    assert action.planned == [list(CATS), list(CATS)]
    assert action.afters == [None, writer.snapshots[0]]
    assert done.attempts == 2 and done.failed_groups == [] and len(action.commits) == 1
    assert len(done.conflicts) == 1 and str(writer.snapshots[0]) in done.conflicts[0]
    table = t.table.refresh()
    assert _data_files(table) == {"a": 1, "b": 1, "c": 1}
    assert rows(table) == writer.rows


def test_without_partial_progress_every_attempt_is_used_then_the_conflict_raised(
    t: CatalogTable,
) -> None:
    writer = SecondWriter(t, ("a",), attempts=(1, 2, 3))
    action = Compaction(t, partial=False, race=writer)

    with pytest.raises(CommitConflictError, match="commit conflict on each of 3 attempt") as exc:
        with_replanning("compaction", action, max_attempts=3)

    assert len(action.planned) == 3 and action.commits == []
    assert exc.value.snapshot_id == writer.snapshots[-1]
    assert f"conflicting snapshot {writer.snapshots[-1]}" in str(exc.value)
    assert _data_files(t.table.refresh()) == {"a": 2, "b": 2, "c": 2}
