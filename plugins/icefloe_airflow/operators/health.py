"""Read a table's health and decide, with its policy, which maintenance jobs are due."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from airflow.sdk import BaseOperator, Context
from airflow.sdk.exceptions import AirflowException

from icefloe_airflow.hook import IcebergHook
from icefloe_airflow.links import IcebergTableLink
from icefloe_airflow.policy import (
    MaintenancePolicy,
    health_score,
    health_summary,
    job_decisions,
    measure_health,
)


class TableHealthOperator(BaseOperator):
    """Health report, score and due jobs of `table`; cheap (metadata only, no Spark).

    Returns (XCom `return_value`) `{"table", "score", "health": summary, "due": [{"job",
    "reason"}, ...], "skipped": [{"job", "reason"}, ...], "policy": the policy used}`; `due`
    and `skipped` are in `policy.JOB_ORDER`, each job in one of them, with its reason.

    :param table: `namespace.name` (templated).
    :param policy: `MaintenancePolicy` keys overriding its defaults (templated), e.g.
        `{"minor_file_count": 8, "max_snapshot_age": "2d"}`.
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
            policy = MaintenancePolicy.from_mapping(values)
        except ValueError as exc:
            raise AirflowException(f"policy for {self.table}: {exc}") from exc
        hook = IcebergHook(self.iceberg_conn_id)
        try:
            report = measure_health(hook.load_table(self.table), policy)
            successes = hook.state_store().last_runs(self.table, state="success")
        finally:
            hook.close()
        last = {job: run.finished_at for job, run in successes.items()}
        decisions = job_decisions(report, policy, last, datetime.now(UTC))
        score = health_score(report, policy)
        for item in decisions:
            verdict = "due" if item.due else "not due"
            self.log.info("%s: %s is %s: %s", self.table, item.job, verdict, item.reason)
        due = [d for d in decisions if d.due]
        self.log.info("%s: health score %d, %d job(s) due", self.table, score, len(due))
        return {
            "table": self.table,
            "score": score,
            "health": health_summary(report),
            "due": [{"job": d.job, "reason": d.reason} for d in due],
            "skipped": [{"job": d.job, "reason": d.reason} for d in decisions if not d.due],
            "policy": policy.to_dict(),
        }
