"""Rewriting files without changing the table's rows (Java's `BaseRewriteFiles`, operation
`replace`): compaction of data files, and of delete files.

The rows a compaction writes were read at its starting snapshot, with the deletes of that
snapshot applied. What others commit meanwhile decides whether it may still commit:
- a replaced file that is no longer live (another compaction or an overwrite took it) is a
  conflict naming the snapshot that removed it;
- a position delete added meanwhile for a replaced data file is a conflict ("Cannot commit,
  found new position delete for replaced data file"): it names a row position in a file the
  compaction drops, so the row would come back;
- an equality delete added meanwhile is fine when the new data files keep the data sequence
  number of the starting snapshot (`use_starting_sequence_number()`), because it then applies
  to them as well; without it, it is a conflict too;
- with `rebase_concurrent_deletes(positions)`, position deletes and DVs added meanwhile are
  no conflict: the commit deletes the same rows in the new files (`icecore.commit.rebase`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, TypeVar

from icecore.commit.merging import MergingSnapshotProducer
from icecore.commit.rebase import NOTHING, DeleteFileWriter, DeleteRebase, Rebased
from icecore.commit.validation import ANY_OPERATION, Validator
from icecore.data.position_maps import PositionMap
from icecore.errors import CommitConflictError, ValidationError
from icecore.spec.manifest import DataFile, FileContent, content_key
from icecore.spec.manifest_list import ManifestFile
from icecore.spec.metadata import TableMetadata
from icecore.spec.refs import MAIN_BRANCH
from icecore.spec.snapshots import Operation, Snapshot

if TYPE_CHECKING:
    from icecore.table import Table

W = TypeVar("W", bound="RewriteFiles")


class RewriteFiles(MergingSnapshotProducer):
    """`table.new_rewrite().rewrite_files(old, new).use_starting_sequence_number().commit()`."""

    def __init__(self, table: Table, branch: str = MAIN_BRANCH) -> None:
        super().__init__(table, branch)
        self._replaced_data: dict[str, DataFile] = {}
        self._removes_deletes = False
        self._use_starting_sequence_number = False
        self._rebase: DeleteRebase | None = None
        self._written_with: tuple[int, int | None] | None = None

    def rewrite_files(
        self: W,
        data_files_to_replace: Iterable[DataFile] = (),
        data_files_to_add: Iterable[DataFile] = (),
        delete_files_to_replace: Iterable[DataFile] = (),
        delete_files_to_add: Iterable[DataFile] = (),
    ) -> W:
        for f in (*data_files_to_replace, *delete_files_to_replace):
            self.delete_file(f)
        for f in (*data_files_to_add, *delete_files_to_add):
            self.add_file(f)
        return self

    def delete_file(self: W, content_file: DataFile) -> W:
        """Replace a data or delete file; it must be live in the branch head."""
        if content_file.content == FileContent.DATA:
            self._replaced_data[content_file.file_path] = content_file
        else:
            self._removes_deletes = True
        self._remove(content_file)
        return self

    def add_file(self: W, content_file: DataFile, data_sequence_number: int | None = None) -> W:
        """Add a replacement file; a delete file may keep an explicit data sequence number
        (data files take the one set by `data_sequence_number`, for all of them)."""
        if content_file.content == FileContent.DATA and data_sequence_number is not None:
            raise ValidationError(
                f"{self.table.name}: set the data sequence number of new data files with "
                "data_sequence_number(), not per file"
            )
        self._add(content_file, data_sequence_number)
        return self

    def data_sequence_number(self: W, sequence_number: int) -> W:
        """Give every new data file this data sequence number instead of the new snapshot's."""
        self._use_starting_sequence_number = False
        self._set_data_sequence_number(sequence_number)
        return self

    def use_starting_sequence_number(self: W) -> W:
        """New data files take the starting snapshot's sequence number, so that equality
        deletes committed while the rewrite ran still apply to them."""
        self._use_starting_sequence_number = True
        return self

    def validate_written_with(self: W, schema_id: int, spec_id: int | None = None) -> W:
        """Fail if the table's current schema is no longer `schema_id` (or, given, its
        default partition spec no longer `spec_id`): the new files were written for those,
        and a rewrite that lands after a schema or spec change would commit files laid out
        for the old one; planned again, it writes for the new."""
        self._written_with = (schema_id, spec_id)
        return self

    def rebase_concurrent_deletes(
        self: W, positions: PositionMap, writer: DeleteFileWriter | None = None
    ) -> W:
        """Follow position deletes and DVs committed meanwhile for the replaced data files to
        the new ones (`positions`: where the rewrite put each row) and commit them there,
        written by `writer` (default: DVs, for v3), instead of failing."""
        self._rebase = DeleteRebase(self.table, positions, writer)
        # A delete file the rewrite applied and removes may be gone whoever took it: its rows
        # are out of the new files already, and what replaced it is rebased or dangling.
        self._deletes_gone_by = ANY_OPERATION
        return self

    @property
    def rebased(self) -> Rebased:
        """What the commit rebased (known after `commit`)."""
        return NOTHING if self._rebase is None else self._rebase.rebased

    def _operation(self) -> Operation:
        return Operation.REPLACE

    def _validate_with(self, validator: Validator) -> None:
        name = self.table.name
        rebased = {content_key(f) for f in self.rebased.delete_files}
        if not (self._replaced_data or self._removes_deletes):
            raise ValidationError(f"{name}: a rewrite must replace at least one file")
        if self.adds_data_files and not self._replaced_data:
            raise ValidationError(f"{name}: data files to add need data files to replace")
        if self._new_deletes.keys() - rebased and not self._removes_deletes:
            raise ValidationError(f"{name}: delete files to add need delete files to replace")
        if self._written_with is not None:
            _check_layout(name, validator.base, *self._written_with)
        if self._use_starting_sequence_number:
            if self.starting_snapshot_id is None:
                raise ValidationError(f"{name}: the table had no snapshot when the rewrite began")
            starting = validator.starting_sequence_number
            if self._new_data_sequence_number != starting:
                self._set_data_sequence_number(starting)
        seq = self._new_data_sequence_number
        if self._rebase is not None:
            self._rebase_onto_new_files(validator)
        validator.no_new_deletes_for(
            self._replaced_data.values(),
            # Equality deletes newer than the start apply to the new files only if these
            # are no newer than the start themselves.
            ignore_equality_deletes=seq is not None and seq <= validator.starting_sequence_number,
            ignore_position_deletes=self._rebase is not None,
        )

    def _rebase_onto_new_files(self, validator: Validator) -> None:
        assert self._rebase is not None
        before = self.rebased.delete_files
        concurrent = validator.concurrent_position_deletes(self._replaced_data.values())
        if self._rebase.update(concurrent, self.added_data_files):
            for f in before:
                self._new_deletes.pop(content_key(f), None)
            for f in self.rebased.delete_files:
                self._add(f)
            self._new_manifests = None

    def _cleanup(self, committed: TableMetadata | None) -> None:
        super()._cleanup(committed)
        if committed is None and self._rebase is not None:
            self._rebase.discard()

    def _manifests(self, base: TableMetadata, parent: Snapshot | None) -> list[ManifestFile]:
        manifests = super()._manifests(base, parent)
        seq = self._new_data_sequence_number
        if seq is not None and self.adds_data_files:
            replaced = [e.sequence_number or 0 for e in self._data_filter.removed]
            newest = max(replaced, default=0)
            if seq < newest:
                raise ValidationError(
                    f"{self.table.name}: data sequence number {seq} for the new data files is "
                    f"older than replaced data ({newest}): older equality deletes would apply "
                    "to them again"
                )
        added = sum(f.record_count for f in self.added_data_files)
        replaced_records = sum(e.data_file.record_count for e in self._data_filter.removed)
        if added > replaced_records:
            raise ValidationError(
                f"{self.table.name}: invalid replace: {added} added records > "
                f"{replaced_records} replaced records"
            )
        return manifests


def _check_layout(name: str, base: TableMetadata, schema_id: int, spec_id: int | None) -> None:
    if base.current_schema_id != schema_id:
        raise CommitConflictError(
            f"{name}: the table's schema changed (id {schema_id} -> {base.current_schema_id}) "
            "after the rewrite planned; its files were written for the old one"
        )
    if spec_id is not None and base.default_spec_id != spec_id:
        raise CommitConflictError(
            f"{name}: the table's partition spec changed (id {spec_id} -> "
            f"{base.default_spec_id}) after the rewrite planned; its files were written for "
            "the old one"
        )
