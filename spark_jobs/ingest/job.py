"""One ingestion run: read the batch, write its files, commit them once.

    result = run(spark, catalog, IngestOptions(table="db.events", source="/in/batch.parquet",
                                                  mode="cdc", key=["id"], batch_id="2024-01-07"))

The order of work makes a failure at any point harmless: everything that can be checked
before writing is (the table, the key and op columns, every source column's type against
the table's, the op values, an empty batch), then files are written below the run's own
directory, then one commit adds all of them. Until that commit nothing references the files;
when it fails they are deleted, and a killed run leaves only unreferenced files behind.
Schema evolution (`--merge-schema`) and the spec for global equality deletes are metadata
commits made before the data commit: harmless on their own if the run then fails.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from icecore.actions.batch_ids import BatchAlreadyCommitted, committed_batch, guard_batch
from icecore.actions.run_files import FileSet, RunFiles, rows_per_file
from icecore.actions.table_setup import add_columns, create_table, unpartitioned_spec
from icecore.catalog import Catalog
from icecore.commit.producer import SnapshotProducer
from icecore.data.dv_files import DVTarget, WrittenDVs
from icecore.data.metrics import MetricsConfig
from icecore.errors import AlreadyExistsError, CommitStateUnknownError, NoSuchTableError
from icecore.jobs.errors import JobError
from icecore.jobs.jobs import IngestOptions
from icecore.jobs.results import IngestResult
from icecore.spec.manifest import DataFile, FileContent
from icecore.spec.metadata import TableMetadata
from icecore.spec.metadata_columns import POSITION_DELETE_NAMES
from icecore.spec.properties import WRITE_DISTRIBUTION_MODE
from icecore.spec.schema import Schema
from icecore.spec.snapshots import INGEST_MODE, Snapshot
from icecore.table import Table
from spark_jobs.common.session import SessionSource, configure, session_of
from spark_jobs.ingest.changes import SUPERSEDED, ResolvedBatch, resolve
from spark_jobs.ingest.object_source import spark_cannot_read
from spark_jobs.ingest.positions import superseded_positions
from spark_jobs.ingest.source import (
    ORDER_COLUMNS,
    describe_malformed,
    is_malformed,
    malformed_message,
    read_source,
    source_format,
    text_reader_options,
    with_row_order,
)
from spark_jobs.schema import (
    check_spark_readable,
    conform,
    fresh_schema,
    invalid_value,
    plan_columns,
    quote_name,
)
from spark_jobs.writing.deletion_vectors import write_deletion_vectors
from spark_jobs.writing.files import write_frame
from spark_jobs.writing.layout import PartitionLayout
from spark_jobs.writing.transforms import sort_columns

KEYED_MODES = ("upsert", "delete", "cdc")


def run(
    source_session: SessionSource,
    catalog: Catalog,
    options: IngestOptions,
    source: DataFrame | None = None,
) -> IngestResult:
    """Ingest `options.source` (or the DataFrame `source`) into the table; the counters."""
    started = time.monotonic()
    spark = configure(session_of(source_session))
    result = IngestResult(table=options.table, mode=options.mode, batch_id=options.batch_id)
    table = _load(catalog, options.table)
    if table is None and not options.create:
        raise JobError(f"table {options.table} does not exist (--create creates it)")
    if table is not None:
        check_spark_readable(table.metadata.schema().fields)  # rows are written whole
    if table is not None and options.batch_id:
        found = committed_batch(table.metadata, options.batch_id)
        if found is not None:
            return replace(result, status="already-committed", snapshot_id=found.snapshot_id)

    frame = _read(spark, catalog, options, table, source)
    ignored = [*ORDER_COLUMNS, *([options.op_column] if options.mode == "cdc" else [])]
    if options.mode == "cdc" and options.op_column not in frame.columns:
        raise JobError(f"--op-column {options.op_column!r} is not a column of the source")
    result = replace(result, table_created=table is None)
    if table is None:
        table = _create(catalog, options, frame, ignored)
    keys = _keys(table, options, frame)
    result = replace(result, columns_added=_check_columns(table, options, frame, keys, ignored))

    run = RunFiles(table.io, table.metadata, "ingest")
    try:
        dvs = WrittenDVs([], {})
        if options.mode in KEYED_MODES:
            changes, dvs = _write_changes(spark, table, run, options, frame=frame, keys=keys)
            added = run.files() + dvs.added
        else:
            _write_rows(table, run, frame)
            added = run.files()
            changes = _Changes(rows=sum(f.record_count for f in added))
        snapshot = _commit(table, options, added, removed=dvs.replaced())
    except BatchAlreadyCommitted as exc:
        run.discard()
        return replace(result, status="already-committed", snapshot_id=exc.snapshot_id)
    except CommitStateUnknownError:
        raise  # the files may be committed: never delete them
    except BaseException as exc:
        run.discard()
        invalid = invalid_value(exc)  # a value a FileIO-read source holds, not of its type
        if invalid is not None:
            raise JobError(invalid) from None
        if source is None and is_malformed(exc):
            explained = _explain_malformed(spark, catalog, options, frame)
            if explained is not None:
                raise JobError(explained) from None
        raise
    return replace(
        result,
        status="committed",
        snapshot_id=snapshot.snapshot_id,
        sequence_number=snapshot.sequence_number,
        operation=snapshot.operation.value if snapshot.operation else None,
        rows=changes.rows,
        inserts=changes.inserts,
        updates=changes.updates,
        deletes=changes.deletes,
        superseded_in_batch=changes.superseded_in_batch,
        **_file_counts(added),
        seconds=round(time.monotonic() - started, 3),
    )


def _load(catalog: Catalog, identifier: str) -> Table | None:
    try:
        return catalog.load_table(identifier)
    except NoSuchTableError:
        return None


def _read(
    spark: SparkSession,
    catalog: Catalog,
    options: IngestOptions,
    table: Table | None,
    source: DataFrame | None,
) -> DataFrame:
    if source is not None:
        return with_row_order(source, from_files=False)
    if not options.source:
        raise JobError("no source: give --source")
    fmt = source_format(catalog.io, options.source, options.source_format)
    schema = table.metadata.schema() if table is not None else None
    return read_source(spark, options.source, fmt, options.source_options, schema, io=catalog.io)


def _explain_malformed(
    spark: SparkSession, catalog: Catalog, options: IngestOptions, frame: DataFrame
) -> str | None:
    """The file, column and value of a source that does not parse (see
    `describe_malformed`): one line instead of a Java trace."""
    assert options.source is not None
    fmt = source_format(catalog.io, options.source, options.source_format)
    if spark_cannot_read(spark, options.source):  # describing reads the source with Spark
        return malformed_message(options.source, fmt)
    read = T.StructType([f for f in frame.schema.fields if f.name not in ORDER_COLUMNS])
    reader_options = text_reader_options(fmt, options.source_options)
    return describe_malformed(spark, options.source, fmt, reader_options, read)


def _create(
    catalog: Catalog, options: IngestOptions, frame: DataFrame, ignored: list[str]
) -> Table:
    if options.mode == "delete":
        raise JobError(f"table {options.table} does not exist: there is nothing to delete from")
    data = T.StructType([f for f in frame.schema.fields if f.name not in ignored])
    schema = fresh_schema(data, options.key)
    try:
        return create_table(
            catalog,
            options.table,
            schema,
            partition_by=options.partition_by,
            sort_by=options.sort_by,
            properties=options.properties,
            format_version=options.format_version,
        )
    except AlreadyExistsError:
        return catalog.load_table(options.table)  # another run of the job created it first


def _keys(table: Table, options: IngestOptions, frame: DataFrame) -> list[str]:
    if options.mode not in KEYED_MODES:
        return []
    schema = table.metadata.schema()
    keys = options.key or [schema.column_name(i) for i in schema.identifier_field_ids]
    if not keys:
        raise JobError(
            f"--mode {options.mode} needs --key: table {table.name} has no identifier fields"
        )
    columns = {c.lower(): c for c in frame.columns}
    for key in keys:
        if key.lower() not in columns:
            raise JobError(f"key column {key!r} is missing from the source")
        field = next((f for f in schema.fields if f.name == key), None)
        if field is None:
            raise JobError(f"key column {key!r} is not a top-level column of table {table.name}")
        if not field.field_type.is_primitive:
            raise JobError(f"key column {key!r} is {field.field_type}, not a primitive type")
    return keys


def _check_columns(
    table: Table, options: IngestOptions, frame: DataFrame, keys: list[str], ignored: list[str]
) -> list[str]:
    """Refuse a source that does not fit the table; add new columns with --merge-schema."""
    schema = table.metadata.schema()
    if options.mode == "delete":
        # Only the keys matter: the rows they delete are not rewritten.
        wanted = {k.lower() for k in keys}
        source = T.StructType([f for f in frame.schema.fields if f.name.lower() in wanted])
        key_schema = Schema(tuple(f for f in schema.fields if f.name in keys))
        plan = plan_columns(source, key_schema, merge_schema=False)
    else:
        source = T.StructType([f for f in frame.schema.fields if f.name not in ignored])
        plan = plan_columns(source, schema, merge_schema=options.merge_schema)
    plan.raise_problems(table.name)
    return add_columns(table, plan.additions)


# Append and overwrite --------------------------------------------------------------------------


def _rows(
    metadata: TableMetadata, layout: PartitionLayout, sort_order_id: int | None = None
) -> FileSet:
    """The data files of a batch, in the table's current schema and spec."""
    schema = metadata.schema()
    metrics = MetricsConfig.for_table(metadata.properties, schema)
    spec = metadata.spec()
    return FileSet(
        "rows", FileContent.DATA, schema, spec, layout.names, metrics, sort_order_id=sort_order_id
    )


