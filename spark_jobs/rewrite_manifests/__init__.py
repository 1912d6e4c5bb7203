"""Manifest rewrite (Iceberg's `rewrite_manifests`): `run` plans (`icecore.actions`), writes
(in the driver's threads, `icecore.actions.manifests_in_threads`, or in Spark tasks,
`in_spark`) and commits (`job`)."""

from spark_jobs.rewrite_manifests.job import run

__all__ = ["run"]
