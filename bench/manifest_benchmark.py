"""Planning before and after `rewrite_manifests`, in one run, as ratios.

Two tables:

- `streaming`: a v2 table of 10,000 commits as a streaming writer leaves it (after expiry,
  one snapshot listing every commit's manifest): 10,000 data manifests of 4 data files each
  (Spark-like metrics, `day(ts)` and `bucket(16, id)` partitions, a day per 100 commits) and
  1,000 delete manifests of a position delete each; the files themselves do not exist
  (planning reads metadata only), as in `plan_benchmark.py`. Generated once per workdir.
- `pyiceberg`: the issue's bar, a table PyIceberg 0.12 wrote in 300 appends, one manifest per
  commit (8 rows in 4 partitions each).

For each table: every planner plans it before the rewrite (icecore's `TableScan`, PyIceberg's
`plan_files`, DuckDB's `iceberg_metadata`, which reads the manifest list and every manifest,
as its scan planning does), `--repeat` times alternating; then `rewrite_manifests` runs (in
process, `--route driver` or `spark`), and the planners plan again. Before any timing each
planner's result is checked: the same data files (and for icecore and PyIceberg the same
deletes per file) before and after. Reported: medians in seconds and before/after ratios.

    python bench/manifest_benchmark.py                    # both tables
    python bench/manifest_benchmark.py --commits 1000     # a quick run

The last line of stdout is the JSON report; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(1, str(BENCH_DIR.parent))

from pyiceberg.table import StaticTable  # noqa: E402
from table_files import BUCKETS, FIRST_DAY, SCHEMA, SPEC, FileFactory  # noqa: E402

from icecore.catalog import SqlCatalog  # noqa: E402
from icecore.jobs.jobs import RewriteManifestsOptions  # noqa: E402
from icecore.spec.manifest import ManifestWriter  # noqa: E402
from icecore.spec.manifest_list import (  # noqa: E402
    ManifestContent,
    ManifestFile,
    ManifestListWriter,
)
from icecore.spec.metadata import TableMetadata, write_table_metadata  # noqa: E402
from icecore.spec.refs import MAIN_BRANCH, SnapshotRef, SnapshotRefType  # noqa: E402
from icecore.spec.snapshots import Operation, Snapshot, SummaryCounts, build_summary  # noqa: E402
from spark_jobs.rewrite_manifests import run as rewrite_manifests  # noqa: E402
from tests.support.duckdb import connect as duckdb_connect  # noqa: E402
from tests.support.pyiceberg_appends import pyiceberg_appends  # noqa: E402

FILES_PER_COMMIT = 4
COMMITS_PER_DAY = 100
DELETES_EVERY = 10
PYICEBERG_COMMITS = 300
BAR = 3.0  # PyIceberg's plan_files on the 300-append table, before / after


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# The tables -------------------------------------------------------------------------------


def streaming_table(catalog: SqlCatalog, location: str, commits: int) -> str:
    """Write the `streaming` table's metadata and register it as `bench.streaming`."""
    rng = random.Random(27)
    files = FileFactory(location, rng)
    io = catalog.io
    manifests: list[ManifestFile] = []
    counts = SummaryCounts()
    for n in range(1, commits + 1):
        snapshot_id, commit_id = rng.getrandbits(62) + 1, str(uuid.UUID(int=rng.getrandbits(128)))
        day = FIRST_DAY + (n - 1) // COMMITS_PER_DAY
        data = [
            files.data_file((day, rng.randrange(BUCKETS)), commit_id)
            for _ in range(FILES_PER_COMMIT)
        ]
        written = [_manifest(io, location, snapshot_id, data, n)]
        if n % DELETES_EVERY == 0:
            target = data[0].file_path
            delete = files.position_delete(data[0].partition, target, target, commit_id)
            written.append(_manifest(io, location, snapshot_id, [delete], n))
            counts.added_file(delete.content, delete.record_count, delete.file_size_in_bytes)
        for f in data:
            counts.added_file(f.content, f.record_count, f.file_size_in_bytes)
        manifests = written + manifests  # newest first, as producers list them
        if n % 1000 == 0:
            log(f"  {n} commits written")
    head_id = rng.getrandbits(62) + 1
    manifest_list = f"{location}/metadata/snap-{head_id}-1-{uuid.uuid4()}.avro"
    writer = ManifestListWriter(io, manifest_list, head_id, None, commits)
    writer.add_all(manifests)
    writer.close()
    now = int(time.time() * 1000)
    snapshot = Snapshot(
        snapshot_id=head_id,
        timestamp_ms=now,
        manifest_list=manifest_list,
        sequence_number=commits,
        summary=build_summary(Operation.APPEND, counts, None),
        schema_id=SCHEMA.schema_id,
    )
    metadata = TableMetadata(
        format_version=2,
        table_uuid=str(uuid.UUID(int=rng.getrandbits(128))),
        location=location,
        last_sequence_number=commits,
        last_updated_ms=now,
        last_column_id=max(f.field_id for f in SCHEMA.fields),
        schemas=(SCHEMA,),
        current_schema_id=SCHEMA.schema_id,
        partition_specs=(SPEC,),
        default_spec_id=SPEC.spec_id,
        last_partition_id=SPEC.last_assigned_field_id,
        properties={"commit.manifest-merge.enabled": "false"},
        current_snapshot_id=head_id,
        snapshots=(snapshot,),
        refs={MAIN_BRANCH: SnapshotRef(head_id, SnapshotRefType.BRANCH)},
    )
    metadata_path = f"{location}/metadata/00001-{uuid.uuid4()}.metadata.json"
    write_table_metadata(io, metadata_path, metadata)
    catalog.register_table("bench.streaming", metadata_path)
    return "bench.streaming"


