"""The command line every job in `spark_jobs/` shares.

    spark-submit spark_jobs/<job>.py --warehouse /data/wh --table db.events [job options]

- `--catalog-uri URI`: the catalog database as a SQLAlchemy URL (SQLite or PostgreSQL);
  default: the environment variable `ICEFLOE_CATALOG_URI`, else the SQLite file `catalog.db`
  in the warehouse. The variable keeps a database password off the command line, where
  process listings and scheduler logs would show it;
- `--catalog-property K=V` (repeatable): catalog properties, e.g. FileIO's `s3.endpoint`,
  `s3.path-style-access` for MinIO or Ceph;
- `--catalog-name NAME`: the catalog's name in that database (default `default`);
- `--warehouse PATH_OR_URI`: where new tables go, and the default catalog's home;
- `--table NAMESPACE.NAME`: the table the job works on.

Output: the last line on stdout is one JSON object with the job's result counters, so a
scheduler can parse it whatever Spark printed before. On failure the exit status is non-zero
(1; 2 for a bad command line) and the last line on stderr is a one-line cause, which is what
Airflow shows. Tracebacks are printed above it only for failures that are bugs, not for bad
input or conflicts the user can act on.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

from icecore.catalog import Catalog, catalog_from_settings
from icecore.errors import IcecoreError
from spark_jobs.common.errors import JobError

CATALOG_URI_ENV = "ICEFLOE_CATALOG_URI"

Job = Callable[[Sequence[str] | None], Mapping[str, Any]]

EXIT_FAILED = 1
EXIT_USAGE = 2
_MAX_CAUSE = 1000


def job_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """A parser with the shared catalog and table options; jobs add their own."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    group = parser.add_argument_group("catalog and table (shared by every job)")
    group.add_argument(
        "--catalog-uri",
        metavar="URI",
        help=f"SQLAlchemy URL of the catalog database (default: ${CATALOG_URI_ENV}, else the "
        "SQLite file catalog.db in the warehouse)",
    )
    group.add_argument(
        "--catalog-property",
        metavar="K=V",
        action="append",
        default=[],
        type=_property,
        help="catalog property, e.g. s3.endpoint=http://minio:9000 (repeatable)",
    )
    group.add_argument(
        "--catalog-name", metavar="NAME", default="default", help="catalog name (default: default)"
    )
    group.add_argument("--warehouse", metavar="PATH_OR_URI", help="where new tables go")
    group.add_argument(
        "--table", metavar="NAMESPACE.NAME", required=True, help="the table to work on"
    )
    return parser


def boolean_flag(text: str) -> bool:
    """A boolean option's value (`--partial-progress.enabled true`), spelled one way by
    every job."""
    value = text.strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def add_partial_progress(add: Callable[..., Any]) -> None:
    """Iceberg's `partial-progress.enabled` / `partial-progress.max-commits`, in the spelling
    of its procedures and with dashes, for both compactions (`add`: a parser's or an argument
    group's `add_argument`)."""
    add(
        "--partial-progress-enabled",
        "--partial-progress.enabled",
        nargs="?",
        const=True,
        default=False,
        type=boolean_flag,
        metavar="BOOL",
        help="commit the groups in several commits, not one (default false)",
    )
    add(
        "--partial-progress-max-commits",
        "--partial-progress.max-commits",
        type=int,
        default=10,
        metavar="N",
        help="at most this many commits with partial progress (default 10)",
    )


def _property(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected K=V, got {text!r}")
    return key.strip(), value


def open_catalog(args: argparse.Namespace) -> Catalog:
    """The catalog the shared options describe."""
    uri = args.catalog_uri or os.environ.get(CATALOG_URI_ENV) or None
    if not uri and not args.warehouse:
        raise JobError(
            f"give --warehouse (SQLite catalog in it), --catalog-uri or ${CATALOG_URI_ENV}"
        )
    return catalog_from_settings(
        uri=uri,
        name=args.catalog_name,
        warehouse=args.warehouse,
        properties=dict(args.catalog_property),
    )


def one_line(exc: BaseException) -> str:
    """`Type: first line of the message`, short enough for a log line and an Airflow UI."""
    text = str(exc).strip()
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    cause = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return cause if len(cause) <= _MAX_CAUSE else cause[: _MAX_CAUSE - 3] + "..."


def run(
    job: Job,
    argv: Sequence[str] | None = None,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run `job` with the command line `argv`; print its counters or its cause; return the
    exit status for `sys.exit`."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    try:
        result = job(argv)
    except SystemExit as exc:  # argparse: usage errors and --help
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    except (JobError, IcecoreError) as exc:
        print(one_line(exc), file=err, flush=True)
        return EXIT_FAILED
    except Exception as exc:
        traceback.print_exc(file=err)
        print(one_line(exc), file=err, flush=True)
        return EXIT_FAILED
    print(json.dumps(dict(result), sort_keys=True, default=str), file=out, flush=True)
    return 0
