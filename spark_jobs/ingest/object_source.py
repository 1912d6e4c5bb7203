"""A batch on an object store Spark has no FileSystem for, read through icecore's FileIO.

Table files never go through Hadoop (see `spark_jobs/reading/parquet_files.py`), so a Spark
without the S3A, GCS or ABFS connector runs every job on an `s3://`, `gs://` or `abfss://`
table. A batch placed next to such a table would still need the connector, its SDK and a
second copy of the credentials in Hadoop's settings. So when Spark cannot open the source's
scheme (Hadoop finds no FileSystem class for it), the batch is read the way table
files are: each Spark task opens its files with a `FileIO` built from the catalog's properties
(Iceberg's `s3.*`, `gcs.*`, `adls.*` names, or the credentials a REST catalog vends) and hands
Spark Arrow batches. The properties travel in the tasks' closure, never on a command line or in
a log. Where Spark can open the scheme (S3A, EMRFS, the GCS connector), the user's Hadoop
settings stay in charge and Spark reads the batch as it always did.

What `source.read_source` promises holds here too:

- ordering columns: the file's location, the split (0: a file is read by one task) and the
  row's position in its file, so CDC rows sort by file, then by place in the file;
- Parquet is read by column name with the Spark types `arrow_source_schema` derives from the
  first file's footer (uuid, time and fixed keep their Iceberg types);
- CSV and JSON values of the table's columns are converted to the table's types and fail the
  job on the first value that does not parse, naming the file, the column and the value;
  other columns are inferred (CSV: the narrowest of int, bigint, double, date, timestamp,
  boolean that every value parses as, else string; JSON: Spark's own inference);
- a directory is listed through FileIO, skipping `_` and `.` names as Spark does.

Not read this way: globs, partition directories (`key=value`, whose columns Spark discovers),
multi-line JSON and Spark reader options FileIO reading does not know; each is refused with a
message naming it.
"""

from __future__ import annotations

import codecs
import json
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from icecore.data.parquet_columns import BATCH_ROWS
from icecore.errors import FileError
from icecore.io import FileIO
from icecore.io.locations import SCHEMES, Store
from icecore.jobs.errors import JobError
from icecore.spec.schema import Schema
from icecore.spec.types import IcebergType, ListType, MapType, StructType, TimeType, UUIDType
from spark_jobs.common.session import parallelism
from spark_jobs.common.worker import cheap_cache_invalidation, worker_io
from spark_jobs.ingest.json_schema import infer_json_schema
from spark_jobs.reading.parquet_files import SPLIT_BYTES, pack_splits
from spark_jobs.schema import arrow_source_schema, checked, quoted, spark_type

OBJECT_STORE_SCHEMES = frozenset(s for s, store in SCHEMES.items() if store is not Store.HDFS)
_TEXT = "_icefloe_text"  # a JSON line, before it is parsed
_CSV_OPTIONS = frozenset(
    {"header", "sep", "delimiter", "quote", "escape", "nullvalue", "multiline", "encoding",
     "charset", "inferschema", "mode"}
)  # fmt: skip
_JSON_FILE_OPTIONS = frozenset({"encoding", "charset", "multiline"})
# How Hadoop says it has no FileSystem for a scheme (classic: Py4JJavaError's text; Connect:
# the server's exception class and message).
_NO_FILESYSTEM = re.compile(
    r"UnsupportedFileSystemException|No FileSystem for scheme"
    r"|ClassNotFoundException: Class \S+ not found"
)
# CSV inference: the first type every value of a column parses as (Spark's order of tries).
_INFERRED = (
    ("int", None),
    ("bigint", None),
    ("double", None),
    ("date", r"^\s*\d{4}-\d{2}-\d{2}\s*$"),
    ("timestamp", None),
    ("boolean", r"^\s*(?i)(true|false)\s*$"),
)


