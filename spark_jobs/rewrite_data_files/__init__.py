"""Major compaction (Iceberg's `rewrite_data_files`): `run` plans (`plan`), writes (`write`)
and commits (`job`)."""

from spark_jobs.rewrite_data_files.job import run

__all__ = ["run"]
