"""Appends: new data files, nothing removed (operation `append`).

`FastAppend` (Java's `FastAppend`) writes one manifest for the new files and carries every
manifest of the branch head over as it is, copying the parent's manifest list entries as raw
Avro blocks (`list_splice`); its cost depends on what it adds, not on how many manifests the
table has, which is what frequent small ingests need. `MergeAppend` (Java's default
`newAppend`) additionally merges small manifests once `commit.manifest.min-count-to-merge` of
them gather (see `manifest_merge`), keeping planning fast for tables that are appended to
forever.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from icecore.commit.list_splice import splice_parent_list
from icecore.commit.merging import MergingSnapshotProducer
from icecore.commit.producer import SnapshotProducer
from icecore.errors import ValidationError
from icecore.scan import snapshot_manifests
from icecore.spec.manifest import DataFile, FileContent
from icecore.spec.manifest_list import ManifestContent, ManifestFile
from icecore.spec.metadata import TableMetadata
from icecore.spec.refs import MAIN_BRANCH
from icecore.spec.snapshots import Operation, Snapshot, SummaryCounts

if TYPE_CHECKING:
    from icecore.table import Table

A = TypeVar("A", bound="FastAppend")
B = TypeVar("B", bound="MergeAppend")


def _require_data_file(table: Table, data_file: DataFile) -> None:
    if data_file.content != FileContent.DATA:
        raise ValidationError(
            f"{table.name}: cannot append {data_file.content.name} file {data_file.file_path}; "
            "delete files are committed with a row delta"
        )
    if data_file.spec_id not in table.metadata.specs_by_id():
        raise ValidationError(
            f"{table.name}: {data_file.file_path} has partition spec {data_file.spec_id}, "
            "which the table does not have"
        )


class FastAppend(SnapshotProducer):
    """`table.new_fast_append().append_file(f).commit()`."""

    def __init__(self, table: Table, branch: str = MAIN_BRANCH) -> None:
        super().__init__(table, branch)
        self._files: dict[str, DataFile] = {}
        self._new_manifests: list[ManifestFile] | None = None

    def append_file(self: A, data_file: DataFile) -> A:
        _require_data_file(self.table, data_file)
        self._files[data_file.file_path] = data_file
        self._new_manifests = None
        return self

    def _operation(self) -> Operation:
        return Operation.APPEND

    def _new_file_manifests(self, base: TableMetadata) -> list[ManifestFile]:
        """One manifest per spec of the appended files, written once for every attempt."""
        if self._new_manifests is None:
            self._new_manifests = []
            for spec_id in sorted({f.spec_id for f in self._files.values()}):
                spec = base.spec_by_id(spec_id)
                writer = self.new_manifest_writer(base, spec, ManifestContent.DATA)
                for f in self._files.values():
                    if f.spec_id == spec_id:
                        writer.add(f)
                self._new_manifests.append(writer.close())
        counts = SummaryCounts()
        for f in self._files.values():
            counts.added_file(f.content, f.record_count, f.file_size_in_bytes)
        self._counts = counts
        self._changed_partitions = {(f.spec_id, f.partition) for f in self._files.values()}
        return self._new_manifests

    def _manifests(self, base: TableMetadata, parent: Snapshot | None) -> list[ManifestFile]:
        head = [] if parent is None else snapshot_manifests(self.table.io, parent)
        return [*self._new_file_manifests(base), *head]

    def _write_manifest_list(
        self, base: TableMetadata, parent: Snapshot | None, location: str, sequence_number: int
    ) -> tuple[list[ManifestFile], int, int | None]:
        if parent is not None and parent.manifest_list is not None:
            spliced = splice_parent_list(
                self.table.io,
                location,
                snapshot=(self.snapshot_id, parent.snapshot_id, sequence_number),
                manifests=self._new_file_manifests(base),
                parent_list=parent.manifest_list,
                codec=self._codec(base),
                format_version=base.format_version,
                next_row_id=base.next_row_id,
            )
            if spliced is not None:
                return spliced
        return super()._write_manifest_list(base, parent, location, sequence_number)


class MergeAppend(MergingSnapshotProducer):
    """`table.new_append().append_file(f).commit()`: an append that merges manifests."""

    def append_file(self: B, data_file: DataFile) -> B:
        _require_data_file(self.table, data_file)
        self._add(data_file)
        return self

    def _operation(self) -> Operation:
        return Operation.APPEND
