"""Committing a batch once: the batch id in the snapshot summary, checked before committing.

An Airflow retry runs the ingestion job again with the same `--batch-id`. The job looks for
the id in the summaries of the branch's snapshots before it starts (the batch went through:
nothing to do) and again on every commit attempt against the refreshed table, so that two
runs of one batch racing each other still commit it once: the loser's files are deleted and
it reports the batch as already committed. The id is only found while its snapshot is in the
table's history: expiring it forgets the batch.
"""

from __future__ import annotations

from icecore.commit.producer import SnapshotProducer
from icecore.errors import CommitConflictError
from icecore.spec.metadata import TableMetadata
from icecore.spec.refs import MAIN_BRANCH
from icecore.spec.snapshots import BATCH_ID, Snapshot


class BatchAlreadyCommitted(CommitConflictError):
    """The batch is in the table already (committed by an earlier or a concurrent run)."""


def committed_batch(
    metadata: TableMetadata, batch_id: str, branch: str = MAIN_BRANCH
) -> Snapshot | None:
    """The snapshot of the branch's history that committed `batch_id`, if any."""
    ref = metadata.refs.get(branch)
    if ref is None:
        return None
    for snapshot in metadata.ancestors_of(ref.snapshot_id):
        if snapshot.summary is not None and snapshot.summary.get(BATCH_ID) == batch_id:
            return snapshot
    return None


def guard_batch(producer: SnapshotProducer, batch_id: str) -> SnapshotProducer:
    """Record `batch_id` in the snapshot and refuse to commit it a second time; the check
    runs on every commit attempt against the refreshed metadata."""
    producer.snapshot_property(BATCH_ID, batch_id)

    def validate_batch(base: TableMetadata, parent: Snapshot | None) -> None:
        found = committed_batch(base, batch_id, producer.branch)
        if found is not None:
            raise BatchAlreadyCommitted(
                f"{producer.table.name}: batch {batch_id!r} was committed by snapshot "
                f"{found.snapshot_id} meanwhile",
                snapshot_id=found.snapshot_id,
            )

    return producer.validate_with(validate_batch)
