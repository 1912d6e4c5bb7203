"""The base of every snapshot-producing commit (Java's `SnapshotProducer`).

A producer owns the identity of the snapshot it will add: the snapshot id is drawn once, so
every retry proposes the same snapshot, and the files it writes are named after one commit
uuid. Each attempt (`_apply`) takes the refreshed branch head as parent, lets the operation
validate and assemble its manifests, then writes one manifest list,
`snap-<id>-<attempt>-<uuid>.avro`: manifests leave their sequence numbers unassigned (the
list fills them in), so they are written once and reused by every retry, and a retry only
rewrites the list.

Whatever an attempt wrote that the committed snapshot does not list is deleted afterwards,
and everything is deleted when the commit fails for good; nothing is deleted when the
catalog cannot say whether the swap happened (see `TableUpdate.commit`).
"""

from __future__ import annotations

import logging
import uuid
from abc import abstractmethod
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

from icecore.commit.update import TableUpdate
from icecore.errors import CommitStateUnknownError, FileError, ValidationError
from icecore.location_provider import metadata_file_location
from icecore.spec.manifest import ManifestWriter
from icecore.spec.manifest_list import ManifestContent, ManifestFile, ManifestListWriter
from icecore.spec.metadata import TableMetadata
from icecore.spec.metadata_builder import MetadataBuilder, now_ms
from icecore.spec.partitioning import PartitionSpec
from icecore.spec.properties import MANIFEST_COMPRESSION
from icecore.spec.refs import MAIN_BRANCH
from icecore.spec.snapshots import Operation, Snapshot, SummaryCounts, build_summary

if TYPE_CHECKING:
    from icecore.table import Table

LOG = logging.getLogger(__name__)

# Iceberg's codec names (gzip is Avro's deflate) as fastavro spells them.
_AVRO_CODECS = {"gzip": "deflate", "deflate": "deflate", "none": "null", "uncompressed": "null",
                "snappy": "snappy", "zstd": "zstandard", "bzip2": "bzip2", "xz": "xz"}  # fmt: skip

CREATED_MANIFESTS = "manifests-created"
KEPT_MANIFESTS = "manifests-kept"
REPLACED_MANIFESTS = "manifests-replaced"

P = TypeVar("P", bound="SnapshotProducer")


def new_snapshot_id(metadata: TableMetadata) -> int:
    """A positive random 63-bit id not used by the table, as Java draws them."""
    taken = {s.snapshot_id for s in metadata.snapshots}
    while True:
        candidate = uuid.uuid4().int & ((1 << 63) - 1)
        if candidate and candidate not in taken:
            return candidate


def manifest_codec(metadata: TableMetadata, table_name: str) -> str:
    """The Avro codec of the table's manifests and lists (`write.manifest.compression-codec`)."""
    name = str(MANIFEST_COMPRESSION.read(metadata.properties)).lower()
    if name not in _AVRO_CODECS:
        raise ValidationError(f"{table_name}: unknown {MANIFEST_COMPRESSION.name} {name!r}")
    return _AVRO_CODECS[name]


