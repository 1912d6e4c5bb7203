"""The fleet's side of the health-check history (`icefloe_airflow.health_history`, which the
UI reads): each survey adds one row per table, and ranking asks when the fleet first saw a
table (how long a never-maintained table has waited)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Engine, func, select

from icefloe_airflow.health_history import HEALTH_CHECKS, ensure_schema


def first_checked(engine: Engine, catalog: str) -> dict[str, datetime]:
    """When the fleet first checked each table of `catalog`."""
    ensure_schema(engine)
    query = (
        select(HEALTH_CHECKS.c.table_name, func.min(HEALTH_CHECKS.c.checked_at_ms))
        .where(HEALTH_CHECKS.c.catalog == catalog)
        .group_by(HEALTH_CHECKS.c.table_name)
    )
    with engine.connect() as conn:
        return {name: datetime.fromtimestamp(ms / 1000, UTC) for name, ms in conn.execute(query)}
