"""What keeping off other tables' files costs orphan removal, on a catalog of 1,000 tables.

`remove_orphan_files` lists the catalog once and reads every table's metadata file (one read
per table, in parallel) before it deletes anything; the files it then lists are checked
against an index of every table's directories (a few dictionary lookups per file). This
builds a SQLite catalog of `--tables` tables (icecore's `create_table`, which checks the
placement of each new table against all the others), nests some of them under the cleaned
table, and times, in one run:

- `create`: creating the catalog's tables (each create lists the catalog too);
- `check cold`: `catalog_directories` + `other_tables` in a fresh process (no cached
  metadata), the cost a real job pays once;
- `check warm`: the same again in the same process (metadata files are cached by location);
- `dry run`: the whole orphan dry run on the cleaned table (`--files` files under it), run
  after the others, so it includes a warm check; reported with the warm check's share.

    python bench/other_tables_benchmark.py                # 1,000 tables
    python bench/other_tables_benchmark.py --tables 200   # quicker

The last line of stdout is the JSON report; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from icecore.catalog import SqlCatalog  # noqa: E402
from icecore.spec.schema import Schema  # noqa: E402
from icecore.spec.types import LongType, NestedField  # noqa: E402

SCHEMA = Schema((NestedField(1, "id", LongType(), required=True),))
CLEANED = "db.events"

_CHILD = """
import json, sys, time
sys.path.insert(0, {root!r})
from icecore.catalog import SqlCatalog
from icecore.catalog.directories import TableDirectories, catalog_directories
from icecore.actions.other_tables import other_tables
from spark_jobs.remove_orphan_files import run as remove_orphans
from icecore.jobs.jobs import RemoveOrphanFilesOptions
catalog = SqlCatalog("default", warehouse={warehouse!r})
table = catalog.load_table({cleaned!r})
ours = TableDirectories.of(table.name, table.metadata.location, table.metadata.properties)
timings = {{}}
for label in ("cold", "warm"):
    started = time.perf_counter()
    found = other_tables(table.io, ours, table.metadata.location, catalog_directories(catalog))
    timings[label] = time.perf_counter() - started
started = time.perf_counter()
result = remove_orphans(None, catalog, RemoveOrphanFilesOptions({cleaned!r}, dry_run=True))
timings["dry_run"] = time.perf_counter() - started
timings["excluded"] = len(result.excluded_locations)
timings["listed"] = result.listed_files_count
print(json.dumps(timings))
"""


def build(warehouse: Path, tables: int, files: int) -> float:
    catalog = SqlCatalog("default", warehouse=warehouse)
    namespaces = max(1, tables // 20)
    for i in range(namespaces):
        catalog.create_namespace(f"ns{i}")
    catalog.create_namespace("db")
    catalog.create_namespace(CLEANED)
    started = time.perf_counter()
    cleaned = catalog.create_table(CLEANED, SCHEMA)
    nested = min(20, tables // 10)
    for i in range(nested):
        catalog.create_table(f"{CLEANED}.child{i}", SCHEMA)
    for i in range(tables - nested - 1):
        catalog.create_table(f"ns{i % namespaces}.t{i}", SCHEMA)
        if (i + 1) % 200 == 0:
            print(f"  {i + 1} tables", file=sys.stderr, flush=True)
    elapsed = time.perf_counter() - started
    data = Path(cleaned.metadata.location, "data")
    data.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        (data / f"stray-{i}.parquet").write_bytes(b"x")
    catalog.close()
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--files", type=int, default=10_000, help="files under the cleaned table")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="icefloe-other-tables-"))
    try:
        warehouse = workdir / "wh"
        print(f"creating {args.tables} tables", file=sys.stderr, flush=True)
        create_s = build(warehouse, args.tables, args.files)
        code = _CHILD.format(root=str(ROOT), warehouse=str(warehouse), cleaned=CLEANED)
        child = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        timings = json.loads(child.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    report = {
        "tables": args.tables,
        "files_under_cleaned_table": args.files,
        "create_all_s": round(create_s, 2),
        "create_per_table_ms": round(create_s * 1000 / args.tables, 2),
        "check_cold_ms": round(timings["cold"] * 1000, 1),
        "check_warm_ms": round(timings["warm"] * 1000, 1),
        "dry_run_ms": round(timings["dry_run"] * 1000, 1),
        "check_warm_share_of_dry_run": round(timings["warm"] / timings["dry_run"], 3),
        "excluded_locations": timings["excluded"],
        "listed_files": timings["listed"],
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
