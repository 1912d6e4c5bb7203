"""Where a rewrite put each row: (old data file, position) -> (new data file, position).

A compaction that commits while a merge-on-read writer deletes rows from the files it replaces
can keep its work only if those deletes follow the rows into the new files
(`icecore.commit.rebase`). The rewrite itself knows where every row went; a `PositionMap` is
that knowledge in a form the commit can ask: "these positions of this old file: where are
they now?". Positions the rewrite dropped (rows already deleted when it read them) have no new
place and are left out: their delete is already applied.

`SegmentMap` is the map of a bin-pack, which writes each input file's live rows in order: an
input split becomes one or more runs of consecutive output rows (a `Segment` per output file
it reaches), so the map is a few segments per input file plus the positions the rewrite
dropped, kept as compressed bitmaps. Every row the rewrite wrote lies in a segment, so a
position of an input that no segment holds was dropped. Its size grows with the deleted
rows, not the rewritten ones (`nbytes`). A task builds its part with a `SegmentRecorder`:
what it read, batch by batch, then the files its writer cut the rows into.

`RowMap` is the map of a rewrite that shuffles (a sort, a move to another partition spec):
rows reach their files in no order their sources give, so the rows carry their source
(`SOURCE_FILE`, an input's number, and `SOURCE_POS`) to the writer, which writes beside each
new file a row map (the sources of its rows, in order: `write_row_map`) into the run's own
directory, never the table's files. The driver reads only the row maps of the files that can
hold rows of inputs with deletes to follow, so its memory stays that of one file's map
whatever the rewrite's size; the cost is the row maps' writing, a few bytes per row.
"""

from __future__ import annotations

import base64
import json
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from icecore.data.arrow_numpy import integers
from icecore.io import FileIO
from icecore.spec.deletion_vectors import DeletionVector

_EMPTY = DeletionVector().to_portable()
# The columns a shuffled row carries to the writer: its input's number and its position there.
SOURCE_FILE, SOURCE_POS = "_src_file", "_src_pos"
ROW_MAPS = "_row-maps"  # the directory of a write's row maps, below the write's own
# A row as one long: its input's number above the position (below 2**40 rows per file).
POSITION_BITS = 40
_MAP_BATCH_ROWS = 1 << 20  # rows of a row map the driver reads at a time


class PositionMap(Protocol):
    """What a rewrite knows of where its input rows went."""

    def covers(self, data_file: str) -> bool:
        """Whether `data_file` is an input of the rewrite, so its rows can be followed."""
        ...

    def move(self, deleted: Mapping[str, np.ndarray]) -> Iterator[tuple[str, np.ndarray]]:
        """(new data file, new positions) of the rows `deleted` names (old data file ->
        ascending positions) that the rewrite wrote, the ones it dropped left out; a new
        file may come more than once. All at once: a map may read files to answer."""
        ...


@dataclass(frozen=True)
class Segment:
    """Rows `start` to `end` (exclusive) of an input file, less those the rewrite dropped,
    written in order to `new_file` from its row `new_start` on."""

    data_file: str
    start: int
    end: int
    new_file: str
    new_start: int

    def to_json(self) -> list[str | int]:
        return [self.data_file, self.start, self.end, self.new_file, self.new_start]

    @classmethod
    def from_json(cls, raw: list) -> Segment:
        data_file, start, end, new_file, new_start = raw
        return cls(str(data_file), int(start), int(end), str(new_file), int(new_start))


