"""The live rows of file groups, every position and equality delete applied, in Spark.

    live = LiveRows(spark, table_schema, groups, delete_sequence_numbers)
    frame = live.of_group(group)  # the table's columns of the group's live rows

Data files are read by Parquet field id with the table's current schema (columns added later
read null), each row with its file's integer id and data sequence number (from
`_metadata.file_path`, see `file_ids`) and its position in the file
(`_metadata.row_index`). The delete rules are the spec's:

- a position delete `(file_path, pos)` removes row `pos` of that file when the planner paired
  the delete file with the data file (same partition, delete sequence number >= the data
  file's, `file_path` bounds);
- an equality delete removes every row of a data file with a strictly lower data sequence
  number whose equality columns equal the delete row's, null equal to null, when the delete
  file applies to the file's (spec, partition): it is one of the group's delete files.

Every group of a write shares one broadcast of each kind of delete and one of the file
lookup (URI -> file id, data sequence number, group), so a write runs a fixed number of
Spark jobs however many groups it holds (every broadcast is a job, even of a local table).
The only work per data row is hash look-ups: its file, then position deletes as one long
key, file id << 40 | position, and equality deletes by their key columns, where only a key
that matches evaluates the sequence number and group conditions. No Python runs per row.
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

from icecore.scan import FileScanTask
from icecore.spec.manifest import DataFile, FileContent
from icecore.spec.schema import Schema
from spark_jobs.common.errors import JobError
from spark_jobs.reading.file_ids import URI, checked, local_frame, uri_rows
from spark_jobs.reading.live_files import top_level_fields
from spark_jobs.schema import quoted, spark_schema
from spark_jobs.writing.files import DELETE_FILE_PATH, DELETE_POS

# Delete rows up to this many are broadcast to the data rows' tasks: the data is then never
# shuffled, which keeps a compaction close to a plain read and rewrite.
BROADCAST_DELETE_ROWS = 4_000_000
POSITION_BITS = 40  # positions below 2**40 rows per file; file ids fill the rest of a long


class TaskGroup(Protocol):
    """Planned files read together (a compaction's file group): its number, its data files
    with the deletes the planner applied to each, and those delete files once each."""

    index: int
    tasks: list[FileScanTask]

    @property
    def delete_files(self) -> list[DataFile]: ...


_ID, _SEQ, _POS, _GROUP = "_cmp_id", "_cmp_seq", "_cmp_pos", "_cmp_group"
_DEL_ID, _DEL_SEQ, _DEL_GROUPS, _DEL_KEY = "_cmp_del_id", "_cmp_del_seq", "_cmp_groups", "_cmp_dk"


def _read(spark: SparkSession, schema: T.StructType, paths: Sequence[str]) -> DataFrame:
    # No partition discovery: files of several partition directories are read together.
    return spark.read.schema(schema).option("recursiveFileLookup", "true").parquet(*paths)


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
    ) -> None:
        self.spark = spark
        self.schema = table_schema
        self.read_schema = spark_schema(table_schema.fields)
        tasks = [t for g in groups for t in g.tasks]
        if len(tasks) >= 2 ** (63 - POSITION_BITS):
            raise JobError(f"{len(tasks)} data files are too many for one write")
        self.file_ids = {t.file.file_path: i for i, t in enumerate(tasks)}
        self.file_values = {
            t.file.file_path: (i, t.data_sequence_number, g.index)
            for i, (g, t) in enumerate((g, t) for g in groups for t in g.tasks)
        }
        deletes: dict[str, DataFile] = {}
        groups_of_delete: dict[str, set[int]] = defaultdict(set)
        for g in groups:
            for d in g.delete_files:
                deletes[d.file_path] = d
                groups_of_delete[d.file_path].add(g.index)
        self.deletes = deletes
        self.delete_seqs = {p: delete_sequence_numbers[p] for p in deletes}
        self.groups_of_delete = {p: sorted(s) for p, s in groups_of_delete.items()}
        self.pairs = [
            (p, t.file.file_path) for g in groups for t in g.tasks for p in _paths(t.deletes)
        ]
        self._lookup: DataFrame | None = None
        self._positions: DataFrame | None = None
        self._equality: dict[tuple[int, ...], DataFrame] = {}

    # The data side -------------------------------------------------------------------------

    def of_group(self, group: TaskGroup) -> DataFrame:
        """The table schema's columns of the group's live rows."""
        paths = [t.file.file_path for t in group.tasks]
        raw = _read(self.spark, self.read_schema, paths)
        columns = [F.col(quoted(f.name)) for f in self.schema.fields]
        deletes = group.delete_files
        if not deletes:
            return raw.select(*columns)
        rows = (
            raw.select(
                *columns,
                F.col("_metadata.file_path").alias(URI),
                F.col("_metadata.row_index").alias(_POS),
            )
            .join(self._data_lookup(), URI, "left")
            .select(*columns, checked(_ID).alias(_ID), _SEQ, _POS, _GROUP)
        )
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
        return rows.select(*columns)

    def _data_lookup(self) -> DataFrame:
        """(Spark's URI, file id, data sequence number, group) of every data file: one
        broadcast for every group (a broadcast, even of a local table, is a Spark job)."""
        if self._lookup is None:
            paths = list(self.file_values)
            raw = _read(self.spark, T.StructType([]), paths)
            self._lookup = F.broadcast(
                local_frame(
                    self.spark,
                    uri_rows(raw, paths, self.file_values),
                    [(URI, "string"), (_ID, "int"), (_SEQ, "long"), (_GROUP, "int")],
                )
            )
        return self._lookup

    # The delete side, built once per write ---------------------------------------------------

    def _position_keys(self) -> DataFrame:
        """`_cmp_dk`: file id << 40 | position of every row a paired position delete removes."""
        if self._positions is not None:
            return self._positions
        files = [p for p, d in self.deletes.items() if d.content == FileContent.POSITION_DELETES]
        ids = {p: i for i, p in enumerate(files)}
        raw = _read(self.spark, spark_schema((DELETE_FILE_PATH, DELETE_POS)), files)
        lookup = local_frame(
            self.spark,
            uri_rows(raw, files, {p: (ids[p],) for p in files}),
            [(URI, "string"), (_DEL_ID, "int")],
        )
        pairs = local_frame(
            self.spark,
            [(ids[d], p, self.file_ids[p]) for d, p in self.pairs if d in ids],
            [(_DEL_ID, "int"), ("_cmp_path", "string"), (_ID, "int")],
        )
        rows = (
            raw.select(
                F.col(DELETE_FILE_PATH.name).alias("_cmp_path"),
                F.col(DELETE_POS.name).alias(_POS),
                F.col("_metadata.file_path").alias(URI),
            )
            .join(F.broadcast(lookup), URI, "left")
            .select("_cmp_path", _POS, checked(_DEL_ID).alias(_DEL_ID))
            # Rows naming a file outside the write, or one the planner did not pair, go.
            .join(F.broadcast(pairs), [_DEL_ID, "_cmp_path"])
            .select(_row_key(F.col(_ID), F.col(_POS)).alias(_DEL_KEY))
        )
        count = sum(self.deletes[p].record_count for p in files)
        self._positions = _maybe_broadcast(rows, count)
        return self._positions

    def _equality_rows(self, ids: tuple[int, ...]) -> DataFrame:
        """Key columns `_cmp_dk<n>`, data sequence number and the groups it applies to of
        every row of the equality delete files with these equality ids."""
        found = self._equality.get(ids)
        if found is not None:
            return found
        files = [
            p
            for p, d in self.deletes.items()
            if d.content == FileContent.EQUALITY_DELETES and tuple(d.equality_ids or ()) == ids
        ]
        if not ids:
            raise JobError(f"equality delete file {files[0]} has no equality ids")
        fields = top_level_fields(self.schema, ids, files[0])
        raw = _read(self.spark, spark_schema(fields), files)
        lookup = local_frame(
            self.spark,
            uri_rows(
                raw, files, {p: (self.delete_seqs[p], self.groups_of_delete[p]) for p in files}
            ),
            [(URI, "string"), (_DEL_SEQ, "long"), (_DEL_GROUPS, "array<int>")],
        )
        keys = [f"{_DEL_KEY}{n}" for n in range(len(fields))]
        rows = (
            raw.select(
                *(F.col(quoted(f.name)).alias(k) for f, k in zip(fields, keys, strict=True)),
                F.col("_metadata.file_path").alias(URI),
            )
            .join(F.broadcast(lookup), URI, "left")
            .select(*keys, checked(_DEL_SEQ).alias(_DEL_SEQ), F.col(_DEL_GROUPS))
        )
        count = sum(self.deletes[p].record_count for p in files)
        self._equality[ids] = _maybe_broadcast(rows, count)
        return self._equality[ids]

    def _apply_equality(self, rows: DataFrame, ids: tuple[int, ...]) -> DataFrame:
        deleted = self._equality_rows(ids)
        fields = top_level_fields(self.schema, ids, "equality delete")
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


def _paths(files: Sequence[DataFile]) -> list[str]:
    return [f.file_path for f in files]
