"""Reading delete and data files with Spark by Parquet field id, with the identity of the
file each row came from as a small integer (mapped from Spark's URI on the driver)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from icecore.types import NestedField
from spark_jobs.maintenance.spark_paths import uri_to_path
from spark_jobs.schema import FIELD_ID_KEY, spark_type

URI = "_uri"


def field_struct(fields: Sequence[NestedField]) -> T.StructType:
    return T.StructType(
        [
            T.StructField(
                f.name, spark_type(f.field_type, f.name), True, {FIELD_ID_KEY: f.field_id}
            )
            for f in fields
        ]
    )


def read_with_file_id(
    spark: SparkSession,
    paths: Sequence[str],
    fields: Sequence[NestedField],
    aliases: Sequence[str],
    *,
    ids: Mapping[str, int],
    id_column: str,
    with_position: str | None = None,
) -> DataFrame:
    """`fields` (read by field id, absent ids as null) renamed to `aliases`, plus
    `id_column` (the file's id in `ids`) and, if asked, the row's position in its file.

    Spark's spelling of each file is found by a metadata-only scan of the files' paths."""
    raw = spark.read.schema(field_struct(fields)).parquet(*paths)
    columns = [F.col(f"`{f.name}`").alias(a) for f, a in zip(fields, aliases, strict=True)]
    columns.append(F.col("_metadata.file_path").alias(URI))
    if with_position:
        columns.append(F.col("_metadata.row_index").alias(with_position))
    frame = raw.select(*columns)
    uris = [row[0] for row in raw.select(F.col("_metadata.file_path")).distinct().collect()]
    mapping = uri_to_path(uris, paths)
    lookup = spark.createDataFrame(
        [(uri, ids[path]) for uri, path in mapping.items()],
        T.StructType(
            [T.StructField(URI, T.StringType()), T.StructField(id_column, T.IntegerType())]
        ),
    )
    return frame.join(F.broadcast(lookup), URI).drop(URI)
