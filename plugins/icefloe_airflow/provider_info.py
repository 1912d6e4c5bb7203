"""icefloe as an Airflow provider: what `airflow providers list` shows, and the connection form.

Registered by the `apache_airflow_provider` entry point in pyproject.toml, so a `pip install`
of the project is all a deployment needs: Airflow 3's ProvidersManager reads the connection
type and its form fields from here without importing the hook (the declarative `conn-fields`
and `ui-field-behaviour`), and loads the UI plugin and the operators' extra links.

The connection type is `icefloe`, not `iceberg`: Apache Airflow's own Iceberg provider
(`apache-airflow-providers-apache-iceberg`) owns that one. icefloe's hook still reads any
connection by its id, an `iceberg` one as that provider does (see `icefloe_airflow.hook`).

The config section `[icefloe]` declares `state_uri`, where the state store lives (see
`icefloe_airflow.state`), `tables_config`, the tables.yaml to read, and
`watch_poll_interval`, how often `schedule: asset` looks at each catalog; declared here,
Airflow lists them (`airflow config list`), knows their defaults and treats the state URI as
sensitive (`AIRFLOW__ICEFLOE__STATE_URI_SECRET`, `_CMD`).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

CONNECTION_TYPE = "icefloe"
# The state store's setting (`icefloe_airflow.state_db` reads it); here, so that loading the
# provider info, which every Airflow process does, imports nothing more.
CONFIG_SECTION = "icefloe"
STATE_URI_OPTION = "state_uri"
TABLES_CONFIG_OPTION = "tables_config"
SPARK_CONNECT_OPTION = "spark_connect_conn_id"
WATCH_POLL_OPTION = "watch_poll_interval"
DEFAULT_WATCH_POLL = "20s"
DEFAULT_STATE_FILE = "icefloe_state.db"


def _version() -> str:
    try:
        return version("icefloe")
    except PackageNotFoundError:  # a checkout on sys.path without an install
        return "0.0.0"


def get_provider_info() -> dict[str, Any]:
    modules = ["icefloe_airflow.operators.jobs", "icefloe_airflow.operators.health"]
    return {
        "package-name": "icefloe",
        "name": "icefloe",
        "description": "Maintenance of Apache Iceberg tables: ingestion and compaction jobs on "
        "Spark, a self-optimizing DAG per table, and the Iceberg page in the Airflow UI.",
        "versions": [_version()],
        "integrations": [
            {
                "integration-name": "icefloe",
                "external-doc-url": "https://iceberg.apache.org/spec/",
                "tags": ["apache", "software"],
            }
        ],
        "hooks": [{"integration-name": "icefloe", "python-modules": ["icefloe_airflow.hook"]}],
        "operators": [{"integration-name": "icefloe", "python-modules": modules}],
        "connection-types": [
            {
                "connection-type": CONNECTION_TYPE,
                "hook-class-name": "icefloe_airflow.hook.IcebergHook",
                "hook-name": "Iceberg catalog (icefloe)",
                "conn-fields": {
                    "catalog_type": {
                        "label": "Catalog type",
                        "description": "sql (Iceberg's JDBC catalog in a database) or rest "
                        "(an Iceberg REST catalog: Polaris, Gravitino, Nessie, Lakekeeper, "
                        "Unity, Glue's REST endpoint ...); empty: rest for an http(s) URI",
                        "schema": {"type": ["string", "null"], "enum": [None, "sql", "rest"]},
                    },
                    "uri": {
                        "label": "Catalog URI",
                        "description": "sql: SQLAlchemy URL of the catalog database, e.g. "
                        "postgresql+psycopg2://iceberg@db:5432/iceberg (empty: SQLite "
                        "<warehouse>/catalog.db), its password in Password; rest: the "
                        "catalog's https:// endpoint",
                        "schema": {"type": ["string", "null"]},
                    },
                    "warehouse": {
                        "label": "Warehouse",
                        "description": "sql: where new tables go, and the SQLite catalog's "
                        "home when no URI is given (/data/warehouse, s3://bucket/prefix); "
                        "rest: the warehouse the server should serve, if it asks for one",
                        "schema": {"type": ["string", "null"]},
                    },
                    "catalog_name": {
                        "label": "Catalog name",
                        "description": "The catalog's name: its rows in a SQL database, its "
                        "tables' Airflow assets and its runs in icefloe's state store",
                        "schema": {"type": ["string", "null"], "default": "default"},
                    },
                    "properties": {
                        "label": "Catalog properties",
                        "description": "JSON object of Iceberg catalog and FileIO properties, "
                        'e.g. {"s3.endpoint": "http://minio:9000"} or for rest {"scope": '
                        '"PRINCIPAL_ROLE:ALL", "oauth2-server-uri": "https://idp/token"}',
                        "schema": {"type": ["string", "null"]},
                    },
                    "token": {
                        "label": "REST bearer token",
                        "description": "rest: a static token sent as Authorization: Bearer, "
                        "instead of the client id and secret",
                        "schema": {"type": ["string", "null"], "format": "password"},
                    },
                },
                "ui-field-behaviour": {
                    "hidden-fields": ["host", "schema", "port"],
                    "relabeling": {
                        "login": "REST client ID",
                        "password": "Database password / REST client secret",
                    },
                    "placeholders": {
                        "login": "rest: OAuth2 client id (empty for sql)",
                        "password": "sql: the database password; rest: the OAuth2 client secret",
                    },
                },
            }
        ],
        "config": {
            CONFIG_SECTION: {
                "description": "icefloe's own settings.",
                "options": {
                    STATE_URI_OPTION: {
                        "description": "SQLAlchemy URL of icefloe's state store: the tables' "
                        "maintenance locks and run history, shared by every worker, whatever "
                        "the catalogs' types. Empty: the SQLite file "
                        f"<AIRFLOW_HOME>/{DEFAULT_STATE_FILE} (one machine only). A "
                        "connection's extra state_uri overrides it for that connection.",
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "postgresql+psycopg2://icefloe@db:5432/icefloe",
                        "default": "",
                        "sensitive": True,
                    },
                    TABLES_CONFIG_OPTION: {
                        "description": "The tables config (tables.yaml: the self-optimizing "
                        "DAGs' tables, the fleets, the policy layers). $ICEFLOE_TABLES_CONFIG "
                        "wins over it; empty: tables.yaml in the dags folder.",
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "/opt/airflow/config/tables.yaml",
                        "default": "",
                    },
                    SPARK_CONNECT_OPTION: {
                        "description": "A Spark Connect connection (type spark_connect) every "
                        "icefloe job operator runs its job on unless given its own "
                        "spark_connect_conn_id (an empty one: spark-submit): the job DAGs' "
                        "hand-triggered runs, the self-optimizing DAGs, the fleets, your DAGs. "
                        "Empty: spark-submit on the operator's conn_id.",
                        "version_added": "0.2.0",
                        "type": "string",
                        "example": "spark_connect_default",
                        "default": "",
                    },
                    WATCH_POLL_OPTION: {
                        "description": "How often the triggerer asks each catalog which tables "
                        "changed, for the DAGs and fleets with schedule: asset (one query per "
                        "poll on a SQL catalog; a list and a conditional load per table on a "
                        "REST one). A duration such as 20s or 1m; read when DAGs are parsed.",
                        "version_added": "0.3.0",
                        "type": "string",
                        "example": "30s",
                        "default": DEFAULT_WATCH_POLL,
                    },
                },
            }
        },
        "extra-links": ["icefloe_airflow.links.IcebergTableLink"],
        "asset-uris": [{"schemes": ["iceberg"], "handler": None}],
        "plugins": [{"name": "icefloe", "plugin-class": "icefloe_airflow.plugin.IcefloePlugin"}],
    }
