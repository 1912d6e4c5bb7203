"""Reading a batch: Parquet, CSV or JSON files, in a row order the change log can rely on.

CDC batches are applied in row order, so every row gets ordering columns: the file it came
from, the start of its file split and its place in that split. Spark may read a batch's
files in any order (it packs splits largest first), but this key is the same whatever the
packing: rows sort by file path, then position in the file. A DataFrame handed in from
Python has no files; its rows are ordered by partition, then position in the partition.

Spark cannot infer the schema of a Parquet file with a uuid or time column at all, and reads
fixed as binary, so a Parquet source's footer is looked at first: when it holds such columns
the source is read with the schema `arrow_source_schema` builds from it, which also carries
each column's Iceberg type to a table created from the source.

CSV and JSON carry no types. For an existing table their columns are read with the table's
types (fail-fast, so a value that does not parse is an error, never a silent null), and
only columns the table does not know are inferred; for a new table everything is inferred.
uuid and time columns are read as text (`123e4567-e89b-...`, `HH:MM:SS[.ffffff]`) and
parsed when conformed to the table.

A source on an object store Spark has no FileSystem for (no S3A, GCS or ABFS connector) is
read through icecore's FileIO with the catalog's credentials instead, keeping these promises
(see `object_source`).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import reduce

import pyarrow.parquet as pq
from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from icecore.errors import FileError
from icecore.io import FileIO
from icecore.jobs.errors import JobError
from icecore.spec.schema import Schema
from icecore.spec.types import TimeType, UUIDType
from spark_jobs.ingest.object_source import read_through_fileio, spark_cannot_read
from spark_jobs.schema import arrow_source_schema, quoted, spark_type

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
        if not candidates and not any(c in path for c in "*?[{"):
            raise JobError(f"source {path} not found: no file is there or under it")
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
    *,
    io: FileIO | None = None,
) -> DataFrame:
    """The batch as a DataFrame with ordering columns (see `with_row_order`): read by Spark,
    or through `io` when Spark cannot open the source's object store."""
    reader_options = text_reader_options(fmt, options)
    if io is not None and spark_cannot_read(spark, path):
        try:
            return read_through_fileio(
                spark,
                io,
                path,
                fmt,
                options=reader_options,
                table_schema=table_schema,
                order_columns=ORDER_COLUMNS,
            )
        except Exception as exc:
            if is_malformed(exc):  # Spark's JSON inference, FAILFAST
                raise JobError(malformed_message(path, fmt)) from None
            raise
    try:
        if fmt == "parquet":
            reader = spark.read.options(**reader_options)
            footer_schema = _parquet_schema(io, path) if io is not None else None
            if footer_schema is not None:
                reader = reader.schema(footer_schema)
            frame = reader.parquet(path)
        else:
            inferred = spark.read.options(**reader_options).format(fmt).load(path).schema
            schema = _text_schema(inferred, table_schema)
            reader_options["mode"] = "FAILFAST"
            frame = spark.read.options(**reader_options).schema(schema).format(fmt).load(path)
        return with_row_order(frame, from_files=True)
    except AnalysisException as exc:
        raise JobError(f"cannot read source {path} as {fmt}: {exc}") from exc


def text_reader_options(fmt: str, options: Mapping[str, str]) -> dict[str, str]:
    """The reader options the job reads a source with: CSV has a header and typed columns
    unless the user says otherwise."""
    reader_options = dict(options)
    if fmt == "csv":
        reader_options.setdefault("header", "true")
        reader_options.setdefault("inferSchema", "true")
    return reader_options


def is_malformed(exc: BaseException) -> bool:
    """Whether Spark failed on a value its reader could not parse (FAILFAST)."""
    return "MALFORMED_RECORD_IN_PARSING" in str(exc) or "Malformed records" in str(exc)


def malformed_message(path: str, fmt: str) -> str:
    """What a failure to parse a record of a source read through FileIO is reported as."""
    return f"cannot read source {path} as {fmt}: a record is not valid {fmt.upper()}"


def describe_malformed(
    spark: SparkSession, path: str, fmt: str, options: Mapping[str, str], schema: T.StructType
) -> str | None:
    """`cannot read <file>: column amount: 'twelve' is not a double`, for the first value of
    the source that does not parse as its column's type; None if none is found.

    Spark's own error names the file and, deep in a Java trace, the value, never the column:
    the source is read again with every column as text, and one query finds the first value
    whose cast fails (one Spark job, run only after the batch already failed)."""
    typed = [f for f in schema.fields if not isinstance(f.dataType, T.StringType)]
    if fmt not in ("csv", "json") or not typed:
        return None
    text = T.StructType([T.StructField(f.name, T.StringType(), True) for f in schema.fields])
    raw = (
        spark.read.options(**{**options, "mode": "PERMISSIVE"})
        .schema(text)
        .format(fmt)
        .load(path)
        .select("*", F.col("_metadata.file_path").alias("_icefloe_file"))
    )
    flags = [
        # SQL's try_cast, not Column.try_cast: Spark 3.5 has only the former.
        F.col(quoted(f.name)).isNotNull()
        & F.expr(f"try_cast({quoted(f.name)} AS {f.dataType.simpleString()})").isNull()
        for f in typed
    ]
    found = (
        raw.select(
            "_icefloe_file",
            *[F.col(quoted(f.name)) for f in typed],
            *[flag.alias(f"_icefloe_bad_{i}") for i, flag in enumerate(flags)],
        )
        .where(reduce(lambda a, b: a | b, flags))
        .limit(1)
        .collect()
    )
    if not found:
        return None
    row = found[0]
    for i, f in enumerate(typed):
        if row[f"_icefloe_bad_{i}"]:
            value = row[f.name]
            return (
                f"cannot read {row['_icefloe_file']}: column {f.name}: {value!r} is not a "
                f"{f.dataType.simpleString()}"
            )
    return None


def _parquet_schema(io: FileIO, path: str) -> T.StructType | None:
    """The schema to read a Parquet source with, from the footer of its first file, when
    Spark cannot infer it right (see the module docstring); None to let Spark infer it."""
    try:
        if _extension(path) in ("parquet", "parq"):
            first = path
        else:
            names = sorted(
                f.location
                for f in io.list_prefix(path)
                if not f.location.rsplit("/", 1)[-1].startswith(("_", "."))
            )
            if not names:
                return None
            first = names[0]
        with io.open_input(first) as handle:
            footer = pq.read_schema(handle)
    except (FileError, OSError, ValueError):
        return None  # a glob or an unreadable file: Spark's own reading reports it
    return arrow_source_schema(footer)


def _text_schema(inferred: T.StructType, table_schema: Schema | None) -> T.StructType:
    if table_schema is None:
        return inferred
    known = {f.name.lower(): f for f in table_schema.fields}
    fields = []
    for f in inferred.fields:
        column = known.get(f.name.lower())
        if column is None:
            fields.append(f)
        elif isinstance(column.field_type, UUIDType | TimeType):
            fields.append(T.StructField(f.name, T.StringType(), True))
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
