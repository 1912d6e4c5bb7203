"""`icefloe tables`, `health` and `due`: what the fleet engine (`icefloe_airflow.fleet`) sees
in a catalog, from metadata only: its tables, their health with every point lost, and what
the fleet DAG would run now, in its order and why, within the budget.

The engine's modules are imported when a subcommand runs, not when the command starts.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from icecore.jobs.argv import OneLineParser
from icefloe_airflow.command.common import (
    EXIT_FAILED,
    Invocation,
    Refused,
    Subcommand,
    open_catalog,
    open_store,
)
from icefloe_airflow.fleet.config import Budget

if TYPE_CHECKING:
    from icefloe_airflow.fleet.survey import Survey


def _json_flag(parser: OneLineParser) -> None:
    parser.add_argument("--json", action="store_true", help="one JSON object per line")


def _health_arguments(parser: OneLineParser) -> None:
    parser.add_argument("tables", nargs="*", metavar="TABLE")
    parser.add_argument("--all", action="store_true", help="every table")
    _json_flag(parser)


def _due_arguments(parser: OneLineParser) -> None:
    _json_flag(parser)
    parser.add_argument("--all", action="store_true", help="also the due tables left for later")
    parser.add_argument("--max-tables", type=int, help="tables per run")
    parser.add_argument("--max-bytes", help="bytes rewritten per run, e.g. 2TB")


def _globs(run: Invocation) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The namespaces to take and to leave out: the flags', else the fleet's."""
    return (
        tuple(run.args.namespace or run.fleet.include),
        tuple(run.args.exclude or run.fleet.exclude),
    )


def _budget(run: Invocation) -> Budget:
    """The fleet's budget with `due`'s `--max-tables` and `--max-bytes`."""
    try:
        return run.fleet.budget.limited(run.args.max_tables, run.args.max_bytes)
    except ValueError as exc:
        raise SystemExit(f"icefloe due: --max-bytes: {exc}") from None


def tables(run: Invocation) -> int:
    from icefloe_airflow.fleet.discovery import discover  # noqa: PLC0415

    with open_catalog(run.catalog) as catalog:
        for table in discover(catalog, *_globs(run)):
            line = {"table": table.name, "metadata_location": table.metadata_location}
            print(json.dumps(line) if run.args.json else table.name)
    return 0


def _survey(run: Invocation, names: list[str] | None, *, record: bool) -> Survey:
    """Every table (or those `names`) checked, from the cache where unchanged."""
    from icefloe_airflow.fleet.cache import HealthCache  # noqa: PLC0415
    from icefloe_airflow.fleet.survey import survey  # noqa: PLC0415

    include, exclude = _globs(run)
    with open_catalog(run.catalog) as catalog, open_store(run.state, catalog.name) as store:
        cache = HealthCache(run.args.cache_dir)
        try:
            return survey(
                catalog,
                run.settings.layers,
                store=store,
                include=include,
                exclude=exclude,
                names=names,
                cache=cache,
                threads=run.args.threads,
                record=record,
            )
        except KeyError as exc:
            raise Refused(exc.args[0], EXIT_FAILED) from None
        finally:
            cache.close()


def _print(run: Invocation, lines: Callable[[bool], Iterable[str]]) -> int:
    """The report's `lines(colour)`, after where the policy and history came from (text)."""
    from icefloe_airflow.command.output import provenance, terminal_colours  # noqa: PLC0415

    if not run.args.json:
        print(provenance(run.state, run.config))
    for line in lines(not run.args.json and terminal_colours(sys.stdout)):
        print(line)
    return 0


def health(run: Invocation) -> int:
    """Each table's score with every point it lost; recorded in the health history."""
    from icefloe_airflow.command.output import health_lines  # noqa: PLC0415

    args = run.args
    if not args.tables and not args.all:
        raise SystemExit("icefloe health: name tables, or --all")
    result = _survey(run, args.tables or None, record=True)
    return _print(run, lambda colour: health_lines(result, as_json=args.json, colour=colour))


def due(run: Invocation) -> int:
    """What the fleet DAG would run now, in its order and why, within the budget."""
    from icefloe_airflow.command.output import due_lines  # noqa: PLC0415
    from icefloe_airflow.fleet.ranking import plan_run  # noqa: PLC0415

    args = run.args
    budget = _budget(run)
    result = _survey(run, None, record=False)
    plan = plan_run(result.ranked, budget)
    return _print(
        run,
        lambda colour: due_lines(
            plan, checked=len(result.checks), as_json=args.json, everything=args.all, colour=colour
        ),
    )


SUBCOMMANDS = (
    Subcommand("tables", "list the catalog's tables", _json_flag, tables),
    Subcommand("health", "health of tables", _health_arguments, health),
    Subcommand("due", "what the fleet DAG would run", _due_arguments, due),
)
