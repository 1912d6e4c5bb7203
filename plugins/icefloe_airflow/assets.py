"""The Airflow Assets icefloe publishes: one per table, so maintenance can run on ingest events.

The ingest operator declares the alias `INGEST_ALIAS` as its outlet and, at run time, attaches
an event for the concrete table's asset to it, and one for its connection's fleet asset; DAGs
scheduled on `table_asset(table)` then run after each committed batch, without the ingest DAG
having to know which tables exist, and a fleet with `schedule: asset` after any batch into
its catalog. Other engines' commits reach the same assets through their watchers
(`icefloe_airflow.catalog_watch`).
"""

from __future__ import annotations

from airflow.sdk import Asset, AssetAlias

INGEST_ALIAS = AssetAlias("icefloe-ingest")


def table_asset(table: str, catalog_name: str = "default") -> Asset:
    """The asset of `namespace.name` in a catalog: uri `iceberg://<catalog>/<namespace>/<name>`.

    The name keeps the dotted table identifier (`iceberg/<catalog>/<ns>.<name>`) so it reads as
    users write it; nested namespaces become path segments of the uri.
    """
    parts = table.split(".")
    if len(parts) < 2 or not all(parts):
        raise ValueError(f"table must be NAMESPACE.NAME, got {table!r}")
    if not catalog_name:
        raise ValueError("catalog_name must not be empty")
    return Asset(
        name=f"iceberg/{catalog_name}/{table}",
        uri=f"iceberg://{catalog_name}/{'/'.join(parts)}",
    )


def fleet_asset(iceberg_conn_id: str) -> Asset:
    """The asset of the fleet of an Airflow connection's catalog: an event per changed table
    (its extra names the table). Named by the connection, as the fleet's DAG is, since the
    catalog's name is known only when the connection is read."""
    if not iceberg_conn_id:
        raise ValueError("iceberg_conn_id must not be empty")
    return Asset(
        name=f"icefloe-fleet/{iceberg_conn_id}", uri=f"x-icefloe-fleet://{iceberg_conn_id}"
    )
