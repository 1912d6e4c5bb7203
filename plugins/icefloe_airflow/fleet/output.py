"""What `icefloe health` and `icefloe due` print: aligned text for people, or one JSON object
per line (`--json`) for scripts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from icefloe_airflow.fleet.checking import TableCheck
from icefloe_airflow.fleet.ranking import RunPlan
from icefloe_airflow.fleet.survey import Survey, check_inputs


def health_record(check: TableCheck) -> dict[str, Any]:
    """One table's health line; partition detail only for a table with a job due."""
    inputs = check_inputs(check)
    record: dict[str, Any] = {
        "table": check.table,
        "score": check.score,
        "enabled": check.enabled,
        "due": [d.to_dict() for d in check.due],
        "metadata_location": check.metadata_location,
        "cached": check.cached,
        "error": check.error,
        "health": inputs.get("health"),
        "benefit": inputs.get("benefit"),
        "rewrite_bytes": inputs.get("rewrite_bytes"),
        "policy_properties": inputs["policy_properties"],
    }
    if check.due and check.report is not None:
        record["partitions"] = [p.to_dict() for p in check.report.partitions]
    return record


def health_lines(result: Survey, *, as_json: bool) -> Iterator[str]:
    for check in result.checks:
        if as_json:
            yield json.dumps(health_record(check), default=str)
        elif check.error is not None:
            yield f"{check.table}  error: {check.error}"
        else:
            state = "" if check.enabled else "  (maintenance disabled)"
            jobs = ", ".join(d.job for d in check.due) or "nothing due"
            yield f"{check.table}  score {check.score}  {jobs}{state}"


def due_lines(plan: RunPlan, *, as_json: bool, everything: bool = False) -> Iterator[str]:
    for rank, candidate in enumerate(plan.chosen, start=1):
        record = {"table": candidate.table, "rank": rank, **candidate.to_dict()}
        if as_json:
            yield json.dumps(record)
            continue
        yield (
            f"{rank:>4}. {candidate.table}  benefit {candidate.benefit:.1f}  "
            f"~{candidate.rewrite_bytes} bytes"
        )
        for d in candidate.jobs:
            yield f"        {d.job}: {d.reason}"
    if not everything:
        return
    for candidate, why in plan.deferred:
        if as_json:
            yield json.dumps({**candidate.to_dict(), "rank": None, "deferred": why})
        else:
            yield f"   -  {candidate.table}  deferred: {why}"
