"""Each health check the fleet makes, kept in icefloe's state store: `icefloe_health_checks`.

One row per table and check (catalog, table_name, checked_at_ms, metadata_location, score,
due_json, inputs_json); the UI reads it for a table's score over time and the fleet for when
it first saw a table (how long a table has waited, `ranking`). Rows are only ever added.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import (
    BigInteger,
    Column,
    Engine,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    func,
    insert,
    select,
)

from icefloe_airflow.fleet.health import HealthCheck

_METADATA = MetaData()
HEALTH_CHECKS = Table(
    "icefloe_health_checks",
    _METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("catalog", String(255), nullable=False),
    Column("table_name", String(1024), nullable=False),
    Column("checked_at_ms", BigInteger, nullable=False),
    Column("metadata_location", Text),
    Column("score", Float),
    Column("due_json", Text, nullable=False),
    Column("inputs_json", Text, nullable=False),
    Index("ix_icefloe_health_checks_table", "catalog", "table_name", "checked_at_ms"),
)


def ensure_schema(engine: Engine) -> None:
    _METADATA.create_all(engine, checkfirst=True)


def record(engine: Engine, catalog: str, checks: Sequence[HealthCheck]) -> None:
    """Add one row per check, in one transaction (the table is created on first use)."""
    if not checks:
        return
    ensure_schema(engine)
    rows = [
        {
            "catalog": catalog,
            "table_name": c.table,
            "checked_at_ms": int(c.checked_at.timestamp() * 1000),
            "metadata_location": c.metadata_location,
            "score": c.score,
            "due_json": json.dumps(list(c.due)),
            "inputs_json": json.dumps(c.inputs, default=str, sort_keys=True),
        }
        for c in checks
    ]
    with engine.begin() as conn:
        conn.execute(insert(HEALTH_CHECKS), rows)


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
