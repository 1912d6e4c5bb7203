"""Commit cost against table size: a one-file fast append to a 10,000-manifest table vs a 10.

The bar (from the issue): appending one file to a table that already has 10,000 manifests
takes no longer than 2x appending one file to a table with 10 manifests, median of repeated
runs. Both tables live in one SQLite `SqlCatalog` and are built the same way: one snapshot
whose manifests each list one data file, written directly with `ManifestWriter` and
`ManifestListWriter`, then registered in the catalog. Appends alternate between the two
tables (and which goes first alternates by round), so a noisy neighbour hurts both alike.

Timed: `table.new_fast_append().append_file(f).commit()` on a loaded `Table`, for a Parquet
file written beforehand (untimed). That is everything a commit does: read the branch head's
manifest list, write one manifest and a new list, write the metadata file, swap the
catalog pointer. A breakdown of where the big table's time goes is printed too.

    python bench/commit_benchmark.py                 # 10,000 vs 10 manifests, 31 rounds
    python bench/commit_benchmark.py --repeat 5      # quicker

The last line of stdout is the JSON report; progress goes to stderr. Exit status 0 only
when the bar is met.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from icecore.catalog.sql import SqlCatalog
from icecore.scan import TableScan
from icecore.spec.manifest import DataFile, FileFormat, ManifestWriter
from icecore.spec.manifest_list import ManifestListWriter, read_manifest_list
from icecore.spec.metadata import write_table_metadata
from icecore.spec.metadata_builder import MetadataBuilder, new_table_metadata
from icecore.spec.refs import MAIN_BRANCH
from icecore.spec.schema import Schema
from icecore.spec.snapshots import Operation, Snapshot, SummaryCounts, build_summary
from icecore.spec.types import LongType, NestedField, StringType
from icecore.table import Table

RATIO_BAR = 2.0
SCHEMA = Schema(
    (NestedField(1, "id", LongType(), required=True), NestedField(2, "data", StringType()))
)
NAMESPACE = "bench"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def build_table(catalog: SqlCatalog, name: str, manifests: int) -> Table:
    """A table whose one snapshot has `manifests` manifests of one data file each.

    The data files they list do not exist: a commit never opens them.
    """
    location = f"{catalog.properties['warehouse']}/{NAMESPACE}/{name}"
    base = new_table_metadata(SCHEMA, location)
    io = catalog.io
    snapshot_id = uuid.uuid4().int & ((1 << 63) - 1)
    metadata_dir = f"{location}/metadata"
    counts = SummaryCounts()
    list_location = f"{metadata_dir}/snap-{snapshot_id}-1-{uuid.uuid4()}.avro"
    with ManifestListWriter(io, list_location, snapshot_id, None, 1) as manifest_list:
        for i in range(manifests):
            writer = ManifestWriter(
                io, f"{metadata_dir}/{uuid.uuid4()}-m{i}.avro", base.spec(), SCHEMA, snapshot_id
            )
            data_file = DataFile(
                f"{location}/data/{i:05d}-{uuid.uuid4()}.parquet",
                FileFormat.PARQUET,
                (),
                record_count=1000,
                file_size_in_bytes=64_000,
            )
            writer.add(data_file)
            counts.added_file(0, data_file.record_count, data_file.file_size_in_bytes)
            manifest_list.add(writer.close())
    snapshot = Snapshot(
        snapshot_id=snapshot_id,
        timestamp_ms=base.last_updated_ms,
        manifest_list=list_location,
        sequence_number=1,
        summary=build_summary(Operation.APPEND, counts, None, changed_partition_count=1),
        schema_id=0,
    )
    metadata = (
        MetadataBuilder(base)
        .add_snapshot(snapshot)
        .set_branch_snapshot(MAIN_BRANCH, snapshot_id)
        .build(base.last_updated_ms)
    )
    metadata_location = f"{metadata_dir}/00000-{uuid.uuid4()}.metadata.json"
    write_table_metadata(io, metadata_location, metadata)
    return catalog.register_table((NAMESPACE, name), metadata_location)


class DataFiles:
    """One real one-row Parquet file, copied to a fresh path for every append."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._directory = directory
        self._template = directory / "template.parquet"
        table = pa.table({"id": pa.array([1], pa.int64()), "data": pa.array(["x"])})
        pq.write_table(table, self._template)
        self._size = self._template.stat().st_size

    def next(self) -> DataFile:
        path = self._directory / f"{uuid.uuid4()}.parquet"
        shutil.copyfile(self._template, path)
        return DataFile(str(path), FileFormat.PARQUET, (), 1, self._size)


