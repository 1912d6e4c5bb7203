"""Delete the files under a table's location that no metadata version references (Iceberg's
`remove_orphan_files`).

    spark-submit --py-files dist/icefloe.zip spark_jobs/main.py remove_orphan_files \\
        --warehouse /data/wh --table db.events --older-than 3d --dry-run

Options: `icecore.jobs.jobs.RemoveOrphanFilesOptions` (the README's table). Only files
last modified before `--older-than` (3d) go: younger ones may belong to a commit in progress,
and files whose storage reports no modification time are never deleted. An `--older-than`
later than `--min-age` (1d) ago is refused unless `--force` (Iceberg's procedure refuses under
24 hours for the same reason); a dry run is never refused. `--location` lists a directory
other than the table location, with the same scheme and authority; `--equal-schemes` and
`--equal-authorities` (`FROM[,FROM...]=TO`, `s3a,s3n=s3` always) treat spellings as one, and
`--prefix-mismatch-mode` says what to do with a listed file that a referenced one matches
except for scheme or authority: `error` (nothing is deleted), `ignore` or `delete`. The
driver lists the top `--listing-depth` levels itself; from `--parallel-listing-threshold`
directories on, they are listed recursively on the executors.

Other tables' files are never deleted (`icecore.actions.other_tables`): the catalog is
listed once (with a SQL catalog, every catalog name in its database) and every table's
metadata read; a table nested under the cleaned location (the default layout of nested
namespaces) is excluded whole, a table whose directories contain it has its referenced files
kept, and a table registered at the same location, or one whose metadata cannot be read
where its files could be, makes the job refuse. Tables of catalogs the job cannot list (a
catalog in another database on the same warehouse) are out of its sight: name their
locations with `--protected-location`.

Which files are referenced: `icecore.actions.referenced_files` (every metadata version
in the log and the current one, their snapshots' manifest lists, manifests, data and delete
files, statistics files, `version-hint.text`). The listing happens before the metadata is
loaded, so a commit landing meanwhile protects its files. Hidden files and directories (names
starting with `.` or `_`, such as `.crc` checksums and `_SUCCESS`; not `_key=value`
partition directories) are never deleted, as in Iceberg: the tables' trash directories
(`.icefloe-trash`, every table's under the cleaned location) are hidden too. Tables with
`gc.enabled=false` are refused: their files may be shared with other tables.

Orphans go into the table's trash (`spark_jobs.files.trashing`, `icecore.trash`), each with
its original path, size and this run in the run's record, and `icefloe restore --orphans`
puts them back, byte for byte, until `icefloe.trash.retention` (3d) has passed; with `0s`
they are deleted at once. Every run also purges what is past the window.

Result: `orphan_file_location` (the first `--max-reported`, default 100, sorted),
`orphan_files_count`, `deleted_files_count` (taken out: into the trash, or deleted with
`0s`), `failed_deletes_count` (and `failed_deletes`), the trash's counters (`Removal.report`),
`listed_files_count`, `referenced_files_count`, `hidden_files_count`, `too_young_count`,
`no_mtime_count`,
`prefix_mismatch_count`, `dry_run`, `older_than`; and what was kept for other tables:
`excluded_locations` (location, table, reason), `other_tables_files_kept_count`,
`other_tables_notes`, `other_tables_checked`, `other_tables_check_ms`.

Unfinished multipart uploads (S3) under the location are orphans too: a writer killed
mid-upload leaves its parts stored, invisible to the listing, until the upload is aborted
(a bucket lifecycle rule would do it days later). Those begun before `--older-than`, outside
other tables' directories, are aborted (not in a dry run), which touches no object:
`abandoned_upload_location` (the first 20), `abandoned_uploads_count`,
`aborted_uploads_count`, `failed_aborts`, `young_uploads_count` (or `uploads_unchecked`,
why they could not be listed).
"""

from __future__ import annotations

import logging
from typing import Any

