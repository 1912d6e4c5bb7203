"""The Iceberg catalog behind an Airflow connection, so that no DAG holds a URI or a secret.

Two kinds of connection are read, by their type:

- icefloe's own, type `icefloe` (the form's fields, declared in `icefloe_airflow.provider_info`,
  are its extras); any type other than `iceberg` is read this way:

      {"catalog_type": "sql",                           # or "rest"; absent: rest for http(s)
       "uri": "postgresql+psycopg2://user@db/iceberg",  # absent: SQLite <warehouse>/catalog.db
       "catalog_name": "default",
       "warehouse": "/data/warehouse",                  # or s3://bucket/prefix
       "properties": {"s3.endpoint": "http://minio:9000"},
       "token": "...",                                  # a REST catalog's bearer token
       "state_uri": "postgresql+psycopg2://..."}        # this connection's own state store

  For a SQL catalog the connection's password is the database's (Airflow masks it there); for
  a REST catalog login and password are the OAuth2 client id and secret (`credential`).
- Airflow's own Iceberg provider's, type `iceberg`, as that provider builds its catalog: the
  host is the REST catalog's URI, login and password the OAuth2 client id and secret, every
  extra a catalog property (`type` defaults to `rest`; `warehouse`, `oauth2-server-uri`,
  `scope`, `s3.*` ...), and the catalog is named after the connection id (a SQL catalog's
  rows carry that name, so both providers see the same tables). icefloe also reads
  `catalog_name` (to name it otherwise) and `state_uri` from its extras; they are no
  catalog properties.

The same settings become the jobs' shared flags (`job_args`), so the Spark job and the Airflow
worker open the same catalog; what could be a secret travels in the job's environment instead
(`job_env`): the URI, a REST catalog's credential and token, and secret properties, since
process listings and task logs show a command line.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook
from sqlalchemy.engine import make_url

from icecore.catalog import Catalog, catalog_from_settings
from icecore.catalog.registry import REST, SQL, catalog_type
from icecore.io.properties import is_secret
from icecore.jobs.argv import (
    CATALOG_CREDENTIAL_ENV,
    CATALOG_PROPERTIES_ENV,
    CATALOG_TOKEN_ENV,
    CATALOG_URI_ENV,
)
from icefloe_airflow.state import MaintenanceStore
from icefloe_airflow.state_db import configured_state_uri

if TYPE_CHECKING:
    from icecore.table import Table

log = logging.getLogger(__name__)

OFFICIAL_CONN_TYPE = "iceberg"  # apache-airflow-providers-apache-iceberg's connection type
CREDENTIAL, TOKEN = "credential", "token"  # Iceberg's names of a REST catalog's secrets
_KNOWN_EXTRAS = frozenset(
    {"uri", "catalog_type", "catalog_name", "warehouse", "properties", "token", "state_uri"}
)
# Request headers a REST catalog sends (`header.<name>`) that carry credentials.
_SECRET_HEADER = re.compile(r"auth|cookie|key|secret|token|session", re.IGNORECASE)


def is_secret_property(key: str) -> bool:
    """Whether a catalog property's value is a credential (never on a command line)."""
    return is_secret(key) or (
        key.lower().startswith("header.") and bool(_SECRET_HEADER.search(key[7:]))
    )


@dataclass(frozen=True)
class CatalogSettings:
    """What a job needs to open the catalog. `uri` None means SQLite in the warehouse;
    `catalog_type` None means by the URI (REST for http(s)); `properties` hold Iceberg's
    catalog and FileIO properties, a REST catalog's `credential` and `token` included;
    `state_uri` is the connection's own state store (None: Airflow's `[icefloe] state_uri`)."""

    uri: str | None
    name: str
    warehouse: str | None
    properties: dict[str, str] = field(default_factory=dict)
    catalog_type: str | None = None
    state_uri: str | None = None

    @property
    def kind(self) -> str:
        """`sql` or `rest`, as icecore decides it from these settings."""
        return catalog_type({"type": self.catalog_type or "", "uri": self.uri or ""})

    def __repr__(self) -> str:  # settings end up in logs and tracebacks: no secret in them
        uri = self.uri and (self.uri if self.kind == REST else _hide_password(self.uri))
        props = {k: "***" if is_secret_property(k) else v for k, v in self.properties.items()}
        state = self.state_uri and _hide_password(self.state_uri)
        return (
            f"CatalogSettings(uri={uri!r}, name={self.name!r}, warehouse={self.warehouse!r}, "
            f"properties={props!r}, catalog_type={self.catalog_type!r}, state_uri={state!r})"
        )


