"""`DeleteRewrite`: a rewrite of delete files that also requires data files to stay live.

icecore's `RewriteFiles` (operation `replace`), plus Java `RowDelta`'s
`validateDataFilesExist`: a job that turns equality deletes into position deletes on data file
D must not commit if D was replaced meanwhile (a compaction may have written D's rows into a
file the removed equality delete still applied to; the new position deletes would miss it).

With deletion vectors, `validate_no_new_position_deletes` also refuses a commit when another
writer added a position delete or DV for one of the data files the new DVs are for (Java's
`validateAddedDVs`): a data file with two DVs makes the table unreadable, and a DV merged from
the starting snapshot's deletes would hide a newer position delete file of the same file.
With `merge_concurrent_deletes()` the commit merges those deletes into its own DV instead
(`icecore.commit.rebase.DvMerge`), and the writer's DV goes; and a delete file the commit
removes may be gone already when a writer replaced it with one holding its positions (a DV, a
file-scoped position delete file it maintains). Another engine's rewrite of the same files
stays a conflict.
"""

from __future__ import annotations

from collections.abc import Iterable

from icecore.commit.rebase import NOTHING, DvMerge, Rebased
from icecore.commit.rewrite import RewriteFiles
from icecore.commit.validation import ADDS_DELETES, Validator
from icecore.spec.manifest import DataFile, content_key
from icecore.spec.metadata import TableMetadata
from icecore.spec.refs import MAIN_BRANCH
from icecore.table import Table


class DeleteRewrite(RewriteFiles):
    """`RewriteFiles` plus `validate_data_files_exist` (replace and overwrite removals)."""

    def __init__(self, table: Table, branch: str = MAIN_BRANCH) -> None:
        super().__init__(table, branch)
        self._must_exist: set[str] = set()
        self._dv_targets: dict[str, DataFile] = {}
        self._dv_merge: DvMerge | None = None
        self._own_dvs: dict[str | None, tuple[DataFile, int | None]] | None = None

    def validate_data_files_exist(self, paths: Iterable[str]) -> DeleteRewrite:
        self._must_exist.update(paths)
        return self

    def validate_no_new_position_deletes(self, data_files: Iterable[DataFile]) -> DeleteRewrite:
        """Fail if a position delete or DV was added for one of `data_files` meanwhile."""
        self._dv_targets.update((f.file_path, f) for f in data_files)
        return self

    def merge_concurrent_deletes(self) -> DeleteRewrite:
        """Merge what writers deleted meanwhile from the data files of the new DVs into
        them (`validate_no_new_position_deletes` names the files), and take delete files
        this commit removes that a writer replaced meanwhile as removed, instead of
        failing."""
        self._dv_merge = DvMerge(self.table)
        self._deletes_gone_by = ADDS_DELETES  # a writer's; another engine's rewrite conflicts
        return self

    @property
    def merged(self) -> Rebased:
        """What the commit merged into its DVs (known after `commit`)."""
        return NOTHING if self._dv_merge is None else self._dv_merge.rebased

    def _validate_with(self, validator: Validator) -> None:
        super()._validate_with(validator)
        validator.data_files_exist(self._must_exist, include_deletes=False)
        if self._dv_merge is None:
            validator.no_new_deletes_for(self._dv_targets.values(), ignore_equality_deletes=True)
            return
        merge = self._dv_merge
        if self._own_dvs is None:  # as the caller added them, before any merge
            self._own_dvs = {
                f.referenced_data_file: (f, seq)
                for f, seq in self._new_deletes.values()
                if f.is_deletion_vector and f.referenced_data_file in self._dv_targets
            }
        merged_before = merge.rebased.delete_files
        concurrent = validator.concurrent_position_deletes(self._dv_targets.values())
        own = {path: f for path, (f, _) in self._own_dvs.items()}
        if not merge.update(concurrent, own, self._dv_targets):
            return
        for f in merged_before:
            self._new_deletes.pop(content_key(f), None)
        for f, seq in self._own_dvs.values():
            self._add(f, seq)
        for replaced, merged in zip(merge.replaced, merge.rebased.delete_files, strict=True):
            _, seq = self._own_dvs[replaced.referenced_data_file or ""]
            self._new_deletes.pop(content_key(replaced))
            self._add(merged, seq)
        self._delete_filter.supersede_dvs(self._dv_targets[p] for p in concurrent)

    def _cleanup(self, committed: TableMetadata | None) -> None:
        super()._cleanup(committed)
        if committed is None and self._dv_merge is not None:
            self._dv_merge.discard()
