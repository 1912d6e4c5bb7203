"""Rebasing concurrent deletes onto a rewrite's new files, instead of giving way.

A compaction replaces data files; a merge-on-read writer meanwhile deletes rows of those files
(position deletes, v3 deletion vectors). Iceberg Java's `RewriteFiles` then refuses to commit
("found new position delete for replaced data file"): the rows would come back in the new
files. Re-planning does the whole rewrite again, against a writer that may commit again
before it is done; on a busy table the compaction never lands.

Every deleted row still exists in the new files, only at another position, and the rewrite
knows which (`icecore.data.position_maps`). So a commit attempt that finds such deletes reads
the positions they delete from each replaced file (`ConcurrentDeletes`), follows them to the
new files, and adds delete files that delete the same rows there: one DV per new data file on
v3 (a data file may have one), position delete files on v2. The concurrent DVs and the
file-scoped delete files of replaced files leave with those files (`ManifestFilter` drops
deletes scoped to a removed data file); partition-scoped ones stay for the other files they
name. The rebased files take the new snapshot's sequence number, above the new data files'
(the starting one), so they apply to them. Rows the rewrite had dropped already (deleted when
it read them) need nothing.

A commit that adds DVs of its own (a conversion of equality deletes, of legacy position
deletes) meets the same writer differently: the writer gave a data file a DV meanwhile, and a
data file may have only one. `DvMerge` writes, for each such data file, one DV holding the
positions of both, in place of the commit's own; the writer's leaves with it.

Each attempt does this against what is committed by then; an attempt that finds the same
deletes as the last one reuses its files, and files of superseded attempts are deleted.
"""

from __future__ import annotations

import contextlib
import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from icecore.commit.concurrent_deletes import ConcurrentDeletes
from icecore.data.position_maps import PositionMap
from icecore.errors import CommitConflictError, FileError
from icecore.location_provider import table_locations
from icecore.spec.deletion_vectors import read_dv, write_dvs
from icecore.spec.manifest import DataFile

if TYPE_CHECKING:
    from icecore.table import Table


class DeleteFileWriter(Protocol):
    """Writes delete files that remove `positions` (ascending) of each data file named."""

    def write(
        self, positions: Mapping[str, np.ndarray], data_files: Mapping[str, DataFile]
    ) -> list[DataFile]: ...


class DeletionVectorWriter:
    """One Puffin file per call with a DV per data file (format v3), where the table puts
    its data files."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def write(
        self, positions: Mapping[str, np.ndarray], data_files: Mapping[str, DataFile]
    ) -> list[DataFile]:
        if not positions:
            return []
        locations = table_locations(self.table.metadata)
        location = locations.new_data_location(f"{uuid.uuid4()}-deletes.puffin")
        written = write_dvs(self.table.io, location, positions)
        return [w.entry(data_files[w.referenced_data_file]) for w in written]


@dataclass(frozen=True)
class Rebased:
    """What one commit rebased: the concurrent commits, the rows their deletes removed that
    now go with the new files, and the delete files that carry them."""

    snapshot_ids: frozenset[int]
    rows: int
    delete_files: tuple[DataFile, ...]


NOTHING = Rebased(frozenset(), 0, ())


class DeleteRebase:
    """The rebase of one rewrite commit, across its attempts."""

    def __init__(
        self, table: Table, positions: PositionMap, writer: DeleteFileWriter | None = None
    ) -> None:
        self.table = table
        self.positions = positions
        self.writer = writer or DeletionVectorWriter(table)
        self._key: frozenset[tuple[str, str]] = frozenset()
        self.rebased = NOTHING

    def update(self, concurrent: ConcurrentDeletes, new_files: Sequence[DataFile]) -> bool:
        """Rebase what `concurrent` holds onto `new_files`; whether the delete files changed
        since the last attempt (the old ones are then deleted)."""
        if concurrent.key == self._key:
            return False
        by_path = {f.file_path: f for f in new_files}
        deleted = {}
        for data_file in concurrent:
            if not self.positions.covers(data_file):
                raise CommitConflictError(
                    f"{self.table.name}: cannot rebase the deletes committed meanwhile for "
                    f"{data_file}: the rewrite did not record where its rows went",
                    snapshot_id=min(d.snapshot_id for d in concurrent[data_file]),
                )
            deleted[data_file] = concurrent.positions(self.table.io, data_file)
        moved: dict[str, list[np.ndarray]] = defaultdict(list)
        for new_file, new_positions in self.positions.move(deleted):
            if new_file not in by_path:
                raise CommitConflictError(
                    f"{self.table.name}: rows the rewrite read went to {new_file}, which this "
                    "commit does not add",
                    snapshot_id=min(concurrent.snapshot_ids),
                )
            moved[new_file].append(new_positions)
        rows = sum(len(p) for chunks in moved.values() for p in chunks)
        merged = {path: np.unique(np.concatenate(chunks)) for path, chunks in moved.items()}
        files = self.writer.write(merged, by_path) if merged else []
        self.discard()
        self._key = concurrent.key
        self.rebased = Rebased(concurrent.snapshot_ids, rows, tuple(files))
        return True

    def discard(self) -> None:
        """Delete the delete files of the last attempt (best effort: else an orphan)."""
        _delete_quietly(self.table, self.rebased.delete_files)
        self.rebased = NOTHING
        self._key = frozenset()


class DvMerge:
    """A commit's own DVs merged with those writers added meanwhile for the same data files,
    across its attempts."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self._key: frozenset[tuple[str, str]] = frozenset()
        self.rebased = NOTHING
        self.replaced: tuple[DataFile, ...] = ()  # the commit's own DVs the merged ones replace

    def update(
        self,
        concurrent: ConcurrentDeletes,
        own: Mapping[str, DataFile],
        data_files: Mapping[str, DataFile],
    ) -> bool:
        """Merge `own` (data file -> the commit's DV for it) with `concurrent`; whether the
        merged DVs changed since the last attempt (the old ones are then deleted)."""
        if concurrent.key == self._key:
            return False
        io = self.table.io
        merged: dict[str, np.ndarray] = {}
        rows = 0
        for path in concurrent:
            if path not in own:
                raise CommitConflictError(
                    f"{self.table.name}: deletes were committed meanwhile for {path}, for which "
                    "this commit has no deletion vector to merge them into",
                    snapshot_id=min(d.snapshot_id for d in concurrent[path]),
                )
            theirs = concurrent.positions(io, path)
            ours = read_dv(
                io,
                own[path].file_path,
                own[path].content_offset or 0,
                own[path].content_size_in_bytes or 0,
                referenced_data_file=path,
                cardinality=own[path].record_count,
            ).to_numpy()
            merged[path] = np.union1d(ours, theirs)
            rows += len(merged[path]) - len(ours)
        files = DeletionVectorWriter(self.table).write(merged, data_files) if merged else []
        self.discard()
        self._key = concurrent.key
        self.replaced = tuple(own[path] for path in merged)
        self.rebased = Rebased(concurrent.snapshot_ids, rows, tuple(files))
        return True

    def discard(self) -> None:
        """Delete the merged DVs of the last attempt (best effort: else an orphan)."""
        _delete_quietly(self.table, self.rebased.delete_files)
        self.rebased = NOTHING
        self.replaced = ()
        self._key = frozenset()


def _delete_quietly(table: Table, files: Sequence[DataFile]) -> None:
    for path in {f.file_path for f in files}:
        with contextlib.suppress(FileError):
            table.io.delete(path, missing_ok=True)
