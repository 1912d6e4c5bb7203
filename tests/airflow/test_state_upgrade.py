"""A state store made by the previous version (run history without figure columns) is
upgraded in place when opened, on SQLite and on PostgreSQL: the columns are added and filled
in from the JSON results already stored, and the UI's chart reads them."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from icefloe_airflow import health_history as hh
from icefloe_airflow.state import RUNS, MaintenanceStore
from sqlalchemy import (
    Column,
    MetaData,
    Table,
    create_engine,
    insert,
    inspect,
    select,
    text,
)

from icecore.jobs.results import RewriteDataFilesResult
from tests.support.catalogs import POSTGRES_URI, postgres_unavailable

# The run history as the previous version created it: without the figure columns.
FIGURES = ("rewritten_bytes", "removed_files")
_OLD = MetaData()
OLD_RUNS = Table(
    RUNS.name,
    _OLD,
    *(
        Column(c.name, c.type, primary_key=c.primary_key, nullable=c.nullable, index=c.index)
        for c in RUNS.columns
        if c.name not in FIGURES
    ),
)
DAY_MS = 86_400_000
NOW_MS = int(datetime(2026, 3, 10, 12, tzinfo=UTC).timestamp() * 1000)


@pytest.fixture(params=["sqlite", "postgresql"])
def old_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of a store holding only the previous version's run history: a SQLite file,
    or a PostgreSQL schema of the test's own (the shared database's tables stay untouched)."""
    if request.param == "sqlite":
        uri = f"sqlite:///{tmp_path / 'icefloe_state.db'}"
        admin = create_engine(uri)
        schema = None
    elif reason := postgres_unavailable():
        pytest.skip(reason)
    else:
        schema = f"old_{uuid.uuid4().hex[:12]}"
        admin = create_engine(POSTGRES_URI)
        with admin.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        uri = f"{POSTGRES_URI}?options=-csearch_path%3D{schema}"
    try:
        old = create_engine(uri)
        _OLD.create_all(old)
        with old.begin() as conn:
            conn.execute(insert(OLD_RUNS), OLD_RUNS_ROWS)
        old.dispose()
        yield uri
    finally:
        if schema is not None:
            with admin.begin() as conn:
                conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def _run(job: str, state: str, days_ago: int, result: Any) -> dict[str, Any]:
    finished = NOW_MS - days_ago * DAY_MS
    return {
        "catalog_name": "default",
        "table_name": "db.events",
        "job": job,
        "state": state,
        "started_at_ms": finished - 60_000,
        "finished_at_ms": finished,
        "result": None if result is None else json.dumps(result),
    }


OLD_RUNS_ROWS = [
    _run("rewrite_data_files", "success", 2, {"rewritten_data_files": 5, "rewritten_bytes": 700}),
    _run("rewrite_data_files", "success", 0, {"rewritten_data_files": 2, "rewritten_bytes": 300}),
    _run(
        "rewrite_position_deletes",
        "success",
        0,
        {"rewritten_delete_files": 4, "removed_dangling_delete_files": 1, "rewritten_bytes": 50},
    ),
    _run(
        "expire_snapshots",
        "success",
        1,
        {"deleted_data_files_count": 3, "deleted_manifest_lists_count": 2, "dry_run": False},
    ),
    # A newer worker's key, a job this version does not know, a result that is no object.
    _run("rewrite_manifests", "success", 1, {"rewritten_bytes": 40, "a_future_counter": 9}),
    _run("compute_statistics", "success", 1, {"rewritten_bytes": 1}),
    _run("ingest", "success", 1, [1, 2]),
    _run("rewrite_data_files", "failed", 1, None),
    _run("rewrite_data_files", "running", 0, None),
]


def test_an_old_store_is_upgraded_in_place_on_open(old_store: str) -> None:
    store = MaintenanceStore.open(old_store, "default")
    try:
        columns = {c["name"] for c in inspect(store.engine).get_columns(RUNS.name)}
        assert set(FIGURES) <= columns
        with store.engine.connect() as conn:
            rows = conn.execute(
                select(RUNS.c.job, RUNS.c.rewritten_bytes, RUNS.c.removed_files).order_by(RUNS.c.id)
            ).all()
        assert [tuple(r) for r in rows] == [
            ("rewrite_data_files", 700, 5),
            ("rewrite_data_files", 300, 2),
            ("rewrite_position_deletes", 50, 5),
            ("expire_snapshots", 0, 5),
            ("rewrite_manifests", 40, 0),
            ("compute_statistics", None, None),
            ("ingest", None, None),
            ("rewrite_data_files", None, None),
            ("rewrite_data_files", None, None),
        ]
        # The old rows' history is intact, and the chart reads the columns.
        expired = store.last_runs("db.events")["expire_snapshots"].result
        assert expired == {
            "deleted_data_files_count": 3,
            "deleted_manifest_lists_count": 2,
            "dry_run": False,
        }
        days = dict(hh.bytes_rewritten_per_day(store.engine, "default", None, now_ms=NOW_MS))
        assert (days["2026-03-10"], days["2026-03-09"], days["2026-03-08"]) == (350, 40, 700)
        assert sum(days.values()) == 1090

        # A run recorded now sets its figures itself; opening again changes nothing.
        pk = store.start_run(
            "db.events", "remove_orphan_files", dag_id="d", run_id="r", task_id="t", try_number=1
        )
        store.finish_run(pk, state="success", result={"deleted_files_count": 6, "dry_run": False})
        compacted = RewriteDataFilesResult(
            table="db.events", rewritten_data_files=3, rewritten_bytes=90
        )
        pk2 = store.start_run(
            "db.events", "rewrite_data_files", dag_id="d", run_id="r", task_id="c", try_number=1
        )
        store.finish_run(pk2, state="success", result=compacted)  # a job's own result object
        again = MaintenanceStore.open(old_store, "default")
        again.close()
        with store.engine.connect() as conn:
            latest = conn.execute(
                select(RUNS.c.rewritten_bytes, RUNS.c.removed_files)
                .where(RUNS.c.id.in_([pk, pk2]))
                .order_by(RUNS.c.id)
            ).all()
        assert [tuple(r) for r in latest] == [(0, 6), (90, 3)]
        assert store.last_runs("db.events")["rewrite_data_files"].result == compacted.to_dict()
    finally:
        store.close()
