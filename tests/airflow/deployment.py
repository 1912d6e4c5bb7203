"""The session's one Airflow deployment: an api-server, a scheduler and a dag-processor
(`tests/airflow/server.py`), started once by the `deployment` fixture (tests/airflow/conftest.py)
and shared by every module that tests through them (the Iceberg page, the fleet pages, the
trigger forms, the REST API, a fleet run waiting for a lease). Each start cost 10-20 s on the
2-core test machine.

What differs between those modules is what the plugin reads per request, so each module sets
it on the running deployment as an operator would, and the deployment puts back what was there
when the module is done (`Deployment.configured`):
- the tables of `tables.yaml` (`$ICEFLOE_TABLES_CONFIG`: the page reads the file when it
  looks at the tables, so an edit shows at the next refresh); its `fleets` stay the same all
  session, since the dag-processor makes the fleet DAG from them at its start;
- the `iceberg_default` connection, kept in Airflow's metadata database (through the REST
  API, as a user creates it in the UI) and looked up at each request, never in the processes'
  environment, which would shadow it;
- the page's cache of the live tables, refreshed after each change.
A module that needs DAGs made from its own tables or fleets (`schedule: asset`) has their
files parsed again (`Deployment.reparse`, as the UI's "Reparse" button asks for it), and
again when it is done, so that the DAGs and their watchers go with its tables.

The deployment has a metadata database of its own (a copy of the session's, as migrated):
the `dag.test()` runs of other modules write their versions of the same DAG ids and their
runs into the session's, and a scheduler there would run their tasks beside them.

The run history of each module's tables lives in its connection's own state store (the
connection's `state_uri`), so Airflow's `[icefloe] state_uri`, which the fleet pages read, holds
only what a module records there itself. The job DAGs' jobs spark-submit (the deployment has
no `[icefloe] spark_connect_conn_id`): the trigger forms' tests check that shape; the fleet's
run as clients of a Spark Connect server (its `spark_connect_conn_id`, a connection the module
running them creates).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from icefloe_airflow.state_db import STATE_URI_ENV
from icefloe_airflow.tables_config import CONFIG_ENV

from tests.airflow.server import AirflowServer, airflow_server

CONN_ID = "iceberg_default"
# The Spark Connect connection the fleet's jobs use; a module that runs them creates it (to
# the session's server, `spark_connect`), so that the other modules start no such server.
FLEET_SPARK_CONNECT_CONN_ID = "spark_connect_fleet"
# The fleet DAG (`icefloe_fleet__iceberg_default`, hand-triggered) of whichever catalog the
# connection names at the time; one job at a time per run, each a client of the warm server.
FLEETS = [
    {
        "iceberg_conn_id": CONN_ID,
        "schedule": None,
        "spark_apps": 1,
        "spark_connect_conn_id": FLEET_SPARK_CONNECT_CONN_ID,
    }
]


def state_store_uri(directory: Path) -> str:
    """A state store of its own in `directory` (`[icefloe] state_uri`, or a connection's
    `state_uri`), never the catalog's database: what tests record stays theirs, and the store
    is proven independent of it."""
    return f"sqlite:///{directory / 'icefloe_state.db'}"


def icefloe_connection(
    warehouse: Path, *, uri: str | None = None, name: str = "default", state_uri: str | None = None
) -> dict[str, Any]:
    """An `icefloe` connection to the catalog in `warehouse` (SQLite there, or the one at
    `uri`), named `name`; `state_uri`: a state store of the connection's own (default:
    Airflow's `[icefloe] state_uri`). The form AIRFLOW_CONN_<ID> takes as JSON."""
    extra: dict[str, str] = {"warehouse": str(warehouse), "catalog_name": name}
    if uri:
        extra["uri"] = uri
    if state_uri:
        extra["state_uri"] = state_uri
    return {"conn_type": "icefloe", "extra": extra}


# How often `schedule: asset` polls a catalog here: short, so that the tests wait little.
WATCH_POLL = "2s"


