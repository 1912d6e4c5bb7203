"""Which files a snapshot expiry leaves unreachable (Java's `ReachableFileCleanup`).

Computed from the metadata before and after the expiry, by reading manifest lists and
manifests only:
- manifest lists of the removed snapshots;
- manifests some removed snapshot lists and no retained snapshot does;
- data and delete files live (ADDED or EXISTING) in those manifests and live in no manifest of
  a retained snapshot. DELETED entries are not references: a file a retained snapshot records
  as deleted is not needed by it, and a file whose only mention left is a DELETED entry was
  already reported when the manifest that had it live went;
- statistics and partition-statistics files the metadata no longer lists.

This is the reachability rule, not Java's incremental one: it is right with branches, tags and
rollbacks, where "deleted by an expired snapshot" does not imply "unused". The retained side
is read only where it can matter: manifests of the same content and partition spec as some
candidate file (a file always stays in manifests of the spec it was written with), and not at
all once no candidate is left.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from icecore.io import FileIO
from icecore.scan import snapshot_manifests
from icecore.spec.manifest import FileContent, read_manifest
from icecore.spec.manifest_list import ManifestContent, ManifestFile
from icecore.spec.metadata import TableMetadata
from icecore.spec.partitioning import PartitionSpec
from icecore.spec.snapshots import Snapshot

_STATISTICS_KEYS = ("statistics", "partition-statistics")


@dataclass(frozen=True)
class UnreachableFiles:
    """Files nothing in the table references any more, by kind; all absolute paths."""

    data_files: frozenset[str] = field(default_factory=frozenset)
    position_delete_files: frozenset[str] = field(default_factory=frozenset)
    equality_delete_files: frozenset[str] = field(default_factory=frozenset)
    manifests: frozenset[str] = field(default_factory=frozenset)
    manifest_lists: frozenset[str] = field(default_factory=frozenset)
    statistics_files: frozenset[str] = field(default_factory=frozenset)

    def all_paths(self) -> frozenset[str]:
        return (
            self.data_files
            | self.position_delete_files
            | self.equality_delete_files
            | self.manifests
            | self.manifest_lists
            | self.statistics_files
        )

    def __len__(self) -> int:
        return len(self.all_paths())


def unreachable_files(
    io: FileIO, before: TableMetadata, after: Iterable[TableMetadata]
) -> UnreachableFiles:
    """Files `before` references and none of the `after` metadata versions does.

    Several `after` versions may be given (the committed one and a fresher one): a file
    counts as reachable if any of them can reach it.
    """
    after = list(after)
    kept_ids = {s.snapshot_id for m in after for s in m.snapshots}
    removed = [s for s in before.snapshots if s.snapshot_id not in kept_ids]
    kept = {s.snapshot_id: s for m in after for s in m.snapshots}.values()
    statistics = _statistics_paths(before) - {p for m in after for p in _statistics_paths(m)}
    if not removed:
        return UnreachableFiles(statistics_files=frozenset(statistics))

    manifest_lists = {s.manifest_list for s in removed if s.manifest_list is not None}
    candidates = _manifests_of(io, removed)
    retained = _manifests_of(io, kept)
    gone = [m for path, m in candidates.items() if path not in retained]

    specs = {spec_id: spec for m in (before, *after) for spec_id, spec in m.specs_by_id().items()}
    files: dict[str, tuple[FileContent, int]] = {}  # path -> (content, spec id)
    for manifest in gone:
        for path, content, spec_id in _live_entries(io, manifest, specs):
            files[path] = (content, spec_id)
    by_key = {(content, spec_id) for content, spec_id in files.values()}
    for manifest in retained.values():
        if not files:
            break
        if not any(
            _manifest_content(c) == manifest.content and s == manifest.partition_spec_id
            for c, s in by_key
        ):
            continue
        for path, _, _ in _live_entries(io, manifest, specs):
            files.pop(path, None)

    def of(content: FileContent) -> frozenset[str]:
        return frozenset(p for p, (c, _) in files.items() if c == content)

    return UnreachableFiles(
        data_files=of(FileContent.DATA),
        position_delete_files=of(FileContent.POSITION_DELETES),
        equality_delete_files=of(FileContent.EQUALITY_DELETES),
        manifests=frozenset(m.manifest_path for m in gone),
        manifest_lists=frozenset(manifest_lists),
        statistics_files=frozenset(statistics),
    )


def _manifests_of(io: FileIO, snapshots: Iterable[Snapshot]) -> dict[str, ManifestFile]:
    """Every manifest the snapshots list, by path."""
    return {m.manifest_path: m for s in snapshots for m in snapshot_manifests(io, s)}


def _live_entries(
    io: FileIO, manifest: ManifestFile, specs: dict[int, PartitionSpec]
) -> Iterator[tuple[str, FileContent, int]]:
    entries = read_manifest(
        io,
        manifest,
        spec=specs.get(manifest.partition_spec_id),
        include_metrics=False,
        live_only=True,
    )
    for entry in entries:
        yield entry.data_file.file_path, entry.data_file.content, manifest.partition_spec_id


def _manifest_content(content: FileContent) -> ManifestContent:
    return ManifestContent.DATA if content == FileContent.DATA else ManifestContent.DELETES


def _statistics_paths(metadata: TableMetadata) -> set[str]:
    paths = set()
    for key in _STATISTICS_KEYS:
        entries = metadata.extra.get(key)
        if isinstance(entries, list):
            paths.update(
                e["statistics-path"]
                for e in entries
                if isinstance(e, dict) and isinstance(e.get("statistics-path"), str)
            )
    return paths