from icecore.actions.other_tables import OtherTables, other_tables, refuse_conflicts
from icecore.actions.referenced_files import referenced_files
from icecore.catalog import Catalog
from icecore.catalog.directories import TableDirectories, catalog_directories
from icecore.errors import FileError
from icecore.io import FileIO
from icecore.io.locations import is_within, split_location
from icecore.jobs.errors import JobError
from icecore.jobs.grammar import format_duration_ms, format_ms, parse_instant_ms
from icecore.jobs.jobs import RemoveOrphanFilesOptions
from icecore.jobs.results import RemoveOrphanFilesResult
from icecore.orphans import DEFAULT_EQUAL_SCHEMES, LocationMatcher, classify, is_hidden
from icecore.spec.metadata_builder import now_ms as current_time_ms
from icecore.spec.properties import GC_ENABLED
from icecore.trash import TRASH_DIRECTORY
from icecore.trash.records import ORPHAN
from spark_jobs.common.session import SessionSource
from spark_jobs.files.listing import list_files
from spark_jobs.files.trashing import retention_of, take_out

LOG = logging.getLogger("icefloe.remove_orphan_files")
_MAX_REPORTED_FAILURES = 20
_MISMATCH_EXAMPLES = 3


def run(
    spark: SessionSource | None, catalog: Catalog, options: RemoveOrphanFilesOptions
) -> RemoveOrphanFilesResult:
    """Find (and unless a dry run, delete) the orphans; the result counters."""
    now = current_time_ms()
    cutoff = parse_instant_ms(options.older_than, now_ms=now)
    floor = now - options.min_age
    if cutoff > floor and not options.force and not options.dry_run:
        raise JobError(
            f"refusing --older-than {options.older_than} ({format_ms(cutoff)}): later than the "
            f"--min-age floor ({format_duration_ms(options.min_age)} ago, {format_ms(floor)}); "
            "files of commits in progress would be deleted. Pass --force if nothing else "
            "writes to the table"
        )
    matcher = LocationMatcher(
        equal_schemes={**DEFAULT_EQUAL_SCHEMES, **options.equal_schemes},
        equal_authorities=dict(options.equal_authorities),
    )
    table = catalog.load_table(options.table)
    if not GC_ENABLED.read(table.metadata.properties):
        raise JobError(
            f"cannot remove orphan files of {table.name}: gc.enabled is false (its files may "
            "be shared with other tables)"
        )
    retention = retention_of(table)
    if not table.metadata.table_uuid:  # its trash is keyed by it
        raise JobError(
            f"{table.name} has no table-uuid (v1 metadata): it has no trash to take orphans to; "
            "any commit gives it one (icecore writes v1 tables as v2)"
        )
    table_location = table.metadata.location
    location = (options.location or table_location).rstrip("/") or "/"
    if not matcher.agree(split_location(location), split_location(table_location)):
        raise JobError(
            f"--location {location} has another scheme or authority than the table location "
            f"{table_location}; declare them equal with --equal-schemes/--equal-authorities"
        )

    # Before the listing: a table created meanwhile is younger than the cutoff anyway.
    ours = TableDirectories.of(table.name, table_location, table.metadata.properties)
    others = other_tables(
        table.io,
        ours,
        location,
        catalog_directories(catalog),
        protected=options.protected_locations,
    )
    if not options.dry_run:
        refuse_conflicts(others, table.name, "remove orphan files")

    listing = list_files(
        spark,
        table.io,
        location,
        depth=options.listing_depth,
        parallel_threshold=options.parallel_listing_threshold,
        # The table's trash is hidden, so never an orphan: not worth listing either.
        skip=[*(e.location for e in others.exclusions), f"{table_location}/{TRASH_DIRECTORY}"],
    )
    # After the listing: a commit that landed meanwhile then protects the files it added.
    table.refresh()
    referenced = referenced_files(table.io, table.metadata, table.name)

    visible = [f for f in listing.files if not is_hidden(f.location, location)]
    # Another table's files are never candidates, whatever their age or our references.
    candidates = [f for f in visible if others.owner_elsewhere(f.location) is None]
    old = [f.location for f in candidates if f.mtime_ms is not None and f.mtime_ms < cutoff]
    sizes = {f.location: f.size for f in candidates}
    no_mtime = sum(1 for f in candidates if f.mtime_ms is None)
    classified = classify(old, referenced, matcher)
    mismatched = classified.mismatched
    if mismatched and options.prefix_mismatch_mode == "error":
        examples = "; ".join(
            f"{listed} is referenced as {', '.join(spellings)}"
            for listed, spellings in mismatched[:_MISMATCH_EXAMPLES]
        )
        raise JobError(
            f"{len(mismatched)} listed file(s) of {table.name} match referenced files except "
            f"for scheme or authority, nothing was deleted: {examples}. Declare equivalences "
            "with --equal-schemes/--equal-authorities, or pass --prefix-mismatch-mode "
            "ignore (keep them) or delete"
        )
    orphans = sorted(classified.orphans)
    if options.prefix_mismatch_mode == "delete":
        orphans = sorted(orphans + [listed for listed, _ in mismatched])
    LOG.info(
        "listed %d files under %s: %d referenced, %d orphans older than %s%s",
        len(listing.files),
        location,
        len(old) - len(classified.orphans) - len(mismatched),
        len(orphans),
        format_ms(cutoff),
        f"; {len(visible) - len(candidates)} files of other tables kept"
        if others.exclusions
        else "",
    )

    uploads = _abandoned_uploads(table.io, location, cutoff, others, options.dry_run)
    removal = None
    if not options.dry_run:
        removal = take_out(
            spark,
            table,
            "remove_orphan_files",
            [(path, ORPHAN, sizes.get(path)) for path in orphans],
            retention_ms=retention,
            now_ms=now,
            executor_threshold=options.executor_delete_threshold,
            threads=options.max_concurrent_deletes,
        )
    failed = dict(removal.failed) if removal is not None else {}
    return RemoveOrphanFilesResult(
        table=options.table,
        location=location,
        dry_run=options.dry_run,
        older_than=format_ms(cutoff),
        orphan_file_location=orphans[: options.max_reported],
        orphan_files_count=len(orphans),
        deleted_files_count=len(removal.removed) if removal is not None else 0,
        failed_deletes_count=len(failed),
        failed_deletes=dict(sorted(failed.items())[:_MAX_REPORTED_FAILURES]),
        listed_files_count=len(listing.files),
        directories_listed_on_executors=listing.directories_listed_on_executors,
        referenced_files_count=len(referenced),
        hidden_files_count=len(listing.files) - len(visible),
        too_young_count=len(candidates) - len(old) - no_mtime,
        no_mtime_count=no_mtime,
        prefix_mismatch_count=len(mismatched),
        deleted_on_executors=bool(removal is not None and removal.on_executors),
        other_tables_files_kept_count=len(visible) - len(candidates),
        **uploads,
        **others.report(),
        **(removal.report() if removal is not None else {}),
    )


