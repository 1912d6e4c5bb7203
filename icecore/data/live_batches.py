"""A data file's live rows as Arrow batches, its deletes applied inside one Python task.

    reader = LiveBatches(io, fields, target, deletes, lineage=False)
    for batch in reader.read(data):  # data: DataRef, its deletes indexes into `deletes`
        ...

A compaction that bin-packs a group into the same partition needs no shuffle, so the task that
writes an output file can also read the rows that go into it. Doing both in Arrow, with the
deletes applied there, keeps the rows out of the JVM altogether: no Arrow-to-row conversion
on the way into Spark and back out to the writer, and no join plan per group.

The delete rules are the spec's, applied exactly as the planner paired files (a data file's
`DataRef.deletes` are its `FileScanTask.deletes`: partition, sequence numbers and `file_path`
bounds already decided):

- a position delete `(file_path, pos)` removes row `pos` of that data file when the delete
  file is one of the data file's deletes; a deletion vector removes the positions it holds;
- an equality delete removes every row whose equality columns equal a delete row's, null
  equal to null, when the delete file is one of the data file's deletes (the planner pairs
  an equality delete only with files of strictly lower data sequence numbers).

Each delete file is read at most once per task: position delete files keep only the rows of
the task's data files (row groups whose `file_path` bounds miss them are skipped), equality
delete files their key columns. Position deletes become a boolean mask per batch (numpy), a
single equality column a table or `is_in` look-up (`KeySet`), several a hash semi-join; none
runs Python per row.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from icecore.data.arrow_numpy import flags, integers, strings
from icecore.data.parquet_columns import (
    match_columns,
    project_column,
    row_group_batches,
    row_group_midpoint,
)
from icecore.data.position_maps import SegmentRecorder
from icecore.io import FileIO
from icecore.spec.deletion_vectors import read_dv
from icecore.spec.manifest import DataFile, FileContent
from icecore.spec.metadata_columns import (
    DELETE_FILE_PATH,
    DELETE_FILE_POS,
    LAST_UPDATED_SEQUENCE_NUMBER,
    ROW_ID,
)
from icecore.spec.types import NestedField

if TYPE_CHECKING:
    import pandas as pd

POSITION, DV, EQUALITY = "position", "dv", "equality"
_ROW = "_live_row"
_NONE = np.empty(0, dtype=np.int64)


@dataclass(frozen=True)
class DeleteRef:
    """A delete file as a task needs it (JSON-able): a Parquet position or equality delete
    file, or a DV (a byte range of a Puffin file)."""

    kind: str
    path: str
    equality_ids: tuple[int, ...] = ()
    offset: int = 0
    length: int = 0
    record_count: int = 0
    referenced_data_file: str | None = None

    @classmethod
    def of(cls, delete: DataFile) -> DeleteRef:
        if delete.content == FileContent.EQUALITY_DELETES:
            return cls(EQUALITY, delete.file_path, tuple(delete.equality_ids or ()))
        if delete.is_deletion_vector:
            return cls(
                DV,
                delete.file_path,
                offset=delete.content_offset or 0,
                length=delete.content_size_in_bytes or 0,
                record_count=delete.record_count,
                referenced_data_file=delete.referenced_data_file,
            )
        return cls(POSITION, delete.file_path)

    @classmethod
    def from_json(cls, raw: dict) -> DeleteRef:
        return cls(**{**raw, "equality_ids": tuple(raw.get("equality_ids") or ())})


@dataclass(frozen=True)
class DataRef:
    """A byte range of a data file to read (rows of the row groups centred in it), with what
    its rows need: data sequence number, `first_row_id` (v3), its deletes (indexes)."""

    path: str
    start: int
    length: int
    sequence_number: int
    first_row_id: int | None = None
    deletes: tuple[int, ...] = ()

    @classmethod
    def from_json(cls, raw: dict) -> DataRef:
        return cls(**{**raw, "deletes": tuple(raw.get("deletes") or ())})


@dataclass(frozen=True)
class _FileDeletes:
    """What one data file's rows are checked against: its deleted positions (sorted, unique)
    and, per set of equality ids, the key rows of its equality deletes."""

    positions: np.ndarray
    equality: list[tuple[tuple[int, ...], KeySet]]


class LiveBatches:
    """Reads data files' live rows projected to `target` (`fields` by field id, then, with
    `lineage`, `_row_id` and `_last_updated_sequence_number`)."""

    def __init__(
        self,
        io: FileIO,
        fields: Sequence[NestedField],
        target: pa.Schema,
        deletes: Sequence[DeleteRef],
        data_paths: Sequence[str],
        *,
        lineage: bool = False,
    ) -> None:
        self.io = io
        self.fields = list(fields)
        self.by_id = {f.field_id: f for f in fields}
        self.target = target
        self.deletes = list(deletes)
        self.lineage = lineage
        self.wanted_paths = set(data_paths)
        self._positions: dict[int, dict[str, np.ndarray]] = {}
        self._keys: dict[int, pa.Table] = {}
        self._combined: dict[tuple[tuple[int, ...], tuple[int, ...]], KeySet] = {}

    # Data --------------------------------------------------------------------------------

    def read(
        self, data: DataRef, recorder: SegmentRecorder | None = None
    ) -> Iterator[pa.RecordBatch]:
        """The live rows of `data`, in order; `recorder` is told each batch's positions and
        those it dropped, as the batch is read (for a rewrite's `SegmentMap`)."""
        deletes = _FileDeletes(self.deleted_positions(data), self._equality_keys(data))
        for position, batch in self._batches(data):
            keep = _kept(batch.num_rows, position, deletes.positions)
            for ids, keys in deletes.equality:
                matched = self._matches(batch, ids, keys)
                if matched is not None:
                    keep = ~matched if keep is None else keep & ~matched
            if recorder is not None:
                dropped = _NONE if keep is None else np.flatnonzero(~keep) + position
                recorder.read(data.path, position, position + batch.num_rows, dropped)
            live = batch if keep is None else batch.filter(pa.array(keep))
            if live.num_rows:
                yield live

    def equality_deleted(self, data: DataRef) -> np.ndarray:
        """The positions (ascending) of `data`'s rows that its equality deletes delete,
        whether or not a position delete deletes them too."""
        equality = self._equality_keys(data)
        found: list[np.ndarray] = []
        if not equality:
            return np.empty(0, dtype=np.int64)
        for position, batch in self._batches(data):
            hit = None
            for ids, keys in equality:
                matched = self._matches(batch, ids, keys)
                if matched is not None:
                    hit = matched if hit is None else hit | matched
            if hit is not None and hit.any():
                found.append(np.flatnonzero(hit).astype(np.int64) + position)
        return np.concatenate(found) if found else np.empty(0, dtype=np.int64)

    def _batches(self, data: DataRef) -> Iterator[tuple[int, pa.RecordBatch]]:
        """(position of its first row, batch projected to `target`) for the row groups of
        `data`'s byte range."""
        read_fields = [
            *self.fields,
            *((ROW_ID, LAST_UPDATED_SEQUENCE_NUMBER) if self.lineage else ()),
        ]
        with self.io.open_input(data.path) as source:
            parquet = pq.ParquetFile(source)
            meta = parquet.metadata
            columns = match_columns(parquet.schema_arrow, read_fields)
            names = sorted({c.name for c in columns.values()})
            position = 0
            for group in range(meta.num_row_groups):
                rows = meta.row_group(group).num_rows
                if not data.start <= row_group_midpoint(meta, group) < data.start + data.length:
                    position += rows
                    continue
                for raw in row_group_batches(parquet, group, names, rows):
                    yield position, self._project(raw, columns, data, position)
                    position += raw.num_rows

    def _project(
        self, raw: pa.RecordBatch, columns: dict[int, pa.Field], data: DataRef, position: int
    ) -> pa.RecordBatch:
        arrays = [
            project_column(raw, columns.get(f.field_id), f, target)
            for f, target in zip(self.fields, self.target, strict=False)
        ]
        if self.lineage:
            arrays.extend(self._lineage(raw, columns, data, position))
        return pa.RecordBatch.from_arrays(arrays, schema=self.target)

    def _lineage(
        self, raw: pa.RecordBatch, columns: dict[int, pa.Field], data: DataRef, position: int
    ) -> list[pa.Array]:
        """`_row_id`, `_last_updated_sequence_number`: the file's value, else the inherited one
        (`first_row_id` + position, the data sequence number); all null without a
        `first_row_id` (spec: "Row Lineage")."""
        n = raw.num_rows
        if data.first_row_id is None:
            return [pa.nulls(n, pa.int64()), pa.nulls(n, pa.int64())]
        start = data.first_row_id + position
        inherited = (
            pa.array(np.arange(start, start + n, dtype=np.int64)),
            pa.repeat(pa.scalar(data.sequence_number, pa.int64()), n),
        )
        out = []
        for column, value in zip((ROW_ID, LAST_UPDATED_SEQUENCE_NUMBER), inherited, strict=True):
            own = columns.get(column.field_id)
            if own is None:
                out.append(value)
            else:
                out.append(pc.coalesce(raw.column(own.name).cast(pa.int64()), value))
        return out

    # Position deletes and DVs ------------------------------------------------------------

    def deleted_positions(self, data: DataRef) -> np.ndarray:
        """The positions (ascending, unique) its position deletes and DV delete."""
        found: list[np.ndarray] = []
        for index in data.deletes:
            ref = self.deletes[index]
            if ref.kind == POSITION:
                positions = self._position_file(index).get(data.path)
                if positions is not None:
                    found.append(positions)
            elif ref.kind == DV and ref.referenced_data_file == data.path:
                dv = read_dv(
                    self.io,
                    ref.path,
                    ref.offset,
                    ref.length,
                    referenced_data_file=ref.referenced_data_file,
                    cardinality=ref.record_count,
                )
                found.append(dv.to_numpy().astype(np.int64, copy=False))
        if not found:
            return np.empty(0, dtype=np.int64)
        return np.unique(np.concatenate(found))

    def _position_file(self, index: int) -> dict[str, np.ndarray]:
        """The positions a position delete file holds for this task's data files, by file."""
        cached = self._positions.get(index)
        if cached is not None:
            return cached
        ref = self.deletes[index]
        paths: dict[str, list[np.ndarray]] = defaultdict(list)
        with self.io.open_input(ref.path) as source:
            parquet = pq.ParquetFile(source)
            columns = match_columns(parquet.schema_arrow, (DELETE_FILE_PATH, DELETE_FILE_POS))
            path_name = columns[DELETE_FILE_PATH.field_id].name
            pos_name = columns[DELETE_FILE_POS.field_id].name
            wanted = strings(sorted(self.wanted_paths))
            for group in range(parquet.metadata.num_row_groups):
                if not self._may_hold(parquet.metadata.row_group(group), path_name):
                    continue
                table = parquet.read_row_group(group, columns=[path_name, pos_name])
                table = table.filter(pc.is_in(table.column(path_name), value_set=wanted))
                if not table.num_rows:
                    continue
                encoded = table.column(path_name).combine_chunks().dictionary_encode()
                codes = integers(encoded.indices)  # null paths were filtered out
                positions = _as_int64(table.column(pos_name).combine_chunks())
                for code, path in enumerate(encoded.dictionary.to_pylist()):
                    paths[path].append(positions[codes == code])
        result = {p: np.concatenate(chunks) for p, chunks in paths.items()}
        self._positions[index] = result
        return result

    def _may_hold(self, row_group: pq.RowGroupMetaData, path_name: str) -> bool:
        """False when the row group's `file_path` bounds exclude every wanted data file."""
        for i in range(row_group.num_columns):
            chunk = row_group.column(i)
            if chunk.path_in_schema != path_name:
                continue
            stats = chunk.statistics
            if stats is None or not stats.has_min_max:
                return True
            low, high = _text(stats.min), _text(stats.max)
            return any(low <= p <= high for p in self.wanted_paths)
        return True

    # Equality deletes --------------------------------------------------------------------

    def _equality_keys(self, data: DataRef) -> list[tuple[tuple[int, ...], KeySet]]:
        """Per set of equality ids, the key rows of the data file's equality deletes (built
        once per combination of delete files: data files of a partition share them)."""
        by_ids: dict[tuple[int, ...], list[int]] = defaultdict(list)
        for index in data.deletes:
            ref = self.deletes[index]
            if ref.kind == EQUALITY:
                by_ids[ref.equality_ids].append(index)
        out = []
        for ids, indexes in by_ids.items():
            combination = (ids, tuple(sorted(indexes)))
            keys = self._combined.get(combination)
            if keys is None:
                keys = KeySet(pa.concat_tables([self._equality_file(i) for i in indexes]))
                self._combined[combination] = keys
            out.append((ids, keys))
        return out

    def _equality_file(self, index: int) -> pa.Table:
        cached = self._keys.get(index)
        if cached is not None:
            return cached
        ref = self.deletes[index]
        key_fields = [self.by_id[i] for i in ref.equality_ids]
        targets = [self.target.field(self.target.get_field_index(f.name)) for f in key_fields]
        batches = []
        with self.io.open_input(ref.path) as source:
            parquet = pq.ParquetFile(source)
            columns = match_columns(parquet.schema_arrow, key_fields)
            names = sorted({c.name for c in columns.values()})
            for group in range(parquet.metadata.num_row_groups):
                rows = parquet.metadata.row_group(group).num_rows
                for raw in row_group_batches(parquet, group, names, rows):
                    batches.append(
                        pa.RecordBatch.from_arrays(
                            [
                                project_column(raw, columns.get(f.field_id), f, t)
                                for f, t in zip(key_fields, targets, strict=True)
                            ],
                            schema=pa.schema(targets),
                        )
                    )
        table = pa.Table.from_batches(batches, schema=pa.schema(targets))
        self._keys[index] = table
        return table

    def _matches(
        self, batch: pa.RecordBatch, ids: tuple[int, ...], keys: KeySet
    ) -> np.ndarray | None:
        """Rows of `batch` whose equality columns equal a key row's (null equals null)."""
        names = [self.by_id[i].name for i in ids]
        return keys.matches([batch.column(batch.schema.get_field_index(n)) for n in names])


class KeySet:
    """The key rows of a data file's equality deletes (one set of equality columns), made
    ready once for the many batches looked up in them.

    One integer-like column (ints, dates, times, timestamps: most keys) is looked up by its
    stored integers, in a structure built once: Arrow's `is_in` builds its hash set again on
    every call, and its look-ups into a large set cost about four times as much (20M rows
    against 200,000 keys: 2.5 s against 0.6 s for a pandas hash index). Keys dense enough
    (their range at most `DENSE_BYTES_PER_KEY` values per key, and `DENSE_MAX_BYTES` in all:
    ids, dates) get a table of one flag per value in their range, which a batch indexes
    directly (3x faster than the pandas index there); sparser ones (timestamps, random ids)
    the pandas hash index. Other single columns use `is_in`; several a hash semi-join. Null
    equals null throughout, as the spec's equality deletes require."""

    DENSE_BYTES_PER_KEY = 128
    DENSE_MAX_BYTES = 1 << 26

    def __init__(self, keys: pa.Table) -> None:
        self.keys = keys.combine_chunks()
        self.table: np.ndarray | None = None  # a flag per value from `low - 1` to `high + 1`
        self.shift = np.int64(0)  # `low - 1` in int64 arithmetic (wrapped at LONG_MIN)
        self.index: pd.Index | None = None
        self.null_key = False
        if self.keys.num_columns == 1 and self.keys.num_rows:
            column = _storage(self.keys.column(0).chunk(0))
            if _integer_like(column.type):
                self.null_key = column.null_count > 0
                self._build(_as_int64(column.drop_null()))

    def _build(self, values: np.ndarray) -> None:
        """The table when the keys are dense (no sort needed: a repeated key sets its flag
        again), else the hash index of the distinct keys."""
        low, high = (int(values.min()), int(values.max())) if values.size else (0, 0)
        span = high - low + 1
        if span <= max(1, min(self.DENSE_BYTES_PER_KEY * values.size, self.DENSE_MAX_BYTES)):
            self.shift = np.int64((low - 1 + 2**63) % 2**64 - 2**63)  # wrapped as int64
            self.table = np.zeros(span + 2, dtype=bool)  # both ends False: no key there
            self.table[values - self.shift] = True
            return
        import pandas as pd  # noqa: PLC0415 (sparse keys only)

        self.index = pd.Index(np.unique(values))

    def matches(self, columns: Sequence[pa.Array]) -> np.ndarray | None:
        """Which rows of `columns` (the equality columns, in the keys' order) a key row
        equals; None when there are no keys."""
        if not self.keys.num_rows:
            return None
        if self.table is not None or self.index is not None:
            return self._look_up(_storage(columns[0]))
        if len(columns) == 1:
            values = _storage(self.keys.column(0).chunk(0))
            return flags(pc.is_in(_storage(columns[0]), value_set=values, skip_nulls=False))
        rows = len(columns[0])
        names = self.keys.column_names
        left, right = _null_safe(pa.table(list(columns), names=names), self.keys)
        left = left.append_column(_ROW, pa.array(np.arange(rows, dtype=np.int64)))
        joined = left.join(right, keys=right.column_names, join_type="left semi")
        matched = np.zeros(rows, dtype=bool)
        matched[joined.column(_ROW).to_numpy()] = True
        return matched

    def _look_up(self, column: pa.Array) -> np.ndarray:
        found = self._found(_as_int64(column))
        if not column.null_count:
            return found
        valid = flags(column.is_valid())  # a null's slot holds any value: masked here
        return (found & valid) | (~valid if self.null_key else False)

    def _found(self, values: np.ndarray) -> np.ndarray:
        if self.table is None:
            assert self.index is not None
            return self.index.get_indexer(values) >= 0
        # int64 arithmetic wraps, but a value lands inside the table only if it is one of the
        # table's values; any other is below 0 or past the end, clipped onto a False end.
        return self.table.take(values - self.shift, mode="clip")


def _integer_like(kind: pa.DataType) -> bool:
    types = pa.types
    return types.is_integer(kind) or any(
        is_kind(kind) for is_kind in (types.is_date, types.is_time, types.is_timestamp)
    )


def _as_int64(column: pa.Array) -> np.ndarray:
    """A column's values as int64 numbers, equal exactly when the values are (the same type on
    both sides of a look-up: timestamps and times by their stored integers); a null's is
    unspecified."""
    return integers(column).astype(np.int64, copy=False)


def _kept(rows: int, position: int, deleted: np.ndarray) -> np.ndarray | None:
    """Which of `rows` rows starting at `position` no position in `deleted` (sorted) names;
    None when all are kept."""
    if not deleted.size:
        return None
    low, high = np.searchsorted(deleted, [position, position + rows])
    if high <= low:
        return None
    keep = np.ones(rows, dtype=bool)
    keep[deleted[low:high] - position] = False
    return keep


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _null_safe(left: pa.Table, right: pa.Table) -> tuple[pa.Table, pa.Table]:
    """Both sides' key columns in a form a hash join matches null to null on: per column, a
    flag saying which rows are null and the values with nulls replaced by a value of the
    column (any: the flag tells them apart)."""
    sides: tuple[dict[str, pa.Array], dict[str, pa.Array]] = ({}, {})
    for i in range(left.num_columns):
        columns = (
            _storage(left.column(i).combine_chunks()),
            _storage(right.column(i).combine_chunks()),
        )
        filler = _any_value(columns)
        for side, column in zip(sides, columns, strict=True):
            side[f"_n{i}"] = column.is_null()
            values = column
            if filler is None:  # null on both sides: the flag alone compares
                values = pa.array(np.zeros(len(column), dtype=np.int8))
            elif column.null_count:
                values = pc.fill_null(column, filler)
            side[f"_v{i}"] = values
    return pa.table(sides[0]), pa.table(sides[1])


def _any_value(columns: Sequence[pa.Array]) -> pa.Scalar | None:
    for column in columns:
        valid = column.drop_null()
        if len(valid):
            return valid[0]
    return None


def _storage(array: pa.Array) -> pa.Array:
    """An extension array (uuid) as its storage: hash look-ups and joins take plain types."""
    return array.storage if isinstance(array, pa.ExtensionArray) else array