def spark_cannot_read(spark: SparkSession, path: str) -> bool:
    """Whether `path` is on an object store whose scheme Spark has no Hadoop FileSystem for.

    Asked of Spark itself, on the cluster (over Spark Connect, the server's): it resolves a
    path that does not exist below `path` with the scheme's FileSystem, which fails with
    Hadoop's UnsupportedFileSystemException, or a ClassNotFoundException for a configured
    class that is missing, and otherwise only says the path is not there. A Spark with S3A or
    EMRFS configured for `s3://` keeps reading with the user's settings."""
    scheme, sep, _ = path.partition("://")
    if not sep or scheme.lower() not in OBJECT_STORE_SCHEMES:
        return False
    probe = f"{path.rstrip('/')}/_icefloe_probe_{uuid.uuid4().hex}"
    try:
        spark.read.format("text").load(probe).schema  # noqa: B018 (resolving is the probe)
    except Exception as exc:  # PATH_NOT_FOUND, or the store's own error: Spark can read
        return _NO_FILESYSTEM.search(str(exc)) is not None
    return False


def source_files(io: FileIO, path: str) -> list[tuple[str, int]]:
    """(location, size) of the batch's files, in location order: `path` itself when it is a
    file, else every file under it whose path below `path` has no `_` or `.` name."""
    if any(c in path for c in "*?[{"):
        raise JobError(
            f"source {path}: globs are not supported on an object store Spark cannot read "
            "(give a file or a directory)"
        )
    try:
        return [(path, io.size(path))]
    except FileError:
        pass  # a directory, or nothing: the listing tells (and reports a failure to list)
    root = path.rstrip("/") + "/"
    found = []
    try:
        listed = list(io.list_prefix(path))
    except FileError as exc:
        raise JobError(f"cannot list source {path}: {exc}") from None
    for f in listed:
        parts = f.location.removeprefix(root).split("/")
        if any(p.startswith(("_", ".")) for p in parts):
            continue
        if any("=" in p for p in parts[:-1]):
            raise JobError(
                f"source {path} has partition directories ({f.location}): on an object store "
                "Spark cannot read, give the files of one partition or a flat directory"
            )
        found.append((f.location, f.size))
    if not found:
        raise JobError(f"source {path} not found: no file is there or under it")
    return sorted(found)


@dataclass(frozen=True)
class _Batch:
    """The files being read, and what reading them needs."""

    spark: SparkSession
    io: FileIO
    files: list[tuple[str, int]]
    order_columns: Sequence[str]


def read_through_fileio(
    spark: SparkSession,
    io: FileIO,
    path: str,
    fmt: str,
    *,
    options: Mapping[str, str],
    table_schema: Schema | None,
    order_columns: Sequence[str],
) -> DataFrame:
    """The batch at `path` read in Spark tasks through FileIO, with the ordering columns."""
    batch = _Batch(spark, io, source_files(io, path), order_columns)
    if fmt == "parquet":
        footer = _footer(io, batch.files[0][0])
        schema = arrow_source_schema(footer, always=True)
        assert schema is not None
        return _read_files(batch, fmt, schema, {})
    if fmt == "csv":
        return _read_csv(batch, options, table_schema)
    return _read_json(batch, options, table_schema)


def _footer(io: FileIO, location: str) -> pa.Schema:
    try:
        with io.open_input(location) as handle:
            return pq.read_schema(handle)
    except (FileError, OSError, pa.ArrowInvalid) as exc:
        raise JobError(f"cannot read source {location} as parquet: {exc}") from None


def _read_csv(batch: _Batch, options: Mapping[str, str], table_schema: Schema | None) -> DataFrame:
    lowered = {k.lower(): v for k, v in options.items()}
    _refuse(lowered, _CSV_OPTIONS, "csv")
    _fail_fast_only(lowered)
    csv = _csv_options(lowered)
    csv["names"] = _csv_names(batch.io, batch.files[0][0], csv)
    text = T.StructType([T.StructField(n, T.StringType(), True) for n in csv["names"]])
    frame = _read_files(batch, "csv", text, csv)
    order_columns = batch.order_columns
    known = {f.name.lower(): f.field_type for f in table_schema.fields} if table_schema else {}
    infer = [n for n in csv["names"] if n.lower() not in known]
    inferred = _infer_csv(frame, infer) if lowered.get("inferschema", "").lower() == "true" else {}
    columns = [
        _typed(n, known.get(n.lower()), inferred.get(n), order_columns[0]) for n in csv["names"]
    ]
    return frame.select(*columns, *order_columns)


