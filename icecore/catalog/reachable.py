"""Every file a table's metadata references: what a purge deletes and orphan removal keeps."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from icecore.errors import FileError
from icecore.io import FileIO
from icecore.scan import snapshot_manifests
from icecore.spec.manifest import read_manifest
from icecore.spec.manifest_list import ManifestFile
from icecore.spec.metadata import TableMetadata, read_table_metadata
from icecore.spec.snapshots import Snapshot

LOG = logging.getLogger(__name__)


def _log_unreadable(exc: FileError) -> None:
    LOG.warning("skipping unreadable file: %s", exc)


def reachable_files(
    io: FileIO,
    metadata: TableMetadata,
    include_data: bool = True,
    on_unreadable: Callable[[FileError], None] = _log_unreadable,
) -> Iterator[str]:
    """Every file the table's metadata versions reference, each once: for the current
    metadata and every version still in its metadata log, the manifest lists, manifests
    and (with `include_data`) data and delete files of their snapshots, the statistics
    files, and the metadata files themselves. Each file is yielded after it was read, so
    a caller may delete as it goes.

    Purging leaves data out when `gc.enabled` is false: such a table may share its data
    files with another one (Java's `CatalogUtil.dropTableData` rule). Metadata versions that
    can no longer be read are skipped and reported to `on_unreadable` (default: a warning);
    purging must get as far as it can, while orphan removal must not trust a walk that
    skipped a file a current snapshot needs (it passes a collector and checks).
    """
    versions = [metadata]
    for entry in metadata.metadata_log:
        try:
            versions.append(read_table_metadata(io, entry.metadata_file))
        except FileError as exc:
            on_unreadable(exc)
    # Snapshots are immutable: read each one's manifest list once, however many versions
    # list it, and keep the version that knows its partition specs.
    snapshots: dict[int, tuple[Snapshot, TableMetadata]] = {}
    for version in versions:
        for snapshot in version.snapshots:
            snapshots.setdefault(snapshot.snapshot_id, (snapshot, version))

    seen: set[str] = set()

    def new(location: str) -> bool:
        if location in seen:
            return False
        seen.add(location)
        return True

    manifests: dict[str, tuple[ManifestFile, TableMetadata]] = {}
    for snapshot, version in snapshots.values():
        try:
            for manifest in snapshot_manifests(io, snapshot):
                manifests.setdefault(manifest.manifest_path, (manifest, version))
        except FileError as exc:
            on_unreadable(exc)
        if snapshot.manifest_list and new(snapshot.manifest_list):
            yield snapshot.manifest_list
    for path, (manifest, version) in manifests.items():
        if include_data:
            try:
                spec = version.spec_by_id(manifest.partition_spec_id)
                for entry in read_manifest(io, manifest, spec=spec, include_metrics=False):
                    if new(entry.data_file.file_path):
                        yield entry.data_file.file_path
            except FileError as exc:
                on_unreadable(exc)
        if new(path):
            yield path
    for version in versions:
        for key in ("statistics", "partition-statistics"):
            for stats in version.extra.get(key) or ():
                path = stats.get("statistics-path") if isinstance(stats, dict) else None
                if path and new(path):
                    yield path
    for version in versions:
        if version.metadata_location and new(version.metadata_location):
            yield version.metadata_location
