"""Ingest a batch into an Iceberg table: `spark-submit spark_jobs/ingest.py ...`.

    spark-submit --py-files dist/icefloe.zip spark_jobs/ingest.py \\
        --warehouse /data/wh --table db.events --source /in/2024-01-07/ \\
        --mode cdc --key id --op-column op --batch-id 2024-01-07 \\
        --create --partition-by "day(ts), bucket(16, id)"

Modes: `append` and `overwrite` (replaces the partitions the batch touches, or the whole
unpartitioned table) write data files only; `upsert`, `delete` and `cdc` write merge-on-read
changes as Iceberg's Flink writer does (see `spark_jobs.ingestion.changes`). Every run is
one atomic commit; with `--batch-id` a batch is committed at most once. The last line on
stdout is a JSON object of counters (see `spark_jobs.common.cli` for the shared contract).

From Python: `spark_jobs.ingestion.job.ingest(spark, catalog, IngestOptions(...))`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from spark_jobs.common.cli import open_catalog, run
from spark_jobs.common.session import get_session
from spark_jobs.ingestion.job import ingest
from spark_jobs.ingestion.options import IngestOptions, build_parser, options_from_args

__all__ = ["IngestOptions", "ingest", "main"]


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = build_parser().parse_args(argv)
    options = options_from_args(args)
    catalog = open_catalog(args)
    try:
        return ingest(get_session("icefloe-ingest"), catalog, options)
    finally:
        catalog.close()


if __name__ == "__main__":
    sys.exit(run(main))
