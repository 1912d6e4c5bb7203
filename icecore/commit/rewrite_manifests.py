"""Replacing manifests with others that list the same files (Java's `BaseRewriteManifests`,
operation `replace`).

A manifest rewrite changes how a snapshot's files are grouped into manifests, never which
files are live or how they apply: the new manifests list every live file of the manifests
they replace as EXISTING, with the snapshot id, data and file sequence numbers (and, format
v3, the `first_row_id`) it had, so a delete that applied before applies after and one that
did not still does not.

    rewrite = table.rewrite_manifests()
    for m in old: rewrite.delete_manifest(m)
    for m in new: rewrite.add_manifest(m)   # written beforehand, e.g. by Spark tasks
    rewrite.commit()

Every attempt is checked against the refreshed branch head: each replaced manifest must still
be listed by it (else `CommitConflictError`: a concurrent compaction or merging append rewrote
it, and the rewrite must be planned again on the new head), and the new manifests must hold as
many live files as the replaced ones, per partition spec and content. Whatever other writers
added meanwhile is kept as it is, behind the new manifests.

Format v3: the new manifests take a `first_row_id` from the manifest list as every new data
manifest does; when every replaced data manifest had one, all their files carry their own ids
and the list assigns them no new id range (`next-row-id` does not grow).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar

from icecore.commit.producer import SnapshotProducer
from icecore.errors import CommitConflictError, ValidationError
from icecore.scan import snapshot_manifests
from icecore.spec.manifest_list import UNASSIGNED_SEQ, ManifestContent, ManifestFile
from icecore.spec.metadata import TableMetadata
from icecore.spec.refs import MAIN_BRANCH
from icecore.spec.snapshots import Operation, Snapshot, SummaryCounts

if TYPE_CHECKING:
    from icecore.table import Table

PROCESSED_ENTRIES = "entries-processed"  # Java's SnapshotSummary.PROCESSED_MANIFEST_ENTRY_COUNT

R = TypeVar("R", bound="RewriteManifests")


class RewriteManifests(SnapshotProducer):
    """`table.rewrite_manifests().delete_manifest(old).add_manifest(new).commit()`."""

    def __init__(self, table: Table, branch: str = MAIN_BRANCH) -> None:
        super().__init__(table, branch)
        self._deleted: dict[str, ManifestFile] = {}
        self._added: dict[str, ManifestFile] = {}
        self._head: list[ManifestFile] = []

    def delete_manifest(self: R, manifest: ManifestFile) -> R:
        """Replace `manifest`, which the branch head must still list when this commits."""
        self._deleted[manifest.manifest_path] = manifest
        return self

    def add_manifest(self: R, manifest: ManifestFile) -> R:
        """Add a manifest of EXISTING entries only, written for this commit (its sequence
        numbers unassigned); it is listed as added by this snapshot."""
        path = manifest.manifest_path
        counts = (manifest.added_files_count, manifest.existing_files_count)
        if None in counts or manifest.deleted_files_count is None:
            raise ValidationError(f"{self.table.name}: {path} has no file counts")
        if manifest.added_files_count or manifest.deleted_files_count:
            raise ValidationError(
                f"{self.table.name}: {path} lists added or deleted files; a manifest rewrite "
                "adds manifests of existing files only"
            )
        if manifest.sequence_number != UNASSIGNED_SEQ:
            raise ValidationError(
                f"{self.table.name}: {path} already has sequence number "
                f"{manifest.sequence_number}; a new manifest's is assigned by the commit"
            )
        if manifest.first_row_id is not None:
            raise ValidationError(
                f"{self.table.name}: {path} already has a first_row_id; the commit assigns it"
            )
        if manifest.partition_spec_id not in self.table.metadata.specs_by_id():
            raise ValidationError(
                f"{self.table.name}: {path} has partition spec {manifest.partition_spec_id}, "
                "which the table does not have"
            )
        self._added[path] = replace(manifest, added_snapshot_id=self.snapshot_id)
        return self

    @property
    def added_manifests(self) -> list[ManifestFile]:
        return list(self._added.values())

    # The attempt --------------------------------------------------------------------------------

    def _operation(self) -> Operation:
        return Operation.REPLACE

    def _validate(self, base: TableMetadata, parent: Snapshot | None) -> None:
        name = self.table.name
        if not self._deleted:
            raise ValidationError(f"{name}: a manifest rewrite must replace at least one manifest")
        if parent is None:
            raise CommitConflictError(
                f"{name}: branch {self.branch!r} has no snapshot any more; the manifests to "
                "replace are gone"
            )
        self._head = snapshot_manifests(self.table.io, parent)
        listed = {m.manifest_path for m in self._head}
        for path in self._deleted:
            if path not in listed:
                raise CommitConflictError(
                    f"{name}: manifest {path} to replace is no longer in snapshot "
                    f"{parent.snapshot_id} (rewritten by a concurrent commit); plan the "
                    "rewrite again",
                    snapshot_id=parent.snapshot_id,
                )
        before = _live_files(name, self._deleted.values())
        after = _live_files(name, self._added.values())
        if before != after:
            raise ValidationError(
                f"{name}: replaced and added manifests must hold the same live files per "
                f"partition spec and content: {dict(before)} replaced, {dict(after)} added"
            )

    def _manifests(self, base: TableMetadata, parent: Snapshot | None) -> list[ManifestFile]:
        kept = [m for m in self._head if m.manifest_path not in self._deleted]
        self._counts = SummaryCounts()
        self._changed_partitions = set()
        self._replaced_manifests = len(self._deleted)
        entries = sum(m.existing_files_count or 0 for m in self._added.values())
        self._properties[PROCESSED_ENTRIES] = str(entries)
        return [*self._added.values(), *kept]

    def _rows_to_assign(self, manifest: ManifestFile) -> int | None:
        if manifest.manifest_path in self._added and all(
            m.first_row_id is not None
            for m in self._deleted.values()
            if m.content == ManifestContent.DATA
        ):
            return 0  # every file read from a manifest with a first_row_id has its own
        return None


def _live_files(table_name: str, manifests: Iterable[ManifestFile]) -> Counter[tuple[int, int]]:
    """Live (added or existing) files per (partition spec, content)."""
    counts: Counter[tuple[int, int]] = Counter()
    for m in manifests:
        if m.added_files_count is None or m.existing_files_count is None:
            raise ValidationError(f"{table_name}: {m.manifest_path} has no file counts")
        live = m.added_files_count + m.existing_files_count
        counts[(m.partition_spec_id, int(m.content))] += live
    return counts
