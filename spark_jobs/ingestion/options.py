"""The ingestion job's options, from the command line or from Python."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field

from spark_jobs.common.cli import job_parser
from spark_jobs.common.errors import JobError

MODES = ("append", "overwrite", "upsert", "delete", "cdc")
KEYED_MODES = ("upsert", "delete", "cdc")


@dataclass
class IngestOptions:
    """What to ingest into `table` (`namespace.name`) and how; see `build_parser`."""

    table: str
    source: str | None = None
    source_format: str | None = None
    source_options: dict[str, str] = field(default_factory=dict)
    mode: str = "append"
    key: list[str] = field(default_factory=list)
    op_column: str = "op"
    create: bool = False
    partition_by: str | None = None
    sort_by: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    format_version: int = 2
    merge_schema: bool = False
    batch_id: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise JobError(f"--mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.batch_id is not None and not self.batch_id.strip():
            raise JobError("--batch-id must not be empty")


def _pairs(values: Sequence[str] | None, option: str) -> dict[str, str]:
    out = {}
    for item in values or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise JobError(f"{option} takes key=value, got {item!r}")
        out[key.strip()] = value
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = job_parser(
        "ingest.py",
        "Ingest a batch of Parquet, CSV or JSON into an Iceberg table in one atomic commit.",
    )
    source = parser.add_argument_group("source")
    source.add_argument("--source", metavar="PATH", required=True, help="file or directory")
    source.add_argument("--source-format", choices=("parquet", "csv", "json"))
    source.add_argument(
        "--source-option",
        metavar="K=V",
        action="append",
        help="Spark reader option, e.g. delimiter=; (repeatable)",
    )
    how = parser.add_argument_group("ingestion")
    how.add_argument("--mode", choices=MODES, default="append")
    how.add_argument(
        "--key",
        metavar="COL[,COL]",
        help="equality fields of upsert/delete/cdc (default: the table's identifier fields)",
    )
    how.add_argument(
        "--op-column", metavar="COL", default="op", help="cdc: column holding I, U or D"
    )
    how.add_argument(
        "--batch-id", metavar="ID", help="commit this batch at most once (safe retries)"
    )
    how.add_argument(
        "--merge-schema", action="store_true", help="add the source's new columns to the table"
    )
    create = parser.add_argument_group("creating the table when it does not exist")
    create.add_argument("--create", action="store_true")
    create.add_argument("--partition-by", metavar="SPEC", help='e.g. "day(ts), bucket(16, id)"')
    create.add_argument("--sort-by", metavar="ORDER", help='e.g. "ts, id desc nulls last"')
    create.add_argument(
        "--property", metavar="K=V", action="append", help="table property (repeatable)"
    )
    create.add_argument("--format-version", type=int, default=2)
    return parser


def options_from_args(args: argparse.Namespace) -> IngestOptions:
    keys = [k.strip() for k in (args.key or "").split(",") if k.strip()]
    return IngestOptions(
        table=args.table,
        source=args.source,
        source_format=args.source_format,
        source_options=_pairs(args.source_option, "--source-option"),
        mode=args.mode,
        key=keys,
        op_column=args.op_column,
        create=args.create,
        partition_by=args.partition_by,
        sort_by=args.sort_by,
        properties=_pairs(args.property, "--property"),
        format_version=args.format_version,
        merge_schema=args.merge_schema,
        batch_id=args.batch_id,
    )
