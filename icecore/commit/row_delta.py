"""Row-level changes: data files plus position and equality delete files (Java's `BaseRowDelta`).

The operation is `delete` when only delete files are added, `append` when only data files are,
and `overwrite` otherwise, as in Java. The data files that added position deletes point at
must still exist when the row delta commits: a concurrent compaction that replaced one would
leave the deletes pointing at nothing and the deleted rows alive in the compacted file. Files
the caller names with `validate_data_files_exist` are checked, and so, automatically, is every
data file an added position delete file is scoped to (`referenced_data_file`, or equal
`file_path` bounds).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, TypeVar

from icecore.commit.merging import MergingSnapshotProducer
from icecore.commit.validation import Validator
from icecore.errors import ValidationError
from icecore.expressions import AlwaysTrue, BooleanExpression
from icecore.spec.delete_targets import referenced_data_file
from icecore.spec.manifest import DataFile, FileContent
from icecore.spec.refs import MAIN_BRANCH
from icecore.spec.snapshots import Operation

if TYPE_CHECKING:
    from icecore.table import Table

R = TypeVar("R", bound="RowDelta")


class RowDelta(MergingSnapshotProducer):
    """`table.new_row_delta().add_deletes(d).validate_data_files_exist([p]).commit()`."""

    def __init__(self, table: Table, branch: str = MAIN_BRANCH) -> None:
        super().__init__(table, branch)
        self._referenced: set[str] = set()
        self._conflict_filter: BooleanExpression = AlwaysTrue()
        self._include_deletes = False
        self._check_data = False
        self._check_deletes = False

    def add_rows(self: R, data_file: DataFile) -> R:
        if data_file.content != FileContent.DATA:
            raise ValidationError(
                f"{self.table.name}: add_rows takes data files; {data_file.file_path} is "
                f"{data_file.content.name}"
            )
        self._add(data_file)
        return self

    def add_deletes(self: R, delete_file: DataFile) -> R:
        if delete_file.content == FileContent.DATA:
            raise ValidationError(
                f"{self.table.name}: add_deletes takes delete files; {delete_file.file_path} "
                "is a data file"
            )
        self._add(delete_file)
        return self

    def remove_deletes(self: R, delete_file: DataFile) -> R:
        self._remove(delete_file)
        return self

    def validate_data_files_exist(self: R, paths: Iterable[str]) -> R:
        """Fail if any of these data files was removed by an overwrite or rewrite meanwhile."""
        self._referenced.update(paths)
        return self

    def validate_deleted_files(self: R) -> R:
        """Also fail when a referenced file was removed by a `delete` snapshot."""
        self._include_deletes = True
        return self

    def conflict_detection_filter(self: R, row_filter: BooleanExpression) -> R:
        self._conflict_filter = row_filter
        return self

    def validate_no_conflicting_data(self: R, row_filter: BooleanExpression | None = None) -> R:
        """Fail if data the conflict filter could match was added meanwhile."""
        if row_filter is not None:
            self._conflict_filter = row_filter
        self._check_data = True
        return self

    def validate_no_conflicting_deletes(self: R, row_filter: BooleanExpression | None = None) -> R:
        """Fail if deletes were added meanwhile where the conflict filter could match."""
        if row_filter is not None:
            self._conflict_filter = row_filter
        self._check_deletes = True
        return self

    def _operation(self) -> Operation:
        if self.adds_data_files and not self.adds_delete_files and not self.removes_data_files:
            return Operation.APPEND
        if self.adds_delete_files and not self.adds_data_files:
            return Operation.DELETE
        return Operation.OVERWRITE

    def _referenced_paths(self) -> set[str]:
        scoped = (referenced_data_file(f) for f, _ in self._new_deletes.values())
        return self._referenced | {p for p in scoped if p is not None}

    def _validate_with(self, validator: Validator) -> None:
        referenced = self._referenced_paths()
        validator.data_files_exist(referenced, include_deletes=self._include_deletes)
        if self._check_data:
            validator.no_new_data_files(self._conflict_filter)
        if self._check_deletes:
            validator.no_new_delete_files(self._conflict_filter)
