"""Where the superseded rows of a batch ended up: (data file, row position) pairs.

The writer does not report row positions, so the new data files are read back (through the
table's FileIO): their key columns and the columns the partition values are computed from,
with each row's file and position. The partition values are computed again by the same
expressions that placed the rows. The rows of one key within one partition were written by
one task (the data is distributed by partition, or by key when unpartitioned) in batch
order (sorted by partition, key and batch position, an order the writer keeps, in files
named in the order it wrote them), so the n-th of them in file order is the n-th in batch
order. Ranking both sides per (key, partition) and joining on the rank pairs each
superseded row with its position; equal keys and equal partitions are matched null-safely,
as equality deletes match nulls.

Only the superseded rows' files and positions are produced, as a join result written
straight to position delete files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from icecore.spec.metadata_columns import DELETE_FILE_PATH, DELETE_FILE_POS
from icecore.spec.schema import Schema
from spark_jobs.ingest.changes import SUPERSEDED
from spark_jobs.ingest.source import ORDER_COLUMNS
from spark_jobs.reading.parquet_files import PerFile, read_parquet
from spark_jobs.schema import FIELD_ID_KEY, quote_name
from spark_jobs.writing.layout import PartitionLayout

_ROW, _RANK, _PATH = "_ingest_pos", "_ingest_rank", "_ingest_path"


def _same(left: DataFrame, right: DataFrame, names: Sequence[str]) -> Column:
    checks = [left[quote_name(n)].eqNullSafe(right[quote_name(n)]) for n in names]
    return reduce(lambda a, b: a & b, checks)


def superseded_positions(
    spark: SparkSession,
    written: DataFrame,
    *,
    data_files: Sequence[str],
    schema: Schema,
    keys: Sequence[str],
    layout: PartitionLayout,
    io_properties: Mapping[str, str],
) -> DataFrame:
    """(`file_path`, `pos`, partition columns...) of every superseded written row.

    `written` holds the written rows with their key, partition and ordering columns and the
    superseded flag; `data_files` are the files they were written to.
    """
    parts = layout.names
    group = [*keys, *parts]
    needed = {schema.find_field(k).field_id for k in keys}
    for path in layout.source_paths():
        needed.add(schema.find_field(path.split(".")[0]).field_id)
    raw = read_parquet(
        spark,
        [(p, None) for p in data_files],
        [f for f in schema.fields if f.field_id in needed],
        io_properties,
        per_file=PerFile([(_PATH, T.StringType())], {p: (p,) for p in data_files}),
        position_column=_ROW,
    )
    back = layout.with_partition_columns(raw).select(
        *(F.col(quote_name(n)) for n in group), _PATH, _ROW
    )
    by_file = Window.partitionBy(*(F.col(quote_name(n)) for n in group)).orderBy(_PATH, _ROW)
    back = back.withColumn(_RANK, F.row_number().over(by_file))
    in_order = [F.col(c).asc_nulls_first() for c in ORDER_COLUMNS]
    by_batch = Window.partitionBy(*(F.col(quote_name(n)) for n in group)).orderBy(*in_order)
    source = written.select(*(F.col(quote_name(n)) for n in group), *ORDER_COLUMNS, SUPERSEDED)
    source = source.withColumn(_RANK, F.row_number().over(by_batch)).filter(F.col(SUPERSEDED))
    matched = source.alias("s").join(
        back.alias("b"),
        _same(source, back, group) & (source[_RANK] == back[_RANK]),
        "inner",
    )
    # coalesce with a literal makes both columns non-nullable, so they are written as the
    # spec's required fields (no value is ever null here).
    return matched.select(
        F.coalesce(back[_PATH], F.lit("")).alias(
            DELETE_FILE_PATH.name, metadata={FIELD_ID_KEY: DELETE_FILE_PATH.field_id}
        ),
        F.coalesce(back[_ROW], F.lit(0))
        .cast("long")
        .alias(DELETE_FILE_POS.name, metadata={FIELD_ID_KEY: DELETE_FILE_POS.field_id}),
        *(back[quote_name(p)].alias(p) for p in parts),
    )
