"""A catalog behind the Iceberg REST protocol: Polaris, Lakekeeper, Nessie, Unity Catalog,
Gravitino, AWS Glue and S3 Tables, and Iceberg's own server.

Commits are sent as requirements + updates (`icecore.commit.changes.TableCommit`); the server
applies them to its current metadata. A commit answered with 500/502/503/504, or lost on the
wire, may have been applied: it is never resent blindly. The table is loaded again and, if
the commit's snapshot (or, for a metadata-only change, each of its effects) is there, the
commit succeeded; if it is not, the commit failed and the caller's retry loop refreshes,
re-validates and tries again; if the table cannot be loaded, the outcome is unknown and
nothing is cleaned up.

Each loaded table gets a FileIO of its own: the catalog's properties, then the `config` and
`storage-credentials` the server returned for that table (vended credentials).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import requests

from icecore.catalog.base import WAREHOUSE, Catalog, Identifier, table_identifier, to_identifier
from icecore.catalog.rest.auth import (
    CREDENTIAL,
    OAUTH2_SERVER_URI,
    SIGV4_ENABLED,
    TOKEN,
    TOKENS_PATH,
    OAuth2ClientCredentials,
    SigV4Signer,
    extra_headers,
)
from icecore.catalog.rest.http import RestError, RestSession, int_property
from icecore.commit.changes import TableCommit, updates_landed
from icecore.errors import (
    CatalogError,
    CommitFailedError,
    CommitStateUnknownError,
    NoSuchNamespaceError,
    NoSuchTableError,
)
from icecore.io import FileIO
from icecore.io.properties import flag
from icecore.spec.metadata import TableMetadata, read_table_metadata
from icecore.spec.partitioning import UNPARTITIONED, PartitionSpec
from icecore.spec.schema import Schema
from icecore.spec.sorting import UNSORTED, SortOrder
from icecore.table import Table

LOG = logging.getLogger(__name__)

URI = "uri"
PREFIX = "prefix"
ACCESS_DELEGATION = "header.X-Iceberg-Access-Delegation"
PAGE_SIZE = ("rest.page-size", "1000")
VERSION_THREADS = ("rest.table-versions-threads", 8)
_NAMESPACE_SEPARATOR = "\x1f"


@dataclass(frozen=True)
class _Version:
    """A table as `table_versions` last loaded it: `metadata` (the loaded JSON) is kept only
    when the load found it changed, for `metadata_at` to use instead of reading the file."""

    location: str
    etag: str | None
    io: FileIO
    metadata: Mapping[str, Any] | None


class RestCatalog(Catalog):
    """`properties` with Iceberg's names: `uri` (required), `warehouse`, `credential` or
    `token`, `scope`, `oauth2-server-uri`, `header.*`, `rest.sigv4-enabled`, FileIO ones.

    Construction asks the server's `GET /v1/config` (with `warehouse`): its defaults go under
    the given properties, its overrides (e.g. `prefix`) above them, as in Java's client.
    """

    def __init__(
        self,
        name: str,
        properties: Mapping[str, str],
        *,
        http: requests.Session | None = None,
    ) -> None:
        props = dict(properties)
        uri = props.get(URI, "").rstrip("/")
        if not uri.startswith(("http://", "https://")):
            raise CatalogError(
                f"catalog {name!r}: a REST catalog needs uri=http(s)://..., got {uri!r}"
            )
        self._http = http or requests.Session()
        self._session = self._new_session(name, uri, props)
        config = self._session.request(
            "GET", "v1/config", "read its configuration",
            params={WAREHOUSE: props[WAREHOUSE]} if props.get(WAREHOUSE) else None,
        ).json()  # fmt: skip
        merged = {**(config.get("defaults") or {}), **props, **(config.get("overrides") or {})}
        super().__init__(name, merged, FileIO(_io_properties(merged)))
        if merged.get(URI, uri).rstrip("/") != uri:
            self._session = self._new_session(name, merged[URI], merged)
        # Used as given, slashes included (Glue's is `catalogs/<id>`), as Java's client does.
        prefix = merged.get(PREFIX, "").strip("/")
        self._base = f"v1/{prefix}/" if prefix else "v1/"
        # What `table_versions` last learnt of each table (its ETag above all).
        self._versions: dict[Identifier, _Version] = {}

    def _new_session(self, name: str, uri: str, props: Mapping[str, str]) -> RestSession:
        oauth = None
        if props.get(CREDENTIAL):
            token_uri = props.get(OAUTH2_SERVER_URI) or f"{uri.rstrip('/')}/{TOKENS_PATH}"
            oauth = OAuth2ClientCredentials(
                self._http,
                catalog_name=name,
                token_uri=token_uri,
                credential=props[CREDENTIAL],
                properties=props,
                timeout=30.0,
            )
        signer = SigV4Signer(props) if flag(props, SIGV4_ENABLED) else None
        return RestSession(
            name,
            uri,
            props,
            oauth=oauth,
            token=props.get(TOKEN),
            signer=signer,
            headers=extra_headers(props),
            http=self._http,
        )

    def __repr__(self) -> str:
        return f"RestCatalog({self.name!r}, {self._session.uri!r})"

    def close(self) -> None:
        self._http.close()

    # Paths ----------------------------------------------------------------------------------

    def _ns_path(self, namespace: Identifier) -> str:
        return f"{self._base}namespaces/{quote(_NAMESPACE_SEPARATOR.join(namespace), safe='')}"

    def _table_path(self, identifier: Identifier) -> str:
        return f"{self._ns_path(identifier[:-1])}/tables/{quote(identifier[-1], safe='')}"

    def _paged(self, path: str, what: str, key: str, params: dict[str, str]) -> Iterator[Any]:
        token: str | None = None
        while True:
            query = {**params, "pageSize": self.properties.get(*PAGE_SIZE)}
            if token:
                query["pageToken"] = token
            body = self._session.request("GET", path, what, params=query).json()
            yield from body.get(key) or ()
            token = body.get("next-page-token")
            if not token:
                return

    # Namespaces -----------------------------------------------------------------------------

    def create_namespace(
        self, namespace: str | Iterable[str], properties: Mapping[str, str] | None = None
    ) -> None:
        ns = to_identifier(namespace)
        body = {"namespace": list(ns), "properties": dict(properties or {})}
        self._session.request(
            "POST", f"{self._base}namespaces", f"create namespace {'.'.join(ns)}", json=body
        )

    def namespace_exists(self, namespace: str | Iterable[str]) -> bool:
        ns = to_identifier(namespace)
        try:
            self._session.request(
                "HEAD", self._ns_path(ns), f"check namespace {'.'.join(ns)}", ok=(200, 204)
            )
        except NoSuchNamespaceError:
            return False
        except NoSuchTableError:  # a 404 without the spec's body
            return False
        return True

    def list_namespaces(self, parent: str | Iterable[str] = ()) -> list[Identifier]:
        ns = to_identifier(parent) if parent else ()
        params = {"parent": _NAMESPACE_SEPARATOR.join(ns)} if ns else {}
        what = f"list namespaces under {'.'.join(ns) or 'the root'}"
        found = self._paged(f"{self._base}namespaces", what, "namespaces", params)
        return [tuple(n) for n in found]

    def load_namespace_properties(self, namespace: str | Iterable[str]) -> dict[str, str]:
        ns = to_identifier(namespace)
        what = f"load namespace {'.'.join(ns)}"
        body = self._session.request("GET", self._ns_path(ns), what).json()
        return dict(body.get("properties") or {})

    def update_namespace_properties(
        self,
        namespace: str | Iterable[str],
        removals: Iterable[str] = (),
        updates: Mapping[str, str] | None = None,
    ) -> None:
        ns = to_identifier(namespace)
        body = {"removals": list(removals), "updates": dict(updates or {})}
        what = f"update namespace {'.'.join(ns)} properties"
        self._session.request("POST", f"{self._ns_path(ns)}/properties", what, json=body)

    def drop_namespace(self, namespace: str | Iterable[str]) -> None:
        ns = to_identifier(namespace)
        what = f"drop namespace {'.'.join(ns)}"
        self._session.request("DELETE", self._ns_path(ns), what, ok=(200, 204))

    # Tables ---------------------------------------------------------------------------------

    def list_tables(self, namespace: str | Iterable[str]) -> list[Identifier]:
        ns = to_identifier(namespace)
        path = f"{self._ns_path(ns)}/tables"
        found = self._paged(path, f"list tables of namespace {'.'.join(ns)}", "identifiers", {})
        return [(*i["namespace"], i["name"]) for i in found]

    def table_exists(self, identifier: str | Iterable[str]) -> bool:
        ident = table_identifier(identifier)
        try:
            self._session.request(
                "HEAD", self._table_path(ident), f"check table {'.'.join(ident)}", ok=(200, 204)
            )
        except (NoSuchTableError, NoSuchNamespaceError):
            return False
        return True

    def current_metadata_location(self, identifier: str | Iterable[str]) -> str:
        return self._load(table_identifier(identifier))[0]["metadata-location"]

    def table_versions(self, namespace: str | Iterable[str] | None = None) -> dict[Identifier, str]:
        """The REST protocol lists no metadata locations: every table is loaded, with
        `If-None-Match: <the ETag of its last load>` (REST spec, loadTable, since Iceberg
        1.8), so that a server that issues ETags answers an unchanged table with a
        body-less 304 and this costs one small request per table. A server that issues none
        (Iceberg Java's own handlers up to 1.10) sends every table's full metadata at every
        call. Plus one call per namespace and per page of its tables. The loads go
        `rest.table-versions-threads` (8) at a time: one after the other, a catalog of
        thousands of tables takes thousands of round trips.
        """
        scope = () if namespace is None else to_identifier(namespace)
        pending: list[Identifier] = [scope] if scope else list(self.list_namespaces())
        tables: list[Identifier] = []
        while pending:
            current = pending.pop()
            try:
                pending.extend(self.list_namespaces(current))
                tables.extend(self.list_tables(current))
            except NoSuchNamespaceError:
                continue
        threads = int_property(self.properties, *VERSION_THREADS)
        with ThreadPoolExecutor(max(1, min(threads, len(tables))), "icefloe-versions") as pool:
            loaded = list(pool.map(self._conditional_load, tables))
        for identifier in [i for i in self._versions if i[: len(scope)] == scope]:
            del self._versions[identifier]
        for identifier, version in zip(tables, loaded, strict=True):
            if version is not None:
                self._versions[identifier] = version
        return {i: v.location for i, v in zip(tables, loaded, strict=True) if v is not None}

    def _conditional_load(self, identifier: Identifier) -> _Version | None:
        """Load `identifier` unless its ETag still matches; None if it is gone meanwhile."""
        known = self._versions.get(identifier)
        headers = self._delegation()
        if known is not None and known.etag:
            headers["If-None-Match"] = known.etag
        try:
            response = self._session.request(
                "GET",
                self._table_path(identifier),
                f"load table {'.'.join(identifier)}",
                headers=headers,
                ok=(200, 304),
            )
        except (NoSuchTableError, NoSuchNamespaceError):
            return None
        if response.status_code == 304:
            if known is None:
                raise CatalogError(
                    f"catalog {self.name!r}: loading {'.'.join(identifier)} without "
                    "If-None-Match was answered 304 Not Modified, which has no metadata"
                )
            # Its metadata, if the last call kept it, has served its turn.
            return dataclasses.replace(known, metadata=None)
        body = response.json()
        location = body["metadata-location"]
        changed = known is not None and known.location != location
        return _Version(
            location,
            response.headers.get("ETag"),
            self._table_io(body),
            body["metadata"] if changed else None,
        )

    def metadata_at(self, identifier: str | Iterable[str], metadata_location: str) -> TableMetadata:
        """The metadata that `table_versions` just loaded, when the table changed there (no
        read); else the file, read with the table's vended settings if it had any."""
        ident = table_identifier(identifier)
        known = self._versions.get(ident)
        if known is not None and known.location == metadata_location:
            if known.metadata is not None:
                return TableMetadata.from_json(known.metadata, location=metadata_location)
            return read_table_metadata(known.io, metadata_location)
        return read_table_metadata(self.io, metadata_location)

    def load_metadata(self, identifier: str | Iterable[str]) -> TableMetadata:
        return self.load_table(identifier).metadata

    def load_table(self, identifier: str | Iterable[str]) -> Table:
        ident = table_identifier(identifier)
        body, io = self._load(ident)
        return Table(ident, _metadata(body), io, self)

    def _delegation(self) -> dict[str, str]:
        """Vended credentials are asked for unless the user set the header (as PyIceberg
        does); `header.X-Iceberg-Access-Delegation=` (empty) asks for none."""
        if self.properties.get(ACCESS_DELEGATION) is None:
            return {"X-Iceberg-Access-Delegation": "vended-credentials"}
        return {}

    def _load(self, ident: Identifier) -> tuple[dict[str, Any], FileIO]:
        response = self._session.request(
            "GET",
            self._table_path(ident),
            f"load table {'.'.join(ident)}",
            headers=self._delegation(),
        )
        body = response.json()
        return body, self._table_io(body)

    def _table_io(self, body: Mapping[str, Any]) -> FileIO:
        """The catalog's FileIO, or one with the table's vended settings on top of it."""
        config = dict(body.get("config") or {})
        location = (body.get("metadata") or {}).get("location", "")
        best = ""
        for credential in body.get("storage-credentials") or ():
            prefix = credential.get("prefix", "")
            if location.startswith(prefix) and len(prefix) >= len(best):
                best = prefix
                config.update(credential.get("config") or {})
        if not config:
            return self.io
        return FileIO({**self.io.properties, **_io_properties(config)})

    def create_table(
        self,
        identifier: str | Iterable[str],
        schema: Schema,
        *,
        spec: PartitionSpec = UNPARTITIONED,
        sort_order: SortOrder = UNSORTED,
        properties: Mapping[str, str] | None = None,
        location: str | None = None,
    ) -> Table:
        ident = table_identifier(identifier)
        body: dict[str, Any] = {
            "name": ident[-1],
            "schema": schema.to_json(),
            "partition-spec": spec.to_json(),
            "write-order": sort_order.to_json(),
            "stage-create": False,
            "properties": dict(properties or {}),
        }
        if location:
            body["location"] = location
        response = self._session.request(
            "POST",
            f"{self._ns_path(ident[:-1])}/tables",
            f"create table {'.'.join(ident)}",
            json=body,
            headers=self._delegation(),
        ).json()
        return Table(ident, _metadata(response), self._table_io(response), self)

    def register_table(self, identifier: str | Iterable[str], metadata_location: str) -> Table:
        ident = table_identifier(identifier)
        body = {"name": ident[-1], "metadata-location": metadata_location}
        response = self._session.request(
            "POST",
            f"{self._ns_path(ident[:-1])}/register",
            f"register table {'.'.join(ident)}",
            json=body,
        ).json()
        return Table(ident, _metadata(response), self._table_io(response), self)

    def rename_table(
        self, from_identifier: str | Iterable[str], to_identifier: str | Iterable[str]
    ) -> Table:
        source, target = table_identifier(from_identifier), table_identifier(to_identifier)
        body = {
            "source": {"namespace": list(source[:-1]), "name": source[-1]},
            "destination": {"namespace": list(target[:-1]), "name": target[-1]},
        }
        what = f"rename table {'.'.join(source)} to {'.'.join(target)}"
        self._session.request("POST", f"{self._base}tables/rename", what, json=body, ok=(200, 204))
        return self.load_table(target)

    def drop_table(self, identifier: str | Iterable[str], purge: bool = False) -> None:
        """With `purge`, the server deletes the files (`purgeRequested`), as the spec has it."""
        ident = table_identifier(identifier)
        self._session.request(
            "DELETE",
            self._table_path(ident),
            f"drop table {'.'.join(ident)}",
            params={"purgeRequested": "true"} if purge else None,
            ok=(200, 204),
        )

    # Commits --------------------------------------------------------------------------------

    def _commit(
        self, identifier: Identifier, base: TableMetadata, commit: TableCommit, timestamp_ms: int
    ) -> TableMetadata:
        name = ".".join(identifier)
        body = {
            "identifier": {"namespace": list(identifier[:-1]), "name": identifier[-1]},
            **commit.to_json(),
        }
        try:
            response = self._session.request(
                "POST", self._table_path(identifier), f"commit to table {name}", json=body
            )
        except RestError as exc:
            if exc.status != 0 and not exc.outcome_unknown:
                raise
            return self._settle(identifier, commit, exc)
        return _metadata(response.json())

    def _settle(self, identifier: Identifier, commit: TableCommit, exc: RestError) -> TableMetadata:
        """After a commit whose outcome is unknown: did it land? (Java's checkCommitStatus.)"""
        name = ".".join(identifier)
        try:
            current = self.load_metadata(identifier)
        except CatalogError as reload_error:
            raise CommitStateUnknownError(
                f"{exc}; reloading {name} to check whether the commit was applied failed too "
                f"({reload_error}); not retrying and not cleaning up"
            ) from exc
        if updates_landed(current, commit):
            LOG.warning("%s: the commit was applied although the catalog answered: %s", name, exc)
            return current
        raise CommitFailedError(f"{exc}; the table shows the commit was not applied") from exc


def _metadata(body: Mapping[str, Any]) -> TableMetadata:
    return TableMetadata.from_json(body["metadata"], location=body.get("metadata-location"))


def _io_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """What FileIO reads: every property except the REST client's own secrets."""
    return {k: v for k, v in properties.items() if k not in (CREDENTIAL, TOKEN)}