class IcebergHook(BaseHook):
    """Opens the icecore catalog an `icefloe` or `iceberg` connection describes, and
    icefloe's state store for it.

    The catalog and the store are opened once per hook and reused (`get_catalog`,
    `load_table`, `state_store`); `close()` releases both.
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
        self._store: MaintenanceStore | None = None

    def settings(self) -> CatalogSettings:
        """The catalog settings of the connection; a clear error when they are unusable."""
        if self._settings is None:
            conn = self.get_connection(self.iceberg_conn_id)
            extra = conn.extra_dejson
            if not isinstance(extra, dict):
                raise ValueError(
                    f"connection {self.iceberg_conn_id!r}: extra must be a JSON object"
                )
            if conn.conn_type == OFFICIAL_CONN_TYPE:
                settings = _official_settings(self.iceberg_conn_id, conn, extra)
            else:
                settings = _icefloe_settings(self.iceberg_conn_id, conn, extra, self.conn_type)
            _mask(settings)
            self._settings = settings
        return self._settings

    def job_args(self, *, include_uri: bool = True) -> list[str]:
        """The shared catalog flags of every job in `spark_jobs/` for this connection; never a
        secret property. Without `include_uri` the URI is left to `job_env` (keeps a
        database password off argv)."""
        settings = self.settings()
        args = ["--catalog-name", settings.name]
        if settings.catalog_type:
            args += ["--catalog-type", settings.catalog_type]
        if settings.uri and include_uri:
            args += ["--catalog-uri", settings.uri]
        if settings.warehouse:
            args += ["--warehouse", settings.warehouse]
        for key, value in settings.properties.items():
            if not is_secret_property(key):
                args += ["--catalog-property", f"{key}={value}"]
        return args

    def job_env(self) -> dict[str, str]:
        """Environment for a job run with `job_args(include_uri=False)`: the URI, a REST
        catalog's credential and token (their own variables, the only way a job takes them)
        and the other secret properties (one JSON object)."""
        settings = self.settings()
        env = {CATALOG_URI_ENV: settings.uri} if settings.uri else {}
        secrets = {k: v for k, v in settings.properties.items() if is_secret_property(k)}
        if CREDENTIAL in secrets:
            env[CATALOG_CREDENTIAL_ENV] = secrets.pop(CREDENTIAL)
        if TOKEN in secrets:
            env[CATALOG_TOKEN_ENV] = secrets.pop(TOKEN)
        if secrets:
            env[CATALOG_PROPERTIES_ENV] = json.dumps(secrets)
        return env

    def get_conn(self) -> Catalog:
        return self.get_catalog()

    def get_catalog(self, *, create: bool = False) -> Catalog:
        """The icecore catalog (opened on first use, then reused by this hook). A local
        catalog that does not exist (no warehouse directory, no `catalog.db`) is refused in
        one line naming the path, and nothing is created: a typo in a connection must not
        leave an empty catalog behind. Only an ingest that creates its table passes
        `create`, as the job's `--create` does."""
        if self._catalog is None:
            s = self.settings()
            self._catalog = catalog_from_settings(
                uri=s.uri,
                name=s.name,
                warehouse=s.warehouse,
                properties=s.properties,
                catalog_type=s.catalog_type,
                create=create,
            )
        return self._catalog

    def load_table(self, table: str) -> Table:
        return self.get_catalog().load_table(table)

    def test_connection(self) -> tuple[bool, str]:
        """The connection form's Test button: open the catalog and list its namespaces."""
        try:
            namespaces = self.get_catalog().list_namespaces()
        except Exception as exc:
            return False, f"{type(exc).__name__}: {exc}"
        finally:
            self.close()
        return True, f"catalog {self.settings().name!r}: {len(namespaces)} namespace(s)"

    def state_uri(self) -> str:
        """The state store's URL for this connection: its extra `state_uri`, else Airflow's
        `[icefloe] state_uri`, else SQLite in AIRFLOW_HOME (`icefloe_airflow.state_db`)."""
        return configured_state_uri(self.settings().state_uri)

    def state_store(self) -> MaintenanceStore:
        """Maintenance locks and run history of this connection's catalog, in icefloe's
        state store (a database of its own, whatever the catalog's type)."""
        if self._store is None:
            self._store = MaintenanceStore.open(self.state_uri(), self.settings().name)
        return self._store

    def close(self) -> None:
        if self._catalog is not None:
            self._catalog.close()
            self._catalog = None
        if self._store is not None:
            self._store.close()
            self._store = None


