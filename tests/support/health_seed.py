"""A fleet's recorded history without Spark or tables: 1,000 tables' health checks and some
rewrite runs written straight into a real SQLite state store through the same code the fleet
core uses (`record_checks`, `MaintenanceStore`'s table). Every value is a function of the
table's index, so tests know the expected order of any sort, the bands and the series.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from icefloe_airflow.health_history import BAND_WIDTH, HealthCheck, record_checks
from icefloe_airflow.state import RUNS, MaintenanceStore, run_figures
from sqlalchemy import Engine, insert

CATALOG = "default"
NAMESPACES = ("sales", "ops", "web", "ml")
CHECKS_PER_TABLE = 12
CHECK_EVERY_MS = 12 * 3600 * 1000  # twice a day: 6 days of history
DAY_MS = 86_400_000
MIB = 1024**2
HISTOGRAM_BOUNDS = (1 * MIB, 8 * MIB, 32 * MIB, 128 * MIB, 512 * MIB, None)


def table_name(i: int) -> str:
    return f"{NAMESPACES[i % len(NAMESPACES)]}.t{i:04d}"


@dataclass(frozen=True)
class Seeded:
    """What was written: the latest check of every table, the rewrite runs' bytes by
    (table, UTC day), and the time of the last check."""

    latest: dict[str, HealthCheck]
    rewritten: dict[tuple[str, str], int]
    last_run_ms: dict[str, int]  # start of each table's latest maintenance run (not ingest)
    now_ms: int
    catalog: str = CATALOG

    def order(self, sort: str, descending: bool = False) -> list[str]:
        """The table names in the order the UI must list them: by `sort`, absent values last
        in either direction, ties by name."""

        def key(name: str) -> object:
            check = self.latest[name]
            return {
                "score": check.score,
                "size": check.inputs["total_bytes"],
                "due": len(check.due),
                "last_run": self.last_run_ms.get(name),
                "table": name,
            }[sort]

        present = sorted((n for n in self.latest if key(n) is not None), key=lambda n: n)
        present.sort(key=key, reverse=descending)  # stable: ties stay in name order
        return present + sorted(n for n in self.latest if key(n) is None)

    def bands(self) -> list[int]:
        counts = [0] * 10
        for check in self.latest.values():
            counts[min(9, int(check.score // BAND_WIDTH))] += 1
        return counts


def latest_score(i: int) -> float:
    """0..100 spread over the fleet, with ties (so the tie-break by name is exercised)."""
    return float((i * 37) % 101)


def inputs(i: int, k: int) -> dict[str, object]:
    """The score's inputs of table i at its k-th check."""
    delete_files = (i + k) % 7 + (3 * k if i % 10 == 0 else 0)
    data_manifests = 1 + (i * 13 + k) % 150
    return {
        "data_files": 10 + i % 90 + k,
        "small_files": (i * 3 + k) % 40,
        "delete_files": delete_files,
        "delete_records": delete_files * 100,
        "equality_deletes": k % 3 if i % 5 == 0 else 0,
        "total_bytes": ((i * 7919) % 1000 + 1) * MIB + i,  # distinct sizes
        "data_manifests": data_manifests,
        "delete_manifests": i % 4,
        "small_manifests": data_manifests // 2,
        "manifest_bytes": data_manifests * 8192,
        "size_histogram": [[bound, (i + j * k) % 23] for j, bound in enumerate(HISTOGRAM_BOUNDS)],
    }


def due(i: int) -> list[str]:
    if i % 20 == 0:
        return ["rewrite_data_files", "rewrite_position_deletes"]
    return ["rewrite_data_files"] if i % 10 == 0 else []


def seed_fleet(
    engine: Engine, tables: int = 1000, *, now_ms: int | None = None, catalog: str = CATALOG
) -> Seeded:
    """Record `CHECKS_PER_TABLE` checks of each table (the latest at `now_ms`), and for every
    50th table three successful rewrites on three different days, one failure, one ingest."""
    now = now_ms if now_ms is not None else int(datetime.now(UTC).timestamp() * 1000)
    MaintenanceStore(engine, catalog)  # the run history's tables
    checks, latest = [], {}
    for i in range(tables):
        for k in range(CHECKS_PER_TABLE):
            last = k == CHECKS_PER_TABLE - 1
            check = HealthCheck(
                table=table_name(i),
                checked_at_ms=now - (CHECKS_PER_TABLE - 1 - k) * CHECK_EVERY_MS,
                # Earlier checks score differently: only the latest may decide the order.
                score=latest_score(i) if last else float((i * 53 + k * 11) % 101),
                due=due(i) if last else [],
                inputs=inputs(i, k),
                metadata_location=f"file:///w/{table_name(i)}/metadata/{k:05d}.metadata.json",
                catalog=catalog,
            )
            checks.append(check)
            if last:
                latest[check.table] = check
    record_checks(engine, catalog, checks)

    runs, rewritten, last_run = [], {}, {}
    for i in range(0, tables, 50):
        table = table_name(i)
        shift = (i // 50) * 60_000  # each table's runs a minute apart: distinct last runs
        for days_ago, size in (((i // 50) % 2, 5 * MIB + i), (2, 3 * MIB), (4, 7 * MIB)):
            finished = now - days_ago * DAY_MS - 60_000 - shift
            runs.append(_run(catalog, table, "rewrite_data_files", "success", finished, size=size))
            last_run[table] = max(last_run.get(table, 0), finished - 120_000)
            day = datetime.fromtimestamp(finished / 1000, tz=UTC).date().isoformat()
            rewritten[(table, day)] = rewritten.get((table, day), 0) + size
        runs.append(_run(catalog, table, "rewrite_position_deletes", "failed", now - 3 * DAY_MS))
        runs.append(_run(catalog, table, "ingest", "success", now - 30_000))
    runs.sort(key=lambda run: run["started_at_ms"])  # recorded as they started
    with engine.begin() as conn:
        conn.execute(insert(RUNS), runs)
    return Seeded(latest, rewritten, last_run, now, catalog)


def _run(
    catalog: str, table: str, job: str, state: str, finished_ms: int, *, size: int | None = None
) -> dict[str, Any]:
    result = (
        None
        if size is None
        else {"rewritten_data_files": 4, "added_data_files": 1, "rewritten_bytes": size}
    )
    return {
        "catalog_name": catalog,
        "table_name": table,
        "job": job,
        "dag_id": f"icefloe_{job}",
        "run_id": f"scheduled__{finished_ms}",
        "task_id": job,
        "try_number": 1,
        "state": state,
        "started_at_ms": finished_ms - 120_000,
        "finished_at_ms": finished_ms,
        "result": None if result is None else json.dumps(result),
        **run_figures(job, result),  # what `MaintenanceStore.finish_run` sets
        "error": "OutOfMemoryError: java heap" if state == "failed" else None,
    }