def append_one(table: Table, data_file: DataFile) -> tuple[float, float]:
    """Wall and CPU seconds of one commit (CPU time is less disturbed by other processes)."""
    wall, cpu = time.perf_counter(), time.process_time()
    table.new_fast_append().append_file(data_file).commit()
    return time.perf_counter() - wall, time.process_time() - cpu


def verify(catalog: SqlCatalog, table: Table, expected_files: int) -> dict[str, int]:
    """The appended table as a reader sees it: every manifest listed once, with assigned
    sequence numbers, and planning finds every data file. A fast wrong commit is worthless."""
    metadata = catalog.load_table(table.identifier).metadata
    snapshot = metadata.current_snapshot()
    assert snapshot is not None and snapshot.manifest_list is not None
    manifests = read_manifest_list(table.io, snapshot.manifest_list)
    paths = {m.manifest_path for m in manifests}
    if len(paths) != len(manifests) or len(manifests) != expected_files:
        raise SystemExit(
            f"{table.name}: {len(manifests)} manifests listed, {expected_files} expected"
        )
    if any(m.sequence_number < 1 or m.min_sequence_number < 1 for m in manifests):
        raise SystemExit(f"{table.name}: a manifest without an assigned sequence number")
    sequence_numbers = [s.sequence_number for s in metadata.ancestors_of(snapshot.snapshot_id)]
    if sequence_numbers != sorted(sequence_numbers, reverse=True):
        raise SystemExit(f"{table.name}: sequence numbers do not rise along the snapshots")
    planned = sum(1 for _ in TableScan(table.io, metadata).plan_files())
    summary = snapshot.summary.properties if snapshot.summary else {}
    if planned != expected_files or summary.get("total-data-files") != str(expected_files):
        raise SystemExit(f"{table.name}: {planned} files planned, {expected_files} expected")
    return {"manifest_list_bytes": table.io.size(snapshot.manifest_list)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifests", type=int, default=10_000, help="manifests of the big table")
    parser.add_argument("--small", type=int, default=10, help="manifests of the small table")
    parser.add_argument("--repeat", type=int, default=31, help="timed appends per table")
    parser.add_argument("--warmup", type=int, default=2, help="untimed appends per table first")
    parser.add_argument("--workdir", type=Path, default=None, help="default: a temporary dir")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="commit-bench-", dir=args.workdir))
    try:
        catalog = SqlCatalog("bench", None, workdir / "warehouse")
        catalog.create_namespace(NAMESPACE)
        tables = {}
        for label, count in (("small", args.small), ("big", args.manifests)):
            start = time.perf_counter()
            tables[label] = build_table(catalog, f"t{count}", count)
            log(f"built {label} table: {count} manifests in {time.perf_counter() - start:.1f}s")
        files = DataFiles(workdir / "files")

        times: dict[str, list[float]] = {"small": [], "big": []}
        cpu: dict[str, list[float]] = {"small": [], "big": []}
        for round_ in range(args.warmup + args.repeat):
            order = ("small", "big") if round_ % 2 == 0 else ("big", "small")
            for label in order:
                wall_s, cpu_s = append_one(tables[label], files.next())
                if round_ >= args.warmup:
                    times[label].append(wall_s)
                    cpu[label].append(cpu_s)
            if round_ >= args.warmup:
                log(
                    f"round {round_ - args.warmup + 1}: small {times['small'][-1] * 1000:.1f} ms,"
                    f" big {times['big'][-1] * 1000:.1f} ms"
                )

        sizes = {}
        for label, table in tables.items():  # every append landed, and reads back right
            expected = {"small": args.small, "big": args.manifests}[label]
            sizes[label] = verify(catalog, table, expected + args.warmup + args.repeat)
            log(f"verified {label} table: {sizes[label]}")

        def ms(values: list[float]) -> float:
            return round(statistics.median(values) * 1000, 2)

        small, big = statistics.median(times["small"]), statistics.median(times["big"])
        report = {
            "manifests": {"small": args.small, "big": args.manifests},
            "repeat": args.repeat,
            "median_ms": {k: ms(v) for k, v in times.items()},
            "min_ms": {k: round(min(v) * 1000, 2) for k, v in times.items()},
            "median_cpu_ms": {k: ms(v) for k, v in cpu.items()},
            "ratio": round(big / small, 3),
            "cpu_ratio": round(statistics.median(cpu["big"]) / statistics.median(cpu["small"]), 3),
            "paired_ratios": [
                round(b / s, 2) for s, b in zip(times["small"], times["big"], strict=True)
            ],
            "manifest_list_bytes": {k: v["manifest_list_bytes"] for k, v in sizes.items()},
            "bar": RATIO_BAR,
        }
        report["bar_met"] = report["ratio"] <= RATIO_BAR
        print(json.dumps(report))
        catalog.close()
        return 0 if report["bar_met"] else 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
