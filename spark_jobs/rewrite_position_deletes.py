"""Minor compaction of delete files:
`spark-submit spark_jobs/rewrite_position_deletes.py --warehouse /data/wh --table db.events`.

Merges each partition's small position delete files into sorted files near
`--target-file-size-bytes`, drops deletes whose data file is gone (whole dangling files are
removed unread), merges equality delete files of one partition, sequence number and set of
equality ids, and never changes which rows are live. One `replace` commit, or one per batch
of groups with partial progress. See `spark_jobs.maintenance.delete_compaction` for the plan,
the groups and the sequence numbers.

Options (named after Iceberg's `rewrite_position_delete_files`), beyond the shared ones:
`--target-file-size-bytes` (64 MB), `--min-file-size-bytes` (75% of the target),
`--max-file-size-bytes` (180%), `--min-input-files` (5), `--rewrite-all`, `--where`
(a partition filter, e.g. "ts >= '2024-01-01'"), `--max-attempts` (3, re-plans after a
commit conflict), `--max-file-group-size-bytes` (100 GB: the most one group rewrites),
`--partial-progress-enabled` / `--partial-progress.enabled` [true|false] and
`--partial-progress-max-commits` / `--partial-progress.max-commits` (10), spelled and meant
as for `rewrite_data_files`. The last stdout line is the JSON result: the counters summed
over `commits` (their snapshot ids), `failed_groups` (with partial progress: the groups whose
commit still conflicted after the last attempt, each with the conflicting snapshot).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from spark_jobs.common.cli import add_partial_progress, job_parser, open_catalog, run
from spark_jobs.common.session import get_session
from spark_jobs.maintenance.delete_compaction import (
    RewriteDeletesOptions,
    rewrite_position_deletes,
)

__all__ = ["RewriteDeletesOptions", "main", "rewrite_position_deletes"]


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = job_parser("rewrite_position_deletes", "Compact a table's delete files.")
    add = parser.add_argument
    add("--target-file-size-bytes", type=int, default=64 * 1024 * 1024, metavar="BYTES")
    add("--min-file-size-bytes", type=int, metavar="BYTES", help="default: 75%% of the target")
    add("--max-file-size-bytes", type=int, metavar="BYTES", help="default: 180%% of the target")
    add("--min-input-files", type=int, default=5, metavar="N")
    add("--rewrite-all", action="store_true", help="rewrite every delete file of the partitions")
    add("--where", metavar="FILTER", help="only partitions this filter may match")
    add("--max-attempts", type=int, default=3, metavar="N")
    add("--max-file-group-size-bytes", type=int, default=100 * 1024**3, metavar="BYTES")
    add_partial_progress(add)
    args = parser.parse_args(argv)
    options = RewriteDeletesOptions(
        table=args.table,
        target_file_size_bytes=args.target_file_size_bytes,
        min_file_size_bytes=args.min_file_size_bytes,
        max_file_size_bytes=args.max_file_size_bytes,
        min_input_files=args.min_input_files,
        rewrite_all=args.rewrite_all,
        where=args.where,
        max_attempts=args.max_attempts,
        max_file_group_size_bytes=args.max_file_group_size_bytes,
        partial_progress_enabled=args.partial_progress_enabled,
        partial_progress_max_commits=args.partial_progress_max_commits,
    )
    catalog = open_catalog(args)
    try:
        return rewrite_position_deletes(
            get_session("icefloe-rewrite-position-deletes"), catalog, options
        )
    finally:
        catalog.close()


if __name__ == "__main__":
    sys.exit(run(main))
