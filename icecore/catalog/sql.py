"""A catalog in a relational database, table for table the one Iceberg's JDBC catalog uses.

`iceberg_tables` maps (catalog_name, table_namespace, table_name) to the current metadata
file; `iceberg_namespace_properties` holds namespace properties, with an `exists` row marking
a namespace created empty. Both are created when absent, with Java's `JdbcUtil` V1 DDL, so
Iceberg Java's JdbcCatalog, PyIceberg's SqlCatalog and icecore can share one database.
Namespaces are stored with their levels joined by '.', and a namespace exists while it has
property rows, tables, or child namespaces, as in those catalogs.

A commit is one statement, `UPDATE iceberg_tables SET metadata_location = new ... WHERE
metadata_location = expected`: the database decides which of two racing writers wins, and
the loser sees a row count of 0. SQLite (the default, a file in the warehouse) runs in WAL
mode with a busy timeout so that several processes can commit to one file; a "database is
locked" that outlasts the timeout is a lost race, never a success.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import (
    Column,
    Connection,
    MetaData,
    String,
    create_engine,
    delete,
    event,
    exists,
    insert,
    inspect,
    literal,
    or_,
    select,
    union_all,
    update,
)
from sqlalchemy import Table as SqlTable
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError
from sqlalchemy.sql.elements import ColumnElement

from icecore.catalog.base import (
    WAREHOUSE,
    Identifier,
    TablePointer,
    table_identifier,
    to_identifier,
)
from icecore.catalog.metastore import MetastoreCatalog
from icecore.errors import (
    AlreadyExistsError,
    CatalogError,
    CommitFailedError,
    CommitStateUnknownError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
)
from icecore.io import FileIO
from icecore.spec.metadata import read_table_metadata
from icecore.table import Table

SQLITE_FILE = "catalog.db"
SQLITE_BUSY_TIMEOUT = ("sqlite.busy-timeout-ms", 30_000)
TABLE_TYPE = "TABLE"
EXISTS_PROPERTY = "exists"  # Java's NAMESPACE_EXISTS_PROPERTY; PyIceberg writes it too

_SCHEMA = MetaData()
TABLES = SqlTable(
    "iceberg_tables",
    _SCHEMA,
    Column("catalog_name", String(255), primary_key=True),
    Column("table_namespace", String(255), primary_key=True),
    Column("table_name", String(255), primary_key=True),
    Column("metadata_location", String(1000)),
    Column("previous_metadata_location", String(1000)),
    Column("iceberg_type", String(5)),
)
NAMESPACE_PROPERTIES = SqlTable(
    "iceberg_namespace_properties",
    _SCHEMA,
    Column("catalog_name", String(255), primary_key=True),
    Column("namespace", String(255), primary_key=True),
    Column("property_key", String(255), primary_key=True),
    Column("property_value", String(1000)),
)


def _namespace_string(namespace: str | Iterable[str]) -> str:
    return ".".join(to_identifier(namespace))


def _children_pattern(namespace: str) -> str:
    """A LIKE pattern (escape '!') for the namespaces below `namespace`."""
    return namespace.replace("!", "!!").replace("_", "!_").replace("%", "!%") + ".%"


def _is_lock_contention(exc: DBAPIError) -> bool:
    """SQLite's busy/locked, PostgreSQL's serialization failure, deadlock or lock timeout:
    the statement lost a race and changed nothing."""
    code = getattr(exc.orig, "pgcode", None)
    if code in ("40001", "40P01", "55P03"):
        return True
    message = str(exc.orig).lower()
    return "database is locked" in message or "database is busy" in message


class SqlCatalog(MetastoreCatalog):
    """An Iceberg JDBC-layout catalog on SQLite or PostgreSQL through SQLAlchemy.

    `uri` is a SQLAlchemy URL (`postgresql+psycopg2://user@host:5432/db`); without one the
    catalog is the SQLite file `<warehouse>/catalog.db`. `properties` are catalog properties
    (FileIO settings and such); `warehouse` is where new tables go. `create=False` opens only
    a catalog that exists: a missing warehouse directory or SQLite file is refused, naming
    it, and nothing is created (a mistyped path must not become an empty catalog).
    """

    def __init__(
        self,
        name: str = "default",
        uri: str | None = None,
        warehouse: str | os.PathLike[str] | None = None,
        properties: Mapping[str, str] | None = None,
        *,
        io: FileIO | None = None,
        create: bool = True,
    ) -> None:
        props = dict(properties or {})
        if warehouse is not None:
            props[WAREHOUSE] = _warehouse_location(warehouse)
        super().__init__(name, props, io)
        if uri:
            self.uri = sqlalchemy_uri(uri, self.properties)
        else:
            self.uri = _default_sqlite_uri(self.properties.get(WAREHOUSE), create)
        if not create:
            _require_sqlite_file(self.uri)
        key, default = SQLITE_BUSY_TIMEOUT
        self.engine = _create_engine(self.uri, int(self.properties.get(key, default)) / 1000)
        self._has_type_column = self._ensure_schema()

    def __repr__(self) -> str:
        return f"SqlCatalog({self.name!r}, {make_url(self.uri).render_as_string()!r})"

    def close(self) -> None:
        self.engine.dispose()

    # Schema -------------------------------------------------------------------------------

    def _ensure_schema(self) -> bool:
        """Create the catalog tables if absent; True if `iceberg_tables` has `iceberg_type`.

        A database created by an older JdbcCatalog (schema V0) has no `iceberg_type` column;
        it is used as it is, without the column, rather than migrated behind its users' back.
        """
        with self._db("open the catalog database"):
            try:
                _SCHEMA.create_all(self.engine, checkfirst=True)
            except DBAPIError:
                # Another process created the tables between our check and our CREATE.
                if not {TABLES.name, NAMESPACE_PROPERTIES.name} <= set(
                    inspect(self.engine).get_table_names()
                ):
                    raise
            columns = inspect(self.engine).get_columns(TABLES.name)
        return any(c["name"] == "iceberg_type" for c in columns)

    @contextmanager
    def _db(self, action: str) -> Iterator[None]:
        """Turn a database failure into a CatalogError naming the catalog and the action."""
        try:
            yield
        except SQLAlchemyError as exc:
            problem = getattr(exc, "orig", None) or exc
            raise CatalogError(f"catalog {self.name!r}: cannot {action}: {problem}") from exc

    def _tables_of_type(self) -> ColumnElement[bool]:
        """Rows that are tables: Java's V1 schema keeps views in the same database table."""
        if not self._has_type_column:
            return literal(True)
        return or_(TABLES.c.iceberg_type == TABLE_TYPE, TABLES.c.iceberg_type.is_(None))

    def _table_row(self, identifier: Identifier) -> ColumnElement[bool]:
        return (
            (TABLES.c.catalog_name == self.name)
            & (TABLES.c.table_namespace == ".".join(identifier[:-1]))
            & (TABLES.c.table_name == identifier[-1])
            & self._tables_of_type()
        )

    # Namespaces ---------------------------------------------------------------------------

    def create_namespace(
        self, namespace: str | Iterable[str], properties: Mapping[str, str] | None = None
    ) -> None:
        name = _namespace_string(namespace)
        if self.namespace_exists(name):
            raise AlreadyExistsError(f"namespace {name} already exists in catalog {self.name!r}")
        rows = {**(properties or {}), EXISTS_PROPERTY: "true"}
        try:
            with self._db(f"create namespace {name}"), self.engine.begin() as conn:
                conn.execute(insert(NAMESPACE_PROPERTIES), self._property_rows(name, rows))
        except CatalogError as exc:
            if isinstance(exc.__cause__, IntegrityError):
                raise AlreadyExistsError(f"namespace {name} already exists") from exc.__cause__
            raise

    def namespace_exists(self, namespace: str | Iterable[str]) -> bool:
        name = _namespace_string(namespace)
        children = _children_pattern(name)
        tables = select(TABLES.c.table_namespace).where(
            TABLES.c.catalog_name == self.name,
            or_(
                TABLES.c.table_namespace == name,
                TABLES.c.table_namespace.like(children, escape="!"),
            ),
        )
        props = select(NAMESPACE_PROPERTIES.c.namespace).where(
            NAMESPACE_PROPERTIES.c.catalog_name == self.name,
            or_(
                NAMESPACE_PROPERTIES.c.namespace == name,
                NAMESPACE_PROPERTIES.c.namespace.like(children, escape="!"),
            ),
        )
        with self._db(f"look up namespace {name}"), self.engine.connect() as conn:
            return bool(conn.execute(select(or_(exists(tables), exists(props)))).scalar())

    def list_namespaces(self, parent: str | Iterable[str] = ()) -> list[Identifier]:
        levels = () if parent in ((), "") else to_identifier(parent)
        tables = select(TABLES.c.table_namespace).where(TABLES.c.catalog_name == self.name)
        props = select(NAMESPACE_PROPERTIES.c.namespace).where(
            NAMESPACE_PROPERTIES.c.catalog_name == self.name
        )
        if levels:
            self._require_namespace(levels)
            pattern = _children_pattern(".".join(levels))
            tables = tables.where(TABLES.c.table_namespace.like(pattern, escape="!"))
            props = props.where(NAMESPACE_PROPERTIES.c.namespace.like(pattern, escape="!"))
        with self._db("list namespaces"), self.engine.connect() as conn:
            names = set(conn.execute(union_all(tables, props)).scalars())
        depth = len(levels) + 1
        found = {
            tuple(n.split("."))[:depth]
            for n in names
            if n.count(".") + 1 >= depth and tuple(n.split("."))[: depth - 1] == levels
        }
        return sorted(found)

    def load_namespace_properties(self, namespace: str | Iterable[str]) -> dict[str, str]:
        """The namespace's properties, without the reserved `exists` marker (as Java)."""
        name = self._require_namespace(namespace)
        stmt = select(NAMESPACE_PROPERTIES.c.property_key, NAMESPACE_PROPERTIES.c.property_value)
        stmt = stmt.where(
            NAMESPACE_PROPERTIES.c.catalog_name == self.name,
            NAMESPACE_PROPERTIES.c.namespace == name,
        )
        with self._db(f"load properties of namespace {name}"), self.engine.connect() as conn:
            rows = conn.execute(stmt).all()
        return {k: v for k, v in rows if k != EXISTS_PROPERTY}

    def update_namespace_properties(
        self,
        namespace: str | Iterable[str],
        removals: Iterable[str] = (),
        updates: Mapping[str, str] | None = None,
    ) -> None:
        name = self._require_namespace(namespace)
        removals, updates = set(removals), dict(updates or {})
        if EXISTS_PROPERTY in removals or EXISTS_PROPERTY in updates:
            raise CatalogError(f"namespace property {EXISTS_PROPERTY!r} is reserved")
        if both := sorted(removals & updates.keys()):
            raise CatalogError(f"namespace {name}: properties both removed and set: {both}")
        in_namespace = (NAMESPACE_PROPERTIES.c.catalog_name == self.name) & (
            NAMESPACE_PROPERTIES.c.namespace == name
        )
        changed = removals | updates.keys()
        with self._db(f"update properties of namespace {name}"), self.engine.begin() as conn:
            if changed:
                conn.execute(
                    delete(NAMESPACE_PROPERTIES).where(
                        in_namespace, NAMESPACE_PROPERTIES.c.property_key.in_(changed)
                    )
                )
            # Keep the namespace in existence even when its last property is removed.
            rows = {**updates, EXISTS_PROPERTY: "true"}
            conn.execute(
                delete(NAMESPACE_PROPERTIES).where(
                    in_namespace, NAMESPACE_PROPERTIES.c.property_key == EXISTS_PROPERTY
                )
            )
            conn.execute(insert(NAMESPACE_PROPERTIES), self._property_rows(name, rows))

    def drop_namespace(self, namespace: str | Iterable[str]) -> None:
        name = self._require_namespace(namespace)
        # Views (Java's V1 schema) count too: dropping their namespace would strand them.
        stmt = select(TABLES.c.table_name).where(
            TABLES.c.catalog_name == self.name, TABLES.c.table_namespace == name
        )
        with self._db(f"list tables of namespace {name}"), self.engine.connect() as conn:
            tables = sorted(conn.execute(stmt).scalars())
        if tables:
            shown = ", ".join(f"{name}.{t}" for t in tables[:5])
            more = f" and {len(tables) - 5} more" if len(tables) > 5 else ""
            raise NamespaceNotEmptyError(
                f"namespace {name} is not empty: it holds {len(tables)} table(s) or view(s): "
                f"{shown}{more}"
            )
        children = self.list_namespaces(name)
        if children:
            raise NamespaceNotEmptyError(
                f"namespace {name} is not empty: it holds namespace(s) "
                + ", ".join(".".join(c) for c in children)
            )
        with self._db(f"drop namespace {name}"), self.engine.begin() as conn:
            conn.execute(
                delete(NAMESPACE_PROPERTIES).where(
                    NAMESPACE_PROPERTIES.c.catalog_name == self.name,
                    NAMESPACE_PROPERTIES.c.namespace == name,
                )
            )

    def _require_namespace(self, namespace: str | Iterable[str]) -> str:
        name = _namespace_string(namespace)
        if not self.namespace_exists(name):
            raise NoSuchNamespaceError(f"namespace {name} does not exist in catalog {self.name!r}")
        return name

    def _property_rows(self, namespace: str, properties: Mapping[str, str]) -> list[dict[str, Any]]:
        return [
            {
                "catalog_name": self.name,
                "namespace": namespace,
                "property_key": str(key),
                "property_value": str(value),
            }
            for key, value in properties.items()
        ]

    # Tables -------------------------------------------------------------------------------

    def list_tables(self, namespace: str | Iterable[str]) -> list[Identifier]:
        name = self._require_namespace(namespace)
        stmt = select(TABLES.c.table_name).where(
            TABLES.c.catalog_name == self.name,
            TABLES.c.table_namespace == name,
            self._tables_of_type(),
        )
        with self._db(f"list tables of namespace {name}"), self.engine.connect() as conn:
            names = conn.execute(stmt).scalars().all()
        return sorted((*name.split("."), table) for table in names)

    def table_pointers(self, *, all_catalogs: bool = False) -> Iterator[TablePointer]:
        """One query for every table (of every catalog name in the database with
        `all_catalogs`: catalogs that share a database often share a warehouse too)."""
        for catalog_name, namespace, name, location in self._pointer_rows(all_catalogs, None):
            yield TablePointer(catalog_name, (*namespace.split("."), name), location)

    def table_versions(self, namespace: str | Iterable[str] | None = None) -> dict[Identifier, str]:
        """One query over the catalog's rows, whatever the number of tables."""
        scope = None if namespace is None else _namespace_string(namespace)
        rows = self._pointer_rows(False, scope)
        return {(*ns.split("."), name): location for _, ns, name, location in rows}

    def _pointer_rows(self, all_catalogs: bool, namespace: str | None) -> list[tuple[str, ...]]:
        """(catalog, namespace, table, metadata location) of the tables that have a location,
        sorted; in `namespace` and the namespaces below it if one is given."""
        stmt = select(
            TABLES.c.catalog_name,
            TABLES.c.table_namespace,
            TABLES.c.table_name,
            TABLES.c.metadata_location,
        ).where(self._tables_of_type(), TABLES.c.metadata_location.is_not(None))
        if not all_catalogs:
            stmt = stmt.where(TABLES.c.catalog_name == self.name)
        if namespace is not None:
            stmt = stmt.where(
                or_(
                    TABLES.c.table_namespace == namespace,
                    TABLES.c.table_namespace.like(_children_pattern(namespace), escape="!"),
                )
            )
        with self._db("list every table"), self.engine.connect() as conn:
            return sorted(tuple(row) for row in conn.execute(stmt) if row[3])

    def table_exists(self, identifier: str | Iterable[str]) -> bool:
        ident = table_identifier(identifier)
        stmt = select(TABLES.c.table_name).where(self._table_row(ident))
        with self._db(f"look up table {'.'.join(ident)}"), self.engine.connect() as conn:
            return conn.execute(stmt).first() is not None

    def current_metadata_location(self, identifier: str | Iterable[str]) -> str:
        ident = table_identifier(identifier)
        stmt = select(TABLES.c.metadata_location).where(self._table_row(ident))
        with self._db(f"load table {'.'.join(ident)}"), self.engine.connect() as conn:
            row = conn.execute(stmt).first()
        if row is None:
            raise NoSuchTableError(
                f"table {'.'.join(ident)} does not exist in catalog {self.name!r}"
            )
        if not row[0]:
            raise CatalogError(
                f"table {'.'.join(ident)} in catalog {self.name!r} has no metadata location"
            )
        return str(row[0])

    def register_table(self, identifier: str | Iterable[str], metadata_location: str) -> Table:
        """Add an existing table by its metadata file, which is read first to check it."""
        ident = table_identifier(identifier)
        self._require_namespace(ident[:-1])
        if self.table_exists(ident):
            raise AlreadyExistsError(f"table {'.'.join(ident)} already exists")
        metadata = read_table_metadata(self.io, metadata_location)
        self.check_placement(ident, metadata)
        self._swap(ident, None, metadata_location)
        return Table(ident, metadata, self.io, self)

    def rename_table(
        self, from_identifier: str | Iterable[str], to_identifier: str | Iterable[str]
    ) -> Table:
        source, target = table_identifier(from_identifier), table_identifier(to_identifier)
        self._require_namespace(target[:-1])
        if self.table_exists(target):
            raise AlreadyExistsError(f"cannot rename to {'.'.join(target)}: it already exists")
        stmt = (
            update(TABLES)
            .where(self._table_row(source))
            .values(table_namespace=".".join(target[:-1]), table_name=target[-1])
        )
        action = f"rename table {'.'.join(source)} to {'.'.join(target)}"
        try:
            with self._db(action), self.engine.begin() as conn:
                renamed = conn.execute(stmt).rowcount
        except CatalogError as exc:
            if isinstance(exc.__cause__, IntegrityError):
                raise AlreadyExistsError(f"{'.'.join(target)} already exists") from exc.__cause__
            raise
        if renamed != 1:
            raise NoSuchTableError(
                f"table {'.'.join(source)} does not exist in catalog {self.name!r}"
            )
        return self.load_table(target)

    def _drop_table_row(self, identifier: Identifier) -> None:
        stmt = delete(TABLES).where(self._table_row(identifier))
        with self._db(f"drop table {'.'.join(identifier)}"), self.engine.begin() as conn:
            dropped = conn.execute(stmt).rowcount
        if dropped != 1:
            raise NoSuchTableError(
                f"table {'.'.join(identifier)} does not exist in catalog {self.name!r}"
            )

    # The compare-and-swap -----------------------------------------------------------------

    def _swap(self, identifier: Identifier, expected: str | None, new: str) -> None:
        name = ".".join(identifier)
        if expected is None:
            row = {
                "catalog_name": self.name,
                "table_namespace": ".".join(identifier[:-1]),
                "table_name": identifier[-1],
                "metadata_location": new,
                "previous_metadata_location": None,
            }
            if self._has_type_column:
                row["iceberg_type"] = TABLE_TYPE
            try:
                with self._db(f"create table {name}"), self.engine.begin() as conn:
                    conn.execute(insert(TABLES).values(row))
            except CatalogError as exc:
                if isinstance(exc.__cause__, IntegrityError):
                    raise AlreadyExistsError(f"table {name} already exists") from exc.__cause__
                raise
            return
        stmt = (
            update(TABLES)
            .where(self._table_row(identifier), TABLES.c.metadata_location == expected)
            .values(metadata_location=new, previous_metadata_location=expected)
        )
        try:
            conn = self.engine.connect()
        except DBAPIError as exc:
            error = CommitFailedError if _is_lock_contention(exc) else CatalogError
            raise error(
                f"commit to table {name}: cannot reach catalog database: {exc.orig}"
            ) from exc
        with conn:
            self._compare_and_swap(conn, stmt, name, expected, new)

    def _compare_and_swap(
        self, conn: Connection, stmt: Any, name: str, expected: str, new: str
    ) -> None:
        """Run the UPDATE and commit it, classifying every failure by what it leaves behind.

        Until COMMIT is sent, a failure means the row is unchanged (the database rolls back
        an uncommitted transaction, also when the connection drops), so it is a lost race or
        a plain error. A failure of the COMMIT itself may hide a success, hence
        CommitStateUnknownError; except SQLite's busy, which leaves the transaction open
        and uncommitted.
        """
        try:
            swapped = conn.execute(stmt).rowcount
        except DBAPIError as exc:
            _rollback_quietly(conn)
            if exc.connection_invalidated or _is_lock_contention(exc):
                raise CommitFailedError(
                    f"commit to table {name} in catalog {self.name!r} did not happen: {exc.orig}"
                ) from exc
            raise CatalogError(f"commit to table {name} failed: {exc.orig}") from exc
        if swapped != 1:
            _rollback_quietly(conn)
            raise CommitFailedError(self._lost_race_message(name, expected))
        try:
            conn.commit()
        except SQLAlchemyError as exc:
            problem = getattr(exc, "orig", None) or exc
            sqlite = self.engine.dialect.name == "sqlite"
            if sqlite and isinstance(exc, DBAPIError) and _is_lock_contention(exc):
                _rollback_quietly(conn)
                raise CommitFailedError(
                    f"commit to table {name} did not happen: {problem}"
                ) from exc
            raise CommitStateUnknownError(
                f"commit to table {name} in catalog {self.name!r} may or may not have "
                f"happened (COMMIT failed: {problem}); the table now points at {expected} "
                f"or at {new}, which is therefore kept"
            ) from exc

    def _lost_race_message(self, name: str, expected: str) -> str:
        try:
            now = self.current_metadata_location(name)
        except (NoSuchTableError, CatalogError) as exc:
            return f"commit to table {name} failed: {exc}"
        return f"commit to table {name} failed: another commit moved it from {expected} to {now}"


