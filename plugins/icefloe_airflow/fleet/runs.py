"""The run history the fleet ranks and decides with, read for a whole catalog at once (the
per-table `MaintenanceStore.last_runs` would cost a query per table)."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime

from sqlalchemy import func, select

from icefloe_airflow.state import RUNS, MaintenanceStore


def last_successes(store: MaintenanceStore) -> dict[str, dict[str, datetime]]:
    """table -> job -> when it last finished successfully, for the store's catalog."""
    query = (
        select(RUNS.c.table_name, RUNS.c.job, func.max(RUNS.c.finished_at_ms))
        .where(RUNS.c.catalog_name == store.catalog_name, RUNS.c.state == "success")
        .group_by(RUNS.c.table_name, RUNS.c.job)
    )
    found: dict[str, dict[str, datetime]] = defaultdict(dict)
    with store.engine.connect() as conn:
        for table, job, ms in conn.execute(query):
            if ms is not None:
                found[table][job] = datetime.fromtimestamp(ms / 1000, UTC)
    return dict(found)


def last_maintained(successes: dict[str, dict[str, datetime]]) -> dict[str, datetime]:
    """table -> its latest successful maintenance job of any kind."""
    return {table: max(jobs.values()) for table, jobs in successes.items() if jobs}
