"""A table's health from its metadata alone: what the maintenance scheduler decides on.

Compaction, delete rewriting and snapshot expiry each pay off under different conditions (many
small files, many delete records per data record, delete files that no longer apply, old
snapshots); this report measures them per partition without opening a single data file, so a
scheduler can afford to compute it for every table on every run.

Cost: the manifest list plus every live manifest entry of one snapshot, decoded once. Data
manifests are read without column metrics; delete manifests with them, for the `file_path`
bounds that tie a position delete to one data file. Memory holds one aggregate per partition
plus one small record per live delete file (as scan planning holds its delete index), never
a list of the table's data files.

Manifests: the snapshot's data and delete manifests per partition spec, the small ones and
their bytes (`icecore.manifest_stats`, from the manifest list alone, the figures the manifest
rewrite's trigger reads): every planner opens each of them before reading a row.

Small files: data files below `small_file_fraction` x `write.target-file-size-bytes` (default
512 MiB); the fraction defaults to the compaction planner's 0.75
(`icecore.actions.file_sizes.MIN_FRACTION`, also Amoro's `self-optimizing.min-target-size-ratio`):
a file at three quarters of the target is already worth leaving alone, one below it is a
candidate for bin-packing.

Dangling deletes are delete files that scan planning (icecore.scan.delete_index, the spec's "Scan
Planning" rules) would pair with no live data file of the snapshot: readers still open them,
to no effect, and only a rewrite removes them. A delete file is dangling when:
- position delete naming one data file (`icecore.spec.delete_targets`): that file is not live
  with a data sequence number <= the delete's;
- other position delete: no live data file of the same spec and partition has a data sequence
  number <= the delete's and a path within the delete's `file_path` bounds;
- equality delete: no live data file of the same spec and partition (any partition, when the
  delete's spec is unpartitioned) has a data sequence number < the delete's.

The trash (`icecore.trash`): what expiry and orphan removal took out of the table and keep for
`icefloe.trash.retention`, per run, from the summary the last of them left (one small read,
no listing), with the retention the table sets; `trash.past_window` says which runs the next
run purges.

Deletion vectors (format v3) are counted apart from position delete files: one per data file
(`files` is the number of DVs, `bytes` their blobs' lengths, not the size of the Puffin file
they share, `records` the positions they delete). A DV dangles, like a position delete naming
one data file, when that file is not live with a data sequence number <= the DV's. Their
positions count in `delete_records`. `position_deletes` of a v3 table are legacy files (of a
table upgraded from v2, or of writers that do not write DVs), which `rewrite_position_deletes`
turns into DVs.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from icecore.actions.file_sizes import MIN_FRACTION
from icecore.errors import ValidationError
from icecore.io import FileIO
from icecore.manifest_stats import ManifestStats, lists_live_files, table_manifest_stats
from icecore.scan import snapshot_manifests
from icecore.spec.delete_targets import path_bounds, referenced_data_file, within_bounds
from icecore.spec.manifest import DataFile, FileContent, ManifestEntry, read_manifest
from icecore.spec.manifest_list import ManifestContent, ManifestFile
from icecore.spec.metadata import TableMetadata
from icecore.spec.properties import TRASH_RETENTION, WRITE_TARGET_FILE_SIZE_BYTES
from icecore.spec.snapshots import Snapshot
from icecore.trash import TrashLayout, TrashSummary, read_summary

_MIB = 1024 * 1024
# Upper bounds of the data-file size histogram (the last bucket holds everything larger): the
# sizes a reader pays an open for, from the tiny files of streaming writers to the target.
SIZE_BUCKETS = (1 * _MIB, 8 * _MIB, 32 * _MIB, 128 * _MIB, 512 * _MIB)

PartitionKey = tuple[int, tuple[Any, ...]]  # (spec id, partition tuple)


@dataclass
class FileStats:
    """How many files, bytes and records a group of files holds."""

    files: int = 0
    bytes: int = 0
    records: int = 0

    def add(self, data_file: DataFile) -> None:
        self.files += 1
        # A DV's own bytes: its Puffin file is shared with the DVs of other data files.
        size = data_file.content_size_in_bytes if data_file.is_deletion_vector else None
        self.bytes += data_file.file_size_in_bytes if size is None else size
        self.records += data_file.record_count

    def merge(self, other: FileStats) -> None:
        self.files += other.files
        self.bytes += other.bytes
        self.records += other.records

    def to_dict(self) -> dict[str, int]:
        return {"files": self.files, "bytes": self.bytes, "records": self.records}

    @classmethod
    def from_dict(cls, values: Mapping[str, int]) -> FileStats:
        return cls(values["files"], values["bytes"], values["records"])


@dataclass
class FileHealth:
    """The counters kept for one partition and, summed, for the whole snapshot."""

    data: FileStats = field(default_factory=FileStats)
    position_deletes: FileStats = field(default_factory=FileStats)
    equality_deletes: FileStats = field(default_factory=FileStats)
    small_data: FileStats = field(default_factory=FileStats)
    dangling_position_deletes: FileStats = field(default_factory=FileStats)
    dangling_equality_deletes: FileStats = field(default_factory=FileStats)
    deletion_vectors: FileStats = field(default_factory=FileStats)
    dangling_deletion_vectors: FileStats = field(default_factory=FileStats)

    @property
    def delete_records(self) -> int:
        """Deleted positions (position delete files and DVs) plus equality delete keys (each
        key may delete many rows)."""
        return (
            self.position_deletes.records
            + self.deletion_vectors.records
            + self.equality_deletes.records
        )

    @property
    def delete_ratio(self) -> float | None:
        """Delete records per data record; None without data records (nothing to divide by)."""
        if self.data.records == 0:
            return None
        return self.delete_records / self.data.records

    @property
    def dangling_delete_files(self) -> int:
        """Dangling delete files, each DV counting as one."""
        return (
            self.dangling_position_deletes.files
            + self.dangling_equality_deletes.files
            + self.dangling_deletion_vectors.files
        )

    def merge(self, other: FileHealth) -> None:
        for name in _STATS:
            getattr(self, name).merge(getattr(other, name))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {name: getattr(self, name).to_dict() for name in _STATS}
        out["delete_records"] = self.delete_records
        out["delete_ratio"] = self.delete_ratio
        out["dangling_delete_files"] = self.dangling_delete_files
        return out

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> FileHealth:
        """The counters back from `to_dict()` (the derived figures are recomputed)."""
        return cls(**_stats_from_dict(values))


_STATS = (
    "data",
    "position_deletes",
    "equality_deletes",
    "small_data",
    "dangling_position_deletes",
    "dangling_equality_deletes",
    "deletion_vectors",
    "dangling_deletion_vectors",
)


@dataclass
class PartitionHealth(FileHealth):
    """One partition of one spec; `path` is its directory name, e.g. `ts_day=2024-01-07`."""

    spec_id: int = 0
    partition: tuple[Any, ...] = ()
    path: str = ""
    values: dict[str, str] = field(default_factory=dict)  # field name -> human string

    def to_dict(self) -> dict[str, Any]:
        return {
            "spec_id": self.spec_id,
            "path": self.path,
            "partition": dict(self.values),
            **super().to_dict(),
        }

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> PartitionHealth:
        """Back from `to_dict()`; the partition tuple is not in it (its values may not be
        JSON), so `partition` is empty: `path` and `values` name the partition."""
        return cls(
            spec_id=values["spec_id"],
            path=values["path"],
            values=dict(values["partition"]),
            **_stats_from_dict(values),
        )


@dataclass
class HealthReport:
    """The health of one snapshot of a table; `to_dict()` is JSON-serializable (Airflow XCom)."""

    table: str
    snapshot_id: int | None
    sequence_number: int | None
    computed_at_ms: int
    target_file_size_bytes: int
    small_file_threshold_bytes: int
    snapshot_count: int
    oldest_snapshot_ms: int | None
    newest_snapshot_ms: int | None
    manifests: ManifestStats  # the snapshot's manifests per spec (`icecore.manifest_stats`)
    totals: FileHealth
    partitions: list[PartitionHealth]
    format_version: int = 2  # v3: position delete files are legacy (DVs replace them)
    # Live data files per size bucket: `SIZE_BUCKETS`, then the files above the last bound.
    size_histogram: list[int] = field(default_factory=lambda: [0] * (len(SIZE_BUCKETS) + 1))
    # The trash as its last writer left it (None: none yet), and `icefloe.trash.retention`.
    trash: TrashSummary | None = None
    trash_retention_ms: int = TRASH_RETENTION.default

    @property
    def oldest_snapshot_age_ms(self) -> int | None:
        return _age(self.computed_at_ms, self.oldest_snapshot_ms)

    @property
    def data_manifests(self) -> int:
        return self.manifests.data_manifests

    @property
    def delete_manifests(self) -> int:
        return self.manifests.delete_manifests

    @property
    def newest_snapshot_age_ms(self) -> int | None:
        return _age(self.computed_at_ms, self.newest_snapshot_ms)

    def partition(self, path: str, spec_id: int | None = None) -> PartitionHealth:
        """The partition with directory name `path` (and spec, when several specs share it)."""
        found = [p for p in self.partitions if p.path == path and spec_id in (None, p.spec_id)]
        if len(found) != 1:
            raise KeyError(f"{self.table}: {len(found)} partitions named {path!r}")
        return found[0]

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "format_version": self.format_version,
            "snapshot_id": self.snapshot_id,
            "sequence_number": self.sequence_number,
            "computed_at_ms": self.computed_at_ms,
            "target_file_size_bytes": self.target_file_size_bytes,
            "small_file_threshold_bytes": self.small_file_threshold_bytes,
            "snapshot_count": self.snapshot_count,
            "oldest_snapshot_ms": self.oldest_snapshot_ms,
            "newest_snapshot_ms": self.newest_snapshot_ms,
            "oldest_snapshot_age_ms": self.oldest_snapshot_age_ms,
            "newest_snapshot_age_ms": self.newest_snapshot_age_ms,
            "data_manifests": self.data_manifests,
            "delete_manifests": self.delete_manifests,
            "manifests": self.manifests.to_json(),
            "totals": self.totals.to_dict(),
            "partitions": [p.to_dict() for p in self.partitions],
            "size_histogram": self.size_histogram_bounds(),
            "trash": None if self.trash is None else self.trash.to_json(),
            "trash_retention_ms": self.trash_retention_ms,
        }

    @classmethod
    def from_dict(
        cls, values: Mapping[str, Any], computed_at_ms: int | None = None
    ) -> HealthReport:
        """A report back from `to_dict()` (a cache, an XCom). `computed_at_ms` re-dates it, so
        snapshot ages count from then rather than from when it was computed; partition tuples
        come back empty (see `PartitionHealth.from_dict`)."""
        histogram = [files for _, files in values.get("size_histogram") or ()]
        return cls(
            table=values["table"],
            snapshot_id=values["snapshot_id"],
            sequence_number=values["sequence_number"],
            computed_at_ms=values["computed_at_ms"] if computed_at_ms is None else computed_at_ms,
            target_file_size_bytes=values["target_file_size_bytes"],
            small_file_threshold_bytes=values["small_file_threshold_bytes"],
            snapshot_count=values["snapshot_count"],
            oldest_snapshot_ms=values["oldest_snapshot_ms"],
            newest_snapshot_ms=values["newest_snapshot_ms"],
            manifests=ManifestStats.from_json(values["manifests"]),
            totals=FileHealth.from_dict(values["totals"]),
            partitions=[PartitionHealth.from_dict(p) for p in values["partitions"]],
            format_version=values["format_version"],
            size_histogram=histogram or [0] * (len(SIZE_BUCKETS) + 1),
            trash=TrashSummary.from_json(values["trash"]) if values.get("trash") else None,
            trash_retention_ms=values.get("trash_retention_ms", TRASH_RETENTION.default),
        )

    def size_histogram_bounds(self) -> list[list[int | None]]:
        """`[[upper bound in bytes, files], ...]`, the last bound None (no upper bound)."""
        bounds: list[int | None] = [*SIZE_BUCKETS, None]
        return [[b, n] for b, n in zip(bounds, self.size_histogram, strict=True)]


def _stats_from_dict(values: Mapping[str, Any]) -> dict[str, FileStats]:
    return {name: FileStats.from_dict(values[name]) for name in _STATS}


def _age(now_ms: int, timestamp_ms: int | None) -> int | None:
    return None if timestamp_ms is None else max(0, now_ms - timestamp_ms)


def table_health(
    io: FileIO,
    metadata: TableMetadata,
    *,
    name: str | None = None,
    snapshot_id: int | None = None,
    ref: str | None = None,
    small_file_fraction: float = MIN_FRACTION,
    target_file_size_bytes: int | None = None,
    now_ms: int | None = None,
) -> HealthReport:
    """The health of a snapshot (default: the current one; or by id, or a branch or tag).

    `target_file_size_bytes` overrides the table's `write.target-file-size-bytes`; `now_ms`
    fixes the clock the snapshot ages are measured against.
    """
    if snapshot_id is not None and ref is not None:
        raise ValidationError("choose a snapshot by id or by ref, not both")
    if not 0 < small_file_fraction <= 1:
        raise ValidationError(f"small_file_fraction must be in (0, 1], got {small_file_fraction}")
    if snapshot_id is not None:
        snapshot: Snapshot | None = metadata.snapshot_by_id(snapshot_id)
    elif ref is not None:
        snapshot = metadata.snapshot_for_ref(ref)
    else:
        snapshot = metadata.current_snapshot()
    target = target_file_size_bytes or WRITE_TARGET_FILE_SIZE_BYTES.read(metadata.properties)
    if target <= 0:
        raise ValidationError(f"target file size must be positive, got {target}")
    threshold = int(target * small_file_fraction)

    accumulator = _Accumulator(metadata, threshold)
    listed = snapshot_manifests(io, snapshot) if snapshot is not None else []
    manifests = table_manifest_stats(metadata, listed)
    data_manifests: list[ManifestFile] = []
    delete_manifests: list[ManifestFile] = []
    for manifest in listed:
        if lists_live_files(manifest):
            is_delete = manifest.content == ManifestContent.DELETES
            (delete_manifests if is_delete else data_manifests).append(manifest)
    # Deletes first: the data pass then settles, file by file, which deletes still apply.
    for entry in _live_entries(io, metadata, delete_manifests, include_metrics=True):
        accumulator.add_delete(entry)
    for entry in _live_entries(io, metadata, data_manifests, include_metrics=False):
        accumulator.add_data(entry)
    partitions = accumulator.finish()

    totals = FileHealth()
    for partition in partitions:
        totals.merge(partition)
    timestamps = [s.timestamp_ms for s in metadata.snapshots]
    return HealthReport(
        table=name or metadata.location,
        snapshot_id=None if snapshot is None else snapshot.snapshot_id,
        sequence_number=None if snapshot is None else snapshot.sequence_number,
        computed_at_ms=int(time.time() * 1000) if now_ms is None else now_ms,
        target_file_size_bytes=target,
        small_file_threshold_bytes=threshold,
        snapshot_count=len(metadata.snapshots),
        oldest_snapshot_ms=min(timestamps, default=None),
        newest_snapshot_ms=max(timestamps, default=None),
        manifests=manifests,
        totals=totals,
        partitions=partitions,
        format_version=metadata.format_version,
        size_histogram=accumulator.size_histogram,
        trash=read_summary(io, TrashLayout.of(metadata)) if metadata.table_uuid else None,
        trash_retention_ms=TRASH_RETENTION.read(metadata.properties),
    )


def _live_entries(
    io: FileIO, metadata: TableMetadata, manifests: list[ManifestFile], include_metrics: bool
) -> Iterator[ManifestEntry]:
    for manifest in manifests:
        yield from read_manifest(
            io,
            manifest,
            spec=metadata.spec_by_id(manifest.partition_spec_id),
            include_metrics=include_metrics,
            live_only=True,
        )


@dataclass(slots=True)
class _PendingDelete:
    """A delete file not yet known to apply to any live data file."""

    key: PartitionKey
    sequence_number: int
    delete_file: DataFile


class _Accumulator:
    """Per-partition counters, and the delete files still waiting for a data file to apply to.

    A delete leaves the waiting lists as soon as one live data file proves it applies, so the
    data pass costs a dictionary lookup per file, plus a bounds check per still-unproven
    path-range position delete of the file's partition (rare: Iceberg's writers scope
    position deletes to one file).
    """

    def __init__(self, metadata: TableMetadata, small_threshold: int) -> None:
        self._metadata = metadata
        self._small_threshold = small_threshold
        self._unpartitioned = {
            spec_id for spec_id, spec in metadata.specs_by_id().items() if spec.is_unpartitioned
        }
        self._partitions: dict[PartitionKey, FileHealth] = defaultdict(FileHealth)
        self._min_data_seq: dict[PartitionKey, int] = {}
        self._global_min_data_seq: int | None = None
        self._by_path: dict[str, list[_PendingDelete]] = defaultdict(list)
        self._path_min_seq: dict[str, int] = {}
        self._pos_ranges: dict[PartitionKey, list[_PendingDelete]] = defaultdict(list)
        self._pos_partition: list[_PendingDelete] = []
        self._eq_partition: list[_PendingDelete] = []
        self._eq_global: list[_PendingDelete] = []
        self.size_histogram = [0] * (len(SIZE_BUCKETS) + 1)

    def add_delete(self, entry: ManifestEntry) -> None:
        delete_file = entry.data_file
        key = (delete_file.spec_id, delete_file.partition)
        pending = _PendingDelete(key, _sequence_number(entry), delete_file)
        health = self._partitions[key]
        if delete_file.content == FileContent.EQUALITY_DELETES:
            health.equality_deletes.add(delete_file)
            is_global = delete_file.spec_id in self._unpartitioned
            (self._eq_global if is_global else self._eq_partition).append(pending)
            return
        if delete_file.is_deletion_vector:
            health.deletion_vectors.add(delete_file)
        else:
            health.position_deletes.add(delete_file)
        target = referenced_data_file(delete_file)
        if target is not None:
            self._by_path[target].append(pending)
        elif path_bounds(delete_file) == (None, None):
            self._pos_partition.append(pending)
        else:
            self._pos_ranges[key].append(pending)

    def add_data(self, entry: ManifestEntry) -> None:
        data_file = entry.data_file
        seq = _sequence_number(entry)
        key = (data_file.spec_id, data_file.partition)
        health = self._partitions[key]
        health.data.add(data_file)
        self.size_histogram[bisect_left(SIZE_BUCKETS, data_file.file_size_in_bytes)] += 1
        if data_file.file_size_in_bytes < self._small_threshold:
            health.small_data.add(data_file)
        if seq < self._min_data_seq.get(key, seq + 1):
            self._min_data_seq[key] = seq
        if self._global_min_data_seq is None or seq < self._global_min_data_seq:
            self._global_min_data_seq = seq
        path = data_file.file_path
        if path in self._by_path and seq < self._path_min_seq.get(path, seq + 1):
            self._path_min_seq[path] = seq
        ranges = self._pos_ranges.get(key)
        if ranges:
            encoded = path.encode("utf-8")  # bounds compare as bytes, as in delete_index
            ranges[:] = [d for d in ranges if not _in_range(d, encoded, seq)]

    def finish(self) -> list[PartitionHealth]:
        """Count the deletes that found nothing to apply to; the partitions, in path order."""
        for path, deletes in self._by_path.items():
            live_seq = self._path_min_seq.get(path)
            for d in deletes:
                if live_seq is None or live_seq > d.sequence_number:
                    self._dangling(d)
        for deletes in self._pos_ranges.values():
            for d in deletes:  # the data pass removed every range delete that applies
                self._dangling(d)
        for d in self._pos_partition:
            if self._min_data_seq.get(d.key, d.sequence_number + 1) > d.sequence_number:
                self._dangling(d)
        for d in self._eq_partition:
            if self._min_data_seq.get(d.key, d.sequence_number) >= d.sequence_number:
                self._dangling(d)
        for d in self._eq_global:
            global_min = self._global_min_data_seq
            if global_min is None or global_min >= d.sequence_number:
                self._dangling(d)
        return sorted(
            (self._describe(key, health) for key, health in self._partitions.items()),
            key=lambda p: (p.spec_id, p.path),
        )

    def _dangling(self, d: _PendingDelete) -> None:
        health = self._partitions[d.key]
        if d.delete_file.content == FileContent.EQUALITY_DELETES:
            health.dangling_equality_deletes.add(d.delete_file)
        elif d.delete_file.is_deletion_vector:
            health.dangling_deletion_vectors.add(d.delete_file)
        else:
            health.dangling_position_deletes.add(d.delete_file)

    def _describe(self, key: PartitionKey, health: FileHealth) -> PartitionHealth:
        spec_id, partition = key
        spec = self._metadata.spec_by_id(spec_id)
        schema = self._metadata.schema()
        result_types = [f.field_type for f in spec.partition_type(schema).fields]
        values = {
            f.name: f.transform.to_human_string(value, result_type)
            for f, value, result_type in zip(spec.fields, partition, result_types, strict=True)
        }
        described = PartitionHealth(
            spec_id=spec_id,
            partition=partition,
            path=spec.partition_path(partition, schema),
            values=values,
        )
        described.merge(health)
        return described


def _sequence_number(entry: ManifestEntry) -> int:
    if entry.sequence_number is None:
        raise ValidationError(
            f"{entry.data_file.file_path} has no data sequence number after inheritance"
        )
    return entry.sequence_number


def _in_range(d: _PendingDelete, path: bytes, seq: int) -> bool:
    """Whether the path-range position delete `d` applies to a data file at `path`, `seq`."""
    return seq <= d.sequence_number and within_bounds(d.delete_file, path)
