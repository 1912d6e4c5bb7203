"""Merging small manifests into fewer, larger ones (Java's `ManifestMergeManager`).

Planning opens every manifest of a snapshot, so a table that gains one small manifest per
commit slows down with every commit. Merging bin-packs the manifests of one partition spec
(data and delete manifests are merged separately, never together) into bins of about
`commit.manifest.target-size-bytes`, packing from the end so that the under-filled bin is the
newest one, which the next commit then tops up.

The bin holding the commit's first manifest (its new files) is only merged once it gathers
`commit.manifest.min-count-to-merge` manifests: below that, an append writes one new manifest
and carries the others over untouched, which keeps commit cost proportional to what it adds.
Other bins of two or more manifests are always merged, as Java does. A merged manifest is
written once per distinct bin and reused by retries that produce the same bin.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from icecore.spec.manifest import EntryStatus, read_manifest
from icecore.spec.manifest_list import ManifestFile
from icecore.spec.metadata import TableMetadata
from icecore.spec.properties import (
    MANIFEST_MERGE_ENABLED,
    MANIFEST_MIN_MERGE_COUNT,
    MANIFEST_TARGET_SIZE_BYTES,
)

if TYPE_CHECKING:
    from icecore.commit.producer import SnapshotProducer


def pack_end(
    items: Sequence[ManifestFile], target: int, weight: Callable[[ManifestFile], int]
) -> list[list[ManifestFile]]:
    """Java's `ListPacker(target, lookback=1).packEnd`: consecutive bins, order kept, filled
    from the end. An item heavier than `target` gets a bin of its own."""
    bins: list[list[ManifestFile]] = []
    current: list[ManifestFile] = []
    current_weight = 0
    for item in reversed(items):
        w = weight(item)
        if current and current_weight + w > target:
            bins.append(current)
            current, current_weight = [], 0
        current.append(item)
        current_weight += w
    if current:
        bins.append(current)
    return [list(reversed(b)) for b in reversed(bins)]


class ManifestMerger:
    """Merges the manifests of one content type for one producer; caches merged outputs."""

    def __init__(self, producer: SnapshotProducer) -> None:
        self._producer = producer
        self._merged: dict[tuple[str, ...], ManifestFile] = {}
        self.replaced_count = 0

    def merge(self, base: TableMetadata, manifests: list[ManifestFile]) -> list[ManifestFile]:
        """`manifests` (new ones first) after merging; the order of their contents is kept."""
        self.replaced_count = 0
        enabled = MANIFEST_MERGE_ENABLED.read(base.properties)
        if not enabled or not manifests:
            return manifests
        target = MANIFEST_TARGET_SIZE_BYTES.read(base.properties)
        min_count = MANIFEST_MIN_MERGE_COUNT.read(base.properties)
        first = manifests[0].manifest_path
        groups: dict[int, list[ManifestFile]] = {}
        for m in manifests:
            groups.setdefault(m.partition_spec_id, []).append(m)
        out: list[ManifestFile] = []
        for spec_id in sorted(groups, reverse=True):  # Java's order: newest spec first
            for bin_ in pack_end(groups[spec_id], target, lambda m: m.manifest_length):
                holds_first = any(m.manifest_path == first for m in bin_)
                if len(bin_) == 1 or (holds_first and len(bin_) < min_count):
                    out.extend(bin_)
                else:
                    out.append(self._merged_manifest(base, spec_id, bin_))
        return out

    def _merged_manifest(
        self, base: TableMetadata, spec_id: int, bin_: list[ManifestFile]
    ) -> ManifestFile:
        own_id = self._producer.snapshot_id
        self.replaced_count += sum(1 for m in bin_ if m.added_snapshot_id != own_id)
        key = tuple(m.manifest_path for m in bin_)
        cached = self._merged.get(key)
        if cached is not None:
            return cached
        spec = base.spec_by_id(spec_id)
        writer = self._producer.new_manifest_writer(base, spec, bin_[0].content)
        io = self._producer.table.io
        for manifest in bin_:
            for entry in read_manifest(io, manifest, spec=spec):
                if entry.status is EntryStatus.DELETED:
                    # Only this snapshot's deletes are news; older ones were already recorded.
                    if entry.snapshot_id == own_id:
                        writer.delete(entry)
                elif entry.status is EntryStatus.ADDED and entry.snapshot_id == own_id:
                    writer.add(entry.data_file, entry.sequence_number)
                else:
                    writer.existing(entry)
        merged = writer.close()
        self._merged[key] = merged
        return merged
