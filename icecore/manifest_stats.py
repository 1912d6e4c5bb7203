"""How a snapshot's files are spread over manifests, and whether a manifest rewrite is due,
from its manifest list alone (no manifest is opened).

Every planner opens every manifest of the snapshot it reads (those its partition summaries do
not rule out), so the count of manifests is a cost every scan pays. A table written in small
commits gains one small manifest per commit; data compaction does not help, it rewrites files,
not the manifests listing them. `rewrite_manifests` does.

Figures count the manifests planners open: those listing live (added or existing) files; a
manifest of DELETED entries only is skipped by every planner.

Small manifest: below 0.75 x `commit.manifest.target-size-bytes` (default 8 MiB), the
fraction that makes a data file small too (`icecore.health`).

The default trigger: more than 100 data manifests in the snapshot, or small manifests of one
partition spec and content (data or deletes, which are never merged together) adding up to
at least a target-size manifest: merging them saves at least one manifest open per scan.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from icecore.spec.manifest_list import ManifestContent, ManifestFile
from icecore.spec.metadata import TableMetadata
from icecore.spec.properties import MANIFEST_TARGET_SIZE_BYTES

SMALL_MANIFEST_FRACTION = 0.75
MAX_DATA_MANIFESTS = 100


def small_manifest_bytes(target_size_bytes: int) -> int:
    """Manifests shorter than this are small."""
    return int(target_size_bytes * SMALL_MANIFEST_FRACTION)


def lists_live_files(manifest: ManifestFile) -> bool:
    """Whether planners open `manifest`: it lists added or existing files (one of DELETED
    entries only is skipped)."""
    return manifest.has_added_files or manifest.has_existing_files


def manifest_target_size(metadata: TableMetadata) -> int:
    return MANIFEST_TARGET_SIZE_BYTES.read(metadata.properties)


@dataclass
class ContentManifests:
    """The manifests of one content (data or deletes) in one partition spec."""

    manifests: int = 0
    bytes: int = 0
    small_manifests: int = 0
    small_bytes: int = 0

    def to_json(self) -> dict[str, int]:
        return {
            "manifests": self.manifests,
            "bytes": self.bytes,
            "small_manifests": self.small_manifests,
            "small_bytes": self.small_bytes,
        }

    @classmethod
    def from_json(cls, values: Mapping[str, int]) -> ContentManifests:
        return cls(
            values["manifests"], values["bytes"], values["small_manifests"], values["small_bytes"]
        )


@dataclass
class SpecManifests:
    """The data and delete manifests of one partition spec."""

    spec_id: int
    data: ContentManifests = field(default_factory=ContentManifests)
    deletes: ContentManifests = field(default_factory=ContentManifests)

    def of(self, content: ManifestContent) -> ContentManifests:
        return self.data if content == ManifestContent.DATA else self.deletes


@dataclass(frozen=True)
class SmallManifests:
    """More than one small manifest of one spec and content: merging them saves opens."""

    spec_id: int
    kind: str  # "data" or "delete"
    counts: ContentManifests


@dataclass(frozen=True)
class ManifestStats:
    """A snapshot's manifests per partition spec, and what the default trigger makes of them."""

    target_size_bytes: int
    specs: dict[int, SpecManifests]

    @property
    def small_threshold_bytes(self) -> int:
        return small_manifest_bytes(self.target_size_bytes)

    @property
    def data_manifests(self) -> int:
        return sum(s.data.manifests for s in self.specs.values())

    @property
    def delete_manifests(self) -> int:
        return sum(s.deletes.manifests for s in self.specs.values())

    @property
    def small_manifests(self) -> int:
        return sum(s.data.small_manifests + s.deletes.small_manifests for s in self.specs.values())

    @property
    def bytes(self) -> int:
        return sum(s.data.bytes + s.deletes.bytes for s in self.specs.values())

    def groups(self) -> list[tuple[int, str, ContentManifests]]:
        """(spec id, "data" or "delete", counts) of every spec and content, in spec order."""
        return [
            (spec.spec_id, kind, counts)
            for spec in sorted(self.specs.values(), key=lambda s: s.spec_id)
            for kind, counts in (("data", spec.data), ("delete", spec.deletes))
            if counts.manifests
        ]

    def mergeable_small(self) -> list[SmallManifests]:
        """The groups holding more than one small manifest, the most small bytes first."""
        found = [SmallManifests(s, k, c) for s, k, c in self.groups() if c.small_manifests > 1]
        return sorted(found, key=lambda g: -g.counts.small_bytes)

    def full_small(self) -> SmallManifests | None:
        """The first group (in spec order) whose small manifests add up to a target manifest."""
        full = [g for g in self.mergeable_small() if g.counts.small_bytes >= self.target_size_bytes]
        return min(full, key=lambda g: (g.spec_id, g.kind), default=None)

    def rewrite_due(self, max_data_manifests: int = MAX_DATA_MANIFESTS) -> bool:
        """The trigger: more than `max_data_manifests` data manifests, or small manifests of
        one spec and content adding up to a target manifest."""
        return self.data_manifests > max_data_manifests or self.full_small() is not None

    def rewrite_reason(self, max_data_manifests: int = MAX_DATA_MANIFESTS) -> str | None:
        """Why a manifest rewrite is due, in words; None when it is not."""
        if self.data_manifests > max_data_manifests:
            return f"{self.data_manifests} data manifests (more than {max_data_manifests})"
        full = self.full_small()
        if full is None:
            return None
        return (
            f"{full.counts.small_manifests} small {full.kind} manifests of partition spec "
            f"{full.spec_id} add up to {full.counts.small_bytes} bytes, at least a "
            f"target-size manifest ({self.target_size_bytes} bytes)"
        )

    def to_json(self) -> dict[str, object]:
        """The figures (no verdict: the trigger's threshold is the caller's policy)."""
        return {
            "target_size_bytes": self.target_size_bytes,
            "data_manifests": self.data_manifests,
            "delete_manifests": self.delete_manifests,
            "small_manifests": self.small_manifests,
            "bytes": self.bytes,
            "specs": {
                str(s.spec_id): {"data": s.data.to_json(), "deletes": s.deletes.to_json()}
                for s in sorted(self.specs.values(), key=lambda s: s.spec_id)
            },
        }

    @classmethod
    def from_json(cls, values: Mapping[str, Any]) -> ManifestStats:
        """Back from `to_json()` (the totals are recomputed from the specs)."""
        specs = {
            int(spec_id): SpecManifests(
                int(spec_id),
                ContentManifests.from_json(counts["data"]),
                ContentManifests.from_json(counts["deletes"]),
            )
            for spec_id, counts in values["specs"].items()
        }
        return cls(values["target_size_bytes"], specs)


def manifest_stats(manifests: Iterable[ManifestFile], target_size_bytes: int) -> ManifestStats:
    """The figures of a snapshot's manifest list (`icecore.scan.snapshot_manifests`)."""
    small = small_manifest_bytes(target_size_bytes)
    specs: dict[int, SpecManifests] = {}
    for m in manifests:
        if not lists_live_files(m):
            continue
        spec = specs.setdefault(m.partition_spec_id, SpecManifests(m.partition_spec_id))
        counts = spec.of(m.content)
        counts.manifests += 1
        counts.bytes += m.manifest_length
        if m.manifest_length < small:
            counts.small_manifests += 1
            counts.small_bytes += m.manifest_length
    return ManifestStats(target_size_bytes, specs)


def table_manifest_stats(
    metadata: TableMetadata, manifests: Iterable[ManifestFile]
) -> ManifestStats:
    """`manifest_stats` at the table's `commit.manifest.target-size-bytes`."""
    return manifest_stats(manifests, manifest_target_size(metadata))
