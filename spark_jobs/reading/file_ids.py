"""Reading delete and data files with Spark by Parquet field id, with the identity of the
file each row came from as a small integer (mapped from Spark's URI on the driver).

Spark names a row's file by URI (`_metadata.file_path`, e.g. `file:/wh/a%20b/x.parquet`),
manifests by the path they were given. The URIs come from the reader's file listing
(`DataFrame.inputFiles()`, no Spark job, no data read), which spells a local file
`file:///a` where `_metadata.file_path` says `file:/a`, so the lookup holds both spellings.
A row whose file is in neither spelling fails its task (`raise_error`) instead of being
dropped by the join: losing rows silently is the one thing a maintenance job must not do.

Small driver-side tables (file ids, pairs) are built as SQL `VALUES` (`local_frame`), a
local relation that Spark broadcasts from the driver; `createDataFrame` would make an RDD,
and every broadcast of it would be a Spark job of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from icecore.spec.types import NestedField
from spark_jobs.reading.spark_paths import uri_to_path
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


def spellings(uri: str) -> list[str]:
    """The spellings `_metadata.file_path` may use for a file `inputFiles()` lists as `uri`."""
    if uri.startswith("file:///"):
        return [uri, "file:/" + uri[len("file:///") :]]
    if uri.startswith("file:/") and not uri.startswith("file://"):
        return [uri, "file:///" + uri[len("file:/") :]]
    return [uri]


def uri_rows(
    frame: DataFrame, paths: Sequence[str], values: Mapping[str, tuple[object, ...]]
) -> list[tuple[object, ...]]:
    """(spelling, *values[path]) for every file `frame` (a plain file scan of `paths`)
    reads, in every spelling Spark may give it."""
    mapping = uri_to_path(frame.inputFiles(), paths)
    return [(s, *values[path]) for uri, path in mapping.items() for s in spellings(uri)]


def checked(column: str, uri: str = URI) -> Column:
    """`column` (from a left join on the file's URI), failing the task where it is null.

    The test is made non-deterministic (`spark_partition_id`) on purpose: otherwise the
    optimizer, seeing a later join or filter that rejects nulls in `column`, turns the left
    join into an inner one and the unmatched rows vanish without the check running."""
    missing = F.col(column).isNull() & (F.spark_partition_id() >= 0)
    message = F.concat(F.lit("Spark read a file the job did not plan: "), F.col(uri))
    return F.when(missing, F.raise_error(message)).otherwise(F.col(column))


def local_frame(
    spark: SparkSession, rows: Sequence[Sequence[Any]], columns: Sequence[tuple[str, str]]
) -> DataFrame:
    """`rows` as a local relation with `columns` (name, Spark SQL type): str, int, None and
    lists of int values. Strings travel hex-encoded, so no path needs SQL escaping."""
    typed = [F.col(f"c{i}").cast(t).alias(n) for i, (n, t) in enumerate(columns)]
    names = ", ".join(f"c{i}" for i in range(len(columns)))
    if rows:
        values = ", ".join("(" + ", ".join(_literal(v) for v in row) + ")" for row in rows)
        query = f"SELECT * FROM VALUES {values} AS t({names})"
    else:
        nulls = ", ".join(f"CAST(NULL AS {t})" for _, t in columns)
        query = f"SELECT * FROM VALUES ({nulls}) AS t({names}) WHERE false"
    return spark.sql(query).select(*typed)


def _literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return f"CAST(X'{value.encode('utf-8').hex()}' AS STRING)"
    if isinstance(value, bool):
        raise TypeError("local_frame: booleans are not supported")
    if isinstance(value, int):
        return f"{value}L"
    if isinstance(value, list | tuple):
        return "ARRAY(" + ", ".join(_literal(v) for v in value) + ")"
    raise TypeError(f"local_frame: unsupported value {value!r}")


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
    `id_column` (the file's id in `ids`) and, if asked, the row's position in its file."""
    raw = spark.read.schema(field_struct(fields)).parquet(*paths)
    columns = [F.col(f"`{f.name}`").alias(a) for f, a in zip(fields, aliases, strict=True)]
    columns.append(F.col("_metadata.file_path").alias(URI))
    if with_position:
        columns.append(F.col("_metadata.row_index").alias(with_position))
    lookup = local_frame(
        spark,
        uri_rows(raw, paths, {p: (ids[p],) for p in paths}),
        [(URI, "string"), (id_column, "int")],
    )
    frame = raw.select(*columns).join(F.broadcast(lookup), URI, "left")
    kept = [c for c in frame.columns if c not in (URI, id_column)]
    return frame.select(*kept, checked(id_column).alias(id_column))