def _manifest(io: Any, location: str, snapshot_id: int, files: list[Any], seq: int) -> ManifestFile:
    """A manifest commit `seq` added (its files inherit the numbers from the list)."""
    path = f"{location}/metadata/{uuid.uuid4()}-m0.avro"
    content = ManifestContent.DELETES if files[0].content else ManifestContent.DATA
    writer = ManifestWriter(io, path, SPEC, SCHEMA, snapshot_id, content=content)
    for f in files:
        writer.add(f)
    return replace(writer.close(), sequence_number=seq, min_sequence_number=seq)


# The planners -----------------------------------------------------------------------------

Plan = dict[str, frozenset[str]]


def plan_icecore(catalog: SqlCatalog, name: str) -> Plan:
    table = catalog.load_table(name)
    return {
        t.file.file_path: frozenset(d.file_path for d in t.deletes)
        for t in table.scan().plan_files()
    }


def plan_pyiceberg(metadata_location: str) -> Plan:
    scan = StaticTable.from_metadata(metadata_location).scan()
    return {
        t.file.file_path: frozenset(d.file_path for d in t.delete_files) for t in scan.plan_files()
    }


def plan_duckdb(metadata_location: str) -> Plan:
    """DuckDB's manifest reading: every live data file the manifests list (its planner pairs
    deletes while scanning, which needs the files themselves)."""
    con = duckdb_connect()
    try:
        found = con.execute(
            "SELECT file_path FROM iceberg_metadata(?) WHERE manifest_content = 'DATA' "
            "AND status <> 'DELETED'",
            [metadata_location],
        ).fetchall()
    finally:
        con.close()
    return {path: frozenset() for (path,) in found}


def timed(plan: Callable[[], Plan], repeat: int, timings: list[float]) -> Plan:
    result: Plan = {}
    for _ in range(repeat):
        started = time.perf_counter()
        result = plan()
        timings.append(time.perf_counter() - started)
    return result


def measure(
    catalog: SqlCatalog, name: str, repeat: int
) -> tuple[dict[str, float], dict[str, Plan]]:
    """Median seconds per planner (runs alternate between planners) and each one's plan."""
    location = catalog.load_table(name).metadata_location
    assert location is not None
    planners: dict[str, Callable[[], Plan]] = {
        "icecore": lambda: plan_icecore(catalog, name),
        "pyiceberg": lambda: plan_pyiceberg(location),
        "duckdb": lambda: plan_duckdb(location),
    }
    timings: dict[str, list[float]] = {p: [] for p in planners}
    plans: dict[str, Plan] = {}
    for _ in range(repeat):
        for planner, plan in planners.items():
            plans[planner] = timed(plan, 1, timings[planner])
    return {p: round(statistics.median(t), 4) for p, t in timings.items()}, plans


