"""Expire old snapshots and delete the files only they reached (Iceberg's
`expire_snapshots`).

    spark-submit --py-files dist/icefloe.zip spark_jobs/main.py expire_snapshots \\
        --warehouse /data/wh --table db.events --older-than 7d --retain-last 10

Options: `icecore.jobs.jobs.ExpireSnapshotsOptions` (the README's table). The floor:
nothing younger than `--min-age` (1h) is expired unless `--force`; the current snapshot (the
head of `main`), and every other branch head and tag, are never expired; refs past their
`max-ref-age-ms` are removed first, as in Iceberg. From `--executor-delete-threshold` files on
(1000), the deletions run as a Spark job on the executors.

Only files the table's own expired snapshots referenced, and no retained snapshot does, are
deleted; of those, a file lying in another table's directories (a table registered from
another engine's metadata may share files, e.g. one Spark's `snapshot` procedure made) is kept
and reported in `kept_files_of_other_tables` (the catalog is listed once, before the commit;
`--protected-location LOC` adds locations of catalogs the job cannot list). A table with
`gc.enabled=false` is refused, as in Iceberg.

Which snapshots go, and which files that leaves unreachable, is icecore's
(`icecore.updates.expire`): the commit changes metadata only; the files go after it, into the
table's trash (`spark_jobs.files.trashing`, `icecore.trash`), whose record keeps each expired
snapshot as the metadata held it (with its statistics entries), so `icefloe restore --snapshot`
can put it back until `icefloe.trash.retention` (3d) has passed; with `0s` they are deleted
at once. Every run also purges what is past the window, expiring anything or not. A job
killed while moving leaves a readable table, and each file in place, in the trash, or both.
Old metadata files are deleted by the commit itself when the table sets
`write.metadata.delete-after-commit.enabled` (those fallen off `write.metadata.previous-
versions-max`), and counted here.

Result counters as Iceberg's procedure names them (`deleted_data_files_count`,
`deleted_position_delete_files_count`, `deleted_equality_delete_files_count`,
`deleted_manifest_files_count`, `deleted_manifest_lists_count`,
`deleted_statistics_files_count`), plus `deleted_metadata_files_count`,
`expired_snapshots_count`, `expired_snapshot_ids`, `removed_refs`, `failed_deletes_count`
(and up to 20 `failed_deletes` with their cause) and `dry_run`. In a dry run the
`deleted_*` counters are 0 and `unreachable_*_count` say what a real run would delete. A
file is "deleted" once it has left the table's storage, into the trash or for good; the trash
counters (`trashed_files_count`, `purged_files_count`, ...: `Removal.report`) say which.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from icecore.actions.other_tables import OtherTables, ownership
from icecore.catalog import Catalog
from icecore.catalog.directories import TableDirectories, catalog_directories
from icecore.io import FileIO
from icecore.jobs.errors import JobError
from icecore.jobs.grammar import format_duration_ms, format_ms, parse_instant_ms
from icecore.jobs.jobs import ExpireSnapshotsOptions
from icecore.jobs.results import ExpireSnapshotsResult
from icecore.spec.metadata import TableMetadata
from icecore.spec.metadata_builder import PARTITION_STATISTICS, STATISTICS
from icecore.spec.metadata_builder import now_ms as current_time_ms
from icecore.spec.properties import METADATA_DELETE_AFTER_COMMIT_ENABLED
from icecore.table import Table
from icecore.trash import records as trashed
from icecore.updates import ExpirationResult, ExpireSnapshots, UnreachableFiles
from spark_jobs.common.session import SessionSource
from spark_jobs.files.trashing import Removal, retention_of, take_out

LOG = logging.getLogger("icefloe.expire_snapshots")
_MAX_REPORTED_FAILURES = 20

# Result key -> UnreachableFiles attribute -> what the trash's record calls the file.
KINDS = (
    ("data_files", "data_files", trashed.DATA),
    ("position_delete_files", "position_delete_files", trashed.POSITION_DELETES),
    ("equality_delete_files", "equality_delete_files", trashed.EQUALITY_DELETES),
    ("manifest_files", "manifests", trashed.MANIFEST),
    ("manifest_lists", "manifest_lists", trashed.MANIFEST_LIST),
    ("statistics_files", "statistics_files", trashed.STATISTICS),
)


def _check_floor(
    name: str, metadata: TableMetadata, plan: ExpirationResult, floor_ms: int | None
) -> None:
    """Refuse to expire the current snapshot, always, and anything younger than the floor."""
    current = metadata.current_snapshot()
    if current is not None and current.snapshot_id in plan.expired_snapshot_ids:
        raise JobError(f"refusing to expire the current snapshot {current.snapshot_id} of {name}")
    if floor_ms is None:
        return
    young = sorted(
        s.snapshot_id
        for s in metadata.snapshots
        if s.snapshot_id in plan.expired_snapshot_ids and s.timestamp_ms > floor_ms
    )
    if young:
        raise JobError(
            f"refusing to expire snapshot(s) {young[:10]} of {name}: younger than --min-age "
            f"(committed after {format_ms(floor_ms)}); pass --force to expire them anyway"
        )


def _old_metadata_deleted(io: FileIO, before: TableMetadata, after: TableMetadata) -> int:
    """Metadata files the commit's catalog deleted (delete-after-commit)."""
    if not METADATA_DELETE_AFTER_COMMIT_ENABLED.read(after.properties):
        return 0
    previous = {e.metadata_file for e in before.metadata_log}
    previous.add(before.metadata_location or "")
    kept = {e.metadata_file for e in after.metadata_log} | {after.metadata_location or ""}
    return sum(1 for p in previous - kept if p and not io.exists(p))


