"""The Iceberg catalog behind an Airflow connection, so that no DAG holds a database URI.

Connection `iceberg_default` (type `icefloe`; any type is read), settings in its extras (the
connection form's fields, declared in `icefloe_airflow.provider_info`):

    {"uri": "postgresql+psycopg2://user@db/iceberg",   # absent: SQLite <warehouse>/catalog.db
     "catalog_name": "default",
     "warehouse": "/data/warehouse",                   # or s3://bucket/prefix
     "properties": {"s3.endpoint": "http://minio:9000"}}  # optional catalog/FileIO properties

The database password may sit in the connection's password field instead of the URI (Airflow
masks it there). The same settings become the jobs' shared flags (`job_args`), so the Spark
job and the Airflow worker always open the same catalog; operators pass the URI through the
job's environment (`job_env`, `ICEFLOE_CATALOG_URI`) rather than the command line, which
process listings and task logs show.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook
from sqlalchemy.engine import make_url

from icecore.catalog import Catalog, SqlCatalog, catalog_from_settings
from icecore.io.properties import is_secret
from icefloe_airflow.state import MaintenanceStore
from spark_jobs.specs.argv import CATALOG_PROPERTIES_ENV, CATALOG_URI_ENV

if TYPE_CHECKING:
    from icecore.table import Table

_KNOWN_EXTRAS = frozenset({"uri", "catalog_name", "warehouse", "properties"})


@dataclass(frozen=True)
class CatalogSettings:
    """What a job needs to open the catalog; `uri` None means SQLite in the warehouse."""

    uri: str | None
    name: str
    warehouse: str | None
    properties: dict[str, str] = field(default_factory=dict)


class IcebergHook(BaseHook):
    """Opens the icecore catalog an `iceberg` connection describes.

    The catalog (and its database engine) is opened once per hook and reused by
    `get_catalog`, `load_table` and `state_store`; `close()` releases it.
    """

    conn_name_attr = "iceberg_conn_id"
    default_conn_name = "iceberg_default"
    conn_type = "icefloe"
    hook_name = "Iceberg catalog (icefloe)"

    def __init__(self, iceberg_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.iceberg_conn_id = iceberg_conn_id
        self._settings: CatalogSettings | None = None
        self._catalog: Catalog | None = None

    def settings(self) -> CatalogSettings:
        """The catalog settings of the connection; a clear error when they are unusable."""
        if self._settings is None:
            conn = self.get_connection(self.iceberg_conn_id)
            extra = conn.extra_dejson
            if not isinstance(extra, dict):
                raise ValueError(
                    f"connection {self.iceberg_conn_id!r}: extra must be a JSON object"
                )
            # The connection form stores its fields under their names; older Airflow forms
            # prefixed them with `extra__<type>__`. Empty form fields come as "".
            extra = {
                str(k).removeprefix(f"extra__{self.conn_type}__"): v
                for k, v in extra.items()
                if v not in ("", None)
            }
            if isinstance(extra.get("properties"), str):
                try:
                    extra["properties"] = json.loads(extra["properties"])
                except ValueError:
                    raise ValueError(
                        f"connection {self.iceberg_conn_id!r}: 'properties' must be a JSON "
                        f"object, got {extra['properties']!r}"
                    ) from None
            unknown = sorted(set(extra) - _KNOWN_EXTRAS)
            if unknown:
                raise ValueError(
                    f"connection {self.iceberg_conn_id!r}: unknown extra keys {unknown}; "
                    f"expected {sorted(_KNOWN_EXTRAS)}"
                )
            uri = extra.get("uri") or None
            if uri and conn.password and make_url(str(uri)).password is None:
                uri = make_url(str(uri)).set(password=conn.password).render_as_string(False)
            properties = extra.get("properties") or {}
            if not isinstance(properties, dict):
                raise ValueError(
                    f"connection {self.iceberg_conn_id!r}: extra 'properties' must be an object"
                )
            warehouse = extra.get("warehouse") or None
            if uri is None and warehouse is None:
                raise ValueError(
                    f"connection {self.iceberg_conn_id!r}: set extra 'warehouse' (SQLite catalog "
                    "in it) or 'uri' (SQLAlchemy URL of the catalog database)"
                )
            self._settings = CatalogSettings(
                uri=None if uri is None else str(uri),
                name=str(extra.get("catalog_name") or "default"),
                warehouse=None if warehouse is None else str(warehouse),
                properties={str(k): _property(v) for k, v in properties.items()},
            )
        return self._settings

    def job_args(self, *, include_uri: bool = True) -> list[str]:
        """The shared catalog flags of every job in `spark_jobs/` for this connection;
        without `include_uri`, the URI is left to `job_env` (keeps passwords off argv)."""
        settings = self.settings()
        args = ["--catalog-name", settings.name]
        if settings.uri and include_uri:
            args += ["--catalog-uri", settings.uri]
        if settings.warehouse:
            args += ["--warehouse", settings.warehouse]
        for key, value in settings.properties.items():
            if not is_secret(key):
                args += ["--catalog-property", f"{key}={value}"]
        return args

    def job_env(self) -> dict[str, str]:
        """Environment for a job run with `job_args(include_uri=False)`: the URI and the
        credential properties, which never go on a command line."""
        settings = self.settings()
        env = {CATALOG_URI_ENV: settings.uri} if settings.uri else {}
        secrets = {k: v for k, v in settings.properties.items() if is_secret(k)}
        if secrets:
            env[CATALOG_PROPERTIES_ENV] = json.dumps(secrets)
        return env

    def get_conn(self) -> Catalog:
        return self.get_catalog()

    def get_catalog(self) -> Catalog:
        """The icecore catalog (opened on first use, then reused by this hook)."""
        if self._catalog is None:
            s = self.settings()
            self._catalog = catalog_from_settings(
                uri=s.uri, name=s.name, warehouse=s.warehouse, properties=s.properties
            )
        return self._catalog

    def load_table(self, table: str) -> Table:
        return self.get_catalog().load_table(table)

    def state_store(self) -> MaintenanceStore:
        """Maintenance locks and run history, kept in the catalog's own database."""
        catalog = self.get_catalog()
        if not isinstance(catalog, SqlCatalog):
            raise TypeError(f"maintenance state needs a SQL catalog, got {type(catalog).__name__}")
        return MaintenanceStore(catalog.engine, self.settings().name)

    def close(self) -> None:
        if self._catalog is not None:
            self._catalog.close()
            self._catalog = None


def _property(value: Any) -> str:
    """A catalog property as Iceberg writes it (`true`, not Python's `True`)."""
    return str(value).lower() if isinstance(value, bool) else str(value)
