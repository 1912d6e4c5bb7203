"""Which delete files apply to which data file: the spec's "Scan Planning" rules as an index.

Rules (spec v2, "Scan Planning"):
- A position delete file applies to a data file when the data file's data sequence number is
  <= the delete file's, both share spec id and partition, and (when the delete file carries
  `file_path` bounds) the data file's path lies within them.
- An equality delete file applies when the data file's data sequence number is strictly
  lower than the delete file's, and the partitions are equal or the delete file's spec is
  unpartitioned (a "global" delete).

Deletes are grouped per (spec id, partition) and sorted by sequence number, so finding the
deletes for one data file is a dictionary lookup and a bisection, not a scan of every delete
file: planning 500,000 data files against 50,000 deletes must stay linear.
Position deletes that name a single data file (`icecore.spec.delete_targets`) are indexed by
that path directly.

v3 deletion vectors (`deletion-vector-v1` blobs in Puffin files) apply to exactly their
`referenced_data_file`. A data file has at most one: two live DVs for one file is a corrupt
table, refused with both names. An index over what several snapshots added (commit
validation, `successive_dvs`) may see a file's DVs one after another, each replacing the last
and holding its positions (the spec requires it): the newest stands for them all, and only
two added by one snapshot are corrupt. A DV holds every position deleted from its file, including
those of position delete files written before the table's upgrade, so where a DV applies the
older position delete files for that file are not returned (Java's `DeleteFileIndex` does
the same).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from icecore.errors import ValidationError
from icecore.spec.delete_targets import referenced_data_file, within_bounds
from icecore.spec.manifest import DataFile, FileContent


@dataclass
class _SeqSorted:
    """Delete files ordered by data sequence number, with the numbers kept for bisection."""

    entries: list[tuple[int, DataFile]] = field(default_factory=list)
    _seqs: list[int] | None = None

    def add(self, seq: int, delete_file: DataFile) -> None:
        self.entries.append((seq, delete_file))
        self._seqs = None

    def freeze(self) -> None:
        self.entries.sort(key=lambda e: e[0])
        self._seqs = [s for s, _ in self.entries]

    def at_least(self, seq: int) -> list[tuple[int, DataFile]]:
        """Entries whose sequence number is >= seq."""
        assert self._seqs is not None, "freeze() the index before querying it"
        return self.entries[bisect_left(self._seqs, seq) :]

    def greater_than(self, seq: int) -> list[tuple[int, DataFile]]:
        assert self._seqs is not None, "freeze() the index before querying it"
        return self.entries[bisect_right(self._seqs, seq) :]


class DeleteFileIndex:
    """Answers `for_data_file(...)`; build it from every live delete entry of one snapshot."""

    def __init__(
        self, unpartitioned_spec_ids: Iterable[int], *, successive_dvs: bool = False
    ) -> None:
        self._unpartitioned_specs = frozenset(unpartitioned_spec_ids)
        self._successive_dvs = successive_dvs
        self._global_eq = _SeqSorted()
        self._eq_by_partition: dict[tuple[int, tuple], _SeqSorted] = defaultdict(_SeqSorted)
        self._pos_by_partition: dict[tuple[int, tuple], _SeqSorted] = defaultdict(_SeqSorted)
        self._pos_by_path: dict[str, _SeqSorted] = defaultdict(_SeqSorted)
        self._dvs: dict[str, tuple[int, DataFile]] = {}
        self._entries: list[tuple[DataFile, int]] = []
        self._count = 0
        self._frozen = False

    def __len__(self) -> int:
        return self._count

    def add(self, delete_file: DataFile, data_sequence_number: int) -> None:
        if self._frozen:
            raise RuntimeError("delete file index is already frozen")
        self._count += 1
        self._entries.append((delete_file, data_sequence_number))
        if delete_file.content == FileContent.EQUALITY_DELETES:
            if delete_file.spec_id in self._unpartitioned_specs:
                self._global_eq.add(data_sequence_number, delete_file)
            else:
                key = (delete_file.spec_id, delete_file.partition)
                self._eq_by_partition[key].add(data_sequence_number, delete_file)
        elif delete_file.is_deletion_vector:
            self._add_dv(delete_file, data_sequence_number)
        elif delete_file.content == FileContent.POSITION_DELETES:
            if (referenced := referenced_data_file(delete_file)) is not None:
                self._pos_by_path[referenced].add(data_sequence_number, delete_file)
            else:
                key = (delete_file.spec_id, delete_file.partition)
                self._pos_by_partition[key].add(data_sequence_number, delete_file)
        else:
            raise ValueError(f"{delete_file.file_path} is a data file, not a delete file")

    def _add_dv(self, dv: DataFile, data_sequence_number: int) -> None:
        referenced = dv.referenced_data_file
        if not referenced:
            raise ValidationError(f"deletion vector in {dv.file_path} has no referenced_data_file")
        if (other := self._dvs.get(referenced)) is not None:
            if self._successive_dvs and other[0] != data_sequence_number:
                if data_sequence_number > other[0]:
                    self._dvs[referenced] = (data_sequence_number, dv)
                return
            raise ValidationError(
                f"corrupt table: data file {referenced} has two deletion vectors "
                f"({other[1].file_path} at offset {other[1].content_offset} and "
                f"{dv.file_path} at offset {dv.content_offset}); a data file may have one"
            )
        self._dvs[referenced] = (data_sequence_number, dv)

    def entries(self) -> list[tuple[DataFile, int]]:
        """Every delete file added, with its data sequence number, in the order added."""
        return list(self._entries)

    def freeze(self) -> DeleteFileIndex:
        for group in (
            [self._global_eq],
            self._eq_by_partition.values(),
            self._pos_by_partition.values(),
            self._pos_by_path.values(),
        ):
            for seq_sorted in group:
                seq_sorted.freeze()
        self._frozen = True
        return self

    def for_data_file(self, data_file: DataFile, data_sequence_number: int) -> tuple[DataFile, ...]:
        """Every delete file that applies to `data_file`, position deletes first."""
        if not self._count:
            return ()
        key = (data_file.spec_id, data_file.partition)
        found: list[DataFile] = []
        dv = self._dvs.get(data_file.file_path)
        has_dv = dv is not None and dv[0] >= data_sequence_number
        if has_dv:
            found.append(dv[1])  # it supersedes the file's older position delete files
        elif (by_path := self._pos_by_path.get(data_file.file_path)) is not None:
            found.extend(f for _, f in by_path.at_least(data_sequence_number))
        if not has_dv and (by_partition := self._pos_by_partition.get(key)) is not None:
            path = data_file.file_path.encode("utf-8")
            for _, delete_file in by_partition.at_least(data_sequence_number):
                if within_bounds(delete_file, path):
                    found.append(delete_file)
        found.extend(f for _, f in self._global_eq.greater_than(data_sequence_number))
        if (eq := self._eq_by_partition.get(key)) is not None:
            found.extend(f for _, f in eq.greater_than(data_sequence_number))
        return tuple(found)
