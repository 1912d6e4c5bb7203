"""What every job takes, declared once: the jobs' options and the grammar of their values.

`jobs` holds each job's options class and the registry `JOBS`; `options` the declaration
model; `results` each job's result class and the registry `RESULTS`; `grammar` sizes,
durations, instants and ratios; `argv` the command line derived from a declaration; `docs`
the README's option tables.

Standard library only, and importing nothing else of spark_jobs: the Airflow side
(`icefloe_airflow`) builds its forms and checks its operators' options from these same
declarations, on workers that have neither Spark nor the jobs' dependencies.
"""

from spark_jobs.specs.jobs import JOBS
from spark_jobs.specs.options import JobOptions, JobSpec, Option, OptionError

__all__ = ["JOBS", "JobOptions", "JobSpec", "Option", "OptionError"]
