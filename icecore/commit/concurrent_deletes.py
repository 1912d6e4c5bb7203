"""Rows other writers deleted, while a rewrite ran, from the data files it replaces.

A merge-on-read writer (Spark or Trino `DELETE`/`UPDATE`/`MERGE`, Flink, our own ingest) keeps
committing position delete files (v2) and deletion vectors (v3) against the very data files a
compaction is rewriting. Its commits are what a rewrite's validation finds after its starting
snapshot: each delete file added by such a snapshot, with a data sequence number above the
starting one, that applies to a replaced data file (by `referenced_data_file`, or by partition
and `file_path` bounds, as scan planning pairs them; the same rule as
`icecore.spec.delete_targets`).

Every such file counts, also one a later concurrent commit replaced: a DV holds every position
of the DV it replaces (spec: "Deletion Vectors"), so of a data file's successive DVs only the
newest is read; position delete files are read whole, as a file replaced by a delete-file
compaction is gone from the head although its rows were deleted meanwhile all the same.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from icecore.data.live_batches import DataRef, DeleteRef, LiveBatches
from icecore.io import FileIO
from icecore.spec.delete_targets import referenced_data_file, within_bounds
from icecore.spec.manifest import DataFile


@dataclass(frozen=True)
class ConcurrentDelete:
    """A position delete file or DV that a snapshot after the starting one added."""

    delete_file: DataFile
    snapshot_id: int
    sequence_number: int


class ConcurrentDeletes(Mapping[str, list[ConcurrentDelete]]):
    """The concurrent position deletes and DVs of each data file (by path) that has any."""

    def __init__(
        self,
        by_data_file: Mapping[str, list[ConcurrentDelete]],
        superseded: Iterable[ConcurrentDelete] = (),
    ) -> None:
        self._by_data_file = {path: list(found) for path, found in by_data_file.items() if found}
        self._superseded = list(superseded)  # older DVs a newer one holds: not read

    @classmethod
    def applying_to(
        cls, data_files: Iterable[DataFile], added: Iterable[ConcurrentDelete]
    ) -> ConcurrentDeletes:
        """Pair `added` (position deletes and DVs only) with the `data_files` they apply to;
        of a data file's DVs only the newest is kept."""
        targets = {f.file_path: f for f in data_files}
        by_partition: dict[tuple[int, tuple], list[DataFile]] = defaultdict(list)
        for f in targets.values():
            by_partition[(f.spec_id, f.partition)].append(f)
        found: dict[str, list[ConcurrentDelete]] = defaultdict(list)
        newest_dv: dict[str, ConcurrentDelete] = {}
        superseded: list[ConcurrentDelete] = []
        for delete in added:
            d = delete.delete_file
            if d.is_deletion_vector:
                path = d.referenced_data_file
                if path in targets:
                    kept = newest_dv.get(path)
                    newer = kept is None or kept.sequence_number < delete.sequence_number
                    if newer:
                        newest_dv[path] = delete
                    older = kept if newer else delete
                    if older is not None:
                        superseded.append(older)
                continue
            if (one := referenced_data_file(d)) is not None:
                if one in targets:
                    found[one].append(delete)
                continue
            for f in by_partition.get((d.spec_id, d.partition), ()):
                if within_bounds(d, f.file_path.encode("utf-8")):
                    found[f.file_path].append(delete)
        for path, delete in newest_dv.items():
            found[path].append(delete)
        return cls(found, superseded)

    def __getitem__(self, data_file: str) -> list[ConcurrentDelete]:
        return self._by_data_file[data_file]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_data_file)

    def __len__(self) -> int:
        return len(self._by_data_file)

    @property
    def snapshot_ids(self) -> frozenset[int]:
        """The concurrent commits whose deletes these are, also those whose DV a later one
        replaced (its positions are in the later one)."""
        found = (d.snapshot_id for deletes in self.values() for d in deletes)
        return frozenset((*found, *(d.snapshot_id for d in self._superseded)))

    @property
    def key(self) -> frozenset[tuple[str, str]]:
        """What was found, comparable across attempts: (data file, delete file) pairs."""
        return frozenset(
            (path, d.delete_file.file_path + f"@{d.delete_file.content_offset}")
            for path, found in self.items()
            for d in found
        )

    def positions(self, io: FileIO, data_file: str) -> np.ndarray:
        """The positions (ascending, unique) the concurrent deletes remove from `data_file`,
        whether or not they were already deleted when the rewrite started."""
        refs = [DeleteRef.of(d.delete_file) for d in self[data_file]]
        reader = LiveBatches(io, [], pa.schema([]), refs, [data_file])
        every = tuple(range(len(refs)))
        return reader.deleted_positions(DataRef(data_file, 0, 0, 0, deletes=every))
