"""Deleting whole files, by path or by row filter (Java's `StreamingDelete`, operation `delete`).

A row filter removes every file whose rows all match it and fails on a file that matches only
in part: removing whole files is all this operation does (row-level deletes are a row delta).
Unlike Java's default, a file named explicitly must be live in the branch head: if a
concurrent compaction replaced it, deleting nothing would leave its rows in the compacted
file, so the commit fails naming the snapshot that removed it.
"""

from __future__ import annotations

from typing import TypeVar

from icecore.commit.merging import MergingSnapshotProducer
from icecore.expressions import BooleanExpression
from icecore.spec.manifest import DataFile
from icecore.spec.snapshots import Operation

D = TypeVar("D", bound="DeleteFiles")


class DeleteFiles(MergingSnapshotProducer):
    """`table.new_delete().delete_from_row_filter(equal("day", d)).commit()`."""

    def delete_file(self: D, content_file: DataFile | str) -> D:
        """Remove a data file (by DataFile or path) or a delete file (by DataFile)."""
        self._remove(content_file)
        return self

    def delete_from_row_filter(self: D, row_filter: BooleanExpression) -> D:
        self._remove_rows_matching(row_filter)
        return self

    def _operation(self) -> Operation:
        return Operation.DELETE