class SegmentMap:
    """A bin-pack's `PositionMap`: segments, and each input file's dropped positions."""

    def __init__(self, inputs: Mapping[str, int]) -> None:
        self._inputs = dict(inputs)  # input file -> its rows (`record_count`)
        self._segments: dict[str, list[Segment]] = defaultdict(list)
        self._dropped: dict[str, bytes] = {}  # portable Roaring bitmaps, decoded on demand

    def add(self, segment: Segment) -> None:
        self._segments[segment.data_file].append(segment)

    def add_dropped(self, data_file: str, positions: np.ndarray) -> None:
        """Record positions of `data_file` the rewrite read but did not write (its deletes);
        added to what is already recorded (a file may be read in several splits)."""
        if not len(positions):
            return
        merged = DeletionVector.from_positions(positions)
        if (old := self._dropped.get(data_file)) is not None:
            merged = merged.union(DeletionVector.from_portable(old))
        self._dropped[data_file] = merged.to_portable()

    def covers(self, data_file: str) -> bool:
        """Whether every row of the input is accounted for: in a segment (written there, or
        dropped inside its range) or dropped outside any (an input whose rows were all
        dropped has no segment at all). A map missing part of a file says no, and the
        commit gives way instead of taking the rows it cannot find as dropped."""
        rows = self._inputs.get(data_file)
        if rows is None:
            return False
        segments = self._segments.get(data_file, ())
        starts = np.array(sorted(s.start for s in segments), dtype=np.int64)
        ends = np.array(sorted(s.end for s in segments), dtype=np.int64)
        dropped = self._dropped_positions(data_file)
        outside = np.searchsorted(ends, dropped, side="right") >= np.searchsorted(
            starts, dropped, side="right"
        )
        return int((ends - starts).sum()) + int(outside.sum()) == rows

    def _dropped_positions(self, data_file: str) -> np.ndarray:
        raw = self._dropped.get(data_file)
        return DeletionVector.from_portable(raw if raw is not None else _EMPTY).to_numpy()

    def move(self, deleted: Mapping[str, np.ndarray]) -> Iterator[tuple[str, np.ndarray]]:
        for data_file, positions in deleted.items():
            yield from self._moved(data_file, positions)

    def _moved(self, data_file: str, positions: np.ndarray) -> Iterator[tuple[str, np.ndarray]]:
        wanted = np.asarray(positions, dtype=np.int64)
        dropped = self._dropped_positions(data_file)
        out: dict[str, list[np.ndarray]] = defaultdict(list)
        for segment in self._segments.get(data_file, ()):
            inside = wanted[(wanted >= segment.start) & (wanted < segment.end)]
            if not len(inside):
                continue
            kept = inside[~np.isin(inside, dropped, assume_unique=True)]
            if not len(kept):
                continue
            before = np.searchsorted(dropped, kept) - np.searchsorted(dropped, segment.start)
            out[segment.new_file].append(segment.new_start + (kept - segment.start) - before)
        for new_file, chunks in out.items():
            yield new_file, np.sort(np.concatenate(chunks))

    def add_report(self, report: str) -> None:
        """Add what a task reported of one file it wrote (`SegmentRecorder.reports`)."""
        parsed = json.loads(report)
        for raw in parsed.get("segments", ()):
            self.add(Segment.from_json(raw))
        for data_file, encoded in parsed.get("dropped", {}).items():
            positions = DeletionVector.from_portable(base64.b64decode(encoded)).to_numpy()
            self.add_dropped(data_file, positions)

    @property
    def nbytes(self) -> int:
        """The map's memory, roughly: its segments and dropped-position bitmaps."""
        segments = sum(len(s) for s in self._segments.values())
        return segments * 96 + sum(len(b) for b in self._dropped.values())


@dataclass(frozen=True)
class _Read:
    data_file: str
    start: int
    end: int
    dropped: np.ndarray  # ascending positions in [start, end) not written

    @property
    def rows(self) -> int:
        return self.end - self.start - len(self.dropped)

    def position_of(self, row: int) -> int:
        """The position of the `row`-th written row (0-based) of this read."""
        # The k-th kept position p satisfies p - start - (dropped below p) == k.
        candidates = self.start + row + np.arange(len(self.dropped) + 1)
        below = np.searchsorted(self.dropped, candidates, side="right")
        return int(candidates[np.argmax(candidates - self.start - below == row)])


class SegmentRecorder:
    """One bin-pack task's part of a `SegmentMap`: `read` each batch of an input file in
    the order its rows are written, then `segments` once the writer says which files it
    wrote, in order, with how many rows each."""

    def __init__(self) -> None:
        # Consecutive reads of one file grow one entry: (file, start, end, dropped chunks),
        # joined once at the end (joining at every batch costs the square of a file's batches).
        self._reading: list[tuple[str, int, int, list[np.ndarray]]] = []

    def read(self, data_file: str, start: int, end: int, dropped: np.ndarray) -> None:
        """Rows `start` to `end` (exclusive) of `data_file` were read, and all but `dropped`
        (ascending, within the range) were written next."""
        chunk = np.asarray(dropped, np.int64)
        if self._reading:
            path, first, last_end, chunks = self._reading[-1]
            if path == data_file and last_end == start:
                chunks.append(chunk)
                self._reading[-1] = (path, first, end, chunks)
                return
        self._reading.append((data_file, start, end, [chunk]))

    @property
    def _reads(self) -> list[_Read]:
        return [
            _Read(path, start, end, chunks[0] if len(chunks) == 1 else np.concatenate(chunks))
            for path, start, end, chunks in self._reading
        ]

    def dropped(self) -> dict[str, np.ndarray]:
        """Per input file, the positions read but not written."""
        found: dict[str, list[np.ndarray]] = defaultdict(list)
        for r in self._reads:
            found[r.data_file].append(r.dropped)
        return {path: np.concatenate(chunks) for path, chunks in found.items()}

    def reports(self, written: list[tuple[str, int]]) -> list[str]:
        """What the task reports with each file of `written` (location, rows; in writing
        order) for the driver's `SegmentMap.add_report`: the file's segments, and with the
        first file every position the task dropped."""
        by_file: dict[str, list[list[str | int]]] = defaultdict(list)
        for segment in self.segments(written):
            by_file[segment.new_file].append(segment.to_json())
        dropped = {
            path: base64.b64encode(DeletionVector.from_positions(p).to_portable()).decode()
            for path, p in self.dropped().items()
            if len(p)
        }
        out = []
        for n, (location, _) in enumerate(written):
            report: dict[str, object] = {"segments": by_file.get(location, [])}
            if n == 0 and dropped:
                report["dropped"] = dropped
            out.append(json.dumps(report))
        return out

    def segments(self, written: list[tuple[str, int]]) -> list[Segment]:
        """The segments, given the files written (location, row count) in writing order."""
        out: list[Segment] = []
        files = iter(written)
        new_file, room = next(files, ("", 0))
        new_start = 0
        for r in self._reads:
            row, rows = 0, r.rows
            position = r.start
            while row < rows:
                while room == 0:
                    new_file, room = next(files, ("", -1))
                    if room < 0:
                        raise ValueError(f"fewer rows were written than read: {written}")
                    new_start = 0
                take = min(room, rows - row)
                end = r.end if row + take == rows else r.position_of(row + take)
                out.append(Segment(r.data_file, position, end, new_file, new_start))
                row, position = row + take, end
                room -= take
                new_start += take
        if room or next(files, None) is not None:
            raise ValueError(f"more rows were written than read: {written}")
        return out