def _icefloe_settings(
    conn_id: str, conn: Any, raw: dict[str, Any], conn_type: str
) -> CatalogSettings:
    # The connection form stores its fields under their names; older Airflow forms prefixed
    # them with `extra__<type>__`. Empty form fields come as "".
    extra = {
        str(k).removeprefix(f"extra__{conn_type}__"): v
        for k, v in raw.items()
        if v not in ("", None)
    }
    if isinstance(extra.get("properties"), str):
        try:
            extra["properties"] = json.loads(extra["properties"])
        except ValueError:
            raise ValueError(
                f"connection {conn_id!r}: 'properties' must be a JSON object, "
                f"got {extra['properties']!r}"
            ) from None
    unknown = sorted(set(extra) - _KNOWN_EXTRAS)
    if unknown:
        raise ValueError(
            f"connection {conn_id!r}: unknown extra keys {unknown}; "
            f"expected {sorted(_KNOWN_EXTRAS)}"
        )
    properties = extra.get("properties") or {}
    if not isinstance(properties, dict):
        raise ValueError(f"connection {conn_id!r}: extra 'properties' must be an object")
    props = {str(k): _property(v) for k, v in properties.items()}
    kind = _catalog_type(conn_id, extra.get("catalog_type"))
    uri = _text(extra.get("uri"))
    warehouse = _text(extra.get("warehouse"))
    if catalog_type({"type": kind or "", "uri": uri or ""}) == REST:
        if conn.password:  # client id and secret, or a bare secret (Iceberg's `credential`)
            props[CREDENTIAL] = f"{conn.login}:{conn.password}" if conn.login else conn.password
        if extra.get("token"):
            props[TOKEN] = str(extra["token"])
    elif uri and conn.password and make_url(uri).password is None:
        uri = make_url(uri).set(password=conn.password).render_as_string(False)
    return _checked(
        conn_id,
        CatalogSettings(
            uri=uri,
            name=_text(extra.get("catalog_name")) or "default",
            warehouse=warehouse,
            properties=props,
            catalog_type=kind,
            state_uri=_text(extra.get("state_uri")),
        ),
    )


