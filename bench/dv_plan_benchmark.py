"""Planning with deletion vectors against planning with file-scoped position deletes.

The bar (issue 14): planning a v3 table with 500,000 data files and 50,000 DVs is no slower
than planning the same table with 50,000 file-scoped position-delete files, in one run.

Two twin v3 tables are generated (metadata only: planning never opens data or delete files):
the same 1,800 data manifests listing 500,000 data files in 16 partitions, and 200 delete
manifests listing 50,000 deletes for 50,000 of those files, either as Parquet position-delete
files scoped to one data file (`referenced_data_file`, equal `file_path` bounds, as Iceberg's
writers produce them) or as DVs (1,000 to a Puffin file, each with its offset and size).
Rounds alternate which twin is planned first; each plan consumes every task.

    python bench/dv_plan_benchmark.py              # the issue's table, 5 rounds
    python bench/dv_plan_benchmark.py --scale 0.1  # quicker

The last line of stdout is the JSON report; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from icecore.io import FileIO
from icecore.scan import TableScan
from icecore.spec.manifest import DataFile, FileContent, FileFormat, ManifestWriter
from icecore.spec.manifest_list import ManifestContent, ManifestListWriter
from icecore.spec.metadata import TableMetadata
from icecore.spec.metadata_builder import MetadataBuilder, new_table_metadata
from icecore.spec.metadata_columns import DELETE_FILE_PATH
from icecore.spec.partitioning import PartitionField, PartitionSpec
from icecore.spec.properties import FORMAT_VERSION
from icecore.spec.schema import Schema
from icecore.spec.snapshots import Operation, Snapshot, Summary
from icecore.spec.transforms import parse_transform
from icecore.spec.types import LongType, NestedField, StringType

SCHEMA = Schema(
    (NestedField(1, "id", LongType(), required=True), NestedField(2, "v", StringType()))
)
SPEC = PartitionSpec(0, (PartitionField(1, 1000, parse_transform("bucket[16]"), "id_bucket"),))
DVS_PER_PUFFIN = 1000


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _data_file(location: str, i: int) -> DataFile:
    return DataFile(f"{location}/data/{i:07d}.parquet", FileFormat.PARQUET, (i % 16,), 1000,
                    100_000, spec_id=0)  # fmt: skip


def _delete_file(location: str, target: DataFile, i: int, dv: bool) -> DataFile:
    if dv:
        puffin = f"{location}/data/{i // DVS_PER_PUFFIN:05d}-deletes.puffin"
        return DataFile(
            puffin, FileFormat.PUFFIN, target.partition, 10, 1_000_000,
            content=FileContent.POSITION_DELETES, referenced_data_file=target.file_path,
            content_offset=4 + 60 * (i % DVS_PER_PUFFIN), content_size_in_bytes=60, spec_id=0,
        )  # fmt: skip
    bounds = {DELETE_FILE_PATH.field_id: target.file_path.encode()}
    return DataFile(
        f"{location}/data/{i:07d}-deletes.parquet", FileFormat.PARQUET, target.partition, 10,
        2_000, content=FileContent.POSITION_DELETES, lower_bounds=bounds, upper_bounds=bounds,
        referenced_data_file=target.file_path, spec_id=0,
    )  # fmt: skip


def build(root: Path, scale: float, dv: bool) -> TableMetadata:
    io = FileIO()
    location = str(root / ("dv" if dv else "pos"))
    metadata = new_table_metadata(SCHEMA, location, spec=SPEC, properties={FORMAT_VERSION: "3"})
    snapshot_id = 1
    data_count, delete_count = int(500_000 * scale), int(50_000 * scale)
    data_manifests, delete_manifests = max(1, int(1800 * scale)), max(1, int(200 * scale))
    files = [_data_file(location, i) for i in range(data_count)]
    manifests = []
    for m in range(data_manifests):
        writer = ManifestWriter(io, f"{location}/metadata/d{m}.avro", SPEC, SCHEMA, snapshot_id,
                                format_version=3)  # fmt: skip
        for f in files[m::data_manifests]:
            writer.add(f)
        manifests.append(writer.close())
    step = max(1, data_count // delete_count)
    deletes = [_delete_file(location, files[i * step], i, dv) for i in range(delete_count)]
    for m in range(delete_manifests):
        writer = ManifestWriter(io, f"{location}/metadata/x{m}.avro", SPEC, SCHEMA, snapshot_id,
                                content=ManifestContent.DELETES, format_version=3)  # fmt: skip
        for f in deletes[m::delete_manifests]:
            writer.add(f)
        manifests.append(writer.close())
    list_path = f"{location}/metadata/snap-{snapshot_id}-{uuid.uuid4()}.avro"
    lister = ManifestListWriter(io, list_path, snapshot_id, None, 1, format_version=3,
                                next_row_id=0)  # fmt: skip
    lister.add_all(manifests)
    lister.close()
    assert lister.next_row_id is not None
    snapshot = Snapshot(snapshot_id, metadata.last_updated_ms, list_path, None, 1,
                        Summary(Operation.APPEND), 0, first_row_id=0,
                        added_rows=lister.next_row_id)  # fmt: skip
    builder = MetadataBuilder(metadata).add_snapshot(snapshot)
    return builder.set_branch_snapshot("main", snapshot_id).build()


def plan(metadata: TableMetadata) -> tuple[float, int]:
    started = time.perf_counter()
    pairs = sum(len(t.deletes) for t in TableScan(FileIO(), metadata).plan_files())
    return time.perf_counter() - started, pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tables = {}
        for kind in ("pos", "dv"):
            log(f"generating the {kind} twin")
            tables[kind] = build(Path(tmp), args.scale, kind == "dv")
        times: dict[str, list[float]] = {"pos": [], "dv": []}
        pairs: dict[str, int] = {}
        for i in range(args.repeat):
            for kind in ("pos", "dv") if i % 2 == 0 else ("dv", "pos"):
                seconds, pairs[kind] = plan(tables[kind])
                times[kind].append(seconds)
            pos, dv = times["pos"][-1], times["dv"][-1]
            log(f"round {i + 1}/{args.repeat}: pos {pos:.2f}s dv {dv:.2f}s")
    assert pairs["pos"] == pairs["dv"], pairs
    report = {
        "scale": args.scale,
        "data_files": int(500_000 * args.scale),
        "deletes": int(50_000 * args.scale),
        "paired": pairs["dv"],
        "position_deletes_median_s": round(statistics.median(times["pos"]), 3),
        "dvs_median_s": round(statistics.median(times["dv"]), 3),
        "dv_over_position_deletes": round(
            statistics.median(times["dv"]) / statistics.median(times["pos"]), 3
        ),
    }
    print(json.dumps(report))
    sys.exit(0 if report["dv_over_position_deletes"] <= 1.0 else 1)


if __name__ == "__main__":
    main()