def write_row_map(io: FileIO, location: str, sources: Sequence[pa.Table]) -> None:
    """Write the row map of one new file: `sources` (tables of `SOURCE_FILE`, `SOURCE_POS`)
    in the order the file's rows were written."""
    table = pa.concat_tables(sources) if sources else pa.table({SOURCE_FILE: [], SOURCE_POS: []})
    table = table.select([SOURCE_FILE, SOURCE_POS]).cast(
        pa.schema([(SOURCE_FILE, pa.int32()), (SOURCE_POS, pa.int64())])
    )
    with io.open_output(location, overwrite=True) as sink:
        pq.write_table(table, sink, compression="zstd")


class RowMap:
    """A shuffling rewrite's `PositionMap`: the inputs' numbers, and per input the new
    files that may hold its rows with each file's row map."""

    def __init__(
        self,
        io: FileIO,
        inputs: Mapping[str, int],
        new_files: Mapping[str, Sequence[str]],
        row_maps: Mapping[str, str],
        *,
        batch_rows: int = _MAP_BATCH_ROWS,
    ) -> None:
        self.io = io
        self.batch_rows = batch_rows
        self._inputs = dict(inputs)  # input file -> its number in the rows' `SOURCE_FILE`
        self._new_files = {path: list(files) for path, files in new_files.items()}
        self._row_maps = dict(row_maps)  # new file -> its row map

    def covers(self, data_file: str) -> bool:
        """An input whose every candidate new file has its row map."""
        files = self._new_files.get(data_file)
        return (
            data_file in self._inputs
            and files is not None
            and all(f in self._row_maps for f in files)
        )

    def move(self, deleted: Mapping[str, np.ndarray]) -> Iterator[tuple[str, np.ndarray]]:
        keys = [
            (np.int64(self._inputs[path]) << POSITION_BITS) | np.asarray(p, dtype=np.int64)
            for path, p in deleted.items()
        ]
        wanted = np.unique(np.concatenate(keys)) if keys else np.empty(0, np.int64)
        if not len(wanted):
            return
        files = sorted({f for path in deleted for f in self._new_files.get(path, ())})
        for new_file in files:
            hits = []
            offset = 0
            with self.io.open_input(self._row_maps[new_file]) as source:
                # In batches: the driver holds one batch of a map, however large its file.
                for batch in pq.ParquetFile(source).iter_batches(self.batch_rows):
                    numbers = integers(batch.column(SOURCE_FILE)).astype(np.int64)
                    found = (numbers << POSITION_BITS) | integers(batch.column(SOURCE_POS))
                    at = np.minimum(np.searchsorted(wanted, found), len(wanted) - 1)
                    hits.append(offset + np.flatnonzero(wanted[at] == found))
                    offset += batch.num_rows
            moved = np.concatenate(hits) if hits else np.empty(0, np.int64)
            if len(moved):
                yield new_file, moved.astype(np.int64)

    @property
    def files(self) -> list[str]:
        """The row maps (scratch files of the run, deleted once it is done)."""
        return list(self._row_maps.values())


class CombinedMap:
    """The map of a rewrite whose groups went different ways: each input by the map that
    covers it."""

    def __init__(self, maps: Sequence[PositionMap]) -> None:
        self.maps = list(maps)

    def covers(self, data_file: str) -> bool:
        return any(m.covers(data_file) for m in self.maps)

    def move(self, deleted: Mapping[str, np.ndarray]) -> Iterator[tuple[str, np.ndarray]]:
        for m in self.maps:
            mine = {path: p for path, p in deleted.items() if m.covers(path)}
            if mine:
                yield from m.move(mine)