def run(
    spark: SessionSource | None, catalog: Catalog, options: ExpireSnapshotsOptions
) -> ExpireSnapshotsResult:
    """Expire as `options` say; the result counters (see the module doc)."""
    now = current_time_ms()
    floor_ms = None if options.force else now - options.min_age
    older_than = None
    if options.older_than is not None:
        older_than = parse_instant_ms(options.older_than, now_ms=now)
        if floor_ms is not None and older_than > floor_ms:
            raise JobError(
                f"refusing --older-than {options.older_than} ({format_ms(older_than)}): later "
                f"than the --min-age floor ({format_duration_ms(options.min_age)} ago, "
                f"{format_ms(floor_ms)}); pass --force to go below it"
            )
    table = catalog.load_table(options.table)
    retention = retention_of(table)
    expiry = table.expire_snapshots(now_ms=now)
    if older_than is not None:
        expiry.expire_older_than(older_than)
    if options.retain_last is not None:
        expiry.retain_last(options.retain_last)
    for snapshot_id in options.snapshot_ids:
        expiry.expire_snapshot_id(snapshot_id)

    before = table.metadata
    plan = expiry.plan()
    LOG.info(
        "plan: expire %d of %d snapshots and %d refs of %s, which leaves %d files unreachable",
        len(plan.expired_snapshot_ids),
        len(before.snapshots),
        len(plan.removed_refs),
        table.name,
        sum(len(getattr(plan.files, attr)) for _, attr, _ in KINDS),
    )
    _check_floor(table.name, before, plan, floor_ms)
    # Listed before the commit: a catalog that cannot be listed leaves the table untouched.
    owners = ownership(
        TableDirectories.of(table.name, before.location, before.properties),
        catalog_directories(catalog),
        protected=options.protected_locations,
    )
    if options.dry_run:
        return _result(options, plan, None, 0, _foreign(owners, plan.files))
    if not plan.expired_snapshot_ids and not plan.removed_refs:
        # Nothing to expire; what the trash kept past its window still goes.
        removal = _take_out(spark, table, options, [], retention=retention, now=now)
        return _result(options, plan, removal, 0, _foreign(owners, plan.files))
    result = _exactly(table, plan, now).commit()
    # The commit may have been retried on a newer base: check what it actually removed.
    _check_committed(table.name, before, plan, result)
    foreign = _foreign(owners, result.files)
    files = [
        (p, kind, None)
        for _, attr, kind in KINDS
        for p in sorted(getattr(result.files, attr))
        if p not in foreign
    ]
    expired = _expired(before, result)
    removal = _take_out(spark, table, options, files, retention=retention, now=now, expired=expired)
    metadata_deleted = _old_metadata_deleted(table.io, before, result.metadata)
    LOG.info(
        "expired %d snapshots; took %d files out of the table (%d could not be), kept %d of "
        "other tables",
        len(result.expired_snapshot_ids),
        len(removal.removed),
        len(removal.failed),
        len(foreign),
    )
    return _result(options, result, removal, metadata_deleted, foreign)