def _fail_fast_only(options: Mapping[str, str]) -> None:
    """Refuse PERMISSIVE and DROPMALFORMED: a value that does not parse must fail the job
    (the table types are the contract), and this reading has no corrupt-record column."""
    if options.get("mode", "FAILFAST").upper() != "FAILFAST":
        raise JobError("source option mode: a source Spark cannot read is read FAILFAST only")


def _refuse(options: Mapping[str, str], supported: frozenset[str], fmt: str) -> None:
    unknown = sorted(set(options) - supported)
    if unknown:
        raise JobError(
            f"source option {unknown[0]} is not supported for a {fmt} source on an object "
            f"store Spark cannot read (supported: {', '.join(sorted(supported))})"
        )


def _csv_options(options: Mapping[str, str]) -> dict[str, Any]:
    """Spark's CSV options as pyarrow's, with Spark's defaults (`\\` escapes a quote)."""
    return {
        "header": options.get("header", "true").lower() == "true",
        "delimiter": options.get("sep", options.get("delimiter", ",")),
        "quote": options.get("quote", '"'),
        "escape": options.get("escape", "\\"),
        "null": options.get("nullvalue", ""),
        "multiline": options.get("multiline", "false").lower() == "true",
        "encoding": options.get("encoding", options.get("charset", "utf8")),
    }


def _csv_names(io: FileIO, location: str, csv: Mapping[str, Any]) -> list[str]:
    """The columns: the first file's header, or `_c0`, `_c1`, ... as Spark names them."""
    try:
        with io.open_input(location) as handle:
            reader = pacsv.open_csv(
                handle,
                read_options=pacsv.ReadOptions(
                    encoding=csv["encoding"], autogenerate_column_names=not csv["header"]
                ),
                parse_options=_parse_options(csv),
            )
            names = reader.schema.names
    except (FileError, OSError, pa.ArrowInvalid) as exc:
        raise JobError(f"cannot read source {location} as csv: {exc}") from None
    return names if csv["header"] else [f"_c{i}" for i in range(len(names))]


def _parse_options(csv: Mapping[str, Any]) -> pacsv.ParseOptions:
    return pacsv.ParseOptions(
        delimiter=csv["delimiter"],
        quote_char=csv["quote"] or False,
        escape_char=csv["escape"] or False,
        double_quote=True,
        newlines_in_values=csv["multiline"],
    )


def _infer_csv(frame: DataFrame, names: Sequence[str]) -> dict[str, str]:
    """Each column's type: the first of `_INFERRED` every one of its values parses as, in
    one Spark job; string when none does (or the column holds only nulls)."""
    if not names:
        return {}
    tallies = []
    for i, name in enumerate(names):
        value = F.col(quoted(name))
        tallies.append(F.count(value).alias(f"n{i}"))
        for j, (kind, pattern) in enumerate(_INFERRED):
            parsed = F.expr(f"try_cast({quoted(name)} AS {kind})").isNotNull()
            if pattern is not None:
                parsed = parsed & value.rlike(pattern)
            tallies.append(F.sum(parsed.cast("long")).alias(f"n{i}_{j}"))
    row = frame.agg(*tallies).collect()[0]
    types = {}
    for i, name in enumerate(names):
        fits = [
            kind
            for j, (kind, _) in enumerate(_INFERRED)
            if row[f"n{i}"] and row[f"n{i}_{j}"] == row[f"n{i}"]
        ]
        types[name] = fits[0] if fits else "string"
    return types