def _official_settings(conn_id: str, conn: Any, extra: dict[str, Any]) -> CatalogSettings:
    """What `airflow.providers.apache.iceberg.hooks.iceberg.IcebergHook.catalog` builds
    (provider 2.1): the extras, then the host as `uri` (trailing slash removed), `type` rest
    unless given, for REST `credential` = `login:password` when both are set, and the
    connection id as the catalog's name."""
    props = {str(k): _property(v) for k, v in extra.items() if v not in ("", None)}
    name = props.pop("catalog_name", None) or conn_id
    state_uri = props.pop("state_uri", None)
    kind = _catalog_type(conn_id, props.pop("type", None) or REST)
    uri = props.pop("uri", None)
    if conn.host:
        uri = str(conn.host).rstrip("/")
    if kind == REST:
        if conn.login and conn.password:
            props[CREDENTIAL] = f"{conn.login}:{conn.password}"
        elif conn.login or conn.password:
            log.warning(
                "connection %r: only one of Client ID / Client Secret is set; both are needed "
                "for OAuth2 client credentials",
                conn_id,
            )
    return _checked(
        conn_id,
        CatalogSettings(
            uri=uri,
            name=name,
            warehouse=props.pop("warehouse", None),
            properties=props,
            catalog_type=kind,
            state_uri=state_uri,
        ),
    )


def _checked(conn_id: str, settings: CatalogSettings) -> CatalogSettings:
    if settings.kind == REST and not (settings.uri or "").startswith(("http://", "https://")):
        raise ValueError(
            f"connection {conn_id!r}: a REST catalog needs its http(s):// URI "
            f"(extra 'uri', or the host of an '{OFFICIAL_CONN_TYPE}' connection), "
            f"got {settings.uri!r}"
        )
    if settings.kind == SQL and settings.uri is None and settings.warehouse is None:
        raise ValueError(
            f"connection {conn_id!r}: set extra 'warehouse' (SQLite catalog in it) or 'uri' "
            "(SQLAlchemy URL of the catalog database)"
        )
    return settings


def _catalog_type(conn_id: str, value: Any) -> str | None:
    if value in (None, ""):
        return None
    kind = str(value).strip().lower()
    if kind not in (SQL, REST):
        raise ValueError(
            f"connection {conn_id!r}: catalog type {value!r}: icefloe opens '{SQL}' and "
            f"'{REST}' catalogs"
        )
    return kind


def _mask(settings: CatalogSettings) -> None:
    """Have Airflow mask the secrets in task logs, also when combined (`id:secret`)."""
    from airflow.sdk.log import mask_secret  # noqa: PLC0415

    for key, value in settings.properties.items():
        if is_secret_property(key):
            mask_secret(value, key)
    for uri in (settings.uri, settings.state_uri):
        password = _password(uri)
        if password:
            mask_secret(password)


def _password(uri: str | None) -> str | None:
    if not uri or uri.startswith(("http://", "https://")):
        return None
    try:
        return make_url(uri).password
    except Exception:  # not a SQLAlchemy URL: nothing to mask
        return None


def _hide_password(uri: str) -> str:
    try:
        return make_url(uri).render_as_string(hide_password=True)
    except Exception:
        return uri


def _text(value: Any) -> str | None:
    return None if value in (None, "") else str(value)


def _property(value: Any) -> str:
    """A catalog property as Iceberg writes it (`true`, not Python's `True`)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


SPARK_CONNECT_CONN_TYPE = "spark_connect"  # the Spark provider's (its SparkConnectHook)


def spark_connect_url(conn_id: str) -> str:
    """The `sc://host:port/;...` URL of a Spark Connect connection, as the Spark provider's
    SparkConnectHook builds it (login: `user_id`, password: `token`, extra `use_ssl`); a
    connection of another type is refused, naming it. The URL may hold a token: it goes to a
    job in `SPARK_REMOTE`, and into logs only as `job_process.shown_remote` shows it."""
    from airflow.providers.apache.spark.hooks.spark_connect import (  # noqa: PLC0415
        SparkConnectHook,
    )

    conn = BaseHook.get_connection(conn_id)
    if conn.conn_type != SPARK_CONNECT_CONN_TYPE:
        raise ValueError(
            f"connection {conn_id!r} is of type {conn.conn_type!r}, not a Spark Connect "
            f"connection (type {SPARK_CONNECT_CONN_TYPE!r}, host and port of the server)"
        )
    if not conn.host:
        raise ValueError(f"Spark Connect connection {conn_id!r} has no host")
    return SparkConnectHook(conn_id).get_connection_url()
