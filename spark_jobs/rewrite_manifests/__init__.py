"""Manifest rewrite (Iceberg's `rewrite_manifests`): `run` plans (`icecore.actions`), writes
(`in_driver` or `in_spark`) and commits (`job`)."""

from spark_jobs.rewrite_manifests.job import run

__all__ = ["run"]
