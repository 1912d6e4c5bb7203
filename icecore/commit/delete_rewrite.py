"""`DeleteRewrite`: a rewrite of delete files that also requires data files to stay live.

icecore's `RewriteFiles` (operation `replace`), plus Java `RowDelta`'s
`validateDataFilesExist`: a job that turns equality deletes into position deletes on data file
D must not commit if D was replaced meanwhile (a compaction may have written D's rows into a
file the removed equality delete still applied to; the new position deletes would miss it).

With deletion vectors, `validate_no_new_position_deletes` also refuses a commit when another
writer added a position delete or DV for one of the data files the new DVs are for (Java's
`validateAddedDVs`): a data file with two DVs makes the table unreadable, and a DV merged from
the starting snapshot's deletes would hide a newer position delete file of the same file.
"""

from __future__ import annotations

from collections.abc import Iterable

from icecore.commit.rewrite import RewriteFiles
from icecore.commit.validation import Validator
from icecore.spec.manifest import DataFile
from icecore.spec.refs import MAIN_BRANCH
from icecore.table import Table


class DeleteRewrite(RewriteFiles):
    """`RewriteFiles` plus `validate_data_files_exist` (replace and overwrite removals)."""

    def __init__(self, table: Table, branch: str = MAIN_BRANCH) -> None:
        super().__init__(table, branch)
        self._must_exist: set[str] = set()
        self._dv_targets: dict[str, DataFile] = {}

    def validate_data_files_exist(self, paths: Iterable[str]) -> DeleteRewrite:
        self._must_exist.update(paths)
        return self

    def validate_no_new_position_deletes(self, data_files: Iterable[DataFile]) -> DeleteRewrite:
        """Fail if a position delete or DV was added for one of `data_files` meanwhile."""
        self._dv_targets.update((f.file_path, f) for f in data_files)
        return self

    def _validate_with(self, validator: Validator) -> None:
        super()._validate_with(validator)
        validator.data_files_exist(self._must_exist, include_deletes=False)
        validator.no_new_deletes_for(self._dv_targets.values(), ignore_equality_deletes=True)
