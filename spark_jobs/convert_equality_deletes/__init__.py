"""Equality deletes replaced by position deletes naming the same rows: `run`."""

from spark_jobs.convert_equality_deletes.job import run

__all__ = ["run"]
