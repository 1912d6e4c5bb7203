"""Delete the files under a table's location that no metadata version references:
`spark-submit spark_jobs/remove_orphan_files.py ...`.

    spark-submit --py-files dist/icefloe.zip spark_jobs/remove_orphan_files.py \\
        --warehouse /data/wh --table db.events --older-than 3d --dry-run

Options after Iceberg's `remove_orphan_files` procedure:
- `--older-than TIME`: only files last modified before this ISO timestamp or age (default
  `3d`): younger files may belong to a commit still in progress. Files whose storage reports
  no modification time are never deleted;
- `--min-age AGE` (default `1d`) and `--force`: the floor. Deleting with an `--older-than`
  later than `--min-age` ago is refused unless `--force`: a commit in progress writes its
  files before it swaps the table pointer, and a short cutoff would delete them (Iceberg's
  procedure refuses under 24 hours for the same reason). A dry run is never refused;
- `--location LOC`: list this directory instead of the whole table location; its scheme and
  authority must agree with the table's;
- `--dry-run`: report the orphans, delete nothing;
- `--equal-schemes FROM[,FROM...]=TO` and `--equal-authorities FROM[,FROM...]=TO`
  (repeatable): schemes and authorities to treat as one (`s3a,s3n=s3` is always on);
- `--prefix-mismatch-mode error|ignore|delete` (default `error`): what to do with a listed
  file whose path a referenced file has, but under another scheme or authority. `error`
  fails naming it (nothing is deleted), `ignore` keeps it, `delete` deletes it;
- `--max-concurrent-deletes`, `--executor-delete-threshold`: as for `expire_snapshots`;
- `--listing-depth N` (default 2), `--parallel-listing-threshold N` (default 8): the driver
  lists the top N directory levels; when it reaches at least the threshold of directories,
  they are listed recursively on the executors;
- `--protected-location LOC` (repeatable): never delete under LOC.

Other tables' files are never deleted (`spark_jobs.maintenance.other_tables`): the catalog is
listed once (with a SQL catalog, every catalog name in its database) and every table's
metadata read; a table nested under the cleaned location (the default layout of nested
namespaces) is excluded whole, a table whose directories contain it has its referenced files
kept, and a table registered at the same location, or one whose metadata cannot be read
where its files could be, makes the job refuse. Tables of catalogs the job cannot list (a
catalog in another database on the same warehouse) are out of its sight: name their
locations with `--protected-location`.

Which files are referenced: `spark_jobs.maintenance.referenced_files` (every metadata version
in the log and the current one, their snapshots' manifest lists, manifests, data and delete
files, statistics files, `version-hint.text`). The listing happens before the metadata is
loaded, so a commit landing meanwhile protects its files. Hidden files and directories (names
starting with `.` or `_`, such as `.crc` checksums and `_SUCCESS`; not `_key=value`
partition directories) are never deleted, as in Iceberg. Tables with `gc.enabled=false` are
refused: their files may be shared with other tables.

Result: `orphan_file_location` (the first `--max-reported`, default 100, sorted),
`orphan_files_count`, `deleted_files_count`, `failed_deletes_count` (and `failed_deletes`),
`listed_files_count`, `referenced_files_count`, `hidden_files_count`, `too_young_count`,
`no_mtime_count`,
`prefix_mismatch_count`, `dry_run`, `older_than`; and what was kept for other tables:
`excluded_locations` (location, table, reason), `other_tables_files_kept_count`,
`other_tables_notes`, `other_tables_checked`, `other_tables_check_ms`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import SparkSession

from icecore.catalog import Catalog
from icecore.catalog.locations import TableDirectories, catalog_directories
from icecore.spec.metadata_builder import now_ms as current_time_ms
from spark_jobs.common.cli import job_parser, open_catalog, run
from spark_jobs.common.errors import JobError
from spark_jobs.common.session import get_session
from spark_jobs.maintenance.durations import format_ms, parse_duration_ms, parse_instant_ms
from spark_jobs.maintenance.file_deletion import (
    DEFAULT_EXECUTOR_THRESHOLD,
    DEFAULT_THREADS,
    delete_files,
)
from spark_jobs.maintenance.file_listing import (
    DEFAULT_DEPTH,
    DEFAULT_PARALLEL_THRESHOLD,
    list_files,
)
from spark_jobs.maintenance.locations import (
    DEFAULT_EQUAL_SCHEMES,
    MISMATCH_MODES,
    LocationMatcher,
    classify,
    is_hidden,
    parse_equivalences,
    split_location,
)
from spark_jobs.maintenance.other_tables import other_tables, refuse_conflicts
from spark_jobs.maintenance.referenced_files import referenced_files

DEFAULT_OLDER_THAN = "3d"
DEFAULT_MIN_AGE = "1d"
DEFAULT_MAX_REPORTED = 100
_MAX_REPORTED_FAILURES = 20
_MISMATCH_EXAMPLES = 3


@dataclass(frozen=True)
class OrphanOptions:
    table: str
    older_than: str = DEFAULT_OLDER_THAN
    location: str | None = None
    dry_run: bool = False
    min_age: str = DEFAULT_MIN_AGE
    force: bool = False
    equal_schemes: dict[str, str] = field(default_factory=dict)
    equal_authorities: dict[str, str] = field(default_factory=dict)
    prefix_mismatch_mode: str = "error"
    max_concurrent_deletes: int = DEFAULT_THREADS
    executor_delete_threshold: int = DEFAULT_EXECUTOR_THRESHOLD
    listing_depth: int = DEFAULT_DEPTH
    parallel_listing_threshold: int = DEFAULT_PARALLEL_THRESHOLD
    max_reported: int = DEFAULT_MAX_REPORTED
    protected_locations: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.prefix_mismatch_mode not in MISMATCH_MODES:
            raise JobError(
                f"--prefix-mismatch-mode must be one of {', '.join(MISMATCH_MODES)}, not "
                f"{self.prefix_mismatch_mode!r}"
            )
        if self.max_concurrent_deletes < 1:
            raise JobError("--max-concurrent-deletes must be at least 1")
        if self.listing_depth < 0 or self.parallel_listing_threshold < 0:
            raise JobError("--listing-depth and --parallel-listing-threshold must be >= 0")
        if self.max_reported < 0:
            raise JobError("--max-reported must not be negative")
        parse_duration_ms(self.min_age)  # fail before touching the table

    def matcher(self) -> LocationMatcher:
        return LocationMatcher(
            equal_schemes={**DEFAULT_EQUAL_SCHEMES, **self.equal_schemes},
            equal_authorities=dict(self.equal_authorities),
        )


def build_parser() -> argparse.ArgumentParser:
    parser = job_parser("remove_orphan_files", "Delete files no table metadata references.")
    group = parser.add_argument_group("orphan files")
    group.add_argument(
        "--older-than",
        metavar="TIME",
        default=DEFAULT_OLDER_THAN,
        help=f"only files modified before this ISO timestamp or age (default {DEFAULT_OLDER_THAN})",
    )
    group.add_argument(
        "--location", metavar="LOC", help="directory to clean (default: the table location)"
    )
    group.add_argument("--dry-run", action="store_true", help="report only; delete nothing")
    group.add_argument(
        "--min-age",
        metavar="AGE",
        default=DEFAULT_MIN_AGE,
        help=f"refuse an --older-than later than this long ago (default {DEFAULT_MIN_AGE})",
    )
    group.add_argument("--force", action="store_true", help="lift the --min-age floor")
    group.add_argument(
        "--equal-schemes",
        metavar="FROM[,FROM]=TO",
        action="append",
        default=[],
        help="schemes to treat as equal (s3a,s3n=s3 always)",
    )
    group.add_argument(
        "--equal-authorities",
        metavar="FROM[,FROM]=TO",
        action="append",
        default=[],
        help="authorities to treat as equal",
    )
    group.add_argument(
        "--prefix-mismatch-mode",
        choices=MISMATCH_MODES,
        default="error",
        help="a listed file referenced under another scheme/authority: error (default), "
        "ignore (keep it) or delete",
    )
    group.add_argument("--max-concurrent-deletes", metavar="N", type=int, default=DEFAULT_THREADS)
    group.add_argument(
        "--executor-delete-threshold", metavar="N", type=int, default=DEFAULT_EXECUTOR_THRESHOLD
    )
    group.add_argument("--listing-depth", metavar="N", type=int, default=DEFAULT_DEPTH)
    group.add_argument(
        "--parallel-listing-threshold", metavar="N", type=int, default=DEFAULT_PARALLEL_THRESHOLD
    )
    group.add_argument("--max-reported", metavar="N", type=int, default=DEFAULT_MAX_REPORTED)
    group.add_argument(
        "--protected-location",
        metavar="LOC",
        action="append",
        default=[],
        help="never delete under LOC: tables of catalogs this job cannot list (repeatable)",
    )
    return parser


def options_from_args(args: argparse.Namespace) -> OrphanOptions:
    return OrphanOptions(
        table=args.table,
        older_than=args.older_than,
        location=args.location,
        dry_run=args.dry_run,
        min_age=args.min_age,
        force=args.force,
        equal_schemes=parse_equivalences(args.equal_schemes, "--equal-schemes"),
        equal_authorities=parse_equivalences(args.equal_authorities, "--equal-authorities"),
        prefix_mismatch_mode=args.prefix_mismatch_mode,
        max_concurrent_deletes=args.max_concurrent_deletes,
        executor_delete_threshold=args.executor_delete_threshold,
        listing_depth=args.listing_depth,
        parallel_listing_threshold=args.parallel_listing_threshold,
        max_reported=args.max_reported,
        protected_locations=tuple(args.protected_location),
    )


def remove_orphans(
    spark: SparkSession | None, catalog: Catalog, options: OrphanOptions
) -> dict[str, Any]:
    """Find (and unless a dry run, delete) the orphans; the result counters."""
    now = current_time_ms()
    cutoff = parse_instant_ms(options.older_than, now_ms=now)
    floor = now - parse_duration_ms(options.min_age)
    if cutoff > floor and not options.force and not options.dry_run:
        raise JobError(
            f"refusing --older-than {options.older_than} ({format_ms(cutoff)}): later than the "
            f"--min-age floor ({options.min_age} ago, {format_ms(floor)}); files of commits in "
            "progress would be deleted. Pass --force if nothing else writes to the table"
        )
    matcher = options.matcher()
    table = catalog.load_table(options.table)
    if not table.metadata.property_as_bool("gc.enabled", True):
        raise JobError(
            f"cannot remove orphan files of {table.name}: gc.enabled is false (its files may "
            "be shared with other tables)"
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
        skip=[e.location for e in others.exclusions],
    )
    # After the listing: a commit that landed meanwhile then protects the files it added.
    table.refresh()
    referenced = referenced_files(table.io, table.metadata, table.name)

    visible = [f for f in listing.files if not is_hidden(f.location, location)]
    # Another table's files are never candidates, whatever their age or our references.
    candidates = [f for f in visible if others.owner_elsewhere(f.location) is None]
    old = [f.location for f in candidates if f.mtime_ms is not None and f.mtime_ms < cutoff]
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

    outcome = None
    if not options.dry_run and orphans:
        outcome = delete_files(
            spark,
            table.io,
            orphans,
            executor_threshold=options.executor_delete_threshold,
            threads=options.max_concurrent_deletes,
        )
    failed = dict(outcome.failed) if outcome is not None else {}
    return {
        "table": options.table,
        "location": location,
        "dry_run": options.dry_run,
        "older_than": format_ms(cutoff),
        "orphan_file_location": orphans[: options.max_reported],
        "orphan_files_count": len(orphans),
        "deleted_files_count": len(outcome.deleted) if outcome is not None else 0,
        "failed_deletes_count": len(failed),
        "failed_deletes": dict(sorted(failed.items())[:_MAX_REPORTED_FAILURES]),
        "listed_files_count": len(listing.files),
        "directories_listed_on_executors": listing.directories_listed_on_executors,
        "referenced_files_count": len(referenced),
        "hidden_files_count": len(listing.files) - len(visible),
        "too_young_count": len(candidates) - len(old) - no_mtime,
        "no_mtime_count": no_mtime,
        "prefix_mismatch_count": len(mismatched),
        "deleted_on_executors": bool(outcome is not None and outcome.on_executors),
        "other_tables_files_kept_count": len(visible) - len(candidates),
        **others.report(),
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = build_parser().parse_args(argv)
    options = options_from_args(args)
    catalog = open_catalog(args)
    try:
        return remove_orphans(get_session("icefloe-remove-orphan-files"), catalog, options)
    finally:
        catalog.close()


if __name__ == "__main__":
    sys.exit(run(main))