def bench_table(
    catalog: SqlCatalog, name: str, repeat: int, route: str, spark: Any
) -> dict[str, Any]:
    table = catalog.load_table(name)
    manifests_before = _manifest_count(table)
    log(f"{name}: {manifests_before} manifests; planning before")
    before, plans_before = measure(catalog, name, repeat)
    log(f"{name}: rewrite_manifests ({route})")
    options = RewriteManifestsOptions(
        table=name, driver_max_bytes=(2**62 if route == "driver" else 0)
    )
    result = rewrite_manifests(spark, catalog, options)
    log(f"{name}: {result.status} in {result.seconds} s; planning after")
    after, plans_after = measure(catalog, name, repeat)
    for planner, plan in plans_before.items():
        if plans_after[planner] != plan:
            raise SystemExit(f"{name}: {planner} plans differently after the rewrite")
    if set(plans_before["icecore"]) != set(plans_before["pyiceberg"]) or set(
        plans_before["icecore"]
    ) != set(plans_before["duckdb"]):
        raise SystemExit(f"{name}: the planners disagree on the data files")
    return {
        "manifests_before": manifests_before,
        "manifests_after": _manifest_count(catalog.load_table(name)),
        "data_files": len(plans_before["icecore"]),
        "rewrite": {
            k: getattr(result, k)
            for k in (
                "rewritten_in",
                "seconds",
                "entries",
                "added_manifests",
                "rewritten_bytes",
                "added_bytes",
            )
        },
        "seconds_before": before,
        "seconds_after": after,
        "speedup": {p: round(before[p] / after[p], 2) for p in before},
    }


def _manifest_count(table: Any) -> int:
    from icecore.scan import snapshot_manifests  # noqa: PLC0415

    snapshot = table.metadata.current_snapshot()
    return len(snapshot_manifests(table.io, snapshot))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=10_000, help="commits of `streaming`")
    parser.add_argument("--repeat", type=int, default=3, help="plans per planner and table")
    parser.add_argument("--route", choices=("driver", "spark"), default="driver")
    parser.add_argument("--workdir", help="where the tables go (default: a temporary dir)")
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="manifest-bench-"))
    warehouse = workdir / "warehouse"
    warehouse.mkdir(parents=True, exist_ok=True)
    catalog = SqlCatalog("default", warehouse=warehouse)
    catalog.create_namespace("bench")
    spark: Any = _no_spark
    if args.route == "spark":
        from pyspark.sql import SparkSession  # noqa: PLC0415

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        spark = (
            SparkSession.builder.master("local[*]")
            .config("spark.ui.enabled", "false")
            .getOrCreate()
        )
    report: dict[str, Any] = {"load_average_at_start": os.getloadavg()[0], "route": args.route}
    log(f"writing `streaming`: {args.commits} commits in {warehouse}")
    started = time.monotonic()
    name = streaming_table(catalog, f"file://{warehouse}/bench/streaming", args.commits)
    report["streaming_write_seconds"] = round(time.monotonic() - started, 1)
    report["streaming"] = bench_table(catalog, name, args.repeat, args.route, spark)
    log(f"writing `pyiceberg`: {PYICEBERG_COMMITS} PyIceberg appends")
    name = pyiceberg_appends(warehouse, catalog, PYICEBERG_COMMITS)
    report["pyiceberg"] = bench_table(catalog, name, max(args.repeat, 5), args.route, spark)
    report["bar_met"] = (
        report["pyiceberg"]["speedup"]["pyiceberg"] >= BAR
        and report["pyiceberg"]["manifests_after"] <= 4
    )
    report["load_average_at_end"] = os.getloadavg()[0]
    print(json.dumps(report))


def _no_spark() -> Any:
    raise SystemExit("the driver route started Spark")


if __name__ == "__main__":
    main()
