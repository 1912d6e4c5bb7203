"""Major compaction vs a plain Spark rewrite, and DuckDB scans before vs after.

The bars, from the issue, on a 10-million-row table with 10% of rows position-deleted and 1%
of keys equality-deleted:
- `rewrite_data_files` takes at most 2x a plain Spark read and rewrite of the same data files
  (no deletes applied), timed in the same run;
- a DuckDB full scan after compaction is at least 3x faster than before;
- `convert_equality_deletes` (when present) costs at most 0.3x the compaction.

    .venv/bin/python bench/compaction_benchmark.py               # 10M rows
    .venv/bin/python bench/compaction_benchmark.py --scale 0.1   # 1M rows, quick

The table (`bench.t`: id, ts, name, amount, category; partitioned by bucket(8, id)) is built
by the ingestion job (append, several commits, so several files per partition), then 10% of
rows get position deletes (every row whose position is 3 mod 10, written with our writers
and committed as a row delta) and 1% of keys get equality deletes (the ingestion job's
`delete` mode, partition-scoped because the key decides the partition). The conversion runs
first and is then rolled back, so compaction starts from the same snapshot. Progress goes to
stderr; the last stdout line is a JSON report.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from icecore.actions.run_files import FileSet, RunFiles
from icecore.catalog import SqlCatalog
from icecore.jobs.jobs import (
    ConvertEqualityDeletesOptions,
    IngestOptions,
    RewriteDataFilesOptions,
)
from icecore.spec.manifest import FileContent
from icecore.spec.metadata_columns import POSITION_DELETE_SCHEMA
from icecore.spec.properties import (
    PARQUET_COMPRESSION,
    PARQUET_DICT_SIZE_BYTES,
    PARQUET_PAGE_SIZE_BYTES,
    PARQUET_ROW_GROUP_SIZE_BYTES,
    WRITE_TARGET_FILE_SIZE_BYTES,
)
from icecore.table import Table
from spark_jobs.common.session import configure
from spark_jobs.convert_equality_deletes import run as convert_equality_deletes
from spark_jobs.ingest import run as ingest
from spark_jobs.reading.parquet_files import PerFile, read_parquet
from spark_jobs.rewrite_data_files import run as compact
from spark_jobs.schema import conform, quoted, spark_schema
from spark_jobs.writing.files import write_frame
from spark_jobs.writing.layout import PartitionLayout

TABLE = "bench.t"
COMMITS = 4

# The baseline's Spark Parquet writer, told what the table's properties say (Iceberg's
# property -> Spark's option, Iceberg's default).
_SPARK_PARQUET_OPTIONS = {
    PARQUET_COMPRESSION: "compression",
    PARQUET_ROW_GROUP_SIZE_BYTES: "parquet.block.size",
    PARQUET_PAGE_SIZE_BYTES: "parquet.page.size",
    PARQUET_DICT_SIZE_BYTES: "parquet.dictionary.page.size",
}


def parquet_options(properties: dict[str, str]) -> dict[str, str]:
    options = {"mapreduce.fileoutputcommitter.marksuccessfuljobs": "false"}
    for prop, option in _SPARK_PARQUET_OPTIONS.items():
        options[option] = str(prop.read(properties)).lower()
    return options


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def source_rows(spark: SparkSession, start: int, count: int) -> DataFrame:
    """Rows `start` .. `start + count` of the benchmark tables (also v3_convert_benchmark)."""
    return spark.range(start, start + count).select(
        F.col("id"),
        F.timestamp_micros(F.lit(1_700_000_000_000_000) + F.col("id") * 1_000).alias("ts"),
        F.concat(F.lit("name-"), (F.col("id") % 100_000).cast("string")).alias("name"),
        (F.col("id") * 0.25).alias("amount"),
        (F.col("id") % 1_000).cast("int").alias("category"),
    )


def _data_tasks(table: Table) -> list[Any]:
    return list(table.scan().plan_files())


def _position_deletes(spark: SparkSession, table: Table) -> int:
    """Delete every row at a position 3 mod 10 of every data file (10% of the rows)."""
    metadata = table.metadata
    schema, spec = metadata.schema(), metadata.spec()
    files = [(t.file.file_path, t.file.file_size_in_bytes) for t in _data_tasks(table)]
    raw = read_parquet(
        spark,
        files,
        schema.fields,
        table.io.properties,
        per_file=PerFile([("file_path", T.StringType())], {p: (p,) for p, _ in files}),
        position_column="pos",
    )
    layout = PartitionLayout(spec, schema, ("file_path", "pos"))
    rows = raw.filter(F.col("pos") % 10 == 3)
    rows = layout.with_partition_columns(rows)
    deletes = rows.select("file_path", "pos", *(F.col(quoted(n)) for n in layout.names))
    deletes = deletes.select(
        *conform(deletes.schema, POSITION_DELETE_SCHEMA.fields),
        *(F.col(quoted(n)) for n in layout.names),
    )
    deletes = deletes.repartition(*(F.col(quoted(n)) for n in layout.names))
    deletes = deletes.sortWithinPartitions(*layout.names, "file_path", "pos")
    run = RunFiles(table.io, metadata, "bench-deletes")
    write_frame(run, deletes, FileSet.position_deletes(spec, layout.names))
    delta = table.new_row_delta()
    written = run.files()
    for f in written:
        delta.add_deletes(f)
    delta.commit()
    return sum(f.record_count for f in written)


def build(spark: SparkSession, catalog: SqlCatalog, rows: int) -> dict[str, Any]:
    started = time.perf_counter()
    per_commit = rows // COMMITS
    properties = {WRITE_TARGET_FILE_SIZE_BYTES.name: str(16 * 1024 * 1024)}
    for n in range(COMMITS):
        ingest(
            spark,
            catalog,
            IngestOptions(
                table=TABLE,
                create=True,
                partition_by="bucket(8, id)",
                properties=properties,
            ),
            source=source_rows(spark, n * per_commit, per_commit),
        )
    table = catalog.load_table(TABLE)
    position_deletes = _position_deletes(spark, table)
    keys = spark.range(0, per_commit * COMMITS).filter(F.col("id") % 100 == 7)
    result = ingest(
        spark,
        catalog,
        IngestOptions(table=TABLE, mode="delete", key=["id"]),
        source=keys.select("id"),
    )
    table = catalog.load_table(TABLE)
    tasks = _data_tasks(table)
    deletes = {d.file_path: d for t in tasks for d in t.deletes}
    return {
        "rows": per_commit * COMMITS,
        "data_files": len(tasks),
        "data_bytes": sum(t.file.file_size_in_bytes for t in tasks),
        "position_deletes": position_deletes,
        "equality_deletes": result.equality_deletes,
        "position_delete_files": sum(
            1 for d in deletes.values() if d.content == FileContent.POSITION_DELETES
        ),
        "equality_delete_files": sum(
            1 for d in deletes.values() if d.content == FileContent.EQUALITY_DELETES
        ),
        "build_seconds": round(time.perf_counter() - started, 1),
    }


def duckdb_scan(
    table: Table, repeat: int, limit: float | None = None
) -> tuple[float, tuple[Any, ...] | None]:
    """Best time of `repeat` scans and their answer; with `limit`, a scan still running after
    `limit` seconds is interrupted and (limit, None) returned: the scan takes at least that."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.support.duckdb import connect  # noqa: PLC0415 - needs the repository root

    con = connect()
    sql = (
        "SELECT count(*), sum(amount), count(DISTINCT name) "
        f"FROM iceberg_scan('{table.metadata_location}')"
    )
    best = float("inf")
    result: tuple[Any, ...] | None = ()
    for _ in range(repeat):
        timer = threading.Timer(limit, con.interrupt) if limit else None
        started = time.perf_counter()
        if timer is not None:
            timer.start()
        try:
            result = tuple(con.execute(sql).fetchone() or ())
        except duckdb.InterruptException:
            con.close()
            return float(limit or 0), None
        finally:
            if timer is not None:
                timer.cancel()
        best = min(best, time.perf_counter() - started)
    con.close()
    return best, result


