"""Writing the manifests of a manifest rewrite: runs of entries in clustering order, each a
manifest (the driver's threads and Spark tasks both write through here), and how large a
manifest of so many entries gets.

Every entry is written EXISTING with the snapshot id, data and file sequence numbers and (v3)
`first_row_id` it was read with (`ManifestWriter.existing`): the manifests carry no number of
their own, so they are the same whichever commit attempt lists them.

Names: `<metadata>/<run>-m-<uuid>.avro`, a fresh uuid per manifest, so that two attempts of a
Spark task never write the same file: the one whose description the driver collects is the
one it commits. What a failed attempt wrote is referenced by nothing.

Sizes: a manifest is its Avro header (the table schema, the spec, the Avro schema) plus its
entries, compressed in blocks of many. The length of a small manifest is mostly header, so
a rewrite of many small ones cannot estimate its output from their lengths; `EntrySize`
measures both parts by encoding a sample of real entries as the rewrite will write them.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import islice

from icecore.io import FileIO
from icecore.spec.manifest import ManifestEntry, ManifestWriter
from icecore.spec.manifest_list import ManifestContent, ManifestFile
from icecore.spec.partitioning import PartitionSpec
from icecore.spec.schema import Schema

SAMPLE_ENTRIES = 1000
WRITER_SLACK = 1.2  # a manifest may overshoot the target this much (as in Java's Spark action)
ROLL_CHECK_ENTRIES = 250  # how often a writer's length is looked at (as Java's)


@dataclass(frozen=True)
class ManifestFormat:
    """How one group's manifests are encoded."""

    spec: PartitionSpec
    schema: Schema
    content: ManifestContent
    format_version: int
    codec: str  # Avro's name of the table's manifest codec

    def writer(self, io: FileIO, location: str, snapshot_id: int) -> ManifestWriter:
        return ManifestWriter(
            io,
            location,
            self.spec,
            self.schema,
            snapshot_id,
            content=self.content,
            codec=self.codec,
            format_version=self.format_version,
        )


@dataclass(frozen=True)
class EntrySize:
    """What a manifest of this format takes: its header, and each entry on average."""

    header: int
    entry: float

    @classmethod
    def measure(
        cls, io: FileIO, form: ManifestFormat, sample: Iterable[ManifestEntry]
    ) -> EntrySize:
        """Encode up to `SAMPLE_ENTRIES` of `sample`, in its order (nothing is written)."""
        writer = form.writer(io, "sample.avro", 0)
        header = writer.length()
        count = 0
        for entry in islice(sample, SAMPLE_ENTRIES):
            writer.existing(entry)
            count += 1
        entries = writer.length(flush=True) - header
        return cls(header, entries / count if count else 0.0)

    def manifests_for(self, entries: int, target_size_bytes: int, slack: float = 1.0) -> int:
        """How many manifests of at most about `target_size_bytes` (times `slack`, the
        overshoot a writer accepts rather than cut off a few entries) hold `entries`."""
        if not entries:
            return 0
        room = max(target_size_bytes - self.header, self.entry, 1) * slack
        return max(1, math.ceil(entries * self.entry / room))


@dataclass(frozen=True)
class ManifestOutput:
    """Where one group's manifests go, and for which snapshot."""

    form: ManifestFormat
    directory: str  # the table's metadata directory
    run: str  # names the run's files
    snapshot_id: int  # the snapshot that will list them

    def location(self) -> str:
        return f"{self.directory.rstrip('/')}/{self.run}-m-{uuid.uuid4()}.avro"


def even_slices(count: int, parts: int) -> list[slice]:
    """`count` items cut into `parts` consecutive runs of about the same length (fewer when
    there are fewer items; none for none)."""
    parts = max(1, min(parts, count))
    return [slice(p * count // parts, (p + 1) * count // parts) for p in range(parts) if count]


def write_manifests(
    io: FileIO,
    output: ManifestOutput,
    entries: Sequence[ManifestEntry],
    parts: int,
    target_size_bytes: int,
) -> list[ManifestFile]:
    """`entries`, in their order, as `parts` manifests of about the same number of entries;
    a part that turns out larger than `WRITER_SLACK` x the target (its entries took more than
    `EntrySize` said) rolls over to another manifest, as Java's rolling writer does."""
    limit = int(target_size_bytes * WRITER_SLACK)
    written = []
    for part in even_slices(len(entries), parts):
        writer = None
        for n, entry in enumerate(entries[part]):
            if writer is not None and n % ROLL_CHECK_ENTRIES == 0 and writer.length() >= limit:
                written.append(writer.close())
                writer = None
            if writer is None:
                writer = output.form.writer(io, output.location(), output.snapshot_id)
            writer.existing(entry)
        if writer is not None:
            written.append(writer.close())
    return written
