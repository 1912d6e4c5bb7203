"""The `icefloe` command: the fleet seen from a terminal, with the jobs' catalog flags.

    icefloe tables  --warehouse /data/wh [--namespace GLOB] [--json]
    icefloe health  --warehouse /data/wh (TABLE ... | --all) [--namespace GLOB] [--json]
    icefloe due     --warehouse /data/wh [--json] [--all]
    icefloe run JOB TABLE --warehouse /data/wh [--master URL | --remote sc://...] [job flags]

`due` prints what the fleet DAG would run, in its order and why, within the budget (the
config's fleet, or `--max-tables` / `--max-bytes`), or `nothing is due (N tables checked)`;
`--all` also prints the due tables left for a later run and why. `health` prints each table's
score with every point it lost. Text has a header and units (colour on a terminal only); with
`--json` every line is one JSON object (`{"table": ...}`). `run` spark-submits the job
(`--master`, default local[*]), or runs it as a client of the Spark Connect server that
`--remote` (else `$SPARK_REMOTE`) names.

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

import argparse
import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from icefloe_airflow import airflow_settings
from icefloe_airflow.fleet.config import Budget, FleetConfig, FleetSettings, load_fleet_settings
from icefloe_airflow.tables_config import CONFIG_ENV, TablesConfigError
from spark_jobs.specs.argv import (
    REMOTE_ENV,
    OneLineParser,
    add_catalog_options,
    catalog_settings,
    checked_remote,
    pop_catalog_args,
    unknown_flag,
)

EXIT_USAGE = 2


def _parser() -> tuple[OneLineParser, dict[str, OneLineParser]]:
    """The command's parser, and each subcommand's (their flags, for did-you-mean)."""
    common = OneLineParser(add_help=False)
    add_catalog_options(common)
    fleet = common.add_argument_group("fleet")
    fleet.add_argument(
        "--config", help=f"tables config (default: ${CONFIG_ENV}, else the Airflow home's)"
    )
    fleet.add_argument("--fleet", metavar="CONN_ID", help="the config's fleet to take from")
    fleet.add_argument("--state-uri", help="icefloe's state store (run history, leases)")
    fleet.add_argument("--cache-dir", help="where the health cache lives")
    fleet.add_argument("--threads", type=int, default=8, help="tables measured at once")
    fleet.add_argument("--namespace", action="append", help="namespace glob (repeatable)")
    fleet.add_argument("--exclude", action="append", help="namespace glob to leave out")

    parser = OneLineParser(prog="icefloe", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    tables = commands.add_parser("tables", parents=[common], help="list the catalog's tables")
    tables.add_argument("--json", action="store_true")
    health = commands.add_parser("health", parents=[common], help="health of tables")
    health.add_argument("tables", nargs="*", metavar="TABLE")
    health.add_argument("--all", action="store_true", help="every table")
    health.add_argument("--json", action="store_true")
    due = commands.add_parser("due", parents=[common], help="what the fleet DAG would run")
    due.add_argument("--json", action="store_true")
    due.add_argument("--all", action="store_true", help="also the due tables left for later")
    due.add_argument("--max-tables", type=int, help="tables per run")
    due.add_argument("--max-bytes", help="bytes rewritten per run, e.g. 2TB")
    run = commands.add_parser(
        "run",
        parents=[common],
        help="run a job on a table (spark-submit or Spark Connect, under its lease)",
    )
    run.add_argument("job")
    run.add_argument("table")
    where = run.add_mutually_exclusive_group()
    where.add_argument("--master", help="spark-submit to this Spark master (default local[*])")
    where.add_argument(
        "--remote",
        metavar="sc://HOST:PORT",
        help=f"run as a client of this Spark Connect server (default: ${REMOTE_ENV}); a URL "
        f"with a token belongs in ${REMOTE_ENV}",
    )
    return parser, {"tables": tables, "health": health, "due": due, "run": run}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:  # `icefloe due | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except SystemExit as exc:  # a mistake on the command line: one line (OneLineParser)
        if not isinstance(exc.code, str):
            raise
        print(exc.code, file=sys.stderr)
        return EXIT_USAGE


def _main(argv: Sequence[str] | None) -> int:
    parser, commands = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.command != "run":
        known = commands[args.command].known_flags()
        raise SystemExit(f"icefloe {args.command}: {unknown_flag(extra, known)}")
    values = vars(args)
    catalog_args = pop_catalog_args(values)
    warehouse = catalog_args.warehouse
    try:
        config = _found(args.config, "--config") or airflow_settings.tables_config(warehouse)
        settings = load_fleet_settings(config.value) if config else FleetSettings()
        fleet = _fleet(settings, args.fleet)
    except (TablesConfigError, KeyError) as exc:
        print(f"icefloe: {exc}", file=sys.stderr)
        return EXIT_USAGE
    state = _found(args.state_uri, "--state-uri") or airflow_settings.state_uri(warehouse)
    if args.command == "run":
        from icefloe_airflow.fleet.run_job import run_job  # noqa: PLC0415

        master, remote = _where(args.master, args.remote)
        with _store(state, catalog_args.name) as store:
            return run_job(
                args.job,
                args.table,
                catalog_args,
                extra,
                master=master,
                remote=remote,
                store=store,
            )
    include = tuple(args.namespace or fleet.include)
    exclude = tuple(args.exclude or fleet.exclude)
    if args.command == "health" and not args.tables and not args.all:
        raise SystemExit("icefloe health: name tables, or --all")
    from icecore.catalog import catalog_from_settings  # noqa: PLC0415
    from icecore.errors import CatalogError  # noqa: PLC0415

    try:
        catalog = catalog_from_settings(**catalog_settings(catalog_args), create=False)
    except (ValueError, CatalogError) as exc:
        print(f"icefloe: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        if args.command == "tables":
            from icefloe_airflow.fleet.discovery import discover  # noqa: PLC0415

            for t in discover(catalog, include, exclude):
                line = {"table": t.name, "metadata_location": t.metadata_location}
                print(json.dumps(line) if args.json else t.name)
            return 0
        with _store(state, catalog.name) as store:
            return _survey_command(
                args,
                catalog=catalog,
                settings=settings,
                fleet=fleet,
                store=store,
                include=include,
                exclude=exclude,
                sources=(state, config),
            )
    finally:
        catalog.close()


def _where(master: str | None, remote: str | None) -> tuple[str, str | None]:
    """`icefloe run`'s Spark: the `--master` to spark-submit to, or the Spark Connect server
    (`--remote`, else `$SPARK_REMOTE` when no `--master` is given) to run the job against."""
    if remote is not None:
        try:
            return "", checked_remote(remote)
        except ValueError as exc:
            raise SystemExit(f"icefloe run: {exc}") from None
    if master is None and os.environ.get(REMOTE_ENV):
        return "", os.environ[REMOTE_ENV]
    return master or "local[*]", None


def _found(value: str | None, flag: str) -> airflow_settings.Found | None:
    return airflow_settings.Found(value, flag) if value else None


def _survey_command(
    args: argparse.Namespace,
    *,
    catalog: Any,
    settings: FleetSettings,
    fleet: FleetConfig,
    store: Any,
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    sources: tuple[airflow_settings.Found | None, airflow_settings.Found | None],
) -> int:
    from icefloe_airflow.fleet.cache import HealthCache  # noqa: PLC0415
    from icefloe_airflow.fleet.output import (  # noqa: PLC0415
        due_lines,
        health_lines,
        provenance,
        terminal_colours,
    )
    from icefloe_airflow.fleet.ranking import plan_run  # noqa: PLC0415
    from icefloe_airflow.fleet.survey import survey  # noqa: PLC0415

    cache = HealthCache(args.cache_dir)
    try:
        names = (args.tables or None) if args.command == "health" else None
        result = survey(
            catalog,
            settings.layers,
            store=store,
            include=include,
            exclude=exclude,
            names=names,
            cache=cache,
            threads=args.threads,
            record=args.command == "health",
        )
    except KeyError as exc:
        print(f"icefloe: {exc.args[0]}", file=sys.stderr)
        return 1
    finally:
        cache.close()
    colour = not args.json and terminal_colours(sys.stdout)
    if not args.json:
        print(provenance(*sources))
    if args.command == "health":
        lines = health_lines(result, as_json=args.json, colour=colour)
    else:
        budget = _budget(fleet.budget, args.max_tables, args.max_bytes)
        plan = plan_run(result.ranked, budget)
        lines = due_lines(
            plan, checked=len(result.checks), as_json=args.json, everything=args.all, colour=colour
        )
    for line in lines:
        print(line)
    return 0


def _fleet(settings: FleetSettings, conn_id: str | None) -> FleetConfig:
    """The config's fleet named by `conn_id`, or its only one; else the defaults."""
    if conn_id is not None:
        for fleet in settings.fleets:
            if fleet.iceberg_conn_id == conn_id:
                return fleet
        raise KeyError(f"no fleet for connection {conn_id!r} in the tables config")
    return settings.fleets[0] if len(settings.fleets) == 1 else FleetConfig()


def _budget(base: Budget, max_tables: int | None, max_bytes: str | None) -> Budget:
    from spark_jobs.specs.grammar import parse_size  # noqa: PLC0415

    return Budget(
        max_tables=base.max_tables if max_tables is None else max_tables,
        max_bytes=base.max_bytes if max_bytes is None else parse_size(max_bytes),
        spark_apps=base.spark_apps,
    )


@contextmanager
def _store(found: airflow_settings.Found | None, catalog_name: str) -> Iterator[Any]:
    """The state store, if one is configured or exists; None otherwise (nothing created)."""
    if found is None:
        yield None
        return
    from icefloe_airflow.state import MaintenanceStore  # noqa: PLC0415

    store = MaintenanceStore.open(found.value, catalog_name)
    try:
        yield store
    finally:
        store.close()


if __name__ == "__main__":
    sys.exit(main())