def _abandoned_uploads(
    io: FileIO, location: str, cutoff: int, others: OtherTables, dry_run: bool
) -> dict[str, Any]:
    """Abort the multipart uploads under `location` begun before `cutoff` (S3).

    A writer killed mid-upload (SIGKILL, a lost executor) cannot abort its own upload: its
    parts stay stored, and billed, invisible to the listing above, until aborted. Like an
    orphan file, an upload is ours to abort only when it is old enough not to belong to a
    write in progress, not under another table's directories and not hidden; aborting never
    touches an object, so a table's files are safe whatever is aborted. A store that refuses
    to list uploads (a policy without s3:ListBucketMultipartUploads) fails nothing: the
    reason is reported in `uploads_unchecked`."""
    try:
        listed = io.pending_uploads(location)
    except FileError as exc:
        LOG.warning("unfinished multipart uploads under %s not checked: %s", location, exc)
        return {"uploads_unchecked": str(exc)}
    pending = [
        u
        for u in listed
        if not is_hidden(u.location, location)
        and others.owner_elsewhere(u.location) is None
        and not any(is_within(u.location, e.location) for e in others.exclusions)
    ]
    stale = sorted(
        (u for u in pending if u.initiated_ms is not None and u.initiated_ms < cutoff),
        key=lambda u: u.location,
    )
    failed: dict[str, str] = {}
    if not dry_run:
        for upload in stale:
            try:
                io.abort_upload(upload)
            except FileError as exc:
                failed[upload.location] = str(exc)
    if stale:
        LOG.info(
            "%d unfinished multipart uploads older than %s under %s%s",
            len(stale),
            format_ms(cutoff),
            location,
            "" if dry_run else f": {len(stale) - len(failed)} aborted",
        )
    return {
        "abandoned_upload_location": [u.location for u in stale][:_MAX_REPORTED_FAILURES],
        "abandoned_uploads_count": len(stale),
        "aborted_uploads_count": 0 if dry_run else len(stale) - len(failed),
        "failed_aborts": dict(sorted(failed.items())[:_MAX_REPORTED_FAILURES]),
        "young_uploads_count": len(pending) - len(stale),
    }
