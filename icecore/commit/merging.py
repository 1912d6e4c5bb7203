"""Producers that add and remove files and merge manifests (Java's `MergingSnapshotProducer`).

Every operation except the fast append is this pipeline, run once per attempt on the
refreshed branch head:

1. validate against what was committed since the starting snapshot (`validation.Validator`);
2. filter the head's data manifests, then its delete manifests (`ManifestFilter`): only
   manifests that can list a removed file are rewritten, and every file the commit names
   must be found live, or the commit fails naming the snapshot that removed it;
3. write the new files' manifests, once, with their sequence numbers left to inheritance
   (or the explicit data sequence number a rewrite asks for);
4. merge small manifests (`ManifestMerger`), data and deletes separately.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from icecore.commit.manifest_filter import ManifestFilter
from icecore.commit.manifest_merge import ManifestMerger
from icecore.commit.producer import SnapshotProducer
from icecore.commit.validation import Validator
from icecore.errors import ValidationError
from icecore.expressions import BooleanExpression
from icecore.scan import snapshot_manifests
from icecore.spec.manifest import DataFile, FileContent, content_key
from icecore.spec.manifest_list import UNASSIGNED_SEQ, ManifestContent, ManifestFile
from icecore.spec.metadata import TableMetadata
from icecore.spec.refs import MAIN_BRANCH
from icecore.spec.snapshots import Operation, Snapshot, SummaryCounts

if TYPE_CHECKING:
    from icecore.table import Table

M = TypeVar("M", bound="MergingSnapshotProducer")


class MergingSnapshotProducer(SnapshotProducer):
    """The shared machinery; operations expose the parts that make sense for them."""

    def __init__(self, table: Table, branch: str = MAIN_BRANCH) -> None:
        super().__init__(table, branch)
        self._new_data: dict[str, DataFile] = {}
        self._new_data_sequence_number: int | None = None
        self._new_deletes: dict[str, tuple[DataFile, int | None]] = {}
        self._new_manifests: tuple[list[ManifestFile], list[ManifestFile]] | None = None
        self._data_filter = ManifestFilter(self, ManifestContent.DATA)
        self._delete_filter = ManifestFilter(self, ManifestContent.DELETES)
        self._data_merger = ManifestMerger(self)
        self._delete_merger = ManifestMerger(self)
        self._case_sensitive = True
        # Delete files this commit removes that commits of these operations may have removed
        # meanwhile: their rows are in what replaced them, which a rebasing commit takes in.
        self._deletes_gone_by: frozenset[Operation] = frozenset()
        self.validator: Validator | None = None

    def case_sensitive(self: M, value: bool) -> M:
        """Whether column names in row filters are matched case-sensitively (default)."""
        self._case_sensitive = value
        self._data_filter.case_sensitive = self._delete_filter.case_sensitive = value
        return self

    # Building blocks for operations -------------------------------------------------------------

    def _add(self, content_file: DataFile, data_sequence_number: int | None = None) -> None:
        """Add a data or delete file; a delete file may carry an explicit data sequence number."""
        self._check_spec(content_file)
        self._new_manifests = None
        if content_file.content == FileContent.DATA:
            self._new_data[content_file.file_path] = content_file
        else:
            if (
                content_file.content == FileContent.EQUALITY_DELETES
                and not content_file.equality_ids
            ):
                raise ValidationError(
                    f"{self.table.name}: equality delete file {content_file.file_path} "
                    "has no equality_ids"
                )
            self._new_deletes[content_key(content_file)] = (content_file, data_sequence_number)

    def _remove(self, content_file: DataFile | str) -> None:
        """Remove a file named by its DataFile (data or delete) or by its path (data)."""
        if isinstance(content_file, str):
            self._data_filter.remove_path(content_file)
        elif content_file.content == FileContent.DATA:
            self._data_filter.remove_file(content_file)
        else:
            self._delete_filter.remove_file(content_file)

    def _remove_rows_matching(self, row_filter: BooleanExpression) -> None:
        self._data_filter.remove_rows_matching(row_filter)
        self._delete_filter.remove_rows_matching(row_filter)

    def _drop_partition(self, spec_id: int, partition: tuple) -> None:
        self._data_filter.drop_partition(spec_id, partition)
        self._delete_filter.drop_partition(spec_id, partition)

    def _set_data_sequence_number(self, sequence_number: int | None) -> None:
        self._new_manifests = None
        self._new_data_sequence_number = sequence_number

    @property
    def adds_data_files(self) -> bool:
        return bool(self._new_data)

    @property
    def adds_delete_files(self) -> bool:
        return bool(self._new_deletes)

    @property
    def removes_data_files(self) -> bool:
        return self._data_filter.has_removals

    @property
    def added_data_files(self) -> list[DataFile]:
        return list(self._new_data.values())

    def _check_spec(self, content_file: DataFile) -> None:
        specs = self.table.metadata.specs_by_id()
        if content_file.spec_id not in specs:
            raise ValidationError(
                f"{self.table.name}: {content_file.file_path} has partition spec "
                f"{content_file.spec_id}, which the table does not have"
            )

    # The attempt --------------------------------------------------------------------------------

    def _validate(self, base: TableMetadata, parent: Snapshot | None) -> None:
        self.validator = Validator(
            self.table.name,
            self.table.io,
            base,
            branch=self.branch,
            parent=parent,
            starting_snapshot_id=self.starting_snapshot_id,
            case_sensitive=self._case_sensitive,
        )
        self._validate_with(self.validator)

    def _validate_with(self, validator: Validator) -> None:
        """Operation-specific checks; the default has none."""

    def _manifests(self, base: TableMetadata, parent: Snapshot | None) -> list[ManifestFile]:
        assert self.validator is not None, "_validate runs before _manifests"
        head = [] if parent is None else snapshot_manifests(self.table.io, parent)
        data = self._filtered(base, head, self._data_filter)
        live_data_seqs = [
            m.min_sequence_number for m in data if m.min_sequence_number != UNASSIGNED_SEQ
        ]
        self._delete_filter.drop_unneeded_deletes(
            min(live_data_seqs, default=base.last_sequence_number),
            (e.data_file for e in self._data_filter.removed),
        )
        deletes = self._filtered(base, head, self._delete_filter)
        new_data, new_deletes = self._write_new_manifests(base)

        own = self.snapshot_id

        def keep(m: ManifestFile) -> bool:
            # A rewritten manifest of only DELETED entries stays: it records the removal.
            return m.has_added_files or m.has_existing_files or m.added_snapshot_id == own

        merged = self._data_merger.merge(base, [m for m in new_data + data if keep(m)])
        merged += self._delete_merger.merge(base, [m for m in new_deletes + deletes if keep(m)])
        self._replaced_manifests = (
            self._data_filter.replaced_count
            + self._delete_filter.replaced_count
            + self._data_merger.replaced_count
            + self._delete_merger.replaced_count
        )
        self._summarize()
        return merged

    def _filtered(
        self, base: TableMetadata, head: list[ManifestFile], manifest_filter: ManifestFilter
    ) -> list[ManifestFile]:
        content = manifest_filter.content
        filtered = manifest_filter.filter(base, [m for m in head if m.content == content])
        found = {content_key(e.data_file) for e in manifest_filter.removed}
        missing = manifest_filter.required_paths - found
        assert self.validator is not None
        if missing and content == ManifestContent.DELETES and self._deletes_gone_by:
            missing -= self.validator.removed_meanwhile(missing, content, self._deletes_gone_by)
        if missing:
            raise self.validator.missing_files(missing, content)
        return filtered

    def _write_new_manifests(
        self, base: TableMetadata
    ) -> tuple[list[ManifestFile], list[ManifestFile]]:
        """One manifest per spec for the new data files and one for the new delete files,
        written on the first attempt and reused by every retry."""
        if self._new_manifests is None:
            data: list[ManifestFile] = []
            deletes: list[ManifestFile] = []
            for spec_id in sorted({f.spec_id for f in self._new_data.values()}):
                writer = self.new_manifest_writer(
                    base, base.spec_by_id(spec_id), ManifestContent.DATA
                )
                for f in self._new_data.values():
                    if f.spec_id == spec_id:
                        writer.add(f, self._new_data_sequence_number)
                data.append(writer.close())
            for spec_id in sorted({f.spec_id for f, _ in self._new_deletes.values()}):
                writer = self.new_manifest_writer(
                    base, base.spec_by_id(spec_id), ManifestContent.DELETES
                )
                for f, seq in self._new_deletes.values():
                    if f.spec_id == spec_id:
                        writer.add(f, seq)
                deletes.append(writer.close())
            self._new_manifests = (data, deletes)
        return self._new_manifests

    def _summarize(self) -> None:
        counts = SummaryCounts()
        partitions: set[tuple[int, tuple]] = set()
        added = [*self._new_data.values(), *(f for f, _ in self._new_deletes.values())]
        for f in added:
            counts.added_file(f.content, f.record_count, f.file_size_in_bytes)
            partitions.add((f.spec_id, f.partition))
        for entry in self._data_filter.removed + self._delete_filter.removed:
            f = entry.data_file
            counts.removed_file(f.content, f.record_count, f.file_size_in_bytes)
            partitions.add((f.spec_id, f.partition))
        self._counts = counts
        self._changed_partitions = partitions
