"""A link from each icefloe task to the table's page in the Iceberg UI.

Airflow 3 resolves an operator's extra links when the task finishes, in the worker, and keeps
them in XCom; the operator's `table` is then the rendered (and checked) table, whether it came
from a template or from the trigger form. The link is relative to the api-server's
`[api] base_url` (the plugin serves the page at `/icefloe`), so it works behind a proxy or
under a base path as Airflow's own links do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote

from airflow.sdk import BaseOperatorLink
from airflow.sdk.configuration import conf

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator
    from airflow.sdk.types import TaskInstanceKey

PAGE_PREFIX = "icefloe"


def table_page_url(table: str) -> str:
    base = conf.get("api", "base_url", fallback="/") or "/"
    return f"{base.rstrip('/')}/{PAGE_PREFIX}/tables/{quote(table, safe='.')}"


class IcebergTableLink(BaseOperatorLink):
    """ "Iceberg table": the table's health, jobs and runs on the Iceberg page."""

    name = "Iceberg table"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        table = getattr(operator, "table", None)
        if not isinstance(table, str) or not table or "{{" in table:
            return ""
        return table_page_url(table)