def _write_rows(table: Table, run: RunFiles, frame: DataFrame) -> None:
    metadata = table.metadata
    schema, spec = metadata.schema(), metadata.spec()
    layout = PartitionLayout(spec, schema, POSITION_DELETE_NAMES)
    rows = layout.with_partition_columns(frame.select(*conform(frame.schema, schema.fields)))
    parts = [F.col(quote_name(n)) for n in layout.names]
    order = metadata.sort_order()
    sort = [*parts, *sort_columns(schema, order.fields)]
    default_mode = "hash" if layout.is_partitioned else "none"
    distribution = WRITE_DISTRIBUTION_MODE.read(metadata.properties) or default_mode
    if distribution == "hash" and parts:
        rows = rows.repartition(*parts)
    elif distribution == "range" and sort:
        rows = rows.repartitionByRange(*sort)
    if sort:
        rows = rows.sortWithinPartitions(*sort)
    sort_order_id = order.order_id if not order.is_unsorted else None
    file_set = _rows(metadata, layout, sort_order_id)
    if not write_frame(run, rows, file_set, rows_per_file(metadata)):
        raise JobError("the source is empty: nothing to ingest")


# Upsert, delete and CDC ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Changes:
    """The rows of a batch; the per-operation counts only for a keyed mode."""

    rows: int
    inserts: int | None = None
    updates: int | None = None
    deletes: int | None = None
    superseded_in_batch: int | None = None