def plain_rewrite(
    spark: SparkSession, table: Table, paths: list[str], workdir: Path, files: int
) -> float:
    """Spark reads the same data files and writes them again, no deletes, same layout:
    partition values computed, rows shuffled into `files` tasks by partition, sorted."""
    metadata = table.metadata
    schema = metadata.schema()
    layout = PartitionLayout(metadata.spec(), schema, ("file_path", "pos"))
    target = workdir / "plain"
    started = time.perf_counter()
    rows = _read(spark, schema, paths)
    rows = layout.with_partition_columns(rows.select(*conform(rows.schema, schema.fields)))
    parts = [F.col(quoted(n)) for n in layout.names]
    rows = rows.repartition(files, *parts).sortWithinPartitions(*parts)
    writer = rows.write.mode("overwrite").options(**parquet_options(metadata.properties))
    writer.partitionBy(*layout.names).parquet(str(target))
    elapsed = time.perf_counter() - started
    shutil.rmtree(target, ignore_errors=True)
    return elapsed


def plain_copy(
    spark: SparkSession, table: Table, paths: list[str], workdir: Path, files: int
) -> float:
    """The cheapest Spark rewrite of the same files: read, coalesce to `files`, write (no
    partition columns, no shuffle, no sort)."""
    metadata = table.metadata
    schema = metadata.schema()
    target = workdir / "copy"
    started = time.perf_counter()
    rows = _read(spark, schema, paths)
    rows = rows.select(*conform(rows.schema, schema.fields)).coalesce(files)
    rows.write.mode("overwrite").options(**parquet_options(metadata.properties)).parquet(
        str(target)
    )
    elapsed = time.perf_counter() - started
    shutil.rmtree(target, ignore_errors=True)
    return elapsed


