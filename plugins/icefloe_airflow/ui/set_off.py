"""What set off each maintenance run the Iceberg page lists: the asset events the DAG run
consumed, read from Airflow's metadata database (the page runs in the api-server).

A watcher's event (`icefloe_airflow.catalog_watch`) names the table and the other engine's
snapshots that set it off (`extra["payload"]`); an ingest's names the table and its batch.
A run no event set off (by hand, on the clock) has no causes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

Run = tuple[str, str]  # (dag_id, run_id)


def cause(extra: Mapping[str, Any], source: str | None) -> dict[str, Any]:
    """One consumed asset event in words: `kind` `commits` (another engine's, with the
    newest snapshot's id, operation, engine and app id, and how many commits) or `ingest`
    (`source`: the DAG run that published it)."""
    payload = extra.get("payload")
    if isinstance(payload, Mapping):
        snapshots = list(payload.get("snapshots") or [])
        newest = snapshots[-1] if snapshots else {}
        return {
            "kind": "commits",
            "table": payload.get("table"),
            "commits": payload.get("commits", len(snapshots)),
            "snapshot_id": newest.get("snapshot_id"),
            "operation": newest.get("operation"),
            "engine": newest.get("engine"),
            "app_id": newest.get("app_id"),
            "timestamp_ms": newest.get("timestamp_ms"),
            "reasons": list(payload.get("reasons") or []),
        }
    return {"kind": "ingest", "table": extra.get("table"), "source": source}


def what_set_off(runs: Iterable[Run]) -> dict[Run, list[dict[str, Any]]]:
    """The causes of each of `runs` that consumed asset events."""
    from airflow.models.dagrun import DagRun  # noqa: PLC0415 - in the api-server only
    from airflow.utils.session import create_session  # noqa: PLC0415
    from sqlalchemy import select, tuple_  # noqa: PLC0415
    from sqlalchemy.orm import selectinload  # noqa: PLC0415

    wanted = sorted(set(runs))
    if not wanted:
        return {}
    query = (
        select(DagRun)
        .where(tuple_(DagRun.dag_id, DagRun.run_id).in_(wanted))
        .options(selectinload(DagRun.consumed_asset_events))
    )
    found: dict[Run, list[dict[str, Any]]] = {}
    with create_session() as session:
        for dag_run in session.scalars(query):
            events = sorted(dag_run.consumed_asset_events, key=lambda e: e.timestamp)
            source = [f"{e.source_dag_id}/{e.source_run_id}" if e.source_dag_id else None
                      for e in events]  # fmt: skip
            causes = [cause(e.extra or {}, s) for e, s in zip(events, source, strict=True)]
            if causes:
                found[(dag_run.dag_id, dag_run.run_id)] = causes
    return found