def _rollback_quietly(conn: Connection) -> None:
    try:
        conn.rollback()
    except SQLAlchemyError:
        conn.invalidate()


def _warehouse_location(warehouse: str | os.PathLike[str]) -> str:
    """Local paths become absolute (tables keep absolute locations); URIs stay as given."""
    text = os.fspath(warehouse)
    if "://" in text or text.startswith("file:"):
        return text.rstrip("/")
    return str(Path(text).absolute())


def sqlalchemy_uri(uri: str, properties: Mapping[str, str] | None = None) -> str:
    """A SQLAlchemy URL for `uri`, which may also be the JDBC URL Spark's and Java's
    JdbcCatalog are configured with (`jdbc:sqlite:/wh/catalog.db`,
    `jdbc:postgresql://host:5432/db` with `jdbc.user` / `jdbc.password` properties), so that
    one setting names the catalog for both."""
    if uri.startswith("jdbc:sqlite:"):
        path = uri.removeprefix("jdbc:sqlite:").removeprefix("file:")
        return f"sqlite:///{path}"
    if uri.startswith("jdbc:postgresql:"):
        props = properties or {}
        url = make_url("postgresql+psycopg2:" + uri.removeprefix("jdbc:postgresql:"))
        query = dict(url.query)
        user = props.get("jdbc.user") or query.pop("user", None)
        password = props.get("jdbc.password") or query.pop("password", None)
        return url.set(username=user, password=password, query=query).render_as_string(
            hide_password=False
        )
    return uri


