"""The Airflow plugin: the icefloe page (a FastAPI app at `/icefloe`), its entry in the
Airflow UI's navigation (an external view shown in an iframe at `/plugin/icefloe`), and the
listener that notes each hand-triggered run with its table (`icefloe_airflow.run_notes`).

How Airflow finds it: the `airflow.plugins` entry point of the installed package
(pyproject.toml), in every Airflow process, whatever the plugins folder holds. The provider
info declares it too (`airflow providers plugins` lists it); Airflow loads providers' plugins
only with lazy provider discovery off, and then skips this second copy by name. When the
checkout's plugins/ is the plugins folder (docker-compose, the tests), `.airflowignore` hides
the package from the folder scan, which would import its modules again under their bare file
names.

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
