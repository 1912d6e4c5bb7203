"""Catalogs: where a table's current metadata pointer lives, and how it is swapped.

    catalog = catalog_from_settings(warehouse="/data/warehouse")   # SQLite in the warehouse
    table = catalog.load_table("db.events")

`load_static_table` opens a table read-only from a metadata file or a Hadoop-layout
directory, without any catalog.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from icecore.catalog.base import Catalog
from icecore.catalog.sql import SqlCatalog
from icecore.catalog.static import load_static_table


def catalog_from_settings(
    uri: str | None = None,
    name: str | None = None,
    warehouse: str | os.PathLike[str] | None = None,
    properties: Mapping[str, str] | None = None,
) -> Catalog:
    """The catalog simple settings describe: a SQLAlchemy `uri` (SQLite or PostgreSQL), or
    none for `<warehouse>/catalog.db`. The one entry point for job CLIs and Airflow hooks."""
    return SqlCatalog.from_settings(uri=uri, name=name, warehouse=warehouse, properties=properties)


__all__ = ["Catalog", "SqlCatalog", "catalog_from_settings", "load_static_table"]
