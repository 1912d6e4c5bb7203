"""Branch and tag management, rollback and retention settings (Java's `ManageSnapshots`).

    table.manage_snapshots().create_tag("eod-2024-06-01", snapshot_id).commit()
    table.manage_snapshots().rollback_to(snapshot_id).commit()

Every call is checked at once and again, in order, against the refreshed metadata after a lost
swap. Calls that move a branch to a snapshot of the caller's choosing (replace, rollback,
set-current) also remember where the branch was when they were made: if a concurrent commit
moved it since, going on would silently discard that commit, so the replay is a
`CommitConflictError` naming the snapshot the branch now points at. (Java re-checks only that a
rollback target is still an ancestor, which lets a rollback drop an append that raced it.) A
fast-forward needs no such guard: it is re-checked as an ancestry condition.

`main` can be moved but never removed or renamed, and tags are never committed to: the
snapshot producers refuse them (`MetadataBuilder.set_branch_snapshot`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from icecore.errors import CommitConflictError, ValidationError
from icecore.spec.metadata import TableMetadata
from icecore.spec.metadata_builder import MetadataBuilder
from icecore.spec.refs import MAIN_BRANCH, SnapshotRef, SnapshotRefType
from icecore.updates.base import ReplayedUpdate

if TYPE_CHECKING:
    from icecore.table import Table

BRANCH, TAG = SnapshotRefType.BRANCH, SnapshotRefType.TAG


class _Refs:
    """The refs as the recorded calls leave them, written through to a metadata builder."""

    def __init__(self, table: str, base: TableMetadata) -> None:
        self.table = table
        self.base = base
        self.refs = dict(base.refs)
        self.builder = MetadataBuilder(base)

    def get(self, name: str, kind: SnapshotRefType | None = None) -> SnapshotRef:
        ref = self.refs.get(name)
        if ref is None:
            what = "branch or tag" if kind is None else kind.value
            raise ValidationError(f"{self.table}: no {what} named {name!r}")
        if kind is not None and ref.type is not kind:
            raise ValidationError(
                f"{self.table}: {name!r} is a {ref.type.value}, not a {kind.value}"
            )
        return ref

    def absent(self, name: str) -> None:
        if not name:
            raise ValidationError(f"{self.table}: a branch or tag needs a non-empty name")
        if name in self.refs:
            raise ValidationError(
                f"{self.table}: a {self.refs[name].type.value} named {name!r} already exists"
            )

    def snapshot(self, snapshot_id: int) -> int:
        self.base.snapshot_by_id(snapshot_id)  # raises NotFoundError naming the table
        return snapshot_id

    def put(self, name: str, ref: SnapshotRef) -> None:
        self.builder.set_ref(name, ref)
        self.refs[name] = ref

    def drop(self, name: str) -> None:
        if name == MAIN_BRANCH:
            raise ValidationError(f"{self.table}: the main branch cannot be removed or renamed")
        self.builder.remove_ref(name)
        del self.refs[name]

    def is_ancestor(self, ancestor_id: int, snapshot_id: int) -> bool:
        return any(s.snapshot_id == ancestor_id for s in self.base.ancestors_of(snapshot_id))


_Call = Callable[[_Refs], None]


class ManageSnapshots(ReplayedUpdate):
    """Branch, tag and rollback operations, committed together; methods return `self`."""

    def __init__(self, table: Table) -> None:
        super().__init__(table)
        self._calls: list[_Call] = []

    # Branches and tags ----------------------------------------------------------------------

    def create_branch(self, name: str, snapshot_id: int | None = None) -> ManageSnapshots:
        """A branch at `snapshot_id` (default: the current snapshot)."""
        if snapshot_id is None:
            snapshot_id = self._start.current_snapshot_id
            if snapshot_id is None:
                raise ValidationError(f"{self.table.name}: no snapshot to branch from")
        target = snapshot_id

        def create(refs: _Refs) -> None:
            refs.absent(name)
            refs.put(name, SnapshotRef(refs.snapshot(target), BRANCH))

        return self._call(create)

    def create_tag(self, name: str, snapshot_id: int) -> ManageSnapshots:
        def create(refs: _Refs) -> None:
            refs.absent(name)
            refs.put(name, SnapshotRef(refs.snapshot(snapshot_id), TAG))

        return self._call(create)

    def remove_branch(self, name: str) -> ManageSnapshots:
        def remove(refs: _Refs) -> None:
            refs.get(name, BRANCH)
            refs.drop(name)

        return self._call(remove)

    def remove_tag(self, name: str) -> ManageSnapshots:
        def remove(refs: _Refs) -> None:
            refs.get(name, TAG)
            refs.drop(name)

        return self._call(remove)

    def rename_branch(self, name: str, new_name: str) -> ManageSnapshots:
        def rename(refs: _Refs) -> None:
            ref = refs.get(name, BRANCH)
            refs.absent(new_name)
            refs.drop(name)
            refs.put(new_name, ref)

        return self._call(rename)

    def replace_tag(self, name: str, snapshot_id: int) -> ManageSnapshots:
        def move(refs: _Refs) -> None:
            ref = refs.get(name, TAG)
            refs.put(name, replace(ref, snapshot_id=refs.snapshot(snapshot_id)))

        return self._call(move)

    def replace_branch(self, name: str, snapshot_id: int) -> ManageSnapshots:
        """Point a branch at any snapshot, keeping its retention settings."""
        return self._move_branch(name, lambda refs: refs.snapshot(snapshot_id), "replace")

    def fast_forward(self, branch: str, to: str) -> ManageSnapshots:
        """Move `branch` to the head of ref `to`; its head must be an ancestor of that."""

        def forward(refs: _Refs) -> None:
            ref = refs.get(branch, BRANCH)
            target = refs.get(to).snapshot_id
            if not refs.is_ancestor(ref.snapshot_id, target):
                raise ValidationError(
                    f"{self.table.name}: cannot fast-forward {branch!r}: its head "
                    f"{ref.snapshot_id} is not an ancestor of {to!r} ({target})"
                )
            refs.put(branch, replace(ref, snapshot_id=target))

        return self._call(forward)

    # Rollback -------------------------------------------------------------------------------

    def rollback_to(self, snapshot_id: int, branch: str = MAIN_BRANCH) -> ManageSnapshots:
        """Move `branch` back to one of its ancestors."""

        def target(refs: _Refs) -> int:
            head = refs.get(branch, BRANCH).snapshot_id
            if not refs.is_ancestor(refs.snapshot(snapshot_id), head):
                raise ValidationError(
                    f"{self.table.name}: cannot roll {branch!r} back to snapshot {snapshot_id}: "
                    f"it is not an ancestor of the branch head {head}"
                )
            return snapshot_id

        return self._move_branch(branch, target, "roll back")

    def rollback_to_time(self, timestamp_ms: int, branch: str = MAIN_BRANCH) -> ManageSnapshots:
        """Roll back to the newest ancestor of the branch written before `timestamp_ms`."""
        head = self._start.snapshot_for_ref(branch).snapshot_id
        older = [s for s in self._start.ancestors_of(head) if s.timestamp_ms < timestamp_ms]
        if not older:
            raise ValidationError(
                f"{self.table.name}: {branch!r} has no snapshot older than {timestamp_ms}"
            )
        return self.rollback_to(max(older, key=lambda s: s.timestamp_ms).snapshot_id, branch)

    def set_current_snapshot(self, snapshot_id: int) -> ManageSnapshots:
        """Make any snapshot (an ancestor or not) the head of `main`."""
        return self._move_branch(MAIN_BRANCH, lambda refs: refs.snapshot(snapshot_id), "set")

    # Retention ------------------------------------------------------------------------------

    def set_min_snapshots_to_keep(self, branch: str, count: int) -> ManageSnapshots:
        return self._retention(branch, BRANCH, min_snapshots_to_keep=count)

    def set_max_snapshot_age_ms(self, branch: str, age_ms: int) -> ManageSnapshots:
        return self._retention(branch, BRANCH, max_snapshot_age_ms=age_ms)

    def set_max_ref_age_ms(self, name: str, age_ms: int) -> ManageSnapshots:
        """How long a branch or tag lives past its head's timestamp (never applies to main)."""
        return self._retention(name, None, max_ref_age_ms=age_ms)

    # Internals ------------------------------------------------------------------------------

    def _retention(self, name: str, kind: SnapshotRefType | None, **limits: int) -> ManageSnapshots:
        def set_limit(refs: _Refs) -> None:
            refs.put(name, replace(refs.get(name, kind), **limits))  # SnapshotRef validates

        return self._call(set_limit)

    def _move_branch(
        self, branch: str, target: Callable[[_Refs], int], action: str
    ) -> ManageSnapshots:
        """A branch move guarded by the head it had when the call was made (see module doc)."""
        expected: list[int] = []

        def move(refs: _Refs) -> None:
            ref = refs.get(branch, BRANCH)
            if not expected:
                expected.append(ref.snapshot_id)
            elif ref.snapshot_id != expected[0]:
                raise CommitConflictError(
                    f"{self.table.name}: cannot {action} {branch!r}: it moved from snapshot "
                    f"{expected[0]} to {ref.snapshot_id} concurrently",
                    ref.snapshot_id,
                )
            refs.put(branch, replace(ref, snapshot_id=target(refs)))

        return self._call(move)

    def _call(self, call: _Call) -> ManageSnapshots:
        self._calls.append(call)
        try:
            self._apply(self._start)  # validate now, against the metadata it was made for
        except Exception:
            self._calls.pop()
            raise
        return self

    def _apply(self, base: TableMetadata) -> TableMetadata:
        return self._on(base, self._replay)

    def _replay(self, base: TableMetadata) -> TableMetadata:
        refs = _Refs(self.table.name, base)
        for call in self._calls:
            call(refs)
        return refs.builder.build()
