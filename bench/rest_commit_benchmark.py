"""REST catalog commit latency against the SQL catalog's, in one run on one machine.

Both catalogs hold the same table (one data file per append, SQLite underneath both): the SQL
catalog is icecore's own `SqlCatalog`; the REST catalog is Apache Iceberg's REST handlers over
its `JdbcCatalog` (tests/support/rest_catalog.py: the server the tests use, behind OAuth2).
Rounds alternate which catalog goes first, so a noisy neighbour hurts both alike.

Timed per append: load the table, then `new_fast_append().append_file(f).commit()` (the data
file is written beforehand, untimed). Through REST that is one GET and one POST, counted from
the server's request log; the bar is at most 2 round trips.

    python bench/rest_commit_benchmark.py              # 41 rounds
    python bench/rest_commit_benchmark.py --repeat 11  # quicker

The last line of stdout is the JSON report; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from icecore.catalog import Catalog, load_catalog
from icecore.spec.manifest import DataFile
from tests.support.committing import SCHEMA, UNPARTITIONED
from tests.support.rest_catalog import start_rest_catalog_server
from tests.support.tables import LocalTable

ROUND_TRIP_BAR = 2


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _append(catalog: Catalog, name: str, data_file: DataFile) -> float:
    started = time.perf_counter()
    table = catalog.load_table(name)
    table.new_fast_append().append_file(data_file).commit()
    return time.perf_counter() - started


def _files(catalog: Catalog, name: str, count: int) -> list[DataFile]:
    table = catalog.load_table(name)
    writer = LocalTable(table.io, table.metadata)
    return [writer.write_data([{"id": i, "cat": "a", "v": i}]) for i in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=41)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, start_rest_catalog_server(Path(tmp)) as server:
        sql = load_catalog("bench", {"warehouse": f"{tmp}/sql-wh"})
        rest = load_catalog("bench", server.properties())
        catalogs = {"sql": sql, "rest": rest}
        files = {}
        for kind, catalog in catalogs.items():
            catalog.create_namespace("bench")
            catalog.create_table("bench.t", SCHEMA, spec=UNPARTITIONED)
            files[kind] = _files(catalog, "bench.t", args.repeat + 1)
            _append(catalog, "bench.t", files[kind].pop())  # warm-up: connections, token
        times: dict[str, list[float]] = {"sql": [], "rest": []}
        trips: list[int] = []
        for i in range(args.repeat):
            order = ("sql", "rest") if i % 2 == 0 else ("rest", "sql")
            for kind in order:
                if kind == "rest":
                    server.reset()
                times[kind].append(_append(catalogs[kind], "bench.t", files[kind].pop()))
                if kind == "rest":
                    trips.append(len(server.requests()))
            log(f"round {i + 1}/{args.repeat}")
        report = {
            "rounds": args.repeat,
            "sql_median_ms": round(statistics.median(times["sql"]) * 1000, 2),
            "rest_median_ms": round(statistics.median(times["rest"]) * 1000, 2),
            "rest_over_sql": round(
                statistics.median(times["rest"]) / statistics.median(times["sql"]), 2
            ),
            "rest_round_trips_max": max(trips),
            "round_trip_bar": ROUND_TRIP_BAR,
        }
        sql.close()
        rest.close()
    print(json.dumps(report))
    sys.exit(0 if report["rest_round_trips_max"] <= ROUND_TRIP_BAR else 1)


if __name__ == "__main__":
    main()
