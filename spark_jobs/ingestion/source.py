"""Reading a batch: Parquet, CSV or JSON files, in a row order the change log can rely on.

CDC batches are applied in row order, so every row gets ordering columns: the file it came
from, the start of its file split and its place in that split. Spark may read a batch's
files in any order (it packs splits largest first), but this key is the same whatever the
packing: rows sort by file path, then position in the file. A DataFrame handed in from
Python has no files; its rows are ordered by partition, then position in the partition.

CSV and JSON carry no types. For an existing table their columns are read with the table's
types (fail-fast, so a value that does not parse is an error, never a silent null), and
only columns the table does not know are inferred; for a new table everything is inferred.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from icecore.io import FileIO
from icecore.schema import Schema
from spark_jobs.common.errors import JobError
from spark_jobs.schema import spark_type

FORMATS = ("parquet", "csv", "json")
_EXTENSIONS = {
    "parquet": "parquet",
    "parq": "parquet",
    "csv": "csv",
    "json": "json",
    "jsonl": "json",
    "ndjson": "json",
}
ORDER_COLUMNS = ("_ingest_file", "_ingest_split", "_ingest_row")


def source_format(io: FileIO, path: str, explicit: str | None) -> str:
    """The format `--source-format` names, else the one the file extensions say."""
    if explicit:
        name = explicit.lower()
        if name not in FORMATS:
            raise JobError(f"--source-format must be one of {', '.join(FORMATS)}, got {explicit!r}")
        return name
    candidates = [path]
    if not _extension(path):
        candidates = [
            f.location
            for f in io.list_prefix(path)
            if not f.location.rsplit("/", 1)[-1].startswith(("_", "."))
        ]
    found = {_EXTENSIONS.get(_extension(p) or "") for p in candidates}
    if len(found) == 1 and None not in found:
        return found.pop()  # type: ignore[return-value]
    raise JobError(
        f"cannot tell the format of source {path}: give --source-format ({', '.join(FORMATS)})"
    )


def _extension(path: str) -> str | None:
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[1].lower() if "." in name else None


def read_source(
    spark: SparkSession,
    path: str,
    fmt: str,
    options: Mapping[str, str],
    table_schema: Schema | None,
) -> DataFrame:
    """The batch as a DataFrame with ordering columns (see `with_row_order`)."""
    reader_options = dict(options)
    try:
        if fmt == "parquet":
            frame = spark.read.options(**reader_options).parquet(path)
        else:
            if fmt == "csv":
                reader_options.setdefault("header", "true")
                reader_options.setdefault("inferSchema", "true")
            inferred = spark.read.options(**reader_options).format(fmt).load(path).schema
            schema = _text_schema(inferred, table_schema)
            reader_options["mode"] = "FAILFAST"
            frame = spark.read.options(**reader_options).schema(schema).format(fmt).load(path)
        return with_row_order(frame, from_files=True)
    except AnalysisException as exc:
        raise JobError(f"cannot read source {path} as {fmt}: {exc}") from exc


def _text_schema(inferred: T.StructType, table_schema: Schema | None) -> T.StructType:
    if table_schema is None:
        return inferred
    known = {f.name.lower(): f for f in table_schema.fields}
    fields = []
    for f in inferred.fields:
        column = known.get(f.name.lower())
        if column is None:
            fields.append(f)
        else:
            fields.append(T.StructField(f.name, spark_type(column.field_type, column.name), True))
    return T.StructType(fields)


def with_row_order(frame: DataFrame, from_files: bool) -> DataFrame:
    """`frame` plus the ordering columns: (file, split start, row) for files, else
    (null, null, row) where row orders partitions, then rows within one."""
    row = F.monotonically_increasing_id()
    if from_files:
        file: Column = F.col("_metadata.file_path")
        split: Column = F.col("_metadata.file_block_start")
    else:
        file, split = F.lit(None).cast("string"), F.lit(None).cast("long")
    names = ORDER_COLUMNS
    return frame.select("*", file.alias(names[0]), split.alias(names[1]), row.alias(names[2]))