def _write_changes(
    spark: SparkSession,
    table: Table,
    run: RunFiles,
    options: IngestOptions,
    *,
    frame: DataFrame,
    keys: list[str],
) -> tuple[_Changes, WrittenDVs]:
    """The batch's files: data, deletes of rows it superseded itself (DVs on a v3 table,
    returned; position delete files before), equality deletes of the keys it changed."""
    op_name = options.op_column if options.mode == "cdc" else None
    batch = resolve(frame, keys, options.mode, op_name)
    dvs = WrittenDVs([], {})
    try:
        if batch.counts["I"] + batch.counts["U"]:
            dvs = _write_written_rows(spark, table, run, batch, keys)
        if batch.counts["U"] + batch.counts["D"]:
            _write_equality_deletes(table, run, batch, keys)
    finally:
        batch.release()
    changes = _Changes(
        rows=batch.rows,
        inserts=batch.counts["I"],
        updates=batch.counts["U"],
        deletes=batch.counts["D"],
        superseded_in_batch=batch.superseded,
    )
    return changes, dvs


def _write_written_rows(
    spark: SparkSession, table: Table, run: RunFiles, batch: ResolvedBatch, keys: list[str]
) -> WrittenDVs:
    """Data files of the I and U rows, then the deletes of those a later change of the
    batch supersedes: DVs on a v3 table (returned; their data files are new, so there is no
    older DV to merge), position delete files before."""
    metadata = table.metadata
    schema, spec = metadata.schema(), metadata.spec()
    layout = PartitionLayout(spec, schema, POSITION_DELETE_NAMES)
    written = batch.written()
    conformed = written.select(*conform(written.schema, schema.fields), *ORDER_COLUMNS, SUPERSEDED)
    rows = layout.with_partition_columns(conformed)
    parts = [F.col(quote_name(n)) for n in layout.names]
    key_columns = [F.col(quote_name(k)) for k in keys]
    # One task gets every row of a key within a partition, in batch order: what lets
    # `superseded_positions` pair rows with positions. So neither the table's sort order nor
    # `write.distribution-mode` applies here (Flink's delta writer does not sort either).
    ordered = rows.repartition(*(parts or key_columns))
    ordered = ordered.sortWithinPartitions(*parts, *key_columns, *ORDER_COLUMNS)
    columns = [*(F.col(quote_name(f.name)) for f in schema.fields), *parts]
    file_set = _rows(metadata, layout)
    data_files = write_frame(run, ordered.select(*columns), file_set, rows_per_file(metadata))
    if not batch.superseded:
        return WrittenDVs([], {})
    positions = superseded_positions(
        spark,
        rows,
        data_files=data_files,
        schema=schema,
        keys=keys,
        layout=layout,
        io_properties=run.io_properties,
    )
    if metadata.format_version >= 3:
        written = set(data_files)
        targets = {f.file_path: DVTarget(f) for f in run.files() if f.file_path in written}
        return write_deletion_vectors(spark, run, targets, positions)
    names = [quote_name(n) for n in layout.names]
    positions = positions.repartition(*names) if names else positions.repartition(1)
    positions = positions.sortWithinPartitions(*names, "file_path", "pos")
    write_frame(run, positions, FileSet.position_deletes(spec, layout.names))
    return WrittenDVs([], {})


