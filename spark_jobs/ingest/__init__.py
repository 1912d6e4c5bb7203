"""Ingest a batch into an Iceberg table in one atomic commit (append, overwrite, upsert,
delete or CDC); `run` is the job, its parts are the modules beside it."""

from spark_jobs.ingest.job import run

__all__ = ["run"]