def _read(spark: SparkSession, schema: Any, paths: list[str]) -> DataFrame:
    return (
        spark.read.schema(spark_schema(schema.fields))
        .option("recursiveFileLookup", "true")
        .parquet(*paths)
    )


def expected_scan(spark: SparkSession, table: Table, paths: list[str]) -> tuple[Any, ...]:
    """The DuckDB query's answer from the construction rules (position 3 mod 10 and id 7
    mod 100 deleted), computed by Spark from the original files, not by the jobs."""
    rows = _read(spark, table.metadata.schema(), paths).filter(
        (F.col("_metadata.row_index") % 10 != 3) & (F.col("id") % 100 != 7)
    )
    found = rows.agg(F.count("*"), F.sum("amount"), F.count_distinct("name")).collect()[0]
    return tuple(found)


def _reset(catalog: SqlCatalog, snapshot_id: int) -> None:
    """Make `snapshot_id` current again (a timed job's commit is undone between rounds)."""
    table = catalog.load_table(TABLE)
    current = table.metadata.current_snapshot()
    if current is None or current.snapshot_id != snapshot_id:
        table.manage_snapshots().rollback_to(snapshot_id).commit()


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 2)


def run(args: argparse.Namespace) -> dict[str, Any]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = configure(
        SparkSession.builder.master(args.master)
        .appName("compaction-benchmark")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", args.driver_memory)
        # The plain-Spark baseline writes timestamps as Iceberg does (INT64 micros).
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        .config("spark.sql.shuffle.partitions", str(args.shuffle_partitions))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="compaction-bench-"))
    catalog = SqlCatalog("default", warehouse=workdir / "wh")
    rows = int(10_000_000 * args.scale)
    report: dict[str, Any] = {
        "scale": args.scale,
        "master": args.master,
        "load_average_at_start": _load(),
    }
    if args.reuse and (workdir / "table.json").exists():
        report["table"] = json.loads((workdir / "table.json").read_text())
        _log(f"reusing the table in {workdir}")
        _reset(catalog, report["table"]["snapshot_id"])  # a kept run left its compaction
    else:
        _log(f"building the table: {rows:,} rows")
        report["table"] = build(spark, catalog, rows)
        built = catalog.load_table(TABLE).metadata.current_snapshot()
        assert built is not None
        report["table"]["snapshot_id"] = built.snapshot_id
        (workdir / "table.json").write_text(json.dumps(report["table"]))
    _log(f"table: {report['table']}")
    if args.build_only:
        catalog.close()
        spark.stop()
        return report
    table = catalog.load_table(TABLE)
    start_snapshot = table.metadata.current_snapshot()
    assert start_snapshot is not None
    start = start_snapshot.snapshot_id
    original = [t.file.file_path for t in _data_tasks(table)]
    expected = expected_scan(spark, table, original)

    before = None
    before_complete = False
    if not args.skip_duckdb_before:
        before, before_result = duckdb_scan(table, args.duckdb_repeat, args.duckdb_before_limit)
        before_complete = before_result is not None
        _log(f"duckdb before: {before:.3f}s {before_result or '(stopped at the limit)'}")
        assert before_result in (None, expected), (before_result, expected)

    rounds: list[dict[str, Any]] = []
    result: dict[str, Any] = {}
    # Round 0 warms up every side alike (JIT, Python workers, page cache) and is not timed.
    for n in range(args.repeat + 1):
        last = n == args.repeat
        measured: dict[str, Any] = {"load_average": _load()}
        _reset(catalog, start)
        started = time.perf_counter()
        converted = convert_equality_deletes(
            spark, catalog, ConvertEqualityDeletesOptions(table=TABLE)
        )
        measured["convert"] = time.perf_counter() - started
        _log(f"round {n}: convert_equality_deletes {measured['convert']:.1f}s {converted}")
        _reset(catalog, start)
        started = time.perf_counter()
        options = RewriteDataFilesOptions(table=TABLE, rewrite_all=True)
        result = compact(spark, catalog, options)
        measured["compaction"] = time.perf_counter() - started
        _log(f"round {n}: rewrite_data_files {measured['compaction']:.1f}s {result}")
        files = max(1, result.added_data_files)
        if not last:
            _reset(catalog, start)
        current = catalog.load_table(TABLE)
        measured["plain"] = plain_rewrite(spark, current, original, workdir, files)
        measured["copy"] = plain_copy(spark, current, original, workdir, files)
        _log(f"round {n}: plain rewrite {measured['plain']:.1f}s, copy {measured['copy']:.1f}s")
        if n > 0:
            rounds.append({k: round(v, 2) for k, v in measured.items()})

    table = catalog.load_table(TABLE)
    after, after_result = duckdb_scan(table, args.duckdb_repeat)
    _log(f"duckdb after: {after:.3f}s {after_result}")
    assert after_result == expected, (after_result, expected)

    compaction = _median([r["compaction"] for r in rounds])
    plain = _median([r["plain"] for r in rounds])
    copy = _median([r["copy"] for r in rounds])
    convert = _median([r["convert"] for r in rounds])
    report.update(
        {
            "compaction": {k: v for k, v in result.to_dict().items() if k != "commits"},
            "rounds": rounds,
            "compaction_seconds": compaction,
            "plain_rewrite_seconds": plain,
            "plain_copy_seconds": copy,
            "compaction_vs_plain": round(compaction / plain, 2),
            "compaction_vs_copy": round(compaction / copy, 2),
            "paired_compaction_vs_plain": [round(r["compaction"] / r["plain"], 2) for r in rounds],
            "convert_seconds": convert,
            "convert_vs_compaction": round(convert / compaction, 2),
            "paired_convert_vs_compaction": [
                round(r["convert"] / r["compaction"], 2) for r in rounds
            ],
            "duckdb_before_seconds": None if before is None else round(before, 3),
            "duckdb_before_complete": before_complete,
            "duckdb_after_seconds": round(after, 3),
            # A lower bound when the scan before was stopped at --duckdb-before-limit.
            "duckdb_speedup": None if before is None else round(before / after, 2),
            "load_average_at_end": _load(),
        }
    )
    catalog.close()
    spark.stop()
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="1.0 = 10M rows")
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds (medians reported)")
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--driver-memory", default="6g")
    parser.add_argument("--shuffle-partitions", type=int, default=8)
    parser.add_argument("--duckdb-repeat", type=int, default=3)
    parser.add_argument(
        "--skip-duckdb-before",
        action="store_true",
        help="skip DuckDB's scan of the uncompacted table (slow with equality deletes)",
    )
    parser.add_argument(
        "--duckdb-before-limit",
        type=float,
        help="stop DuckDB's scan of the uncompacted table after this many seconds; the "
        "speedup is then a lower bound (the scan took at least that long)",
    )
    parser.add_argument("--workdir")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument(
        "--reuse", action="store_true", help="use the table a --keep run left in --workdir"
    )
    parser.add_argument(
        "--build-only", action="store_true", help="build the table into --workdir and stop"
    )
    args = parser.parse_args()
    report = run(args)
    print(json.dumps(report, sort_keys=True, default=str), flush=True)
    if args.build_only:
        return 0
    ok = report["compaction_vs_plain"] <= 2 and report["convert_vs_compaction"] <= 0.3
    if report["duckdb_speedup"] is not None:
        ok = ok and report["duckdb_speedup"] >= 3
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
