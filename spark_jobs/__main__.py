"""`python -m spark_jobs <job> [options]`: a job run locally, or as a Spark Connect client with
`SPARK_REMOTE` set (see `spark_jobs.common.cli`)."""

from spark_jobs.common.cli import exit_process, main

if __name__ == "__main__":  # imported as a module (a walk over the package), it runs nothing
    exit_process(main())
