"""Major compaction: `spark-submit spark_jobs/rewrite_data_files.py --table db.events ...`.

    spark-submit --py-files dist/icefloe.zip spark_jobs/rewrite_data_files.py \\
        --warehouse /data/wh --table db.events --strategy binpack \\
        --target-file-size-bytes 536870912 --where "ts >= '2024-01-01T00:00:00'" \\
        --partial-progress-enabled

Bin-packs (or sorts) data files into files near the target size, applying every position and
equality delete, and drops the delete files that no longer apply to any live file. Options
are named after Iceberg's `rewrite_data_files` procedure (see
`spark_jobs.maintenance.compaction_plan` for how files and groups are chosen and
`spark_jobs.maintenance.compaction` for commits and conflicts). The last line on stdout is
a JSON object: rewritten_data_files, added_data_files, rewritten_bytes,
removed_delete_files, failed_groups, commits (see `spark_jobs.common.cli`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from spark_jobs.common.cli import (
    add_partial_progress,
    boolean_flag,
    job_parser,
    open_catalog,
    run,
)
from spark_jobs.common.session import get_session
from spark_jobs.maintenance.compaction import RewriteDataFilesOptions, compact

__all__ = ["RewriteDataFilesOptions", "build_parser", "compact", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = job_parser(
        "rewrite_data_files",
        "Compact data files, applying position and equality deletes (Iceberg's "
        "rewrite_data_files).",
    )
    g = parser.add_argument_group("rewrite_data_files")
    g.add_argument("--strategy", choices=("binpack", "sort"), default="binpack")
    g.add_argument(
        "--sort-order",
        metavar="TERMS",
        help="with --strategy sort: e.g. 'id desc nulls last, day(ts)' (default: the table's)",
    )
    g.add_argument(
        "--target-file-size-bytes",
        type=int,
        help="default: write.target-file-size-bytes (512 MB)",
    )
    g.add_argument("--min-file-size-bytes", type=int, help="default: 0.75 x target")
    g.add_argument("--max-file-size-bytes", type=int, help="default: 1.8 x target")
    g.add_argument("--min-input-files", type=int, default=5)
    g.add_argument("--rewrite-all", action="store_true")
    g.add_argument("--delete-file-threshold", type=int, default=2**31 - 1)
    g.add_argument(
        "--delete-ratio-threshold",
        type=float,
        default=0.3,
        help="deleted rows / rows of a file, position and equality deletes counted",
    )
    g.add_argument("--max-file-group-size-bytes", type=int, default=100 * 1024**3)
    add_partial_progress(g.add_argument)
    g.add_argument("--output-spec-id", type=int, help="default: the table's current spec")
    g.add_argument("--where", metavar="FILTER", help="only files that may hold matching rows")
    g.add_argument(
        "--use-starting-sequence-number",
        nargs="?",
        const=True,
        default=True,
        type=boolean_flag,
    )
    g.add_argument(
        "--max-retries",
        type=int,
        default=3,
        help="times a conflicting group is re-planned and rewritten (default 3)",
    )
    g.add_argument(
        "--max-concurrent-file-group-rewrites",
        type=int,
        default=5,
        help="Spark jobs writing file groups at the same time, each up to 64 groups (default 5)",
    )
    return parser


def options_from_args(args: argparse.Namespace) -> RewriteDataFilesOptions:
    return RewriteDataFilesOptions(
        table=args.table,
        strategy=args.strategy,
        sort_order=args.sort_order,
        target_file_size_bytes=args.target_file_size_bytes,
        min_file_size_bytes=args.min_file_size_bytes,
        max_file_size_bytes=args.max_file_size_bytes,
        min_input_files=args.min_input_files,
        rewrite_all=args.rewrite_all,
        delete_file_threshold=args.delete_file_threshold,
        delete_ratio_threshold=args.delete_ratio_threshold,
        max_file_group_size_bytes=args.max_file_group_size_bytes,
        partial_progress_enabled=args.partial_progress_enabled,
        partial_progress_max_commits=args.partial_progress_max_commits,
        output_spec_id=args.output_spec_id,
        where=args.where,
        use_starting_sequence_number=args.use_starting_sequence_number,
        max_retries=args.max_retries,
        max_concurrent_file_group_rewrites=args.max_concurrent_file_group_rewrites,
    )


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = build_parser().parse_args(argv)
    options = options_from_args(args)
    catalog = open_catalog(args)
    try:
        return compact(get_session("icefloe-rewrite-data-files"), catalog, options)
    finally:
        catalog.close()


if __name__ == "__main__":
    sys.exit(run(main))