def _write_equality_deletes(
    table: Table, run: RunFiles, batch: ResolvedBatch, keys: list[str]
) -> None:
    """One equality delete row per key updated or deleted by the batch, in the key's
    partition when the key determines it, else in a global (unpartitioned) delete file."""
    metadata = table.metadata
    schema, spec = metadata.schema(), metadata.spec()
    key_fields = [schema.find_field(k) for k in keys]
    deleted = batch.deleted_keys(keys)
    frame = deleted.select(*conform(deleted.schema, key_fields))
    layout = PartitionLayout(spec, schema, POSITION_DELETE_NAMES)
    partition_columns: list[str] = []
    if layout.is_partitioned and layout.source_paths() <= set(keys):
        frame = layout.with_partition_columns(frame)
        frame = frame.repartition(*(F.col(quote_name(n)) for n in layout.names))
        partition_columns = layout.names
    else:
        if layout.is_partitioned:
            spec = unpartitioned_spec(table)
        frame = frame.repartition(1)
    metrics = MetricsConfig.for_table(metadata.properties, schema)
    file_set = FileSet.equality_deletes(
        "equality-deletes", key_fields, spec, partition_columns, metrics
    )
    write_frame(run, frame, file_set)


# Commit -----------------------------------------------------------------------------------------


def _commit(
    table: Table, options: IngestOptions, added: list[DataFile], *, removed: list[DataFile]
) -> Snapshot:
    """One commit of the batch's files; a keyed batch's is a row delta, which also removes
    the DVs its new DVs replace (`removed`), so a data file never has two."""
    table.refresh()
    producer: SnapshotProducer
    if options.mode == "append":
        append = table.new_append()
        for f in added:
            append.append_file(f)
        producer = append
    elif options.mode == "overwrite":
        overwrite = table.new_replace_partitions()
        for f in added:
            overwrite.add_file(f)
        producer = overwrite
    else:
        delta = table.new_row_delta()
        for f in added:
            if f.content == FileContent.DATA:
                delta.add_rows(f)
            else:
                delta.add_deletes(f)
        for f in removed:
            delta.remove_deletes(f)
        producer = delta
    producer.snapshot_property(INGEST_MODE, options.mode)
    if options.batch_id:
        guard_batch(producer, options.batch_id)
    committed = producer.commit()
    return committed.snapshot_by_id(producer.snapshot_id)


def _file_counts(files: list[DataFile]) -> dict[str, int]:
    out = {
        "data_files": 0,
        "data_records": 0,
        "position_delete_files": 0,
        "position_deletes": 0,
        "equality_delete_files": 0,
        "equality_deletes": 0,
        "deletion_vectors": 0,
        "deletion_vector_positions": 0,
        "bytes_written": 0,
    }
    prefix = {
        FileContent.DATA: ("data_files", "data_records"),
        FileContent.POSITION_DELETES: ("position_delete_files", "position_deletes"),
        FileContent.EQUALITY_DELETES: ("equality_delete_files", "equality_deletes"),
    }
    puffin_sizes: dict[str, int] = {}  # a Puffin file holds many DVs: count its size once
    for f in files:
        if f.is_deletion_vector:
            out["deletion_vectors"] += 1
            out["deletion_vector_positions"] += f.record_count
            puffin_sizes[f.file_path] = f.file_size_in_bytes
            continue
        count_key, record_key = prefix[f.content]
        out[count_key] += 1
        out[record_key] += f.record_count
        out["bytes_written"] += f.file_size_in_bytes
    out["bytes_written"] += sum(puffin_sizes.values())
    return out
