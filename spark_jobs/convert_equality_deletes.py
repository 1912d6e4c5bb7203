"""Replace a table's equality deletes with position deletes:
`spark-submit spark_jobs/convert_equality_deletes.py --warehouse /data/wh --table db.events`.

Every live equality delete file is replaced, in one `replace` commit, by position delete
files naming the rows it deletes; afterwards readers join no equality deletes, and readers
without equality delete support (PyIceberg) can read the table. Rows are unchanged. See
`spark_jobs.maintenance.equality_conversion` for the plan, sequence numbers and conflicts.

Options (beyond the shared ones, `spark_jobs.common.cli`):
- `--max-attempts N` (default 3): plans, writes and commits again from the new table state
  after a commit conflict, then fails naming the conflicting snapshot.

The last line on stdout is the JSON result: removed_equality_delete_files,
added_position_delete_files, added_position_deletes, data_files_scanned, snapshot_id, ...
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from spark_jobs.common.cli import job_parser, open_catalog, run
from spark_jobs.common.session import get_session
from spark_jobs.maintenance.equality_conversion import ConvertOptions, convert_equality_deletes

__all__ = ["ConvertOptions", "convert_equality_deletes", "main"]


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = job_parser(
        "convert_equality_deletes", "Replace equality deletes with position deletes."
    )
    parser.add_argument(
        "--max-attempts",
        type=int,
        default=3,
        metavar="N",
        help="plan and commit again after a commit conflict, at most N times (default 3)",
    )
    args = parser.parse_args(argv)
    catalog = open_catalog(args)
    try:
        options = ConvertOptions(table=args.table, max_attempts=args.max_attempts)
        return convert_equality_deletes(
            get_session("icefloe-convert-equality-deletes"), catalog, options
        )
    finally:
        catalog.close()


if __name__ == "__main__":
    sys.exit(run(main))
