"""Conflict checks against what other writers committed meanwhile (Java's
`MergingSnapshotProducer.validate*`).

An operation is planned on one snapshot of a branch (its starting snapshot) and committed on
whatever the branch head is by then. Every attempt walks the branch back from the new head to
the starting snapshot and looks only at what those snapshots added or removed: the manifests
each of them wrote itself (`added_snapshot_id`), and in them only the entries they changed.
The cost of validation therefore grows with the concurrent commits, not with the table.

Every failed check raises `CommitConflictError` naming the snapshot that conflicts; retrying
cannot help, the operation has to be planned again on the new state.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from functools import cached_property

from icecore.commit.concurrent_deletes import ConcurrentDelete, ConcurrentDeletes
from icecore.commit.row_filter import RowFilterMatcher
from icecore.errors import CommitConflictError, ValidationError
from icecore.expressions import AlwaysTrue, BooleanExpression
from icecore.expressions.pruning import ManifestEvaluator
from icecore.io import FileIO
from icecore.scan import snapshot_manifests
from icecore.scan.delete_index import DeleteFileIndex
from icecore.spec.manifest import (
    DataFile,
    EntryStatus,
    FileContent,
    ManifestEntry,
    content_key,
    read_manifest,
)
from icecore.spec.manifest_list import ManifestContent, ManifestFile
from icecore.spec.metadata import TableMetadata
from icecore.spec.snapshots import Operation, Snapshot

# Which snapshots can hold what a check looks for (Java's VALIDATE_* operation sets).
ADDS_DATA = frozenset({Operation.APPEND, Operation.OVERWRITE})
REMOVES_DATA = frozenset({Operation.OVERWRITE, Operation.REPLACE, Operation.DELETE})
ADDS_DELETES = frozenset({Operation.OVERWRITE, Operation.DELETE})
# Deletes a data file gains, as a rewrite of that file must see them: a `replace` adds some
# too, converting equality deletes committed meanwhile into position deletes or DVs (their
# data sequence number stays above the start, the equality deletes they replace are gone).
# Deletes a `replace` only moves (a delete compaction of files older than the start) keep a
# sequence number no newer than the start and are not seen (Java checks overwrites and
# deletes only, and misses the converted deletes).
DELETES_OF_DATA_FILES = ADDS_DELETES | {Operation.REPLACE}
ANY_OPERATION = frozenset(Operation)

Partitions = Collection[tuple[int, tuple]]


class Validator:
    """Checks one attempt: `base` is the refreshed metadata, `parent` its branch head."""

    def __init__(
        self,
        table_name: str,
        io: FileIO,
        base: TableMetadata,
        *,
        branch: str,
        parent: Snapshot | None,
        starting_snapshot_id: int | None,
        case_sensitive: bool = True,
    ) -> None:
        self.table_name = table_name
        self.io = io
        self.base = base
        self.branch = branch
        self.parent = parent
        self.starting_snapshot_id = starting_snapshot_id
        self.case_sensitive = case_sensitive

    @cached_property
    def new_snapshots(self) -> list[Snapshot]:
        """Snapshots committed to the branch after the starting one, newest first."""
        start = self.starting_snapshot_id
        if self.parent is None:
            if start is not None:
                raise CommitConflictError(
                    f"{self.table_name}: branch {self.branch!r} no longer exists, so what was "
                    f"committed since snapshot {start} cannot be checked",
                    snapshot_id=start,
                )
            return []
        found = []
        for snapshot in self.base.ancestors_of(self.parent.snapshot_id):
            if snapshot.snapshot_id == start:
                return found
            found.append(snapshot)
        if start is None:
            return found
        raise CommitConflictError(
            f"{self.table_name}: cannot determine history between starting snapshot {start} and "
            f"branch {self.branch!r} head {self.parent.snapshot_id}: the starting snapshot is no "
            "longer its ancestor (expired, or the branch was reset)",
            snapshot_id=self.parent.snapshot_id,
        )

    @cached_property
    def _new_ids(self) -> dict[int, Snapshot]:
        return {s.snapshot_id: s for s in self.new_snapshots}

    @cached_property
    def starting_sequence_number(self) -> int:
        """The starting snapshot's sequence number (0 for an empty start); a conflict when
        the starting snapshot is no longer in the branch's history."""
        start = self.starting_snapshot_id
        if start is None:
            return 0
        self.new_snapshots  # noqa: B018 - walks the lineage, raising if the start is gone
        return self.base.snapshot_by_id(start).sequence_number

    # Checks -----------------------------------------------------------------------------------

    def no_new_data_files(
        self, row_filter: BooleanExpression | None = None, partitions: Partitions | None = None
    ) -> None:
        """No data that `row_filter` (or the partition set) could match was added."""
        for entry in self._entries(ADDS_DATA, ManifestContent.DATA, EntryStatus.ADDED, row_filter):
            if _in_partitions(entry.data_file, partitions):
                what = _describe_filter(row_filter, partitions)
                raise self._conflict(
                    f"found conflicting data file {entry.data_file.file_path} that can contain "
                    f"records matching {what}",
                    entry.snapshot_id,
                )

    def no_deleted_data_files(
        self, row_filter: BooleanExpression | None = None, partitions: Partitions | None = None
    ) -> None:
        """No data file that `row_filter` (or the partition set) could match was removed."""
        for entry in self._entries(
            REMOVES_DATA, ManifestContent.DATA, EntryStatus.DELETED, row_filter
        ):
            if _in_partitions(entry.data_file, partitions):
                what = _describe_filter(row_filter, partitions)
                raise self._conflict(
                    f"found conflicting deleted data file {entry.data_file.file_path} that can "
                    f"contain records matching {what}",
                    entry.snapshot_id,
                )

    def no_new_delete_files(
        self, row_filter: BooleanExpression | None = None, partitions: Partitions | None = None
    ) -> None:
        """No delete file was added in a partition `row_filter` (or the set) could match."""
        for entry in self._new_deletes(row_filter):
            if _in_partitions(entry.data_file, partitions):
                what = _describe_filter(row_filter, partitions)
                raise self._conflict(
                    f"found new conflicting delete file {entry.data_file.file_path} that can "
                    f"apply to records matching {what}",
                    entry.snapshot_id,
                )

    def no_new_deletes_for(
        self,
        data_files: Iterable[DataFile],
        *,
        ignore_equality_deletes: bool = False,
        ignore_position_deletes: bool = False,
        row_filter: BooleanExpression | None = None,
    ) -> None:
        """No delete file added meanwhile applies to any of `data_files` (which this commit
        removes: their replacement would silently bring the deleted rows back).

        Equality deletes can be ignored when the replacing files keep the data sequence
        number of the starting snapshot: the new deletes then apply to them as well; position
        deletes and DVs when the commit rebases them onto the new files
        (`concurrent_position_deletes`).
        """
        files = list(data_files)
        if not files:
            return
        unpartitioned = [s for s, spec in self.base.specs_by_id().items() if spec.is_unpartitioned]
        # Over several snapshots a data file may have had DVs one after another.
        index = DeleteFileIndex(unpartitioned, successive_dvs=True)
        added_by: dict[str, int | None] = {}
        for entry in self._new_deletes(row_filter, DELETES_OF_DATA_FILES):
            content = entry.data_file.content
            if (ignore_equality_deletes and content == FileContent.EQUALITY_DELETES) or (
                ignore_position_deletes and content == FileContent.POSITION_DELETES
            ):
                continue
            index.add(entry.data_file, _sequence_number(entry))
            added_by[content_key(entry.data_file)] = entry.snapshot_id
        index.freeze()
        for data_file in files:
            for delete_file in index.for_data_file(data_file, self.starting_sequence_number):
                kind = (
                    "position"
                    if delete_file.content == FileContent.POSITION_DELETES
                    else "equality"
                )
                raise self._conflict(
                    f"Cannot commit, found new {kind} delete for replaced data file "
                    f"{data_file.file_path}: {delete_file.file_path}",
                    added_by[content_key(delete_file)],
                )

    def concurrent_position_deletes(self, data_files: Iterable[DataFile]) -> ConcurrentDeletes:
        """The position deletes and DVs added meanwhile that apply to `data_files`."""
        added = (
            ConcurrentDelete(e.data_file, e.snapshot_id, _sequence_number(e))
            for e in self._new_deletes(None, DELETES_OF_DATA_FILES)
            if e.data_file.content == FileContent.POSITION_DELETES and e.snapshot_id is not None
        )
        return ConcurrentDeletes.applying_to(data_files, added)

    def removed_meanwhile(
        self, keys: Collection[str], content: ManifestContent, operations: frozenset[Operation]
    ) -> set[str]:
        """Those of `keys` (`content_key`s) that a snapshot of `operations` removed after
        the starting one."""
        return {
            key
            for entry in self._entries(operations, content, EntryStatus.DELETED)
            if (key := content_key(entry.data_file)) in keys
        }

    def data_files_exist(self, paths: Collection[str], *, include_deletes: bool) -> None:
        """None of `paths` was removed by an overwrite or rewrite (or, with
        `include_deletes`, by a delete)."""
        if not paths:
            return
        operations = REMOVES_DATA if include_deletes else REMOVES_DATA - {Operation.DELETE}
        for entry in self._entries(operations, ManifestContent.DATA, EntryStatus.DELETED):
            if entry.data_file.file_path in paths:
                raise self._conflict(
                    f"Cannot commit, missing data file {entry.data_file.file_path} "
                    "(referenced by this commit)",
                    entry.snapshot_id,
                )

    def missing_files(self, paths: Collection[str], content: ManifestContent) -> ValidationError:
        """The error for files this commit removes that are not live in the branch head:
        a conflict naming the snapshot that removed them meanwhile, if one did."""
        kind = "data" if content == ManifestContent.DATA else "delete"
        for entry in self._entries(ANY_OPERATION, content, EntryStatus.DELETED):
            if content_key(entry.data_file) in paths:
                return self._conflict(
                    f"{kind} file {entry.data_file.file_path} that this commit removes was "
                    "removed meanwhile",
                    entry.snapshot_id,
                )
        head = None if self.parent is None else self.parent.snapshot_id
        return ValidationError(
            f"{self.table_name}: cannot remove {kind} files that are not in branch "
            f"{self.branch!r} (snapshot {head}): {', '.join(sorted(paths))}"
        )

    # Reading what the new snapshots changed -----------------------------------------------------

    def _added_manifests(
        self, operations: frozenset[Operation], content: ManifestContent
    ) -> Iterator[ManifestFile]:
        for snapshot in self.new_snapshots:
            # A snapshot without an operation promises nothing: check it like an overwrite.
            operation = snapshot.operation or Operation.OVERWRITE
            if operation not in operations:
                continue
            for manifest in snapshot_manifests(self.io, snapshot):
                if (
                    manifest.added_snapshot_id == snapshot.snapshot_id
                    and manifest.content == content
                ):
                    yield manifest

    def _entries(
        self,
        operations: frozenset[Operation],
        content: ManifestContent,
        status: EntryStatus,
        row_filter: BooleanExpression | None = None,
        *,
        partitions_only: bool = False,
    ) -> Iterator[ManifestEntry]:
        """Entries with `status` that a new snapshot itself wrote, matching `row_filter`."""
        matcher = None
        evaluators: dict[int, ManifestEvaluator] = {}
        if row_filter is not None and row_filter is not AlwaysTrue():
            matcher = RowFilterMatcher(self.base, row_filter, self.case_sensitive)
        schema = self.base.schema()
        for manifest in self._added_manifests(operations, content):
            spec = self.base.spec_by_id(manifest.partition_spec_id)
            if matcher is not None:
                evaluator = evaluators.get(spec.spec_id)
                if evaluator is None:
                    evaluator = ManifestEvaluator.for_row_filter(spec, schema, row_filter)
                    evaluators[spec.spec_id] = evaluator
                if not evaluator.eval(manifest):
                    continue
            for entry in read_manifest(self.io, manifest, spec=spec):
                if entry.status is not status or entry.snapshot_id not in self._new_ids:
                    continue
                if matcher is not None and not (
                    matcher.partition_might_match(entry.data_file)
                    if partitions_only
                    else matcher.might_match(entry.data_file)
                ):
                    continue
                yield entry

    def _new_deletes(
        self,
        row_filter: BooleanExpression | None,
        operations: frozenset[Operation] = ADDS_DELETES,
    ) -> Iterator[ManifestEntry]:
        """Delete files added meanwhile by snapshots of `operations`, newer than the start;
        matched to the filter by partition only, since their column metrics describe deleted
        rows, not the rows the filter asks about."""
        for entry in self._entries(
            operations,
            ManifestContent.DELETES,
            EntryStatus.ADDED,
            row_filter,
            partitions_only=True,
        ):
            if _sequence_number(entry) > self.starting_sequence_number:
                yield entry

    def _conflict(self, message: str, snapshot_id: int | None) -> CommitConflictError:
        snapshot = self._new_ids.get(snapshot_id) if snapshot_id is not None else None
        operation = snapshot.operation.value if snapshot and snapshot.operation else "unknown"
        return CommitConflictError(
            f"{self.table_name}: {message}; conflicting snapshot {snapshot_id} ({operation}) was "
            f"committed to branch {self.branch!r} after starting snapshot "
            f"{self.starting_snapshot_id}",
            snapshot_id=snapshot_id,
        )


def _sequence_number(entry: ManifestEntry) -> int:
    if entry.sequence_number is None:
        raise ValidationError(f"{entry.data_file.file_path} has no data sequence number")
    return entry.sequence_number


def _in_partitions(data_file: DataFile, partitions: Partitions | None) -> bool:
    return partitions is None or (data_file.spec_id, data_file.partition) in partitions


def _describe_filter(row_filter: BooleanExpression | None, partitions: Partitions | None) -> str:
    if partitions is not None:
        return f"partitions {sorted(partitions, key=repr)}"
    return repr(row_filter if row_filter is not None else AlwaysTrue())