def _default_sqlite_uri(warehouse: str | None, create: bool) -> str:
    if not warehouse:
        raise CatalogError("a SqlCatalog needs a database uri or a local warehouse directory")
    path = urlsplit(warehouse).path if warehouse.startswith("file:") else warehouse
    if "://" in path:
        raise CatalogError(
            f"warehouse {warehouse} is not local: pass the catalog database uri explicitly"
        )
    if create:
        os.makedirs(path, exist_ok=True)
    elif not os.path.isdir(path):
        raise CatalogError(f"warehouse directory {path} does not exist")
    return f"sqlite:///{path}/{SQLITE_FILE}"


def _require_sqlite_file(uri: str) -> None:
    """A SQLite catalog's file must exist (SQLite would create an empty one on connect)."""
    url = make_url(uri)
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return
    if not os.path.isfile(url.database):
        raise CatalogError(f"no catalog database {url.database}: the file does not exist")


def _create_engine(uri: str, sqlite_busy_timeout_s: float) -> Engine:
    url = make_url(uri)
    if url.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True)
    engine = create_engine(url, connect_args={"timeout": sqlite_busy_timeout_s})

    @event.listens_for(engine, "connect")
    def _wal(dbapi_connection: Any, _record: Any) -> None:
        # WAL lets readers go on while one process commits; the pragma is a no-op for
        # in-memory databases and sticks to the file once set.
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
        finally:
            cursor.close()

    return engine
