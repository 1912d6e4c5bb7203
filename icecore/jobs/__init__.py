"""What every job takes, declared once: the jobs' options and the grammar of their values.

`jobs` holds each job's options class and the registry `JOBS`; `options` the declaration
model; `results` each job's result class and the registry `RESULTS`; `grammar` sizes,
durations, instants and ratios; `argv` the command line derived from a declaration; `docs`
the README's option tables.

Engine-neutral, beside the rest of the jobs' Spark-free part (`errors`, `where`, `progress`,
`attempts`): the Airflow side (`icefloe_airflow`) builds its forms and checks its operators'
options from these same declarations on workers without Spark, and the Spark jobs
(`spark_jobs`) parse their command lines and report their results with them.
"""

from icecore.jobs.jobs import JOBS
from icecore.jobs.options import JobOptions, JobSpec, Option, OptionError

__all__ = ["JOBS", "JobOptions", "JobSpec", "Option", "OptionError"]
