"""Catalogs: where a table's current metadata pointer lives, and how it is swapped.

    catalog = catalog_from_settings(warehouse="/data/warehouse")   # SQLite in the warehouse
    catalog = load_catalog("prod", {"uri": "https://rest.example.com", "credential": "id:s"})
    table = catalog.load_table("db.events")

`load_static_table` opens a table read-only from a metadata file or a Hadoop-layout
directory, without any catalog.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from icecore.catalog.base import Catalog
from icecore.catalog.registry import catalog_from_settings, load_catalog
from icecore.catalog.static import load_static_table

if TYPE_CHECKING:
    from icecore.catalog.sql import SqlCatalog

__all__ = ["Catalog", "SqlCatalog", "catalog_from_settings", "load_catalog", "load_static_table"]


def __getattr__(name: str) -> Any:
    """`SqlCatalog` on first use: SQLAlchemy's import is a quarter second of a job's start that
    a run on another catalog (REST, the static tables) does not need."""
    if name == "SqlCatalog":
        from icecore.catalog.sql import SqlCatalog  # noqa: PLC0415 (SQLAlchemy only when used)

        return SqlCatalog
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
