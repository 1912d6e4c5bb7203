"""One hand-triggered DAG per job, each with the job's form: `icefloe_<job>`.

The DAG, its form (`icefloe_airflow.forms`) and its task all come from the job's option
declaration, so a new option shows up on the form, is checked by the operator and reaches the
job's command line without a line here. The DAG's documentation is the job's option table.

    from icefloe_airflow.job_dags import job_dags
    globals().update({dag.dag_id: dag for dag in job_dags()})   # what dags/icefloe_jobs.py does
"""

from __future__ import annotations

from airflow.sdk import DAG

from icecore.jobs.docs import option_table
from icecore.jobs.jobs import JOBS
from icefloe_airflow.forms import job_params
from icefloe_airflow.operators import OPERATORS, IcefloeJobOperator

# Ingest batches of different tables may run side by side; maintenance waits on the table's
# lock anyway, so a few concurrent runs are enough.
MAX_ACTIVE_RUNS = {"ingest": 8}
_INTRO = (
    "Trigger it with the form (or the REST API's `conf`): empty fields keep the job's own "
    "defaults; every value is checked before Spark starts, and a table that does not exist is "
    "refused at once."
)


def job_dag_id(job: str) -> str:
    return f"icefloe_{job}"


def job_dag(job: str) -> DAG:
    """The hand-triggered DAG of `job` (a name in `icecore.jobs.jobs.JOBS`)."""
    spec = JOBS[job]
    kind = "maintenance" if spec.maintenance else "ingest"
    with DAG(
        dag_id=job_dag_id(job),
        description=spec.summary,
        schedule=None,
        max_active_runs=MAX_ACTIVE_RUNS.get(job, 4),
        catchup=False,
        tags=["icefloe", "iceberg", kind],
        doc_md=f"{_INTRO}\n\n{option_table(spec)}",
        params=job_params(spec),
    ) as dag:
        OPERATORS.get(job, IcefloeJobOperator)(job=job, task_id=job, from_params=True)
    return dag


def job_dags() -> list[DAG]:
    return [job_dag(job) for job in JOBS]
