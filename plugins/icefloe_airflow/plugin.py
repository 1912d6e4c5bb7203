"""The Airflow plugin: the icefloe page (a FastAPI app at `/icefloe`) and its entry in the
Airflow UI's navigation (an external view shown in an iframe at `/plugin/icefloe`).

How Airflow finds it, and why not otherwise: Airflow imports every `.py` file under the
plugins folder by its bare file name (`hook.py` would become a module named `hook`, beside
the real `icefloe_airflow.hook`), so scanning our package would import it a second time under
other names, with duplicate classes and side effects. `plugins/.airflowignore` therefore hides
the `icefloe_airflow/` package from the scan, and the one-line `plugins/icefloe_plugin.py`
imports `IcefloePlugin` by its package name, which the scan registers. This works wherever the
plugins folder is mounted (docker-compose, a bare install), with or without `pip install`;
an `airflow.plugins` entry point as well would register the plugin twice.

The FastAPI app is built on first access of `fastapi_apps`, which only the api-server makes:
every other Airflow process (scheduler, dag-processor, each task's worker) loads plugins too,
and should not pay for importing the web app and Airflow's API security layer.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from airflow.plugins_manager import AirflowPlugin

from icefloe_airflow import run_notes

URL_PREFIX = "/icefloe"


@cache
def _fastapi_app() -> Any:
    from icefloe_airflow.ui.app import create_app  # noqa: PLC0415 (api-server only, see above)

    return create_app()


class IcefloePlugin(AirflowPlugin):
    """Registers the icefloe page with the api-server and the Airflow UI."""

    name = "icefloe"
    external_views = [  # noqa: RUF012 (AirflowPlugin declares these as mutable class lists)
        {
            "name": "Iceberg",
            # Relative to the api-server's base URL (the UI's <base href>), so the link
            # works under a base path or behind a proxy.
            "href": URL_PREFIX.lstrip("/") + "/",
            "destination": "nav",
            "nav_top_level": True,
            "url_route": "icefloe",
        }
    ]

    listeners = [run_notes]  # noqa: RUF012 (as above)

    @property
    def fastapi_apps(self) -> list[dict[str, Any]]:  # type: ignore[override]
        return [{"app": _fastapi_app(), "url_prefix": URL_PREFIX, "name": "icefloe"}]
