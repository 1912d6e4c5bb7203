"""Writing the manifests of a manifest rewrite: a run of entries in clustering order, cut into
manifests of about equal size (the driver's threads and Spark tasks both write through here).

Every entry is written EXISTING with the snapshot id, data and file sequence numbers and (v3)
`first_row_id` it was read with (`ManifestWriter.existing`): the manifests carry no number of
their own, so they are the same whichever commit attempt lists them.

Names: `<metadata>/<run>-m-<uuid>.avro`, a fresh uuid per manifest, so that two attempts of a
Spark task never write the same file: the one whose description the driver collects is the
one it commits. What a failed attempt wrote is referenced by nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from icecore.io import FileIO
from icecore.spec.manifest import ManifestEntry, ManifestWriter
from icecore.spec.manifest_list import ManifestContent, ManifestFile
from icecore.spec.partitioning import PartitionSpec
from icecore.spec.schema import Schema


@dataclass(frozen=True)
class ManifestOutput:
    """Where and how one group's manifests are written."""

    directory: str  # the table's metadata directory
    run: str  # names the run's files
    snapshot_id: int  # the snapshot that will list them
    format_version: int
    codec: str  # Avro's name of the table's manifest codec
    spec: PartitionSpec
    schema: Schema
    content: ManifestContent

    def location(self) -> str:
        return f"{self.directory.rstrip('/')}/{self.run}-m-{uuid.uuid4()}.avro"


def even_slices(count: int, parts: int) -> list[slice]:
    """`count` items cut into `parts` consecutive runs of about the same length (fewer when
    there are fewer items; none for none)."""
    parts = max(1, min(parts, count))
    return [slice(p * count // parts, (p + 1) * count // parts) for p in range(parts) if count]


def write_manifest(
    io: FileIO, output: ManifestOutput, entries: Sequence[ManifestEntry]
) -> ManifestFile:
    """One manifest of `entries`, in their order, all EXISTING."""
    writer = ManifestWriter(
        io,
        output.location(),
        output.spec,
        output.schema,
        output.snapshot_id,
        content=output.content,
        codec=output.codec,
        format_version=output.format_version,
    )
    for entry in entries:
        writer.existing(entry)
    return writer.close()


def write_manifests(
    io: FileIO, output: ManifestOutput, entries: Sequence[ManifestEntry], parts: int
) -> list[ManifestFile]:
    """`entries`, in their order, as `parts` manifests of about the same number of entries."""
    return [write_manifest(io, output, entries[s]) for s in even_slices(len(entries), parts)]
