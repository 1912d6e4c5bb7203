"""Putting an expired snapshot back, tagged, without touching the table's current state.

    RestoreSnapshot(table, snapshot, tag="restored-123").commit()

Its files must be back first (`icecore.trash.snapshots`); this commit is metadata only: it
adds the snapshot, a tag pointing at it (so every engine reads it by id or by tag, and no
expiry takes it again while the tag stands), and its statistics entries. `main` and every
other ref stay where they are.

The snapshot comes back with the table's next sequence number, not its old one. Iceberg
Java's `TableMetadata.Builder.addSnapshot` (and PyIceberg's, and iceberg-rust's, so every
REST catalog built on them) refuses a snapshot whose sequence number is not above the
table's `last-sequence-number` unless it has no parent, and then sets `last-sequence-number`
to it: the old number would be refused, or would move the table's counter back so that the
next commit reuses numbers that existing files carry, and delete files would then apply to
the wrong data. What the snapshot reads does not depend on its own number: its manifest list
holds every manifest's sequence numbers, and entries inherit theirs from there (spec,
"Sequence Number Inheritance"), so the restored snapshot reads exactly what it read before.

v3 row lineage: rows keep the ids they had, since the manifest list assigns each manifest's
`first_row_id`. The re-added snapshot assigns no new ids: its `first-row-id` is the table's
`next-row-id` and its `added-rows` 0 ("required even if a commit does not assign any ID
space", spec, "Snapshot Row IDs"), which Java's check (`first-row-id` not behind
`next-row-id`) accepts and which leaves `next-row-id` where it is.

Its timestamp, parent and summary are kept: they say when and from what it was written. A
tag's age is counted from its snapshot's timestamp, so with a table default
`history.expire.max-ref-age-ms` the tag gets its own, that long from the restore: the next
expiry would otherwise drop a tag older than that at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from icecore.errors import ValidationError
from icecore.spec.metadata import TableMetadata
from icecore.spec.metadata_builder import PARTITION_STATISTICS, STATISTICS, MetadataBuilder
from icecore.spec.metadata_builder import now_ms as current_time_ms
from icecore.spec.properties import MAX_REF_AGE_MS
from icecore.spec.refs import SnapshotRef, SnapshotRefType
from icecore.spec.snapshots import Snapshot
from icecore.updates.base import ReplayedUpdate

if TYPE_CHECKING:
    from icecore.table import Table

RESTORED_TAG_PREFIX = "restored-"


def restored_tag(snapshot_id: int) -> str:
    return f"{RESTORED_TAG_PREFIX}{snapshot_id}"


class RestoreSnapshot(ReplayedUpdate):
    """Re-add `snapshot` under the tag `tag` (default `restored-<id>`); see the module doc."""

    def __init__(
        self,
        table: Table,
        snapshot: Snapshot,
        *,
        tag: str | None = None,
        statistics: Sequence[dict[str, Any]] = (),
        partition_statistics: Sequence[dict[str, Any]] = (),
        now_ms: int | None = None,
    ) -> None:
        super().__init__(table)
        self.snapshot = snapshot
        self.tag = tag or restored_tag(snapshot.snapshot_id)
        self._statistics = list(statistics)
        self._partition_statistics = list(partition_statistics)
        self._now = now_ms if now_ms is not None else current_time_ms()

    def _apply(self, base: TableMetadata) -> TableMetadata:
        return self._on(base, self._restore)

    def _restore(self, base: TableMetadata) -> TableMetadata:
        snapshot_id = self.snapshot.snapshot_id
        if any(s.snapshot_id == snapshot_id for s in base.snapshots):
            raise ValidationError(f"{self.table.name}: snapshot {snapshot_id} is in the table")
        if self.tag in base.refs:
            kind = base.refs[self.tag].type.value
            raise ValidationError(f"{self.table.name}: a {kind} named {self.tag!r} exists")
        lineage: dict[str, Any] = {}
        if base.format_version >= 3:
            lineage = {"first_row_id": base.next_row_id, "added_rows": 0}
        snapshot = replace(self.snapshot, sequence_number=base.last_sequence_number + 1, **lineage)
        builder = MetadataBuilder(base)
        builder.add_snapshot(snapshot)
        builder.set_ref(self.tag, SnapshotRef(snapshot_id, SnapshotRefType.TAG, **self._age(base)))
        for statistics in self._statistics:
            builder.set_statistics(statistics, STATISTICS)
        for statistics in self._partition_statistics:
            builder.set_statistics(statistics, PARTITION_STATISTICS)
        return builder.build()

    def _age(self, base: TableMetadata) -> dict[str, int]:
        limit = MAX_REF_AGE_MS.read(base.properties)
        if limit < 0:
            return {}
        return {"max_ref_age_ms": max(0, self._now - self.snapshot.timestamp_ms) + limit}
