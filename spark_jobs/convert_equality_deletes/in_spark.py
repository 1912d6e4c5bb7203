"""The Spark route of the conversion (more delete keys than a task should hold): the rows
equality deletes delete, found by one Spark join (see `matches`). Imported only when a job
takes this route, so that a conversion matched in the driver never loads pyspark."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from functools import reduce

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from icecore.actions.live_files import LiveDelete, LiveState, equality_fields
from icecore.table import Table
from spark_jobs.reading.live_rows import BROADCAST_DELETE_ROWS
from spark_jobs.reading.parquet_files import PerFile, read_parquet
from spark_jobs.schema import quoted
from spark_jobs.writing.files import GROUP

_PATH, _POS, _SEQ, _DEL_SEQ, _SCOPE, _BY = "_path", "_pos", "_seq", "_del_seq", "_groups", "_by"


def matches(
    spark: SparkSession,
    table: Table,
    state: LiveState,
    used: list[LiveDelete],
    group_of_data: Mapping[str, int],
) -> DataFrame:
    """(`file_path`, `pos`, `_group`) of every live row some equality delete deletes, each
    once: one Spark job with a single shuffle (the write's, by group).

    A delete row deletes a data row when the keys are equal (null-safe), the delete's data
    sequence number is higher, and the delete applies to the data file's group -- its
    (spec, partition): the planner paired the delete with a file of that group, and within
    one partition pairing depends on the sequence numbers only.

    Most data rows match no key, so the per-row work is kept to the key probe: the delete
    keys are made unique first (each with the list of (sequence number, groups) of the
    deletes holding it), so every data row matches at most once and needs no `distinct`;
    only the matched rows are checked against that list, with the sequence number and group
    of their file, which the task reading the file attached to each row. Required
    key columns join on plain equality, which Spark hashes directly; optional ones
    null-safely, which costs an extra null flag per key."""
    schema = table.metadata.schema()
    by_ids: dict[tuple[int, ...], list[LiveDelete]] = defaultdict(list)
    for d in used:
        by_ids[tuple(d.file.equality_ids or ())].append(d)
    scope: dict[str, set[int]] = defaultdict(set)
    for d in used:
        scope[d.file.file_path].update(group_of_data[t.file.file_path] for t in state.applies_to(d))
    io = table.io.properties
    frames = []
    for _, deletes in sorted(by_ids.items()):
        fields = equality_fields(schema, deletes[0].file)
        dk = [f"_dk{n}" for n in range(len(fields))]
        rk = [f"_rk{n}" for n in range(len(fields))]
        delete_rows = read_parquet(
            spark,
            [(d.file.file_path, d.file.file_size_in_bytes) for d in deletes],
            fields,
            io,
            per_file=PerFile(
                [(_DEL_SEQ, T.LongType()), (_SCOPE, T.ArrayType(T.IntegerType()))],
                {
                    d.file.file_path: (d.sequence_number, sorted(scope[d.file.file_path]))
                    for d in deletes
                },
            ),
        )
        keys = (
            delete_rows.select(
                *(F.col(quoted(f.name)).alias(k) for f, k in zip(fields, dk, strict=True)),
                F.struct(_DEL_SEQ, _SCOPE).alias(_BY),
            )
            .groupBy(*dk)
            .agg(F.collect_list(_BY).alias(_BY))
        )
        if sum(d.file.record_count for d in deletes) <= BROADCAST_DELETE_ROWS:
            keys = F.broadcast(keys)  # the data rows are then never shuffled
        data_files = sorted({t.file.file_path for d in deletes for t in state.applies_to(d)})
        data_rows = read_parquet(
            spark,
            [(p, state.data_by_path[p].file.file_size_in_bytes) for p in data_files],
            fields,
            io,
            per_file=PerFile(
                [(_PATH, T.StringType()), (_SEQ, T.LongType()), (GROUP, T.IntegerType())],
                {
                    p: (p, state.data_by_path[p].data_sequence_number, group_of_data[p])
                    for p in data_files
                },
            ),
            position_column=_POS,
        )
        same = reduce(
            lambda a, b: a & b,
            [
                F.col(r) == F.col(d) if f.required else F.col(r).eqNullSafe(F.col(d))
                for f, r, d in zip(fields, rk, dk, strict=True)
            ],
        )
        matched = data_rows.select(
            *(F.col(quoted(f.name)).alias(r) for f, r in zip(fields, rk, strict=True)),
            _PATH,
            _SEQ,
            GROUP,
            _POS,
        ).join(keys, same, "inner")
        applies = F.exists(
            _BY,
            lambda d: (d[_DEL_SEQ] > F.col(_SEQ)) & F.array_contains(d[_SCOPE], F.col(GROUP)),
        )
        frames.append(
            matched.where(applies).select(
                F.col(_PATH).alias("file_path"), F.col(_POS).alias("pos"), GROUP
            )
        )
    return reduce(DataFrame.unionByName, frames)
