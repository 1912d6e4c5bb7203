"""Removing files from a branch's manifests (Java's `ManifestFilterManager`).

A commit that removes files rewrites only the manifests that list one of them; every other
manifest of the branch head is carried over untouched. Whether a manifest can list a removed
file is decided from the manifest list alone where possible: files named with their
partition, dropped partitions and row filters are checked against the manifest's partition
summaries, so a compaction of one partition opens that partition's manifests, not the table's.

A rewritten manifest keeps every other live entry as EXISTING, with its snapshot id and
sequence numbers, and records the removed ones as DELETED by this snapshot. Rewritten
manifests are cached per source manifest, so a retry on a head that still holds that
manifest reuses the file written by the first attempt.

Delete manifests are filtered the same way and, while open anyway, also lose delete files
that can no longer apply to anything: files older than every live data file (Java's
`dropDeleteFilesOlderThan`), position deletes scoped to a data file this commit removes, and
DVs that a DV this commit adds for the same data file supersedes (`supersede_dvs`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from icecore.commit.row_filter import RowFilterMatcher
from icecore.errors import CommitConflictError, ValidationError
from icecore.expressions import AlwaysFalse, BooleanExpression, Or
from icecore.expressions.pruning import ManifestEvaluator
from icecore.spec.conversions import decoder
from icecore.spec.delete_targets import referenced_data_file
from icecore.spec.manifest import DataFile, FileContent, ManifestEntry, content_key, read_manifest
from icecore.spec.manifest_list import ManifestContent, ManifestFile, PartitionFieldSummary
from icecore.spec.metadata import TableMetadata
from icecore.spec.types import IcebergType

if TYPE_CHECKING:
    from icecore.commit.producer import SnapshotProducer

PartitionKey = tuple[int, tuple]


@dataclass(frozen=True)
class _Filtered:
    manifest: ManifestFile  # the source manifest itself when nothing was removed
    removed: tuple[ManifestEntry, ...]


class ManifestFilter:
    """What one commit removes from the manifests of one content type (data or deletes)."""

    def __init__(self, producer: SnapshotProducer, content: ManifestContent) -> None:
        self._producer = producer
        self.content = content
        self._paths: set[str] = set()  # named by path alone
        self._files: dict[str, DataFile] = {}  # named with their spec and partition
        self._partitions: set[PartitionKey] = set()
        self._row_filter: BooleanExpression = AlwaysFalse()
        self.case_sensitive = True
        self.fail_any_delete = False
        # Delete manifests only: see `drop_unneeded_deletes`.
        self._min_sequence_number = 0
        self._removed_data: frozenset[str] = frozenset()
        self._removed_data_partitions: frozenset[PartitionKey] = frozenset()
        self._superseded_dvs: frozenset[str] = frozenset()
        self._superseded_partitions: frozenset[PartitionKey] = frozenset()
        self._cache: dict[str, _Filtered] = {}
        self.removed: list[ManifestEntry] = []
        self.replaced_count = 0

    # What to remove -------------------------------------------------------------------------

    def remove_path(self, path: str) -> None:
        self._cache.clear()
        self._paths.add(path)

    def remove_file(self, content_file: DataFile) -> None:
        self._cache.clear()
        self._files[content_key(content_file)] = content_file

    def drop_partition(self, spec_id: int, partition: tuple) -> None:
        self._cache.clear()
        self._partitions.add((spec_id, tuple(partition)))

    def remove_rows_matching(self, row_filter: BooleanExpression) -> None:
        """Remove every file whose rows all match; a file only partly matching is an error."""
        self._cache.clear()
        self._row_filter = Or(self._row_filter, row_filter)

    @property
    def row_filter(self) -> BooleanExpression:
        return self._row_filter

    @property
    def required_paths(self) -> set[str]:
        """Files named explicitly: each must be live in the branch head."""
        return self._paths | self._files.keys()

    @property
    def has_removals(self) -> bool:
        return bool(self._paths or self._files or self._partitions) or (
            self._row_filter is not AlwaysFalse()
        )

    def drop_unneeded_deletes(
        self, min_data_sequence_number: int, removed_data: Iterable[DataFile]
    ) -> None:
        """Also remove delete files older than every live data file, and position deletes
        scoped to one of `removed_data`, from the delete manifests this commit opens."""
        removed = list(removed_data)
        paths = frozenset(f.file_path for f in removed)
        if (min_data_sequence_number, paths) != (self._min_sequence_number, self._removed_data):
            self._cache.clear()
        self._min_sequence_number = min_data_sequence_number
        self._removed_data = paths
        self._removed_data_partitions = frozenset((f.spec_id, f.partition) for f in removed)

    def supersede_dvs(self, data_files: Iterable[DataFile]) -> None:
        """Also remove the live DVs of `data_files`: this commit adds DVs for them that hold
        every position of those (a data file may have one DV)."""
        files = list(data_files)
        paths = frozenset(f.file_path for f in files)
        if paths != self._superseded_dvs:
            self._cache.clear()
        self._superseded_dvs = paths
        self._superseded_partitions = frozenset((f.spec_id, f.partition) for f in files)

    # Filtering --------------------------------------------------------------------------------

    def filter(self, base: TableMetadata, manifests: list[ManifestFile]) -> list[ManifestFile]:
        """`manifests` with the removed files recorded as DELETED; sets `removed`."""
        out: list[ManifestFile] = []
        removed: dict[str, ManifestEntry] = {}
        self.replaced_count = 0
        matcher = None
        if self._row_filter is not AlwaysFalse():
            matcher = RowFilterMatcher(base, self._row_filter, self.case_sensitive)
        scope = _Scope(base, self._row_filter, self._partition_keys())
        for manifest in manifests:
            result = self._cache.get(manifest.manifest_path)
            if result is None:
                result = self._filter_manifest(base, manifest, matcher, scope)
                self._cache[manifest.manifest_path] = result
            out.append(result.manifest)
            if result.removed:
                self.replaced_count += 1
            for entry in result.removed:
                removed.setdefault(content_key(entry.data_file), entry)
        self.removed = list(removed.values())
        return out

    def _filter_manifest(
        self,
        base: TableMetadata,
        manifest: ManifestFile,
        matcher: RowFilterMatcher | None,
        scope: _Scope,
    ) -> _Filtered:
        if not (manifest.has_added_files or manifest.has_existing_files):
            return _Filtered(manifest, ())
        if not self._paths and not scope.may_hold(manifest):
            return _Filtered(manifest, ())
        spec = base.spec_by_id(manifest.partition_spec_id)
        io = self._producer.table.io
        entries = list(read_manifest(io, manifest, spec=spec, live_only=True))
        gone = [self._removes(entry, matcher) for entry in entries]
        if not any(gone):
            return _Filtered(manifest, ())
        writer = self._producer.new_manifest_writer(base, spec, manifest.content)
        for entry, remove in zip(entries, gone, strict=True):
            if remove:
                writer.delete(entry)
            else:
                writer.existing(entry)
        removed = tuple(e for e, remove in zip(entries, gone, strict=True) if remove)
        return _Filtered(writer.close(), removed)

    def _partition_keys(self) -> set[PartitionKey]:
        """Partitions holding a file this filter removes by name or by partition."""
        keys = {(f.spec_id, f.partition) for f in self._files.values()} | self._partitions
        if self.content == ManifestContent.DELETES:
            keys |= self._removed_data_partitions | self._superseded_partitions
        return keys

    def _removes(self, entry: ManifestEntry, matcher: RowFilterMatcher | None) -> bool:
        f = entry.data_file
        is_delete = self.content == ManifestContent.DELETES
        marked = (
            f.file_path in self._paths
            or content_key(f) in self._files
            or (f.spec_id, f.partition) in self._partitions
            or (is_delete and self._unneeded(entry))
        )
        if not marked:
            if matcher is None or not matcher.might_match(f):
                return False
            if not matcher.must_match(f):
                if is_delete:
                    return False  # a delete file may outlive part of what it applies to
                raise ValidationError(
                    f"{self._producer.table.name}: cannot delete file where some, but not all, "
                    f"rows match filter {self._row_filter!r}: {f.file_path}"
                )
        if self.fail_any_delete:
            raise CommitConflictError(
                f"{self._producer.table.name}: cannot commit file that conflicts with existing "
                f"partition {f.partition!r} of spec {f.spec_id}: {f.file_path} (added by "
                f"snapshot {entry.snapshot_id})",
                snapshot_id=entry.snapshot_id,
            )
        return True

    def _unneeded(self, entry: ManifestEntry) -> bool:
        seq = entry.sequence_number
        if seq is not None and 0 < seq < self._min_sequence_number:
            return True
        f = entry.data_file
        if f.is_deletion_vector and f.referenced_data_file in self._superseded_dvs:
            return True
        if f.content != FileContent.POSITION_DELETES or not self._removed_data:
            return False
        target = referenced_data_file(f)
        return target is not None and target in self._removed_data


class _Scope:
    """Which manifests can list a removed file, judged by their partition summaries."""

    def __init__(
        self, base: TableMetadata, row_filter: BooleanExpression, keys: set[PartitionKey]
    ) -> None:
        self._base = base
        self._row_filter = row_filter
        self._partitions: dict[int, list[tuple]] = {}
        for spec_id, partition in keys:
            self._partitions.setdefault(spec_id, []).append(partition)
        self._evaluators: dict[int, ManifestEvaluator] = {}

    def may_hold(self, manifest: ManifestFile) -> bool:
        spec_id = manifest.partition_spec_id
        if self._row_filter is not AlwaysFalse():
            evaluator = self._evaluators.get(spec_id)
            if evaluator is None:
                spec = self._base.spec_by_id(spec_id)
                schema = self._base.schema()
                evaluator = ManifestEvaluator.for_row_filter(spec, schema, self._row_filter)
                self._evaluators[spec_id] = evaluator
            if evaluator.eval(manifest):
                return True
        candidates = self._partitions.get(spec_id)
        if not candidates:
            return False
        summaries = manifest.partitions
        if summaries is None:
            return True
        partition_type = self._base.spec_by_id(spec_id).partition_type(self._base.schema())
        ranges = [
            _Range.of(summary, field.field_type)
            for summary, field in zip(summaries, partition_type.fields, strict=False)
        ]
        if len(ranges) != len(partition_type.fields):
            return True
        return any(all(r.admits(v) for r, v in zip(ranges, p, strict=True)) for p in candidates)


@dataclass(frozen=True)
class _Range:
    """One partition field's summary in a manifest, bounds decoded."""

    contains_null: bool
    contains_nan: bool | None
    lower: Any
    upper: Any

    @classmethod
    def of(cls, summary: PartitionFieldSummary, field_type: IcebergType) -> _Range:
        if summary.lower_bound is None or summary.upper_bound is None:
            # Per the spec no bounds means only nulls (and NaN); trust it no further than
            # that a writer may simply not have kept them.
            return cls(summary.contains_null, summary.contains_nan, None, None)
        decode = decoder(field_type)
        lower, upper = decode(summary.lower_bound), decode(summary.upper_bound)
        return cls(summary.contains_null, summary.contains_nan, lower, upper)

    def admits(self, value: Any) -> bool:
        if value is None:
            return self.contains_null
        if isinstance(value, float) and math.isnan(value):
            return self.contains_nan is not False
        if self.lower is None:
            return True
        return bool(self.lower <= value <= self.upper)
