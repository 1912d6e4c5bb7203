"""`DeleteRewrite`: a rewrite of delete files that also requires data files to stay live.

icecore's `RewriteFiles` (operation `replace`), plus Java `RowDelta`'s
`validateDataFilesExist`: a job that turns equality deletes into position deletes on data file
D must not commit if D was replaced meanwhile (a compaction may have written D's rows into a
file the removed equality delete still applied to; the new position deletes would miss it).
"""

from __future__ import annotations

from collections.abc import Iterable

from icecore.commit.rewrite import RewriteFiles
from icecore.commit.validation import Validator
from icecore.spec.refs import MAIN_BRANCH
from icecore.table import Table


class DeleteRewrite(RewriteFiles):
    """`RewriteFiles` plus `validate_data_files_exist` (replace and overwrite removals)."""

    def __init__(self, table: Table, branch: str = MAIN_BRANCH) -> None:
        super().__init__(table, branch)
        self._must_exist: set[str] = set()

    def validate_data_files_exist(self, paths: Iterable[str]) -> DeleteRewrite:
        self._must_exist.update(paths)
        return self

    def _validate_with(self, validator: Validator) -> None:
        super()._validate_with(validator)
        validator.data_files_exist(self._must_exist, include_deletes=False)