@dataclass
class Deployment:
    """The running deployment: its `server` (an all-admins api-server, so both a REST client
    and a browser log in), the tables config it reads, Airflow's `[icefloe] state_uri`, and
    its metadata database (a SQLite file)."""

    server: AirflowServer
    tables_config: Path
    state_uri: str
    metadata: Path
    _tables: list[Mapping[str, Any]] = field(default_factory=list)
    _connection: Mapping[str, Any] | None = None
    _fleets: list[Mapping[str, Any]] = field(default_factory=lambda: list(FLEETS))

    @contextmanager
    def configured(
        self,
        tables: Sequence[Mapping[str, Any]],
        connection: Mapping[str, Any] | None,
        fleets: Sequence[Mapping[str, Any]] = FLEETS,
    ) -> Iterator[AirflowServer]:
        """tables.yaml lists `tables` (and `fleets`) and `iceberg_default` is `connection`
        (None: there is no such connection) while the block runs; then all are as before."""
        before = (self._tables, self._connection, self._fleets)
        self._apply(list(tables), connection, list(fleets))
        try:
            yield self.server
        finally:
            self._apply(*before)

    def reparse(self, dag_file: str) -> None:
        """Ask the dag-processor to parse `dags/<dag_file>` again now (it otherwise parses
        each file once, at its start): the row the REST API's `parseDagFile` adds."""
        fileloc = dag_file
        key = hashlib.md5(f"dags-folder:{fileloc}".encode()).hexdigest()
        with sqlite3.connect(self.metadata, timeout=30) as db:
            db.execute(
                "INSERT OR REPLACE INTO dag_priority_parsing_request "
                "(id, bundle_name, relative_fileloc) VALUES (?, 'dags-folder', ?)",
                (key, fileloc),
            )

    def wait_for_watchers(self, asset_name: str, count: int, timeout: float = 120) -> None:
        """Wait until the asset has `count` watchers registered (0: none left)."""
        deadline = time.monotonic() + timeout
        while True:
            response = self.server.get("/api/v2/assets", params={"name_pattern": asset_name})
            assert response.status_code == 200, response.text
            found = [a for a in response.json()["assets"] if a["name"] == asset_name]
            watchers = len(found[0]["watchers"]) if found else 0
            if watchers == count:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{asset_name}: {watchers} watchers, not {count}")
            time.sleep(0.5)

    def _apply(
        self,
        tables: list[Mapping[str, Any]],
        connection: Mapping[str, Any] | None,
        fleets: list[Mapping[str, Any]],
    ) -> None:
        self.tables_config.write_text(json.dumps({"tables": tables, "fleets": fleets}))
        gone = self.server.delete(f"/api/v2/connections/{CONN_ID}")
        assert gone.status_code in (204, 404), gone.text
        if connection is not None:
            extra = json.dumps(connection["extra"])
            body = {"connection_id": CONN_ID, **connection, "extra": extra}
            created = self.server.post("/api/v2/connections", json=body)
            assert created.status_code == 201, created.text
        self._tables, self._connection, self._fleets = tables, connection, fleets
        fresh = self.server.get("/icefloe/api/tables", params={"refresh": "true"})
        assert fresh.status_code == 200, fresh.text


@contextmanager
def start_deployment(home: Path, metadata: Path) -> Iterator[Deployment]:
    """Start the deployment with its tables config and state store in `home`, its metadata
    database at `metadata` (a migrated SQLite file), the session's other Airflow settings from
    os.environ (tests/airflow/conftest.py), and no `iceberg_default` there: the metadata
    database's is the one the modules set."""
    config = home / "tables.yaml"
    config.write_text(json.dumps({"tables": [], "fleets": FLEETS}))
    state_uri = state_store_uri(home)
    env = {
        **os.environ,
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{metadata}",
        CONFIG_ENV: str(config),
        STATE_URI_ENV: state_uri,
        # The DAG files are parsed once, at the start: what the modules change later makes no
        # DAG they trigger, and parsing them every 30 s (the default) would cost the rest of
        # the suite a tenth of a core while the deployment waits for the session's end.
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "3600",
        # A job whose table another job holds waits in the triggerer, as a deployment that
        # turns deferral on has every operator do (`IcefloeJobOperator(deferrable=...)`); a
        # test that needs the triggerer starts it (`server.running("triggerer")`), so that it
        # costs the rest of the suite nothing.
        "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": "True",
        "AIRFLOW__ICEFLOE__WATCH_POLL_INTERVAL": WATCH_POLL,
    }
    env.pop(f"AIRFLOW_CONN_{CONN_ID.upper()}", None)
    with airflow_server(env, all_admins=True, scheduler=True, dag_processor=True) as server:
        yield Deployment(server, config, state_uri, metadata)
