"""Overwrites: replace files, rows matching a filter, or whole partitions (operation `overwrite`).

`OverwriteFiles` (Java's `BaseOverwriteFiles`) removes named files and/or every file whose rows
all match a row filter, and adds new data files. With `validate_no_conflicting_data()` it
fails when a concurrent commit added data its conflict-detection filter could match (data the
overwrite would have replaced had it seen it); with `validate_no_conflicting_deletes()` when
deletes were added or files removed in that range meanwhile.

`ReplacePartitions` (Java's `BaseReplacePartitions`, Spark's dynamic partition overwrite)
replaces every partition its new files fall in, or the whole table when they are unpartitioned.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from icecore.commit.merging import MergingSnapshotProducer
from icecore.commit.row_filter import RowFilterMatcher
from icecore.commit.validation import Validator
from icecore.errors import ValidationError
from icecore.expressions import AlwaysFalse, AlwaysTrue, BooleanExpression
from icecore.spec.manifest import DataFile, FileContent
from icecore.spec.refs import MAIN_BRANCH
from icecore.spec.snapshots import Operation

if TYPE_CHECKING:
    from icecore.table import Table

OF = TypeVar("OF", bound="OverwriteFiles")
R = TypeVar("R", bound="ReplacePartitions")

REPLACE_PARTITIONS = "replace-partitions"


def _require_data(table: Table, data_file: DataFile, what: str) -> None:
    if data_file.content != FileContent.DATA:
        raise ValidationError(
            f"{table.name}: {what} takes data files; {data_file.file_path} is "
            f"{data_file.content.name} (use a row delta or a rewrite for delete files)"
        )


class OverwriteFiles(MergingSnapshotProducer):
    """`table.new_overwrite().overwrite_by_row_filter(f).add_file(d).commit()`."""

    def __init__(self, table: Table, branch: str = MAIN_BRANCH) -> None:
        super().__init__(table, branch)
        self._deleted_data: dict[str, DataFile] = {}
        self._conflict_filter: BooleanExpression | None = None
        self._check_added_match_filter = False
        self._check_data = False
        self._check_deletes = False

    def add_file(self: OF, data_file: DataFile) -> OF:
        _require_data(self.table, data_file, "an overwrite")
        self._add(data_file)
        return self

    def delete_file(self: OF, content_file: DataFile) -> OF:
        """Remove a data file, or a delete file; it must be live in the branch head."""
        if content_file.content == FileContent.DATA:
            self._deleted_data[content_file.file_path] = content_file
        self._remove(content_file)
        return self

    def overwrite_by_row_filter(self: OF, row_filter: BooleanExpression) -> OF:
        """Remove every file whose rows all match `row_filter` (a partly matching file fails)."""
        self._remove_rows_matching(row_filter)
        return self

    def validate_added_files_match_overwrite_filter(self: OF) -> OF:
        """Refuse added files holding rows the overwrite filter does not cover."""
        self._check_added_match_filter = True
        return self

    def conflict_detection_filter(self: OF, row_filter: BooleanExpression) -> OF:
        """The rows whose concurrent changes conflict (default: the overwrite filter)."""
        self._conflict_filter = row_filter
        return self

    def validate_no_conflicting_data(self: OF) -> OF:
        """Fail if data the conflict filter could match was added after the start."""
        self._check_data = True
        return self

    def validate_no_conflicting_deletes(self: OF) -> OF:
        """Fail if deletes were added, or data removed, that the overwrite would have met."""
        self._check_deletes = True
        return self

    def _operation(self) -> Operation:
        if self.removes_data_files and not self.adds_data_files:
            return Operation.DELETE
        if self.adds_data_files and not self.removes_data_files:
            return Operation.APPEND
        return Operation.OVERWRITE

    def _validate_with(self, validator: Validator) -> None:
        row_filter = self._data_filter.row_filter
        if self._check_added_match_filter:
            matcher = RowFilterMatcher(validator.base, row_filter, self._case_sensitive)
            for f in self.added_data_files:
                if not (matcher.partition_might_match(f) and matcher.must_match(f)):
                    raise ValidationError(
                        f"{self.table.name}: cannot append file with rows that do not match "
                        f"filter {row_filter!r}: {f.file_path}"
                    )
        if self._check_data:
            validator.no_new_data_files(self._data_conflict_filter(row_filter))
        if self._check_deletes:
            if row_filter is not AlwaysFalse():
                conflict_filter = self._conflict_filter or row_filter
                validator.no_new_delete_files(conflict_filter)
                validator.no_deleted_data_files(conflict_filter)
            validator.no_new_deletes_for(
                self._deleted_data.values(), row_filter=self._conflict_filter
            )

    def _data_conflict_filter(self, row_filter: BooleanExpression) -> BooleanExpression:
        if self._conflict_filter is not None:
            return self._conflict_filter
        if row_filter is not AlwaysFalse() and not self._deleted_data:
            return row_filter
        return AlwaysTrue()


class ReplacePartitions(MergingSnapshotProducer):
    """`table.new_replace_partitions().add_file(d).commit()`: dynamic partition overwrite."""

    def __init__(self, table: Table, branch: str = MAIN_BRANCH) -> None:
        super().__init__(table, branch)
        self.snapshot_property(REPLACE_PARTITIONS, "true")
        self._replaced: set[tuple[int, tuple]] = set()
        self._whole_table = False
        self._check_data = False
        self._check_deletes = False

    def add_file(self: R, data_file: DataFile) -> R:
        _require_data(self.table, data_file, "a partition overwrite")
        self._add(data_file)
        if self.table.metadata.spec_by_id(data_file.spec_id).is_unpartitioned:
            if not self._whole_table:
                self._whole_table = True
                self._remove_rows_matching(AlwaysTrue())
        else:
            key = (data_file.spec_id, tuple(data_file.partition))
            if key not in self._replaced:
                self._replaced.add(key)
                self._drop_partition(*key)
        return self

    def validate_append_only(self: R) -> R:
        """Fail instead of replacing a partition that already holds data."""
        self._data_filter.fail_any_delete = self._delete_filter.fail_any_delete = True
        return self

    def validate_no_conflicting_data(self: R) -> R:
        """Fail if data was added to a replaced partition after the start."""
        self._check_data = True
        return self

    def validate_no_conflicting_deletes(self: R) -> R:
        """Fail if a replaced partition had deletes added or data removed after the start."""
        self._check_deletes = True
        return self

    def _operation(self) -> Operation:
        return Operation.OVERWRITE

    def _validate_with(self, validator: Validator) -> None:
        if not self.adds_data_files:
            raise ValidationError(
                f"{self.table.name}: a partition overwrite needs data files to know which "
                "partitions to replace"
            )
        whole = AlwaysTrue() if self._whole_table else None
        partitions = None if self._whole_table else self._replaced
        if self._check_data:
            validator.no_new_data_files(whole, partitions)
        if self._check_deletes:
            validator.no_deleted_data_files(whole, partitions)
            validator.no_new_delete_files(whole, partitions)
