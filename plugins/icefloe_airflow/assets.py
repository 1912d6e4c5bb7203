"""The Airflow Assets icefloe publishes: one per table, so maintenance can run on ingest events.

The ingest operator declares the alias `INGEST_ALIAS` as its outlet and, at run time, attaches
an event for the concrete table's asset to it; DAGs scheduled on `table_asset(table)` then run
after each committed batch, without the ingest DAG having to know which tables exist.
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
