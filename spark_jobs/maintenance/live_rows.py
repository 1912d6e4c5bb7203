"""The live rows of a set of data files, every position and equality delete applied, in Spark.

Data files are read by Parquet field id with the table's current schema (columns added later
read null), each row with Spark's `_metadata.file_path` and `_metadata.row_index` (its
position in the file). The delete rules are the spec's, with the data sequence numbers of
the plan:

- a position delete `(file_path, pos)` removes row `pos` of that file when the delete file's
  data sequence number is >= the data file's;
- an equality delete removes every row of a data file with a strictly lower data sequence
  number whose equality columns equal the delete row's, null equal to null. The caller
  passes only delete files that apply to the files' (spec, partition), so the sequence
  numbers are the only condition left, applied in the join.

Spark spells a file by URI (`file:/a/b%20c`), manifests by the path they were given; a cheap
metadata-only scan lists Spark's spellings and the driver maps each back to the manifest's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import reduce
from urllib.parse import unquote, urlsplit

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from icecore.manifest import DataFile, FileContent
from icecore.schema import Schema
from spark_jobs.common.errors import JobError
from spark_jobs.schema import quoted, spark_schema
from spark_jobs.writing.files import DELETE_FILE_PATH, DELETE_POS

URI, POS, SEQ = "_cmp_uri", "_cmp_pos", "_cmp_seq"
# Delete rows up to this many are broadcast to the data rows' tasks: the data is then never
# shuffled, which keeps a compaction close to a plain read and rewrite.
BROADCAST_DELETE_ROWS = 4_000_000
_DEL_SEQ, _DEL_URI = "_cmp_del_seq", "_cmp_del_uri"


def path_key(location: str) -> tuple[str, str]:
    """(authority, path) of a location, to match Spark's URI spelling with a manifest's."""
    parts = urlsplit(location)
    if parts.scheme in ("", "file"):
        return "", parts.path if parts.scheme else location
    return parts.netloc, parts.path


def _spark_key(uri: str) -> tuple[str, str]:
    parts = urlsplit(uri)
    if parts.scheme in ("", "file"):
        return "", unquote(parts.path)
    return parts.netloc, unquote(parts.path)


def _read(spark: SparkSession, schema: T.StructType, paths: Sequence[str]) -> DataFrame:
    # No partition discovery: files of several partition directories are read together.
    return spark.read.schema(schema).option("recursiveFileLookup", "true").parquet(*paths)


def spark_uris(spark: SparkSession, paths: Sequence[str]) -> dict[str, str]:
    """Spark's `_metadata.file_path` spelling of each manifest path: one metadata-only scan
    of every file (no column is read), made once per run."""
    if not paths:
        return {}
    frame = _read(spark, T.StructType([]), list(paths))
    by_key = {path_key(p): p for p in paths}
    out: dict[str, str] = {}
    for (uri,) in frame.select(F.col("_metadata.file_path")).distinct().collect():
        found = by_key.get(_spark_key(uri))
        if found is None:
            raise JobError(f"Spark read {uri}, which is not one of the planned files")
        out[found] = uri
    # A file without rows yields no row, so it is missing here: it needs no mapping.
    return out


def _uri_mapping(
    spark: SparkSession, uris: Mapping[str, str], paths: Mapping[str, int]
) -> DataFrame:
    """(uri, path, seq) of `paths` (manifest path -> data sequence number)."""
    rows = [(uris[p], p, seq) for p, seq in paths.items() if p in uris]
    return spark.createDataFrame(rows, f"{URI} string, _cmp_path string, {SEQ} long")


def live_rows(
    spark: SparkSession,
    table_schema: Schema,
    data_files: Mapping[str, int],
    deletes: Sequence[tuple[DataFile, int]],
    uris: Mapping[str, str],
) -> DataFrame:
    """The table schema's columns of the live rows of `data_files` (path -> data sequence
    number) once `deletes` (delete file, data sequence number) are applied."""
    read_schema = spark_schema(table_schema.fields)
    raw = _read(spark, read_schema, list(data_files))
    mapping = _uri_mapping(spark, uris, data_files)
    rows = raw.select(
        *(F.col(quoted(f.name)) for f in table_schema.fields),
        F.col("_metadata.file_path").alias(URI),
        F.col("_metadata.row_index").alias(POS),
    ).join(F.broadcast(mapping.select(URI, "_cmp_path", SEQ)), URI)
    positions = [(d, s) for d, s in deletes if d.content == FileContent.POSITION_DELETES]
    if positions:
        rows = _apply_positions(spark, rows, positions, uris)
    by_ids: dict[tuple[int, ...], list[tuple[DataFile, int]]] = {}
    for d, s in deletes:
        if d.content == FileContent.EQUALITY_DELETES:
            by_ids.setdefault(tuple(d.equality_ids or ()), []).append((d, s))
    for ids, files in sorted(by_ids.items()):
        rows = _apply_equality(spark, rows, table_schema, ids, files, uris=uris)
    return rows.select(*(F.col(quoted(f.name)) for f in table_schema.fields))


def _apply_positions(
    spark: SparkSession,
    rows: DataFrame,
    deletes: Sequence[tuple[DataFile, int]],
    uris: Mapping[str, str],
) -> DataFrame:
    schema = spark_schema((DELETE_FILE_PATH, DELETE_POS))
    frame = _read(spark, schema, [d.file_path for d, _ in deletes])
    seqs = {d.file_path: s for d, s in deletes}
    mapping = _uri_mapping(spark, uris, seqs).select(
        F.col(URI).alias(_DEL_URI), F.col(SEQ).alias(_DEL_SEQ)
    )
    positions = (
        frame.select(
            F.col(DELETE_FILE_PATH.name).alias("_cmp_del_path"),
            F.col(DELETE_POS.name).alias("_cmp_del_pos"),
            F.col("_metadata.file_path").alias(_DEL_URI),
        )
        .join(F.broadcast(mapping), _DEL_URI)
        .drop(_DEL_URI)
    )
    condition = (
        (rows["_cmp_path"] == positions["_cmp_del_path"])
        & (rows[POS] == positions["_cmp_del_pos"])
        & (positions[_DEL_SEQ] >= rows[SEQ])
    )
    return rows.join(_maybe_broadcast(positions, deletes), condition, "left_anti")


def _apply_equality(
    spark: SparkSession,
    rows: DataFrame,
    table_schema: Schema,
    ids: tuple[int, ...],
    deletes: Sequence[tuple[DataFile, int]],
    *,
    uris: Mapping[str, str],
) -> DataFrame:
    if not ids:
        raise JobError(f"equality delete file {deletes[0][0].file_path} has no equality ids")
    fields = [table_schema.find_field(i) for i in ids]
    frame = _read(spark, spark_schema(fields), [d.file_path for d, _ in deletes])
    seqs = {d.file_path: s for d, s in deletes}
    mapping = _uri_mapping(spark, uris, seqs).select(
        F.col(URI).alias(_DEL_URI), F.col(SEQ).alias(_DEL_SEQ)
    )
    keys = [f"_cmp_key{i}" for i in range(len(fields))]
    deleted = (
        frame.select(
            *(F.col(quoted(f.name)).alias(k) for f, k in zip(fields, keys, strict=True)),
            F.col("_metadata.file_path").alias(_DEL_URI),
        )
        .join(F.broadcast(mapping), _DEL_URI)
        .groupBy(*keys)
        .agg(F.max(_DEL_SEQ).alias(_DEL_SEQ))
    )
    same = [rows[quoted(f.name)].eqNullSafe(deleted[k]) for f, k in zip(fields, keys, strict=True)]
    condition = reduce(lambda a, b: a & b, same) & (deleted[_DEL_SEQ] > rows[SEQ])
    return rows.join(_maybe_broadcast(deleted, deletes), condition, "left_anti")


def _maybe_broadcast(frame: DataFrame, deletes: Sequence[tuple[DataFile, int]]) -> DataFrame:
    rows = sum(d.record_count for d, _ in deletes)
    return F.broadcast(frame) if rows <= BROADCAST_DELETE_ROWS else frame