def _take_out(
    spark: SessionSource | None,
    table: Table,
    options: ExpireSnapshotsOptions,
    files: list[tuple[str, str, int | None]],
    *,
    retention: int,
    now: int,
    expired: dict[str, list[dict[str, Any]]] | None = None,
) -> Removal:
    return take_out(
        spark,
        table,
        "expire_snapshots",
        files,
        retention_ms=retention,
        now_ms=now,
        executor_threshold=options.executor_delete_threshold,
        threads=options.max_concurrent_deletes,
        expired=expired,
    )


def _expired(before: TableMetadata, result: ExpirationResult) -> dict[str, list[dict[str, Any]]]:
    """What the trash's record keeps for a restore: each expired snapshot as the metadata
    held it, and its statistics and partition-statistics entries, which the expiry drops."""
    gone = result.expired_snapshot_ids

    def of(key: str) -> list[dict[str, Any]]:
        entries = before.extra.get(key)
        if not isinstance(entries, list):
            return []
        return [e for e in entries if isinstance(e, dict) and e.get("snapshot-id") in gone]

    return {
        "snapshots": [s.to_json() for s in before.snapshots if s.snapshot_id in gone],
        "statistics": of(STATISTICS),
        "partition_statistics": of(PARTITION_STATISTICS),
    }


def _foreign(owners: OtherTables, files: UnreachableFiles) -> dict[str, str]:
    """Unreachable files lying in another table's tree (path -> table): kept. Our snapshots
    referenced them, but so may that table (files shared by a table registered from another
    engine's metadata, or added from another table's directory)."""
    found = {}
    for _, attr, _ in KINDS:
        for path in getattr(files, attr):
            owner = owners.owner_elsewhere(path)
            if owner is not None:
                found[path] = owner
    return found


def _exactly(table: Table, plan: ExpirationResult, now: int) -> ExpireSnapshots:
    """An expiry of exactly the planned snapshots. Selecting again on a retry would be wrong:
    a snapshot committed meanwhile shifts the `--retain-last` window, so one more old snapshot
    would go than was planned (and checked against the floor). A cutoff at the epoch makes
    age-based selection keep everything; ref expiry still applies, as it did in the plan."""
    exact = table.expire_snapshots(now_ms=now).expire_older_than(0)
    for snapshot_id in sorted(plan.expired_snapshot_ids):
        exact.expire_snapshot_id(snapshot_id)
    return exact


def _check_committed(
    name: str, before: TableMetadata, plan: ExpirationResult, result: ExpirationResult
) -> None:
    """A retried commit selects again on the fresher base; snapshots committed meanwhile are
    younger than any cutoff, so it can only expire what the plan did (or fewer). Anything
    else is a bug, and deleting its files could lose data: stop before deleting."""
    extra = result.expired_snapshot_ids - plan.expired_snapshot_ids
    if extra:
        raise JobError(
            f"the expiry of {name} committed ({result.metadata.metadata_location}) but removed "
            f"snapshots the plan did not: {sorted(extra)[:10]}; no file was deleted"
        )


def _result(
    options: ExpireSnapshotsOptions,
    result: ExpirationResult,
    removal: Removal | None,
    metadata_deleted: int,
    foreign: Mapping[str, str],
) -> ExpireSnapshotsResult:
    files: UnreachableFiles = result.files
    deleted = removal.removed if removal is not None else frozenset()
    counts: dict[str, int] = {}
    for key, attr, _ in KINDS:
        paths = getattr(files, attr)
        counts[f"deleted_{key}_count"] = len(paths & deleted)
        counts[f"unreachable_{key}_count"] = len(paths)
    failed = dict(removal.failed) if removal is not None else {}
    return ExpireSnapshotsResult(
        table=options.table,
        dry_run=options.dry_run,
        committed=result.committed,
        expired_snapshots_count=len(result.expired_snapshot_ids),
        expired_snapshot_ids=sorted(result.expired_snapshot_ids),
        removed_refs=sorted(result.removed_refs),
        deleted_metadata_files_count=metadata_deleted,
        **counts,
        failed_deletes_count=len(failed),
        failed_deletes=dict(sorted(failed.items())[:_MAX_REPORTED_FAILURES]),
        deleted_on_executors=bool(removal is not None and removal.on_executors),
        kept_files_of_other_tables_count=len(foreign),
        kept_files_of_other_tables=dict(sorted(foreign.items())[:_MAX_REPORTED_FAILURES]),
        **(removal.report() if removal is not None else {}),
    )
