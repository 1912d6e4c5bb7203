"""Where the superseded rows of a batch ended up: (data file, row position) pairs.

Spark's writer does not report row positions, so the new data files are read back: their key
and partition columns, with each row's `_metadata.file_path` and `_metadata.row_index`.
The rows of one key within one partition were written by one task (the data is distributed
by partition, or by key when unpartitioned) in batch order (sorted by partition, key and
batch position, an order Spark's writer keeps), so the n-th of them in file order is the
n-th in batch order. Ranking both sides per (key, partition) and joining on the rank pairs
each superseded row with its position; equal keys and equal partitions are matched
null-safely, as equality deletes match nulls.

Only the superseded rows' files and positions come back to the driver in aggregate form (a
join result written straight to position delete files); the driver only maps Spark's URI
spelling of each file path back to the path the manifest records.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from urllib.parse import unquote, urlsplit

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_jobs.common.errors import JobError
from spark_jobs.ingest.changes import SUPERSEDED
from spark_jobs.ingest.source import ORDER_COLUMNS
from spark_jobs.schema import FIELD_ID_KEY, quote_name
from spark_jobs.writing.files import DELETE_FILE_PATH, DELETE_POS

_URI, _ROW, _RANK, _PATH = "_ingest_uri", "_ingest_pos", "_ingest_rank", "_ingest_path"


def _same(left: DataFrame, right: DataFrame, names: Sequence[str]) -> Column:
    checks = [left[quote_name(n)].eqNullSafe(right[quote_name(n)]) for n in names]
    return reduce(lambda a, b: a & b, checks)


def superseded_positions(
    spark: SparkSession,
    written: DataFrame,
    *,
    data_files: Sequence[str],
    rows_location: str,
    key_fields: Sequence[T.StructField],
    partition_fields: Sequence[T.StructField],
) -> DataFrame:
    """(`file_path`, `pos`, partition columns...) of every superseded written row.

    `written` holds the written rows with their key, partition and ordering columns and the
    superseded flag; `data_files` are the files they were written to, below `rows_location`.
    """
    keys = [f.name for f in key_fields]
    parts = [f.name for f in partition_fields]
    group = [*keys, *parts]
    read_schema = T.StructType([*key_fields, *partition_fields])
    raw = (
        spark.read.schema(read_schema)
        .option("basePath", rows_location)
        .parquet(*data_files)
        .select(
            *(F.col(quote_name(n)) for n in group),
            F.col("_metadata.file_path").alias(_URI),
            F.col("_metadata.row_index").alias(_ROW),
        )
    )
    by_file = Window.partitionBy(*(F.col(quote_name(n)) for n in group)).orderBy(_URI, _ROW)
    back = raw.withColumn(_RANK, F.row_number().over(by_file))
    in_order = [F.col(c).asc_nulls_first() for c in ORDER_COLUMNS]
    by_batch = Window.partitionBy(*(F.col(quote_name(n)) for n in group)).orderBy(*in_order)
    source = written.select(*(F.col(quote_name(n)) for n in group), *ORDER_COLUMNS, SUPERSEDED)
    source = source.withColumn(_RANK, F.row_number().over(by_batch)).filter(F.col(SUPERSEDED))
    matched = source.alias("s").join(
        back.alias("b"),
        _same(source, back, group) & (source[_RANK] == back[_RANK]),
        "inner",
    )
    positions = matched.select(
        back[_URI].alias(_URI),
        back[_ROW].alias(_ROW),
        *(back[quote_name(p)].alias(p) for p in parts),
    )
    # Spark's spelling of each new file: a cheap scan of the files' metadata only.
    uris = [row[_URI] for row in raw.select(_URI).distinct().collect()]
    mapping = spark.createDataFrame(
        [(uri, _iceberg_path(uri, rows_location, data_files)) for uri in uris],
        f"{_URI} string, {_PATH} string",
    )
    located = positions.join(F.broadcast(mapping), _URI)
    # coalesce with a literal makes both columns non-nullable, so Spark writes them as the
    # spec's required fields (no value is ever null here).
    return located.select(
        F.coalesce(F.col(_PATH), F.lit("")).alias(
            DELETE_FILE_PATH.name, metadata={FIELD_ID_KEY: DELETE_FILE_PATH.field_id}
        ),
        F.coalesce(F.col(_ROW), F.lit(0))
        .cast("long")
        .alias(DELETE_POS.name, metadata={FIELD_ID_KEY: DELETE_POS.field_id}),
        *(F.col(quote_name(p)) for p in parts),
    )


def _iceberg_path(uri: str, rows_location: str, data_files: Sequence[str]) -> str:
    """The manifest's spelling of a file Spark names by URI (percent-encoded, qualified)."""
    decoded = unquote(urlsplit(uri).path)
    prefix = rows_location.rstrip("/") + "/"
    for path in data_files:
        if decoded.endswith("/" + path[len(prefix) :]):
            return path
    raise JobError(f"read back a row of {uri}, which is not one of the files just written")