class SnapshotProducer(TableUpdate):
    """Adds one snapshot to `branch` (main by default). A branch that does not exist yet is
    created by the commit, forking from main's current snapshot.

    `starting_snapshot_id` is the branch head when the operation was created: validation
    looks at what was committed to the branch after it. Operations that must see an older
    state (a rewrite planned on an earlier snapshot) set it with `validate_from_snapshot`.
    """

    def __init__(self, table: Table, branch: str = MAIN_BRANCH) -> None:
        super().__init__(table)
        base = table.metadata
        _require_branch(table, base, branch)
        self.branch = branch
        self.snapshot_id = new_snapshot_id(base)
        head = _branch_head(base, branch)
        self.starting_snapshot_id: int | None = None if head is None else head.snapshot_id
        self._commit_uuid = uuid.uuid4()
        self._manifest_count = 0
        self._list_attempt = 0
        self._properties: dict[str, str] = {}
        self._written: list[str] = []  # manifests and lists, in the order they were written
        self._lists: dict[str, list[ManifestFile]] = {}  # list -> the manifests we wrote in it
        self._counts = SummaryCounts()
        self._changed_partitions: set[tuple[int, tuple]] = set()
        self._replaced_manifests = 0
        self._checks: list[Callable[[TableMetadata, Snapshot | None], None]] = []

    # Options ------------------------------------------------------------------------------

    def validate_with(self: P, check: Callable[[TableMetadata, Snapshot | None], None]) -> P:
        """Run `check(base, branch_head)` on every attempt, after the operation's own
        validation, against the refreshed metadata: a caller's rule (e.g. "this batch was
        not committed meanwhile") gets the same retry-safe treatment as Iceberg's."""
        self._checks.append(check)
        return self

    def snapshot_property(self: P, name: str, value: str) -> P:
        """Add a property to the snapshot summary (e.g. the job that wrote it)."""
        self._properties[str(name)] = str(value)
        return self

    def validate_from_snapshot(self: P, snapshot_id: int) -> P:
        """Validate against every commit to the branch after `snapshot_id`, e.g. the snapshot
        a compaction planned from."""
        self.table.metadata.snapshot_by_id(snapshot_id)
        self.starting_snapshot_id = snapshot_id
        return self

    # What an operation supplies -------------------------------------------------------------

    @abstractmethod
    def _operation(self) -> Operation:
        """The summary's operation; asked after `_manifests`, so it may depend on them."""

    def _validate(self, base: TableMetadata, parent: Snapshot | None) -> None:
        """Raise CommitConflictError if what was committed since the start forbids this."""

    @abstractmethod
    def _manifests(self, base: TableMetadata, parent: Snapshot | None) -> list[ManifestFile]:
        """The new snapshot's manifests; sets `_counts`, `_changed_partitions` and
        `_replaced_manifests` for the summary. Reuses what earlier attempts wrote."""

    def _rows_to_assign(self, manifest: ManifestFile) -> int | None:
        """v3: how many rows of `manifest` (a data manifest without a `first_row_id`) need
        row ids from the list; None for the spec's estimate, every row it lists."""
        return None

    # The attempt --------------------------------------------------------------------------------

    def _apply(self, base: TableMetadata) -> TableMetadata:
        _require_branch(self.table, base, self.branch)
        if any(s.snapshot_id == self.snapshot_id for s in base.snapshots):
            # The catalog reported a lost swap for an attempt that in fact went through.
            # Retrying would add nothing and cleaning up would delete committed files.
            raise CommitStateUnknownError(
                f"{self.table.name}: snapshot {self.snapshot_id} is already in the table "
                "although its commit was reported as failed; not retrying"
            )
        parent = _branch_head(base, self.branch)
        sequence_number = base.last_sequence_number + 1
        self._validate(base, parent)
        for check in self._checks:
            check(base, parent)
        self._list_attempt += 1
        name = f"snap-{self.snapshot_id}-{self._list_attempt}-{self._commit_uuid}.avro"
        location = metadata_file_location(base, name)
        self._written.append(location)
        own, kept, added_rows = self._write_manifest_list(base, parent, location, sequence_number)
        self._lists[location] = own
        manifest_counts = {
            CREATED_MANIFESTS: str(len(own)),
            KEPT_MANIFESTS: str(kept),
            REPLACED_MANIFESTS: str(self._replaced_manifests),
        }

        summary = build_summary(
            self._operation(),
            self._counts,
            parent,
            changed_partition_count=len(self._changed_partitions),
            properties={**self._properties, **manifest_counts},
        )
        timestamp_ms = max(now_ms(), base.last_updated_ms)
        snapshot = Snapshot(
            snapshot_id=self.snapshot_id,
            timestamp_ms=timestamp_ms,
            manifest_list=location,
            parent_snapshot_id=None if parent is None else parent.snapshot_id,
            sequence_number=sequence_number,
            summary=summary,
            schema_id=base.current_schema_id,
            first_row_id=base.next_row_id if base.format_version >= 3 else None,
            added_rows=added_rows,
        )
        builder = MetadataBuilder(base).add_snapshot(snapshot)
        return builder.set_branch_snapshot(self.branch, self.snapshot_id).build(timestamp_ms)

    def _write_manifest_list(
        self, base: TableMetadata, parent: Snapshot | None, location: str, sequence_number: int
    ) -> tuple[list[ManifestFile], int, int | None]:
        """Write the list of `_manifests` at `location`; return the listed manifests this
        update wrote (sequence numbers assigned), how many others it carried over, and (v3)
        how many row ids the list assigned."""
        writer = ManifestListWriter(
            self.table.io,
            location,
            self.snapshot_id,
            None if parent is None else parent.snapshot_id,
            sequence_number,
            codec=self._codec(base),
            format_version=base.format_version,
            next_row_id=base.next_row_id,
        )
        for manifest in self._manifests(base, parent):
            writer.add(manifest, self._rows_to_assign(manifest))
        listed = writer.close()
        own = [m for m in listed if m.added_snapshot_id == self.snapshot_id]
        added_rows = None
        if base.format_version >= 3:
            assert writer.next_row_id is not None and base.next_row_id is not None
            added_rows = writer.next_row_id - base.next_row_id
        return own, len(listed) - len(own), added_rows

    # Files ----------------------------------------------------------------------------------

    def new_manifest_writer(
        self, base: TableMetadata, spec: PartitionSpec, content: ManifestContent
    ) -> ManifestWriter:
        """A writer for `<metadata>/<commit-uuid>-m<N>.avro`, tracked for cleanup."""
        location = metadata_file_location(base, f"{self._commit_uuid}-m{self._manifest_count}.avro")
        self._manifest_count += 1
        self._written.append(location)
        return ManifestWriter(
            self.table.io,
            location,
            spec,
            base.schema(),
            self.snapshot_id,
            content=content,
            codec=self._codec(base),
            format_version=base.format_version,
        )

    def _codec(self, base: TableMetadata) -> str:
        return manifest_codec(base, self.table.name)

    def _delete_files(self, locations: Iterable[str]) -> None:
        """Best effort: a file left behind is an orphan, never a broken table."""
        for location in locations:
            try:
                self.table.io.delete(location, missing_ok=True)
            except FileError as exc:
                LOG.warning("%s: could not delete uncommitted file: %s", self.table.name, exc)

    def _cleanup(self, committed: TableMetadata | None) -> None:
        """Delete what this update wrote except the committed snapshot's list and manifests."""
        keep: set[str] = set()
        saved = None
        if committed is not None:
            saved = next(
                (s for s in committed.snapshots if s.snapshot_id == self.snapshot_id), None
            )
        if saved is not None and saved.manifest_list in self._lists:
            keep = {saved.manifest_list}
            keep.update(m.manifest_path for m in self._lists[saved.manifest_list])
        self._delete_files(p for p in self._written if p not in keep)
        self._written = [p for p in self._written if p in keep]


def _branch_head(metadata: TableMetadata, branch: str) -> Snapshot | None:
    """The snapshot a commit to `branch` builds on; a branch that does not exist yet starts
    from main's current snapshot, as in Java (`SnapshotUtil.latestSnapshot`)."""
    ref = metadata.refs.get(branch)
    if ref is None:
        return metadata.current_snapshot()
    return metadata.snapshot_by_id(ref.snapshot_id)


def _require_branch(table: Table, metadata: TableMetadata, branch: str) -> None:
    ref = metadata.refs.get(branch)
    if ref is not None and not ref.is_branch:
        raise ValidationError(
            f"{table.name}: {branch!r} is a tag, not a branch; tags cannot be committed to"
        )
