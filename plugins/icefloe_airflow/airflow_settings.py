"""The Airflow deployment's icefloe settings, read without importing Airflow (the `icefloe`
command starts in well under a second): where the state store and the tables config are, so
that the command sees the run history and the policy the Iceberg page sees.

Which Airflow home: `$AIRFLOW_HOME`; else, for a command given `--warehouse`, an Airflow home
kept in the warehouse (`<warehouse>/.airflow`, `make demo`'s layout) when it holds an
`airflow.cfg`; else `~/airflow`, as Airflow itself defaults. Its `airflow.cfg`
(`$AIRFLOW_CONFIG` names another file) is read for:

    state store:   $AIRFLOW__ICEFLOE__STATE_URI, else [icefloe] state_uri, else the SQLite
                   file <home>/icefloe_state.db when it exists
    tables config: $ICEFLOE_TABLES_CONFIG, else [icefloe] tables_config, else tables.yaml in
                   [core] dags_folder when it exists

A state URI that Airflow would fetch with `_cmd` or `_secret` cannot be read here: pass it with
`--state-uri`. `{AIRFLOW_HOME}` in a value is expanded, as Airflow does.
"""

from __future__ import annotations

import configparser
import os
from dataclasses import dataclass
from pathlib import Path

from icefloe_airflow.provider_info import (
    CONFIG_SECTION,
    DEFAULT_STATE_FILE,
    STATE_URI_OPTION,
    TABLES_CONFIG_OPTION,
)
from icefloe_airflow.state_db import STATE_URI_ENV
from icefloe_airflow.tables_config import CONFIG_ENV as TABLES_CONFIG_ENV

WAREHOUSE_HOME = ".airflow"  # an Airflow home inside the warehouse: `make demo`'s


@dataclass(frozen=True)
class Found:
    """A setting's value and where it came from (said in the command's output)."""

    value: str
    source: str


def airflow_home(warehouse: str | None = None) -> Path:
    """The Airflow home the command reads (see the module docstring)."""
    configured = os.environ.get("AIRFLOW_HOME")
    if configured:
        return Path(os.path.expanduser(os.path.expandvars(configured))).absolute()
    if warehouse and "://" not in warehouse:
        kept = Path(warehouse).absolute() / WAREHOUSE_HOME
        if (kept / "airflow.cfg").is_file():
            return kept
    return Path(os.path.expanduser("~/airflow")).absolute()


def _config(home: Path) -> tuple[configparser.ConfigParser, Path]:
    path = Path(os.environ.get("AIRFLOW_CONFIG") or home / "airflow.cfg")
    parser = configparser.ConfigParser(interpolation=None)
    if path.is_file():
        parser.read(path, encoding="utf-8")
    return parser, path


def _option(home: Path, section: str, option: str) -> Found | None:
    parser, path = _config(home)
    value = parser.get(section, option, fallback="").strip()
    if not value:
        return None
    return Found(value.replace("{AIRFLOW_HOME}", str(home)), f"{path} [{section}] {option}")


def _configured(env: str, option: str, warehouse: str | None) -> tuple[Found | None, Path]:
    """The variable `env`, else `[icefloe] option` of the Airflow home's config; and the home."""
    if os.environ.get(env):
        return Found(os.environ[env], f"${env}"), airflow_home(warehouse)
    home = airflow_home(warehouse)
    return _option(home, CONFIG_SECTION, option), home


def state_uri(warehouse: str | None = None) -> Found | None:
    """The state store the deployment uses; None when there is none yet."""
    found, home = _configured(STATE_URI_ENV, STATE_URI_OPTION, warehouse)
    default = home / DEFAULT_STATE_FILE
    if found is None and default.is_file():
        return Found(f"sqlite:///{default}", f"the Airflow home {home}")
    return found


def tables_config(warehouse: str | None = None) -> Found | None:
    """The tables config the deployment's DAGs read; None when there is none."""
    found, home = _configured(TABLES_CONFIG_ENV, TABLES_CONFIG_OPTION, warehouse)
    if found is not None:
        return found
    dags = _option(home, "core", "dags_folder")
    if dags is not None and (Path(dags.value) / "tables.yaml").is_file():
        return Found(str(Path(dags.value) / "tables.yaml"), dags.source)
    return None
