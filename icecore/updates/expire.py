"""Snapshot expiry as a metadata commit (Java's `RemoveSnapshots`), returning what to delete.

    result = table.expire_snapshots().expire_older_than(cutoff_ms).retain_last(10).commit()
    result.files.data_files  # for the Spark job to delete, in parallel

Which snapshots go follows Java exactly:
- refs older than their `max-ref-age-ms` (table default `history.expire.max-ref-age-ms`,
  forever) are removed, except `main`; age is measured from the ref's snapshot timestamp;
- every remaining branch keeps its head and walks back through its ancestors, keeping each
  while fewer than `min-snapshots-to-keep` are kept or it is younger than the branch's
  `max-snapshot-age-ms` (table defaults `history.expire.min-snapshots-to-keep`, 1, and
  `history.expire.max-snapshot-age-ms`, 5 days; `retain_last` and `expire_older_than` replace
  those defaults); the walk stops at the first ancestor that fails both;
- every remaining tag keeps its snapshot;
- a snapshot in no remaining branch's history and no tag is kept while it is younger than the
  cutoff;
- `expire_snapshot_id` removes a snapshot whatever its age, unless a remaining ref points at
  it. The current snapshot is `main`'s head, so it is never expired.

Branch ancestors past the retention window go even though the branch can "reach" them:
retention is exactly the knob that bounds history, as in Java.

The commit only changes metadata. It returns the files that became unreachable
(`icecore.updates.unreachable`), computed after the swap from the base the commit was applied to
and the committed metadata (plus a fresh load, so that a snapshot committed right after ours
also protects its files), so a long listing never holds a commit open. `plan()` returns the
same result without committing. `gc.enabled=false` refuses expiry, as in Java: such tables
share files with other tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from icecore.errors import ValidationError
from icecore.spec.metadata import TableMetadata
from icecore.spec.metadata_builder import MetadataBuilder
from icecore.spec.metadata_builder import now_ms as current_time_ms
from icecore.spec.properties import (
    GC_ENABLED,
    MAX_REF_AGE_MS,
    MAX_SNAPSHOT_AGE_MS,
    MIN_SNAPSHOTS_TO_KEEP,
)
from icecore.spec.refs import MAIN_BRANCH
from icecore.updates.base import ReplayedUpdate
from icecore.updates.unreachable import UnreachableFiles, unreachable_files

if TYPE_CHECKING:
    from icecore.table import Table


@dataclass(frozen=True)
class ExpirationResult:
    """What an expiry removed (or, from `plan()`, would remove) and the files left unreachable.

    `metadata` is the committed metadata, or for a plan the metadata a commit would write.
    """

    metadata: TableMetadata = field(repr=False)
    expired_snapshot_ids: frozenset[int]
    removed_refs: frozenset[str]
    files: UnreachableFiles
    committed: bool


class ExpireSnapshots(ReplayedUpdate):
    """Configure, then `plan()` or `commit()`. Ages are measured from `now_ms` (default: now)."""

    def __init__(self, table: Table, *, now_ms: int | None = None) -> None:
        super().__init__(table)
        self._now = now_ms if now_ms is not None else current_time_ms()
        self._older_than: int | None = None
        self._min_to_keep: int | None = None
        self._ids: set[int] = set()
        self._applied_to: TableMetadata | None = None

    def expire_older_than(self, timestamp_ms: int) -> ExpireSnapshots:
        """Default cutoff for branches without their own `max-snapshot-age-ms`."""
        self._older_than = timestamp_ms
        return self

    def retain_last(self, count: int) -> ExpireSnapshots:
        """Default minimum history for branches without their own `min-snapshots-to-keep`."""
        if count < 1:
            raise ValidationError(f"must retain at least 1 snapshot, not {count}")
        self._min_to_keep = count
        return self

    def expire_snapshot_id(self, snapshot_id: int) -> ExpireSnapshots:
        self._start.snapshot_by_id(snapshot_id)  # NotFoundError naming the table
        self._ids.add(snapshot_id)
        return self

    def plan(self) -> ExpirationResult:
        """The result of committing now, without committing."""
        base = self.table.metadata
        updated = self._apply(base)
        return _result(self.table, base, updated, [updated], committed=False)

    def commit(self) -> ExpirationResult:  # type: ignore[override]
        """Commit (with retries) and return the result; unlike other updates, not just the
        metadata. Nothing is written when nothing would expire."""
        base = self.table.metadata
        doomed, refs = self._on(base, self._select)
        if not doomed and not refs:
            return ExpirationResult(base, frozenset(), frozenset(), UnreachableFiles(), False)
        committed = super().commit()
        before = self._applied_to or base
        try:
            fresh = self.table.refresh().metadata
            return _result(self.table, before, committed, [committed, fresh], committed=True)
        except Exception as exc:
            exc.add_note(
                f"the expiry of {self.table.name} was committed ({committed.metadata_location}); "
                "files it left unreachable are now orphans for orphan-file cleanup"
            )
            raise

    # Selection ------------------------------------------------------------------------------

    def _apply(self, base: TableMetadata) -> TableMetadata:
        self._applied_to = base
        return self._on(base, self._expire)

    def _expire(self, base: TableMetadata) -> TableMetadata:
        doomed, refs = self._select(base)
        builder = MetadataBuilder(base)
        for name in sorted(refs):
            builder.remove_ref(name)
        builder.remove_snapshots(doomed)
        return builder.build()

    def _select(self, base: TableMetadata) -> tuple[set[int], set[str]]:
        """(snapshot ids to remove, ref names to remove) for `base`."""
        if not GC_ENABLED.read(base.properties):
            raise ValidationError(
                f"cannot expire snapshots of {self.table.name}: gc.enabled is false (its files "
                "may be shared with other tables)"
            )
        now = self._now
        older_than = self._older_than
        if older_than is None:
            older_than = now - MAX_SNAPSHOT_AGE_MS.read(base.properties)
        min_to_keep = self._min_to_keep or MIN_SNAPSHOTS_TO_KEEP.read(base.properties)
        max_ref_age = MAX_REF_AGE_MS.read(base.properties)

        snapshots = {s.snapshot_id: s for s in base.snapshots}
        kept_refs = {}
        for name, ref in base.refs.items():
            limit = ref.max_ref_age_ms if ref.max_ref_age_ms is not None else max_ref_age
            snapshot = snapshots.get(ref.snapshot_id)
            if name == MAIN_BRANCH or (
                snapshot is not None and (limit < 0 or now - snapshot.timestamp_ms <= limit)
            ):
                kept_refs[name] = ref
        by_snapshot: dict[int, list[str]] = {}
        for name, ref in kept_refs.items():
            by_snapshot.setdefault(ref.snapshot_id, []).append(name)
        for snapshot_id in sorted(self._ids):
            if snapshot_id in by_snapshot:
                raise ValidationError(
                    f"cannot expire snapshot {snapshot_id} of {self.table.name}: still "
                    f"referenced by {sorted(by_snapshot[snapshot_id])}"
                )

        retained = set(by_snapshot)
        in_history = set(by_snapshot)  # tagged snapshots and every kept branch's ancestry
        for ref in kept_refs.values():
            if not ref.is_branch:
                continue
            cutoff = older_than
            if ref.max_snapshot_age_ms is not None:
                cutoff = now - ref.max_snapshot_age_ms
            keep = ref.min_snapshots_to_keep or min_to_keep
            in_window = True
            for n, ancestor in enumerate(base.ancestors_of(ref.snapshot_id)):
                in_history.add(ancestor.snapshot_id)
                in_window = in_window and (n < keep or ancestor.timestamp_ms >= cutoff)
                if in_window:
                    retained.add(ancestor.snapshot_id)
        retained.update(
            s.snapshot_id
            for s in base.snapshots
            if s.snapshot_id not in in_history and s.timestamp_ms >= older_than
        )
        doomed = (set(snapshots) - retained) | (self._ids & set(snapshots))
        return doomed, set(base.refs) - set(kept_refs)


def _result(
    table: Table,
    before: TableMetadata,
    updated: TableMetadata,
    after: list[TableMetadata],
    *,
    committed: bool,
) -> ExpirationResult:
    expired = {s.snapshot_id for s in before.snapshots} - {s.snapshot_id for s in updated.snapshots}
    return ExpirationResult(
        metadata=updated,
        expired_snapshot_ids=frozenset(expired),
        removed_refs=frozenset(set(before.refs) - set(updated.refs)),
        files=unreachable_files(table.io, before, after),
        committed=committed,
    )
