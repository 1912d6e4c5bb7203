"""Hand-triggered runs you can tell apart: each run of a job DAG is noted with its table.

Run ids of hand-triggered runs are `manual__<timestamp>`, and the Airflow UI's run list folds
the conf away, so nothing said which table a run touched. A DAG-run listener (Airflow's
supported hook into run state changes, called in the scheduler) sets the run's note to
`<table> · <job>` when a run of an icefloe job DAG starts, unless the run has a note already
(the Iceberg page's "run now" sets its own, and a person may type one on the trigger form).
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.listeners import hookimpl

log = logging.getLogger(__name__)

JOB_DAG_PREFIX = "icefloe_"
_NOT_JOB_DAGS = ("icefloe_optimize__",)  # per-table DAGs name their table already


def run_note(dag_id: str, conf: Any) -> str | None:
    """The note for a run of `dag_id` with `conf`, or None when it is not a job DAG's run
    naming a table."""
    if not dag_id.startswith(JOB_DAG_PREFIX) or dag_id.startswith(_NOT_JOB_DAGS):
        return None
    table = conf.get("table") if isinstance(conf, dict) else None
    if not isinstance(table, str) or not table.strip():
        return None
    return f"{table.strip()} · {dag_id.removeprefix(JOB_DAG_PREFIX)}"


@hookimpl
def on_dag_run_running(dag_run: Any, msg: str) -> None:
    note = run_note(dag_run.dag_id, dag_run.conf)
    if note is None or dag_run.note:
        return
    try:
        dag_run.note = note
    except Exception:  # a note is a convenience: never fail the scheduler for it
        log.warning("could not note run %s of %s", dag_run.run_id, dag_run.dag_id, exc_info=True)