def _typed(name: str, table_type: IcebergType | None, inferred: str | None, file: str) -> Column:
    """Text column `name` as the table's type (uuid and time stay text: conforming parses
    them), else as its inferred type; a value that does not parse fails the task."""
    column = F.col(quoted(name))
    if table_type is not None:
        if isinstance(table_type, UUIDType | TimeType):
            return column.alias(name)
        kind = spark_type(table_type, name).simpleString()
    elif inferred is not None:
        kind = inferred
    else:
        return column.alias(name)
    if kind == "string":
        return column.alias(name)
    value = F.expr(f"try_cast({quoted(name)} AS {kind})")
    message = F.concat(
        F.lit("cannot read "),
        F.col(quoted(file)),
        F.lit(f": column {name}: '"),
        column,
        F.lit(f"' is not {'an' if kind[0] in 'aeiou' else 'a'} {kind}"),
    )
    return checked(column, value, value.isNotNull(), message).alias(name)


def _read_json(batch: _Batch, options: Mapping[str, str], table_schema: Schema | None) -> DataFrame:
    """JSON lines: the tasks hand Spark each line as text; Spark infers the schema from
    them (its own JSON inference) and parses them with `from_json`, FAILFAST. The table's
    primitive columns are parsed as text, then converted as CSV values are (a value that is
    not of the column's type names the file, column and value)."""
    lowered = {k.lower(): v for k, v in options.items()}
    if lowered.get("multiline", "false").lower() == "true":
        raise JobError(
            "source option multiLine: multi-line JSON on an object store Spark cannot read is "
            "not supported (give JSON lines)"
        )
    _fail_fast_only(lowered)
    spark_options = {k: v for k, v in options.items() if k.lower() not in _JSON_FILE_OPTIONS}
    text = T.StructType([T.StructField(_TEXT, T.StringType(), False)])
    file_options = {"encoding": lowered.get("encoding", lowered.get("charset", "utf-8"))}
    lines = _read_files(batch, "json", text, file_options)
    order_columns = batch.order_columns
    inferred = infer_json_schema(lines.select(_TEXT), {**spark_options, "mode": "FAILFAST"})
    known = {f.name.lower(): f.field_type for f in table_schema.fields} if table_schema else {}
    read = T.StructType(
        [
            T.StructField(f.name, _json_read_type(known.get(f.name.lower()), f), True)
            for f in inferred.fields
        ]
    )
    parsed = lines.select(
        F.from_json(_TEXT, read, {**spark_options, "mode": "FAILFAST"}).alias(_TEXT),
        *order_columns,
    ).select(*[F.col(_TEXT).getField(f.name).alias(f.name) for f in read.fields], *order_columns)
    columns = [
        _typed(f.name, known.get(f.name.lower()), None, order_columns[0])
        if known.get(f.name.lower()) is not None and not _nested(known[f.name.lower()])
        else F.col(quoted(f.name))
        for f in read.fields
    ]
    return parsed.select(*columns, *order_columns)


def _nested(kind: IcebergType) -> bool:
    return isinstance(kind, StructType | ListType | MapType)


def _json_read_type(table_type: IcebergType | None, inferred: T.StructField) -> T.DataType:
    """Text for the table's primitive columns (converted and checked afterwards), the
    table's type for its nested ones (Spark's FAILFAST parsing checks them), else inferred."""
    if table_type is None:
        return inferred.dataType
    if _nested(table_type):
        return spark_type(table_type, inferred.name)
    return T.StringType()


def _read_files(
    batch: _Batch, fmt: str, schema: T.StructType, options: Mapping[str, Any]
) -> DataFrame:
    """`schema`'s columns of every row of `files`, then the ordering columns; a file is read
    by one task, small files packed into tasks as Spark packs them."""
    spark = batch.spark
    splits = [(location, 0, size) for location, size in batch.files]
    tasks = [[location for location, _, _ in task] for task in
             pack_splits(splits, parallelism(spark), SPLIT_BYTES)]  # fmt: skip
    file, split, row = batch.order_columns
    output = T.StructType(
        [
            *schema.fields,
            T.StructField(file, T.StringType(), False),
            T.StructField(split, T.LongType(), False),
            T.StructField(row, T.LongType(), False),
        ]
    )
    payload = json.dumps(
        {
            "tasks": tasks,
            "format": fmt,
            "output": output.json(),
            "io": dict(batch.io.properties),
            "options": dict(options),
        }
    )
    ids = spark.range(0, len(tasks), 1, numPartitions=len(tasks))
    return ids.mapInArrow(partial(_read_tasks, payload=payload), output)


