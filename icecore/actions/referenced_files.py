"""Every file a table's metadata versions reference, for orphan-file removal.

`icecore.catalog.reachable.reachable_files` (the purge walk) gives the manifest lists, manifests,
data and delete files of the snapshots of the current metadata and of every version in its
metadata log, the statistics files and the metadata files. A purge goes on past a manifest
list or manifest it cannot read. Orphan removal may do so only for snapshots the current
metadata no longer has (expiry deleted their manifest lists on purpose, while older metadata
versions still name them): an unreadable manifest list or manifest of a current snapshot is
an error, since every file it lists would look orphaned and be deleted. Iceberg's orphan
removal reads only the current metadata's snapshots; reading the older versions too only
protects more files.

Hadoop-style tables also keep `version-hint.text` next to their metadata files; it is always
referenced.
"""

from __future__ import annotations

from icecore.catalog.reachable import reachable_files
from icecore.errors import FileError
from icecore.io import FileIO
from icecore.jobs.errors import JobError
from icecore.location_provider import metadata_file_location
from icecore.scan import snapshot_manifests
from icecore.spec.metadata import TableMetadata

VERSION_HINT = "version-hint.text"


def _needed(io: FileIO, metadata: TableMetadata, skipped: dict[str, str]) -> list[str]:
    """The skipped files a snapshot of the current metadata needs."""
    needed = []
    for snapshot in metadata.snapshots:
        if snapshot.manifest_list in skipped:
            needed.append(skipped[snapshot.manifest_list])
            continue
        try:
            manifests = snapshot_manifests(io, snapshot)
        except FileError as exc:  # unreadable now, though the walk read it
            needed.append(str(exc))
            continue
        needed.extend(skipped[m.manifest_path] for m in manifests if m.manifest_path in skipped)
    return sorted(set(needed))


def referenced_files(io: FileIO, metadata: TableMetadata, table_name: str) -> set[str]:
    """Every referenced location, as the metadata spells it; JobError if a manifest list or
    manifest of a current snapshot cannot be read."""
    skipped: dict[str, str] = {}

    def collect(exc: FileError) -> None:
        skipped[exc.path] = str(exc)

    referenced = set(reachable_files(io, metadata, include_data=True, on_unreadable=collect))
    if skipped:
        problems = _needed(io, metadata, skipped)
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise JobError(
                f"cannot tell the orphans of {table_name} apart: {problems[0]}{more}; "
                "nothing was deleted"
            )
    referenced.add(metadata_file_location(metadata, VERSION_HINT))
    return referenced
