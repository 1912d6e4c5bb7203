"""Catalogs by type, from Iceberg's property names, as PyIceberg's `load_catalog` takes them.

    load_catalog("prod", {"uri": "https://polaris.example.com/api/catalog",
                          "warehouse": "analytics", "credential": "id:secret"})

`type` is `sql` or `rest`; without one, an `http(s)://` `uri` means REST and anything else
(a SQLAlchemy URL, or no uri: SQLite in the warehouse) means SQL.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from icecore.catalog.base import WAREHOUSE, Catalog
from icecore.errors import CatalogError

TYPE = "type"
URI = "uri"
SQL, REST = "sql", "rest"


def _sql(name: str, properties: dict[str, str], create: bool) -> Catalog:
    from icecore.catalog.sql import SqlCatalog  # noqa: PLC0415 - SQLAlchemy only when used

    uri = properties.pop(URI, None) or None
    warehouse = properties.pop(WAREHOUSE, None) or None
    return SqlCatalog(name, uri, warehouse, properties, create=create)


def _rest(name: str, properties: dict[str, str], create: bool) -> Catalog:
    from icecore.catalog.rest import RestCatalog  # noqa: PLC0415 - requests only when used

    return RestCatalog(name, properties)  # a server's catalog: nothing here to create


CATALOG_TYPES: dict[str, Callable[[str, dict[str, str], bool], Catalog]] = {
    SQL: _sql,
    REST: _rest,
}


def catalog_type(properties: Mapping[str, str]) -> str:
    given = (properties.get(TYPE) or "").strip().lower()
    if given:
        if given not in CATALOG_TYPES:
            raise CatalogError(
                f"unknown catalog type {given!r}; icecore knows {', '.join(CATALOG_TYPES)}"
            )
        return given
    uri = properties.get(URI) or ""
    return REST if uri.startswith(("http://", "https://")) else SQL


def load_catalog(
    name: str | None, properties: Mapping[str, str], *, create: bool = True
) -> Catalog:
    """The catalog `properties` describe (Iceberg's names; `type` optional). `create=False`
    opens only a catalog that exists (see `SqlCatalog`)."""
    props = {str(k): str(v) for k, v in properties.items() if v is not None}
    kind = catalog_type(props)
    props.pop(TYPE, None)
    return CATALOG_TYPES[kind](name or "default", props, create)


def catalog_from_settings(
    uri: str | None = None,
    name: str | None = None,
    warehouse: str | os.PathLike[str] | None = None,
    properties: Mapping[str, str] | None = None,
    catalog_type: str | None = None,
    *,
    create: bool = True,
) -> Catalog:
    """The catalog simple settings describe, as job flags and Airflow connections give them;
    empty strings count as not given. `create=False`: refuse rather than create a missing
    SQLite catalog or its warehouse directory (the command lines' mode)."""
    props = dict(properties or {})
    if uri:
        props[URI] = uri
    if warehouse:
        props[WAREHOUSE] = os.fspath(warehouse)
    if catalog_type:
        props[TYPE] = catalog_type
    return load_catalog(name, props, create=create)