def _read_tasks(batches: Iterator[pa.RecordBatch], payload: str) -> Iterator[pa.RecordBatch]:
    cheap_cache_invalidation()
    spec = json.loads(payload)
    target = to_arrow_schema(T.StructType.fromJson(json.loads(spec["output"])))
    io = worker_io(spec["io"])
    read = {"parquet": _parquet_batches, "csv": _csv_batches, "json": _json_batches}[spec["format"]]
    columns = pa.schema(list(target)[:-3])
    for batch in batches:
        for index in batch.column(0).to_pylist():
            for location in spec["tasks"][index]:
                position = 0
                with io.open_input(location) as handle:
                    for arrays in read(handle, columns, spec["options"]):
                        n = len(arrays[0]) if arrays else 0
                        yield pa.RecordBatch.from_arrays(
                            [
                                *arrays,
                                pa.repeat(pa.scalar(location), n),
                                pa.repeat(pa.scalar(0, pa.int64()), n),
                                pa.array(np.arange(position, position + n, dtype=np.int64)),
                            ],
                            schema=target,
                        )
                        position += n


def _parquet_batches(
    handle: pa.NativeFile, columns: pa.Schema, _: Mapping[str, Any]
) -> Iterator[list[pa.Array]]:
    """The file's columns by name, as Spark's Arrow types; a column it lacks reads null."""
    parquet = pq.ParquetFile(handle)
    present = set(parquet.schema_arrow.names)
    names = [f.name for f in columns if f.name in present]
    for raw in parquet.iter_batches(batch_size=BATCH_ROWS, columns=names):
        yield [
            _as_spark(raw.column(f.name), f.type)
            if f.name in present
            else pa.nulls(raw.num_rows, f.type)
            for f in columns
        ]


def _as_spark(array: pa.Array, target: pa.DataType) -> pa.Array:
    """A Parquet column as the Arrow type Spark's type for it has: uuid's extension type as
    its bytes, a time of day as microseconds, anything else cast."""
    if isinstance(array.type, pa.BaseExtensionType):
        array = array.storage
    if pa.types.is_time(array.type):
        return array.cast(pa.time64("us")).view(pa.int64())
    return array if array.type == target else array.cast(target)


def _csv_batches(
    handle: pa.NativeFile, columns: pa.Schema, csv: Mapping[str, Any]
) -> Iterator[list[pa.Array]]:
    """Every column as text; a column a file lacks reads null, one it adds is left out."""
    reader = pacsv.open_csv(
        handle,
        read_options=pacsv.ReadOptions(
            encoding=csv["encoding"],
            column_names=None if csv["header"] else csv["names"],
            block_size=16 << 20,
        ),
        parse_options=_parse_options(csv),
        convert_options=pacsv.ConvertOptions(
            column_types={n: pa.string() for n in csv["names"]},
            include_columns=csv["names"],
            include_missing_columns=True,
            null_values=[csv["null"]],
            strings_can_be_null=True,
            quoted_strings_can_be_null=csv["null"] == "",
        ),
    )
    for batch in reader:
        yield [batch.column(i).cast(pa.string()) for i in range(batch.num_columns)]


def _json_batches(
    handle: pa.NativeFile, _: pa.Schema, options: Mapping[str, Any]
) -> Iterator[list[pa.Array]]:
    """Each non-blank line as text (Spark's JSON reader skips blank lines too)."""
    decoder = codecs.getincrementaldecoder(options["encoding"])()
    rest = ""
    while True:
        chunk = handle.read(8 << 20)
        text = rest + decoder.decode(chunk, final=not chunk)
        lines = text.split("\n")
        rest = lines.pop() if chunk else ""
        kept = [line for line in lines if line.strip()]
        if kept:
            yield [pa.array(kept, pa.string())]
        if not chunk:
            return
