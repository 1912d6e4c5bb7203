"""icefloe as an Airflow provider: what `airflow providers list` shows, and the connection form.

Registered by the `apache_airflow_provider` entry point in pyproject.toml, so a `pip install`
of the project is all a deployment needs: Airflow 3's ProvidersManager reads the connection
type and its form fields from here without importing the hook (the declarative `conn-fields`
and `ui-field-behaviour`), and loads the UI plugin and the operators' extra links.

The connection type is `icefloe`, not `iceberg`: Apache Airflow's own Iceberg provider
(`apache-airflow-providers-apache-iceberg`) owns that one. icefloe's hook still reads any
connection by its id, whatever its type.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

CONNECTION_TYPE = "icefloe"


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
                    "warehouse": {
                        "label": "Warehouse",
                        "description": "Where new tables go, and the SQLite catalog's home "
                        "when no URI is given: /data/warehouse, s3://bucket/prefix",
                        "schema": {"type": ["string", "null"]},
                    },
                    "uri": {
                        "label": "Catalog database URI",
                        "description": "SQLAlchemy URL of the catalog database, e.g. "
                        "postgresql+psycopg2://iceberg@db:5432/iceberg (empty: SQLite "
                        "<warehouse>/catalog.db); its password goes in Password",
                        "schema": {"type": ["string", "null"]},
                    },
                    "catalog_name": {
                        "label": "Catalog name",
                        "description": "The catalog's name in that database",
                        "schema": {"type": ["string", "null"], "default": "default"},
                    },
                    "properties": {
                        "label": "Catalog properties",
                        "description": "JSON object of Iceberg catalog and FileIO properties, "
                        'e.g. {"s3.endpoint": "http://minio:9000"}',
                        "schema": {"type": ["string", "null"]},
                    },
                },
                "ui-field-behaviour": {
                    "hidden-fields": ["host", "schema", "login", "port"],
                    "relabeling": {"password": "Catalog database password"},
                    "placeholders": {},
                },
            }
        ],
        "extra-links": ["icefloe_airflow.links.IcebergTableLink"],
        "asset-uris": [{"schemes": ["iceberg"], "handler": None}],
        "plugins": [{"name": "icefloe", "plugin-class": "icefloe_airflow.plugin.IcefloePlugin"}],
    }
