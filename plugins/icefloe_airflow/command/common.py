"""What every `icefloe` subcommand is given and may open: the catalog flags' values, the
tables config and the fleet it selects, and the state store, found as the Airflow deployment
finds them (`icefloe_airflow.airflow_settings`), so the command and the Iceberg page agree.

A subcommand is a `Subcommand` (its name, its arguments, its handler) in a group module's
`SUBCOMMANDS`; its handler gets an `Invocation` and returns the exit status. What the user can
act on is refused with `Refused` (one line, `icefloe: <message>`) or, for a mistake on the
command line, `SystemExit("icefloe <subcommand>: ...")`; either way the command exits 2 unless
told otherwise.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from icecore.jobs.argv import CatalogArgs, OneLineParser, add_catalog_options, catalog_settings
from icefloe_airflow import airflow_settings
from icefloe_airflow.fleet.config import FleetConfig, FleetSettings
from icefloe_airflow.tables_config import CONFIG_ENV

if TYPE_CHECKING:
    from icecore.catalog import Catalog
    from icefloe_airflow.state import MaintenanceStore

EXIT_FAILED = 1
EXIT_USAGE = 2


class Refused(Exception):
    """A refusal in one line (`icefloe: <message>`), with the command's exit status."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Invocation:
    """One run of a subcommand: its arguments and what the shared flags found."""

    args: argparse.Namespace  # the subcommand's own arguments and the fleet flags
    catalog: CatalogArgs
    config: airflow_settings.Found | None  # the tables config, and where it came from
    settings: FleetSettings
    fleet: FleetConfig  # the config's fleet for this catalog (`--fleet`), else the defaults
    state: airflow_settings.Found | None  # the state store's URI, and where it came from
    extra: tuple[str, ...] = ()  # flags passed on (only to a subcommand taking `pass_on`)


@dataclass(frozen=True)
class Subcommand:
    """`icefloe <name>`: `arguments` adds its own to its parser; `handler` runs it."""

    name: str
    help: str
    arguments: Callable[[OneLineParser], None]
    handler: Callable[[Invocation], int]
    pass_on: bool = False  # flags it does not know go to the handler (a job's own flags)


def common_options() -> OneLineParser:
    """The parent parser of every subcommand: the jobs' catalog flags, then the fleet's."""
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
    return common


def found(value: str | None, flag: str) -> airflow_settings.Found | None:
    """A flag's value as a `Found` naming the flag, or None when it was not given."""
    return airflow_settings.Found(value, flag) if value else None


def select_fleet(settings: FleetSettings, conn_id: str | None) -> FleetConfig:
    """The config's fleet named by `conn_id`, or its only one; else the defaults."""
    if conn_id is not None:
        for fleet in settings.fleets:
            if fleet.iceberg_conn_id == conn_id:
                return fleet
        raise Refused(f"no fleet for connection {conn_id!r} in the tables config")
    return settings.fleets[0] if len(settings.fleets) == 1 else FleetConfig()


@contextmanager
def open_catalog(catalog: CatalogArgs) -> Iterator[Catalog]:
    """The catalog the flags name; one that does not exist is refused and nothing created."""
    from icecore.catalog import catalog_from_settings  # noqa: PLC0415
    from icecore.errors import CatalogError  # noqa: PLC0415

    try:
        opened = catalog_from_settings(**catalog_settings(catalog), create=False)
    except (ValueError, CatalogError) as exc:
        raise Refused(str(exc)) from None
    try:
        yield opened
    finally:
        opened.close()


@contextmanager
def open_store(state: airflow_settings.Found | None, catalog_name: str) -> Iterator[Any]:
    """The state store, if one is configured or exists; None otherwise (nothing created)."""
    if state is None:
        yield None
        return
    from icefloe_airflow.state import MaintenanceStore  # noqa: PLC0415

    store: MaintenanceStore = MaintenanceStore.open(state.value, catalog_name)
    try:
        yield store
    finally:
        store.close()
