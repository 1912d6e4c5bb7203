"""Where icefloe's state store lives (see `icefloe_airflow.state`): its URL from Airflow's
configuration, its engine, and its PostgreSQL database for a fresh deployment.

    python -m icefloe_airflow.state_db ensure-database

creates the role and database that `[icefloe] state_uri` names when they do not exist, as the
PostgreSQL role in `$ICEFLOE_STATE_ADMIN_URI` (one that may create roles and databases).
docker-compose's init service runs it on every start: PostgreSQL's own first-start scripts
never run again on an existing volume, and a stack created before the store had a database of
its own must get one too. The tables inside are created by the store on first use.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url

from icefloe_airflow.provider_info import CONFIG_SECTION, DEFAULT_STATE_FILE, STATE_URI_OPTION

STATE_URI_ENV = f"AIRFLOW__{CONFIG_SECTION.upper()}__{STATE_URI_OPTION.upper()}"
ADMIN_URI_ENV = "ICEFLOE_STATE_ADMIN_URI"
# Several task processes share one SQLite file: a writer waits this long for another's commit.
SQLITE_BUSY_TIMEOUT_S = 30.0


def default_state_uri() -> str:
    """`sqlite:///<AIRFLOW_HOME>/icefloe_state.db`, AIRFLOW_HOME as Airflow itself finds it."""
    home = os.path.expanduser(os.path.expandvars(os.environ.get("AIRFLOW_HOME") or "~/airflow"))
    return f"sqlite:///{Path(home).absolute() / DEFAULT_STATE_FILE}"


def configured_state_uri(override: str | None = None) -> str:
    """The state store's SQLAlchemy URL: a connection's `override`, else Airflow's
    `[icefloe] state_uri`, else the SQLite file in AIRFLOW_HOME."""
    if override:
        return override
    from airflow.sdk import conf  # noqa: PLC0415 - the store itself needs no Airflow

    # `_CMD` and secrets backends hand the value over with its trailing newline.
    configured = conf.get(CONFIG_SECTION, STATE_URI_OPTION, fallback="").strip()
    return configured or default_state_uri()


def create_state_engine(uri: str) -> Engine:
    """An engine for the state store. SQLite waits for other processes' commits (busy timeout)
    in WAL mode, so readers (the UI) never hold up a lease renewal; servers are pinged before
    use, since a renewal may come after a long idle spell."""
    url = make_url(uri)
    if url.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True)
    if url.database and url.database != ":memory:":
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})

    @event.listens_for(engine, "connect")
    def _wal(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
        finally:
            cursor.close()

    return engine


def ensure_database(uri: str, admin_uri: str) -> list[str]:
    """Create the PostgreSQL role (with the URL's password) and the database, owned by that
    role, that `uri` names, through `admin_uri`, when they are missing; returns what was
    created. An existing role is left as it is. Other databases need nothing (SQLite's file is
    created on first use)."""
    url = make_url(uri)
    if url.get_backend_name() != "postgresql" or not url.database:
        return []
    admin = create_engine(make_url(admin_uri), isolation_level="AUTOCOMMIT")
    quote = admin.dialect.identifier_preparer.quote_identifier
    created = []
    try:
        with admin.connect() as conn:
            role = url.username
            exists = text("SELECT 1 FROM pg_roles WHERE rolname = :name")
            if role and conn.execute(exists, {"name": role}).first() is None:
                password = "" if url.password is None else f" PASSWORD {_literal(url.password)}"
                conn.execute(text(f"CREATE ROLE {quote(role)} LOGIN{password}"))
                created.append(f"role {role}")
            exists = text("SELECT 1 FROM pg_database WHERE datname = :name")
            if conn.execute(exists, {"name": url.database}).first() is None:
                owner = f" OWNER {quote(role)}" if role else ""
                conn.execute(text(f"CREATE DATABASE {quote(url.database)}{owner}"))
                created.append(f"database {url.database}")
    finally:
        admin.dispose()
    return created


def _literal(value: str) -> str:
    """A PostgreSQL string constant (standard_conforming_strings, the default since 9.1);
    DDL takes no bind parameters."""
    return "'" + value.replace("'", "''") + "'"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args != ["ensure-database"]:
        print("usage: python -m icefloe_airflow.state_db ensure-database", file=sys.stderr)
        return 2
    admin = os.environ.get(ADMIN_URI_ENV)
    if not admin:
        print(f"${ADMIN_URI_ENV} must hold an administrator's database URL", file=sys.stderr)
        return 2
    uri = configured_state_uri()
    created = ensure_database(uri, admin)
    where = make_url(uri).render_as_string(hide_password=True)
    print(f"icefloe state store {where}: " + (", ".join(created) + " created" if created else "ok"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
