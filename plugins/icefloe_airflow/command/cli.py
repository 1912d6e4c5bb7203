"""The `icefloe` command: the fleet seen from a terminal, with the jobs' catalog flags.

    icefloe tables  --warehouse /data/wh [--namespace GLOB] [--json]
    icefloe health  --warehouse /data/wh (TABLE ... | --all) [--namespace GLOB] [--json]
    icefloe due     --warehouse /data/wh [--json] [--all]
    icefloe run JOB TABLE --warehouse /data/wh [--master URL | --remote sc://...] [job flags]
    icefloe trash TABLE --warehouse /data/wh [--purge] [--json]
    icefloe restore TABLE --warehouse /data/wh (--snapshot ID | --orphans [--run RUN | --since T])

`due` prints what the fleet DAG would run, in its order and why, within the budget (the
config's fleet, or `--max-tables` / `--max-bytes`), or `nothing is due (N tables checked)`;
`--all` also prints the due tables left for a later run and why. `health` prints each table's
score with every point it lost. Text has a header and units (colour on a terminal only); with
`--json` every line is one JSON object (`{"table": ...}`). `run` spark-submits the job
(`--master`, default local[*]), or runs it as a client of the Spark Connect server that
`--remote` (else `$SPARK_REMOTE`) names. `trash` and `restore` show a table's trash and bring
back what expiry or orphan removal took (`icefloe_airflow.command.trash`).

Policy comes from the tables config (`--config`, else the Airflow deployment's: see
`icefloe_airflow.airflow_settings`; none: the defaults) and the tables' properties; run history
and leases from icefloe's state store (`--state-uri`, else the deployment's; none: cadence jobs
count as never run), so the command and the Iceberg page agree; the text output's first line
says where both came from. A warehouse directory or SQLite catalog that does not exist is
refused in one line, and nothing is created. Health is cached under `--cache-dir`
(`$ICEFLOE_CACHE_DIR`, else `~/.cache/icefloe`). No Airflow is imported: the command starts in
well under a second.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from icecore.jobs.argv import OneLineParser, pop_catalog_args, unknown_flag
from icefloe_airflow import airflow_settings
from icefloe_airflow.command import report, run, trash
from icefloe_airflow.command.common import (
    EXIT_USAGE,
    Invocation,
    Refused,
    Subcommand,
    common_options,
    found,
    select_fleet,
)
from icefloe_airflow.fleet.config import FleetSettings, load_fleet_settings
from icefloe_airflow.tables_config import TablesConfigError

# The subcommand groups, in the order `icefloe --help` lists them.
GROUPS = (report, run, trash)
SUBCOMMANDS: dict[str, Subcommand] = {c.name: c for g in GROUPS for c in g.SUBCOMMANDS}


def _parser() -> tuple[OneLineParser, dict[str, OneLineParser]]:
    """The command's parser, and each subcommand's (their flags, for did-you-mean)."""
    common = common_options()
    parser = OneLineParser(prog="icefloe", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    parsers = {}
    for name, subcommand in SUBCOMMANDS.items():
        parsers[name] = commands.add_parser(name, parents=[common], help=subcommand.help)
        subcommand.arguments(parsers[name])
    return parser, parsers


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:  # `icefloe due | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Refused as exc:
        print(f"icefloe: {exc}", file=sys.stderr)
        return exc.code
    except SystemExit as exc:  # a mistake on the command line: one line (OneLineParser)
        if not isinstance(exc.code, str):
            raise
        print(exc.code, file=sys.stderr)
        return EXIT_USAGE


def _main(argv: Sequence[str] | None) -> int:
    parser, parsers = _parser()
    args, extra = parser.parse_known_args(argv)
    subcommand = SUBCOMMANDS[args.command]
    if extra and not subcommand.pass_on:
        known = parsers[args.command].known_flags()
        raise SystemExit(f"icefloe {args.command}: {unknown_flag(extra, known)}")
    catalog = pop_catalog_args(vars(args))
    config = found(args.config, "--config") or airflow_settings.tables_config(catalog.warehouse)
    try:
        settings = load_fleet_settings(config.value) if config else FleetSettings()
    except TablesConfigError as exc:
        raise Refused(str(exc)) from None
    invocation = Invocation(
        args=args,
        catalog=catalog,
        config=config,
        settings=settings,
        fleet=select_fleet(settings, args.fleet),
        state=found(args.state_uri, "--state-uri") or airflow_settings.state_uri(catalog.warehouse),
        extra=tuple(extra),
    )
    return subcommand.handler(invocation)


if __name__ == "__main__":
    sys.exit(main())
