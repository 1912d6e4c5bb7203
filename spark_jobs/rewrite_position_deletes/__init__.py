"""Minor compaction of delete files (Iceberg's `rewrite_position_delete_files`): `run`."""

from spark_jobs.rewrite_position_deletes.job import run

__all__ = ["run"]
