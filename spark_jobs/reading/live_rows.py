"""The live rows of file groups, every position and equality delete applied, in Spark.

    live = LiveRows(spark, table_schema, groups, delete_sequence_numbers, io_properties)
    frame = live.of_group(group)  # the table's columns of the group's live rows

With `lineage` (v3 tables), each row also gets its row lineage, `_row_id` and
`_last_updated_sequence_number` (spec: "Row Lineage"), so a rewrite can carry them into the
files it writes: a non-null value in the file is the row's own, a null (or no column) is
inherited, the file's `first_row_id` plus the row's position and the file's data sequence
number, and a file without a `first_row_id` (added before an upgrade to v3) has none at all,
whatever it holds, as Java's reader has it. Both are plain column expressions over values
the reading task attaches per file, so this too runs no Python per row.

Data and delete files are read through the table's FileIO (`parquet_files`) by Parquet field
id with the table's current schema (columns added later read null), each row with its file's
integer id, data sequence number and group (attached by the task reading the file) and its
position in the file. The delete rules are the spec's:

- a position delete `(file_path, pos)` removes row `pos` of that file when the planner paired
  the delete file with the data file (same partition, delete sequence number >= the data
  file's, `file_path` bounds);
- an equality delete removes every row of a data file with a strictly lower data sequence
  number whose equality columns equal the delete row's, null equal to null, when the delete
  file applies to the file's (spec, partition): it is one of the group's delete files.

Every group of a write shares one broadcast of each kind of delete, so a write runs a fixed
number of Spark jobs however many groups it holds (every broadcast is a job, even of a local
table). The only work per data row is hash look-ups: position deletes as one long key, file
id << 40 | position, and equality deletes by their key columns, where only a key that
matches evaluates the sequence number and group conditions. No Python runs per row.
Beyond `BROADCAST_DELETE_ROWS` delete rows, Spark's own join strategy (a shuffle) is used
instead of a broadcast.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from functools import reduce
from typing import Protocol

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from icecore.actions.live_files import equality_fields
from icecore.data.position_maps import POSITION_BITS, SOURCE_FILE, SOURCE_POS
from icecore.jobs.errors import JobError
from icecore.scan import FileScanTask
from icecore.spec.manifest import DataFile, FileContent, content_key
from icecore.spec.metadata_columns import (
    DELETE_FILE_PATH,
    DELETE_FILE_POS,
    LAST_UPDATED_SEQUENCE_NUMBER,
    ROW_ID,
    ROW_LINEAGE,
)
from icecore.spec.schema import Schema
from icecore.spec.types import NestedField
from spark_jobs.reading.deletion_vectors import ID as DV_ID
from spark_jobs.reading.deletion_vectors import POS as DV_POS
from spark_jobs.reading.deletion_vectors import dv_positions
from spark_jobs.reading.local_frames import local_frame
from spark_jobs.reading.parquet_files import PerFile, read_parquet
from spark_jobs.schema import quoted

# Delete rows up to this many are broadcast to the data rows' tasks: the data is then never
# shuffled, which keeps a compaction close to a plain read and rewrite.
BROADCAST_DELETE_ROWS = 4_000_000


class TaskGroup(Protocol):
    """Planned files read together (a compaction's file group): its number, its data files
    with the deletes the planner applied to each, and those delete files once each."""

    index: int
    tasks: list[FileScanTask]

    @property
    def delete_files(self) -> list[DataFile]: ...


_ID, _SEQ, _POS, _GROUP = "_cmp_id", "_cmp_seq", "_cmp_pos", "_cmp_group"
_FIRST_ROW_ID = "_cmp_first_row_id"
_DEL_ID, _DEL_SEQ, _DEL_GROUPS, _DEL_KEY = "_cmp_del_id", "_cmp_del_seq", "_cmp_groups", "_cmp_dk"


def _row_key(file_id: Column, pos: Column) -> Column:
    return F.shiftleft(file_id.cast("long"), POSITION_BITS).bitwiseOR(pos.cast("long"))


def _maybe_broadcast(frame: DataFrame, rows: int) -> DataFrame:
    return F.broadcast(frame) if rows <= BROADCAST_DELETE_ROWS else frame


class LiveRows:
    """Live rows of `groups`, sharing the delete-side frames between groups."""

    def __init__(
        self,
        spark: SparkSession,
        table_schema: Schema,
        groups: Sequence[TaskGroup],
        delete_sequence_numbers: Mapping[str, int],
        io_properties: Mapping[str, str],
        *,
        lineage: bool = False,
    ) -> None:
        self.spark = spark
        self.schema = table_schema
        self.lineage = lineage
        if lineage:
            check_no_lineage_names(table_schema)
        self.io_properties = dict(io_properties)
        tasks = [t for g in groups for t in g.tasks]
        if len(tasks) >= 2 ** (63 - POSITION_BITS):
            raise JobError(f"{len(tasks)} data files are too many for one write")
        self.file_ids = {t.file.file_path: i for i, t in enumerate(tasks)}
        self.file_values = {
            t.file.file_path: (i, t.data_sequence_number, g.index, t.file.first_row_id)
            for i, (g, t) in enumerate((g, t) for g in groups for t in g.tasks)
        }
        deletes: dict[str, DataFile] = {}
        groups_of_delete: dict[str, set[int]] = defaultdict(set)
        for g in groups:
            for d in g.delete_files:
                deletes[content_key(d)] = d
                groups_of_delete[content_key(d)].add(g.index)
        self.deletes = deletes
        self.delete_seqs = {k: delete_sequence_numbers[d.file_path] for k, d in deletes.items()}
        self.groups_of_delete = {k: sorted(s) for k, s in groups_of_delete.items()}
        self.pairs = [
            (content_key(d), t.file.file_path) for g in groups for t in g.tasks for d in t.deletes
        ]
        self._positions: DataFrame | None = None
        self._equality: dict[tuple[int, ...], tuple[DataFrame, list[NestedField]]] = {}

    # The data side -------------------------------------------------------------------------

    def of_group(self, group: TaskGroup, *, sources: bool = False) -> DataFrame:
        """The table schema's columns of the group's live rows, then with `lineage` their
        `_row_id` and `_last_updated_sequence_number`, then with `sources` where each came
        from: its file's number (`file_ids`) and its position there (the columns of
        `icecore.data.position_maps`, for a rewrite's row maps)."""
        files = [(t.file.file_path, t.file.file_size_in_bytes) for t in group.tasks]
        columns = [F.col(quoted(f.name)) for f in self.schema.fields]
        deletes = group.delete_files
        if not deletes and not self.lineage and not sources:
            return self._read(files, self.schema.fields).select(*columns)
        per_file = PerFile(
            [
                (_ID, T.IntegerType()),
                (_SEQ, T.LongType()),
                (_GROUP, T.IntegerType()),
                (_FIRST_ROW_ID, T.LongType()),
            ],
            self.file_values,
        )
        fields = [*self.schema.fields, *(ROW_LINEAGE if self.lineage else ())]
        rows = self._read(files, fields, per_file, position=_POS)
        if any(d.content == FileContent.POSITION_DELETES for d in deletes):
            positions = self._position_keys()
            rows = rows.join(
                positions, _row_key(F.col(_ID), F.col(_POS)) == F.col(_DEL_KEY), "left_anti"
            )
        by_ids = sorted(
            {
                tuple(d.equality_ids or ())
                for d in deletes
                if d.content == FileContent.EQUALITY_DELETES
            }
        )
        for ids in by_ids:
            rows = self._apply_equality(rows, ids)
        return rows.select(
            *columns,
            *(_lineage_columns() if self.lineage else ()),
            *((F.col(_ID).alias(SOURCE_FILE), F.col(_POS).alias(SOURCE_POS)) if sources else ()),
        )

    def _read(
        self,
        files: Sequence[tuple[str, int]],
        fields: Sequence[NestedField],
        per_file: PerFile | None = None,
        position: str | None = None,
    ) -> DataFrame:
        return read_parquet(
            self.spark,
            files,
            fields,
            self.io_properties,
            per_file=per_file,
            position_column=position,
        )

    def _sized(self, paths: Sequence[str]) -> list[tuple[str, int]]:
        return [(p, self.deletes[p].file_size_in_bytes) for p in paths]

    # The delete side, built once per write ---------------------------------------------------

    def _position_keys(self) -> DataFrame:
        """`_cmp_dk`: file id << 40 | position of every row a paired position delete removes."""
        if self._positions is not None:
            return self._positions
        files = [
            p
            for p, d in self.deletes.items()
            if d.content == FileContent.POSITION_DELETES and not d.is_deletion_vector
        ]
        ids = {p: i for i, p in enumerate(files)}
        raw = self._read(
            self._sized(files),
            (DELETE_FILE_PATH, DELETE_FILE_POS),
            PerFile([(_DEL_ID, T.IntegerType())], {p: (ids[p],) for p in files}),
        )
        pairs = local_frame(
            self.spark,
            [(ids[d], p, self.file_ids[p]) for d, p in self.pairs if d in ids],
            [(_DEL_ID, "int"), ("_cmp_path", "string"), (_ID, "int")],
        )
        rows = (
            raw.select(
                F.col(DELETE_FILE_PATH.name).alias("_cmp_path"),
                F.col(DELETE_FILE_POS.name).alias(_POS),
                _DEL_ID,
            )
            # Rows naming a file outside the write, or one the planner did not pair, go.
            .join(F.broadcast(pairs), [_DEL_ID, "_cmp_path"])
            .select(_row_key(F.col(_ID), F.col(_POS)).alias(_DEL_KEY))
        )
        # A DV pairs with exactly its data file: the data file's id tags its positions.
        dvs = [
            (self.file_ids[d.referenced_data_file], d)
            for d in self.deletes.values()
            if d.is_deletion_vector and d.referenced_data_file in self.file_ids
        ]
        if dvs:
            vectors = dv_positions(self.spark, dvs, self.io_properties).select(
                _row_key(F.col(DV_ID), F.col(DV_POS)).alias(_DEL_KEY)
            )
            rows = vectors if not files else rows.unionByName(vectors)
        count = sum(
            d.record_count
            for d in self.deletes.values()
            if d.content == FileContent.POSITION_DELETES
        )
        self._positions = _maybe_broadcast(rows, count)
        return self._positions

    def _equality_rows(self, ids: tuple[int, ...]) -> tuple[DataFrame, list[NestedField]]:
        """Key columns `_cmp_dk<n>`, data sequence number and the groups it applies to of
        every row of the equality delete files with these equality ids; the key columns."""
        found = self._equality.get(ids)
        if found is not None:
            return found
        files = [
            p
            for p, d in self.deletes.items()
            if d.content == FileContent.EQUALITY_DELETES and tuple(d.equality_ids or ()) == ids
        ]
        fields = equality_fields(self.schema, self.deletes[files[0]])
        per_file = PerFile(
            [(_DEL_SEQ, T.LongType()), (_DEL_GROUPS, T.ArrayType(T.IntegerType()))],
            {p: (self.delete_seqs[p], self.groups_of_delete[p]) for p in files},
        )
        raw = self._read(self._sized(files), fields, per_file)
        keys = [f"{_DEL_KEY}{n}" for n in range(len(fields))]
        rows = raw.select(
            *(F.col(quoted(f.name)).alias(k) for f, k in zip(fields, keys, strict=True)),
            _DEL_SEQ,
            _DEL_GROUPS,
        )
        count = sum(self.deletes[p].record_count for p in files)
        self._equality[ids] = (_maybe_broadcast(rows, count), fields)
        return self._equality[ids]

    def _apply_equality(self, rows: DataFrame, ids: tuple[int, ...]) -> DataFrame:
        deleted, fields = self._equality_rows(ids)
        same = [
            F.col(quoted(f.name)).eqNullSafe(F.col(f"{_DEL_KEY}{n}")) for n, f in enumerate(fields)
        ]
        condition = (
            reduce(lambda a, b: a & b, same)
            & (F.col(_DEL_SEQ) > F.col(_SEQ))
            # The data row's group (not a literal: the condition then stays in the join, and
            # every group's plan has the same broadcast, built once).
            & F.array_contains(F.col(_DEL_GROUPS), F.col(_GROUP))
        )
        return rows.join(deleted, condition, "left_anti")


def _lineage_columns() -> list[Column]:
    """`_row_id` and `_last_updated_sequence_number` of rows read with their file's lineage
    values and position: the file's own value, else the inherited one (spec: "Row Lineage");
    null for a file without a `first_row_id`."""
    first = F.col(_FIRST_ROW_ID)
    inherited = (first + F.col(_POS), F.col(_SEQ))
    return [
        F.when(first.isNotNull(), F.coalesce(F.col(quoted(f.name)), value)).alias(f.name)
        for f, value in zip(ROW_LINEAGE, inherited, strict=True)
    ]


def check_no_lineage_names(schema: Schema) -> None:
    """A v3 table column named like a lineage column would be read, and written, in its
    place (and Java's write schema, the table's joined with the lineage columns, would hold
    the name twice)."""
    reserved = {ROW_ID.name, LAST_UPDATED_SEQUENCE_NUMBER.name}
    taken = [f.name for f in schema.fields if f.name.lower() in reserved]
    if taken:
        raise JobError(
            f"column {taken[0]!r} has the name of a row lineage column: a v3 table's rows "
            "cannot be rewritten with their lineage"
        )
