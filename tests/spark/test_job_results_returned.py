"""Every job run in process returns its declared result class (`icecore.jobs.results`),
whose JSON reads back as the same result; one small table goes through all of them."""

from __future__ import annotations

import importlib
import json
from typing import Any

from pyspark.sql import SparkSession

from icecore.catalog import Catalog
from icecore.jobs.jobs import (
    ConvertEqualityDeletesOptions,
    ExpireSnapshotsOptions,
    IngestOptions,
    RemoveOrphanFilesOptions,
    RewriteDataFilesOptions,
    RewriteManifestsOptions,
    RewritePositionDeletesOptions,
)
from icecore.jobs.results import RESULTS, JobResult
from tests.support.batches import SOURCE, Model, batch, feed

NAME = "db.results"


def _run(spark: SparkSession, catalog: Catalog, job: str, options: Any, **kw: Any) -> Any:
    result = importlib.import_module(f"spark_jobs.{job}").run(spark, catalog, options, **kw)
    assert type(result) is RESULTS[job], job
    printed = json.loads(result.to_json())
    assert RESULTS[job].from_dict(printed) == result, job
    return result


def test_every_job_returns_its_result_class(spark: SparkSession, catalog: Catalog) -> None:
    model = Model()
    for first in (0, 20):
        feed(spark, catalog, NAME, mode="append", rows=batch(first, 20), model=model)
    upserts = spark.createDataFrame(batch(5, 6, "U"), SOURCE).drop("op")
    ingested = _run(
        spark, catalog, "ingest", IngestOptions(table=NAME, mode="upsert", key=["id"]),
        source=upserts,
    )  # fmt: skip
    assert (ingested.status, ingested.updates, ingested.inserts) == ("committed", 6, 0)
    assert ingested.equality_delete_files and "batch_id" not in ingested.to_dict()

    converted = _run(
        spark, catalog, "convert_equality_deletes", ConvertEqualityDeletesOptions(NAME)
    )
    assert converted.removed_equality_delete_files == ingested.equality_delete_files
    assert converted.figures().removed_files == converted.removed_equality_delete_files
    assert converted.attempts == 1 and converted.table == NAME

    minor = _run(
        spark, catalog, "rewrite_position_deletes",
        RewritePositionDeletesOptions(NAME, rewrite_all=True),
    )  # fmt: skip
    assert minor.status == "committed" and len(minor.commits) == 1
    assert minor.figures().rewritten_bytes == minor.rewritten_bytes > 0

    major = _run(
        spark, catalog, "rewrite_data_files", RewriteDataFilesOptions(NAME, rewrite_all=True)
    )
    assert major.rewritten_data_files > major.added_data_files > 0 and major.attempts == 1
    assert major.figures().removed_files == major.rewritten_data_files
    assert major.commits == [catalog.load_table(NAME).metadata.current_snapshot_id]

    manifests = _run(
        spark, catalog, "rewrite_manifests", RewriteManifestsOptions(NAME, rewrite_all=True)
    )
    assert manifests.status == "committed" and manifests.rewritten_in == "driver"

    expired = _run(
        spark, catalog, "expire_snapshots",
        ExpireSnapshotsOptions(NAME, retain_last=1, older_than="0s", force=True),
    )  # fmt: skip
    assert expired.committed and expired.expired_snapshots_count >= 5
    assert expired.figures().removed_files == sum(
        v for k, v in expired.to_dict().items() if k.startswith("deleted_") and k.endswith("_count")
    )

    orphans = _run(
        spark, catalog, "remove_orphan_files",
        RemoveOrphanFilesOptions(NAME, older_than="0s", dry_run=True),
    )  # fmt: skip
    assert orphans.dry_run and orphans.deleted_files_count == 0
    assert isinstance(orphans, JobResult) and orphans.listed_files_count > 0
