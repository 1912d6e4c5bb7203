"""What the trash costs: orphan removal moving files into the table's trash against deleting
them at once (`icefloe.trash.retention` 3d against 0s), on local disk and on S3 (moto).

    .venv/bin/python bench/trash_benchmark.py                       # 400 x 64 KiB, 3 rounds
    .venv/bin/python bench/trash_benchmark.py --files 40 --size 8MiB  # fewer, larger files
    .venv/bin/python bench/trash_benchmark.py --stores local --rounds 5

Each round writes `--files` orphans of `--size` bytes into a table's data directory and runs
`remove_orphan_files` (in this process, no Spark: a few hundred files are moved or deleted by
the driver's threads, as the job does below `--executor-delete-threshold`), once with the
retention at `0s` (deleted at once, as before the trash) and once at `3d` (moved into the
trash), alternately (0s first in odd rounds), so a change in the machine's load falls on both
alike. After a `3d` run, the purge that run's window ends in is timed too (`Trash.empty`, what
the next run of either job does then): trash-first costs the move now and the delete later.
Round 0 warms up (moto's first requests, imports) and is not timed.

Reported per store: the median job time with each retention and their ratio
(`trash_vs_delete`), the median purge, and `(trash + purge) / delete`: the whole cost of
keeping a file for the window against deleting it at once. moto is one Python process on the
same cores, so S3's figures are this machine's cost of the request path (a server-side copy
is a PUT with `x-amz-copy-source` that moto serves by copying bytes in memory), not AWS's.
Progress goes to stderr; the last stdout line is a JSON report.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from objectstore_compaction_benchmark import BUCKET, start_moto

from icecore.catalog import SqlCatalog
from icecore.jobs.grammar import parse_size
from icecore.jobs.jobs import RemoveOrphanFilesOptions
from icecore.spec.schema import Schema
from icecore.spec.types import LongType, NestedField
from icecore.table import Table
from icecore.trash import Trash
from spark_jobs.remove_orphan_files import run as remove_orphan_files

TABLE = "bench.t"
WINDOW_MS = 3 * 86_400_000
RETENTIONS = ("0s", "3d")


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _orphans(table: Table, count: int, size: int, tag: str) -> list[str]:
    paths = [f"{table.metadata.location}/data/orphans-{tag}/{i:05d}.bin" for i in range(count)]
    data = os.urandom(size)
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(lambda p: table.io.write_bytes(p, data), paths))
    return paths


def _round(
    catalog: SqlCatalog, retention: str, count: int, size: int, tag: str
) -> dict[str, float]:
    table = catalog.load_table(TABLE)
    table.update_properties().set("icefloe.trash.retention", retention).commit()
    table = catalog.load_table(TABLE)
    paths = _orphans(table, count, size, tag)
    options = RemoveOrphanFilesOptions(TABLE, older_than="2100-01-01T00:00:00", force=True)
    started = time.perf_counter()
    result = remove_orphan_files(None, catalog, options)
    job = time.perf_counter() - started
    assert result.deleted_files_count == count and result.failed_deletes_count == 0, result
    assert not any(table.io.exists(p) for p in paths[:5])
    out = {"job_s": job}
    if retention != "0s":
        assert result.trashed_files_count == count, result
        trash = Trash.of(table)
        now = int(time.time() * 1000) + WINDOW_MS + 1
        started = time.perf_counter()
        purge, failed = trash.empty(WINDOW_MS, now_ms=now, run=f"bench-purge-{tag}", job="bench")
        out["purge_s"] = time.perf_counter() - started
        assert len(purge.files) == count and not failed
    return out


def _store(
    name: str, properties: dict[str, str], warehouse: str, workdir: Path, args: Any
) -> dict[str, Any]:
    catalog = SqlCatalog(
        f"bench_{name}",
        uri=f"sqlite:///{workdir}/{name}.db",
        warehouse=warehouse,
        properties=properties,
    )
    catalog.create_namespace("bench")
    catalog.create_table(TABLE, Schema((NestedField(1, "id", LongType()),)))
    size = parse_size(args.size)
    timings: dict[str, list[dict[str, float]]] = {r: [] for r in RETENTIONS}
    for number in range(args.rounds + 1):
        order = RETENTIONS if number % 2 else tuple(reversed(RETENTIONS))
        for retention in order:
            took = _round(catalog, retention, args.files, size, f"{number}-{retention}")
            _log(f"{name} round {number} retention {retention}: {took}")
            if number:
                timings[retention].append(took)
    catalog.close()
    delete = statistics.median(t["job_s"] for t in timings["0s"])
    trash = statistics.median(t["job_s"] for t in timings["3d"])
    purge = statistics.median(t["purge_s"] for t in timings["3d"])
    return {
        "delete_s": round(delete, 3),
        "trash_s": round(trash, 3),
        "purge_s": round(purge, 3),
        "trash_vs_delete": round(trash / delete, 2),
        "trash_and_purge_vs_delete": round((trash + purge) / delete, 2),
        "rounds": {r: timings[r] for r in RETENTIONS},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=400)
    parser.add_argument("--size", default="64KiB")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stores", default="local,s3")
    args = parser.parse_args()
    report: dict[str, Any] = {"files": args.files, "size": args.size, "rounds": args.rounds}
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="trash-bench-")))
        for name in args.stores.split(","):
            if name == "local":
                properties, warehouse = {}, str(workdir / "wh")
            else:
                properties = start_moto(stack, workdir)
                warehouse = f"s3://{BUCKET}/wh"
            report[name] = _store(name, properties, warehouse, workdir, args)
            _log(f"{name}: {json.dumps({k: v for k, v in report[name].items() if k != 'rounds'})}")
    report["load_average"] = os.getloadavg()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
