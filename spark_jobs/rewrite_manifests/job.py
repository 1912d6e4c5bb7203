"""Rewriting a table's manifests (Iceberg's `rewrite_manifests`): plan, write, commit.

    result = run(spark, catalog, RewriteManifestsOptions(table="db.events"))

Plan (driver, `icecore.actions.rewrite_manifests`): from the current snapshot's manifest list,
the manifests to replace, by partition spec and content, and how many manifests each group
becomes. Write: in the driver's threads when the replaced manifests add up to at most
`--driver-max-bytes` (`icecore.actions.manifests_in_threads`; no Spark session is started:
`spark_jobs.common.session`), else in Spark tasks (`in_spark`). Commit: one
`RewriteManifests` (`replace`) that requires every replaced manifest to still be in the
branch head; when a concurrent commit rewrote one (a compaction, a merging append), the
rewrite is planned and written again on the new head, up to `--max-attempts` times
(`icecore.actions.committing.with_replanning`). Commits that only added manifests meanwhile
are kept as they are. The manifests of an attempt that does not commit are deleted (not when
the catalog cannot say whether the commit happened: they may be the table's).
"""

from __future__ import annotations

import logging
import uuid

from icecore.actions.committing import Attempted, BeforeCommit
from icecore.actions.manifest_output import ManifestOutput
from icecore.actions.manifests_in_threads import rewrite_in_threads
from icecore.actions.rewrite_manifests import ManifestRewritePlan, plan_manifest_rewrite
from icecore.catalog import Catalog
from icecore.errors import CommitStateUnknownError, ValidationError
from icecore.jobs.attempts import run_attempts
from icecore.jobs.errors import JobError
from icecore.jobs.jobs import RewriteManifestsOptions
from icecore.jobs.progress import size
from icecore.jobs.results import RewriteManifestsResult
from icecore.location_provider import metadata_directory
from icecore.scan import snapshot_manifests
from icecore.spec.manifest_list import ManifestContent, ManifestFile
from icecore.spec.snapshots import ICEFLOE_JOB
from icecore.table import Table
from spark_jobs.common.session import SessionSource, configure, session_of
from spark_jobs.rewrite_manifests.in_spark import rewrite_in_spark

JOB = "rewrite_manifests"
LOG = logging.getLogger(f"icefloe.{JOB}")


def run(
    spark: SessionSource,
    catalog: Catalog,
    options: RewriteManifestsOptions,
    *,
    before_commit: BeforeCommit | None = None,
) -> RewriteManifestsResult:
    """Rewrite the table's manifests; the result counters. `before_commit(table)` runs after
    the manifests are written, before the commit (tests commit concurrently there)."""
    return run_attempts(
        JOB,
        catalog,
        options,
        lambda table, _: Attempted(rewrite_once(spark, table, options, before_commit)),
    )


def rewrite_once(
    spark: SessionSource,
    table: Table,
    options: RewriteManifestsOptions,
    before_commit: BeforeCommit | None = None,
) -> RewriteManifestsResult:
    """One attempt: plan on the current snapshot, write, commit (CommitConflictError when a
    replaced manifest is gone meanwhile)."""
    snapshot = table.metadata.current_snapshot()
    if snapshot is None:
        return RewriteManifestsResult(status="empty-table")
    manifests = snapshot_manifests(table.io, snapshot)
    try:
        plan = plan_manifest_rewrite(
            table.io,
            table.metadata,
            snapshot.snapshot_id,
            manifests,
            spec_id=options.spec_id,
            sort_by=options.sort_by or None,
            rewrite_all=options.rewrite_all,
        )
    except ValidationError as exc:
        raise JobError(f"{table.name}: {exc}") from None
    if not plan.groups:
        LOG.info("%s: %d manifests, none to rewrite", table.name, len(manifests))
        return RewriteManifestsResult(
            status="nothing-to-rewrite",
            starting_snapshot_id=snapshot.snapshot_id,
            **_counts(manifests, manifests),
        )
    rewrite = table.rewrite_manifests()
    written: list[ManifestFile] = []
    try:
        rewritten_in = _write(
            spark,
            table,
            plan,
            snapshot_id=rewrite.snapshot_id,
            driver_max_bytes=options.driver_max_bytes,
            written=written,
        )
        if before_commit is not None:
            before_commit(table)
        for m in plan.rewritten:
            rewrite.delete_manifest(m)
        for m in written:
            rewrite.add_manifest(m)
        rewrite.snapshot_property(ICEFLOE_JOB, JOB)
        committed = rewrite.commit()
    except CommitStateUnknownError:
        raise  # the new manifests may be the table's now
    except BaseException:
        failed = table.io.delete_many(m.manifest_path for m in written)
        for path, why in failed.items():
            LOG.warning("%s: could not delete uncommitted manifest %s: %s", table.name, path, why)
        raise
    after = committed.snapshot_by_id(rewrite.snapshot_id)
    listed = snapshot_manifests(table.io, after)
    LOG.info(
        "%s: %d manifests (%s) rewritten as %d; the snapshot lists %d manifests, was %d",
        table.name,
        len(plan.rewritten),
        size(sum(m.manifest_length for m in plan.rewritten)),
        len(written),
        len(listed),
        len(manifests),
    )
    return RewriteManifestsResult(
        status="committed",
        snapshot_id=after.snapshot_id,
        sequence_number=after.sequence_number,
        starting_snapshot_id=snapshot.snapshot_id,
        rewritten_in=rewritten_in,
        **_counts(manifests, listed),
        rewritten_manifests=len(plan.rewritten),
        added_manifests=len(written),
        kept_manifests=len(plan.kept),
        entries=sum(g.live_files for g in plan.groups),
        rewritten_bytes=sum(m.manifest_length for m in plan.rewritten),
        added_bytes=sum(m.manifest_length for m in written),
    )


def _write(
    spark: SessionSource,
    table: Table,
    plan: ManifestRewritePlan,
    *,
    snapshot_id: int,
    driver_max_bytes: int,
    written: list[ManifestFile],
) -> str:
    """Write the plan's manifests into `written`; where they were written."""
    metadata = table.metadata
    run = str(uuid.uuid4())
    directory = metadata_directory(metadata.location, metadata.properties)
    groups = [(g, ManifestOutput(g.form, directory, run, snapshot_id)) for g in plan.groups]
    replaced = sum(g.bytes for g in plan.groups)
    LOG.info(
        "plan: %d of %d manifests (%s, %d entries) of %s into %d",
        len(plan.rewritten),
        len(plan.rewritten) + len(plan.kept),
        size(replaced),
        sum(g.live_files for g in plan.groups),
        table.name,
        plan.outputs,
    )
    if replaced <= driver_max_bytes:
        for group, output in groups:
            if group.outputs:
                rewrite_in_threads(table.io, group, output, written)
        return "driver"
    session = configure(session_of(spark))
    rewrite_in_spark(session, table.io.properties, groups, written)
    return "spark-tasks"


def _counts(before: list[ManifestFile], after: list[ManifestFile]) -> dict[str, int]:
    def count(manifests: list[ManifestFile], content: ManifestContent) -> int:
        return sum(1 for m in manifests if m.content == content)

    return {
        "data_manifests_before": count(before, ManifestContent.DATA),
        "delete_manifests_before": count(before, ManifestContent.DELETES),
        "data_manifests_after": count(after, ManifestContent.DATA),
        "delete_manifests_after": count(after, ManifestContent.DELETES),
    }
