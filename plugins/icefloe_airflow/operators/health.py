"""Read a table's health and decide, with its policy, which maintenance jobs are due."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from airflow.sdk import BaseOperator, Context
from airflow.sdk.exceptions import AirflowException

from icefloe_airflow.health_model import health_summary
from icefloe_airflow.hook import IcebergHook
from icefloe_airflow.links import IcebergTableLink
from icefloe_airflow.policy import MaintenancePolicy
from icefloe_airflow.table_health import check_table, table_policy_of


class TableHealthOperator(BaseOperator):
    """Health report, score and due jobs of `table`; cheap (metadata only, no Spark). The
    check is recorded in the state store's health history (`health_history`), which the
    Iceberg page charts.

    Returns (XCom `return_value`) `{"table", "score", "health": summary, "due": [{"job",
    "reason"}, ...], "skipped": [{"job", "reason"}, ...], "penalties": [{"points", "text",
    ...}, ...], "policy": the policy used}`; `due` and `skipped` are in `policy.JOB_ORDER`,
    each job in one of them, with its reason; `penalties` say what each point lost is for.

    The policy is the one the Iceberg page, `icefloe health` and the fleet use for the table
    (`table_health.table_policy_of`): the tables config's layers, then `policy`, then the
    table's own `icefloe.*` properties; so the task, the page and the command agree.

    :param table: `namespace.name` (templated).
    :param policy: `MaintenancePolicy` keys over the tables config's for this table
        (templated), e.g. `{"minor_file_count": 8, "max_snapshot_age": "2d"}`.
    :param iceberg_conn_id: the Iceberg connection.
    """

    template_fields = ("table", "policy")
    operator_extra_links = (IcebergTableLink(),)
    ui_color = "#e3f4e1"

    def __init__(
        self,
        *,
        table: str,
        policy: Mapping[str, Any] | str | None = None,
        iceberg_conn_id: str = IcebergHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table = table
        self.policy = policy
        self.iceberg_conn_id = iceberg_conn_id

    def execute(self, context: Context) -> dict[str, Any]:
        values = self.policy
        try:
            if isinstance(values, str):  # a rendered template of a mapping, e.g. a DAG Param
                values = json.loads(values) if values.strip() else None
            if values is not None and not isinstance(values, Mapping):
                raise ValueError(f"expected a mapping of policy keys, got {values!r}")
            MaintenancePolicy.from_mapping(values)  # its own mistakes, named before any read
        except ValueError as exc:
            raise AirflowException(f"policy for {self.table}: {exc}") from exc
        hook = IcebergHook(self.iceberg_conn_id)
        try:
            table = hook.load_table(self.table)
            try:
                policy = table_policy_of(self.table, table.metadata.properties, overrides=values)
            except ValueError as exc:  # a table property that does not parse
                raise AirflowException(f"policy for {self.table}: {exc}") from exc
            store = hook.state_store()
            report, assessment = check_table(table, self.table, store, policy, source="health task")
        finally:
            hook.close()
        for item in assessment.decisions:
            verdict = "due" if item.due else "not due"
            self.log.info("%s: %s is %s: %s", self.table, item.job, verdict, item.reason)
        self.log.info(
            "%s: health score %d, %d job(s) due", self.table, assessment.score, len(assessment.due)
        )
        for line in assessment.explanation():
            self.log.info("%s: %s", self.table, line)
        return {
            "table": self.table,
            "health": health_summary(report),
            **assessment.to_dict(),
            "policy": policy.to_dict(),
        }
