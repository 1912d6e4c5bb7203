"""File access for every storage an Iceberg table may live on, through `pyarrow.fs`.

Iceberg tables store absolute locations (`s3://bucket/t/data/x.parquet`, `hdfs://nn/t/...`,
`file:/t/...`, plain `/t/...`) in their metadata, and those exact strings must come back out:
orphan-file removal compares listed locations with the ones the manifests hold, so a listing
that dropped or changed the scheme would make every live file look orphaned. `FileIO` therefore
keeps, for each location, how to turn a filesystem path back into a location spelled the way
the caller spelled it.

Filesystems are built from Iceberg's catalog property names (`s3.endpoint`, `gcs.project-id`,
...) and cached per scheme and authority, so a job touching thousands of files builds one client.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NamedTuple
from urllib.parse import urlsplit

import pyarrow as pa
from pyarrow import fs as pafs

from icecore.errors import FileError

S3_ENDPOINT = "s3.endpoint"
S3_ACCESS_KEY_ID = "s3.access-key-id"
S3_SECRET_ACCESS_KEY = "s3.secret-access-key"
S3_SESSION_TOKEN = "s3.session-token"
S3_REGION = "s3.region"
S3_PATH_STYLE_ACCESS = "s3.path-style-access"
GCS_PROJECT_ID = "gcs.project-id"
GCS_SERVICE_HOST = "gcs.service.host"
GCS_OAUTH2_TOKEN = "gcs.oauth2.token"
GCS_OAUTH2_TOKEN_EXPIRES_AT = "gcs.oauth2.token-expires-at"
GCS_NO_AUTH = "gcs.no-auth"
ADLS_ACCOUNT_KEY = "adls.account-key"
ADLS_SAS_TOKEN = "adls.sas-token"
HDFS_USER = "hdfs.user"

_S3_SCHEMES = frozenset({"s3", "s3a", "s3n"})
_GCS_SCHEMES = frozenset({"gs", "gcs"})
_AZURE_SCHEMES = frozenset({"abfs", "abfss"})


class ListedFile(NamedTuple):
    """One file found by `FileIO.list_prefix`.

    `mtime_ms` is None when the filesystem does not report a modification time; callers that
    delete by age must then leave the file alone.
    """

    location: str
    size: int
    mtime_ms: int | None


@dataclass(frozen=True)
class _Resolved:
    filesystem: pafs.FileSystem
    path: str
    to_location: Callable[[str], str]


def _prefixer(prefix: str) -> Callable[[str], str]:
    return lambda path: path if "://" in path else prefix + path


def _flag(properties: Mapping[str, str], name: str) -> bool | None:
    value = properties.get(name)
    if value is None:
        return None
    if value.lower() not in ("true", "false"):
        raise FileError(name, f"property must be 'true' or 'false', got {value!r}")
    return value.lower() == "true"


class FileIO:
    """Reads, writes, lists and deletes files at Iceberg locations.

    `properties` are catalog/table properties using Iceberg's names: `s3.endpoint`,
    `s3.access-key-id`, `s3.secret-access-key`, `s3.session-token`, `s3.region`,
    `s3.path-style-access`; `gcs.project-id`, `gcs.service.host`, `gcs.oauth2.token`,
    `gcs.oauth2.token-expires-at`, `gcs.no-auth`; `adls.account-key`, `adls.sas-token`;
    `hdfs.user`. Anything absent falls back to the SDK's own defaults (environment variables,
    instance credentials).
    """

    def __init__(self, properties: Mapping[str, str] | None = None) -> None:
        self.properties: dict[str, str] = dict(properties or {})
        self._filesystems: dict[tuple[str, str], pafs.FileSystem] = {}
        self._lock = threading.Lock()

    def resolve(self, location: str) -> tuple[pafs.FileSystem, str]:
        """The filesystem holding `location` and the path to hand to it."""
        resolved = self._resolve(location)
        return resolved.filesystem, resolved.path

    def open_input(self, location: str) -> pa.NativeFile:
        """A seekable binary file; Parquet and Avro readers need random access."""
        resolved = self._resolve(location)
        try:
            return resolved.filesystem.open_input_file(resolved.path)
        except FileNotFoundError:
            raise FileError(location, "file not found") from None
        except OSError as exc:
            raise FileError(location, f"cannot open for reading: {exc}") from exc

    def read_bytes(self, location: str) -> bytes:
        with self.open_input(location) as f:
            try:
                return f.read()
            except OSError as exc:
                raise FileError(location, f"cannot read: {exc}") from exc

    def open_output(self, location: str, overwrite: bool = False) -> pa.NativeFile:
        """A binary file to write, refusing to replace an existing one unless `overwrite`.

        Metadata, manifest lists and manifests are immutable once a commit may point at them,
        so clobbering one corrupts the table; the default is the safe one. On local disks the
        check is atomic (exclusive create). Object stores offer no such primitive through
        pyarrow, so there the check is best effort: commit atomicity belongs to the catalog.
        """
        resolved = self._resolve(location)
        filesystem, path = resolved.filesystem, resolved.path
        try:
            if isinstance(filesystem, pafs.LocalFileSystem):
                os.makedirs(os.path.dirname(path), exist_ok=True)
                if not overwrite:
                    return pa.PythonFile(open(path, "xb"), mode="w")
            elif not overwrite and self._info(resolved).type != pafs.FileType.NotFound:
                raise FileExistsError(location)
            return filesystem.open_output_stream(path)
        except FileExistsError:
            raise FileError(location, "already exists; refusing to overwrite it") from None
        except OSError as exc:
            raise FileError(location, f"cannot open for writing: {exc}") from exc

    def write_bytes(self, location: str, data: bytes, overwrite: bool = False) -> None:
        with self.open_output(location, overwrite=overwrite) as f:
            try:
                f.write(data)
            except OSError as exc:
                raise FileError(location, f"cannot write: {exc}") from exc

    def exists(self, location: str) -> bool:
        return self._info(self._resolve(location)).type != pafs.FileType.NotFound

    def size(self, location: str) -> int:
        info = self._info(self._resolve(location))
        if info.type == pafs.FileType.NotFound:
            raise FileError(location, "file not found")
        if info.type != pafs.FileType.File:
            raise FileError(location, "is not a file")
        return int(info.size)

    def delete(self, location: str, missing_ok: bool = False) -> None:
        """Delete one file. A missing file is an error unless `missing_ok`: expiring snapshots
        may race with another cleanup, but a caller deleting a file it just listed should know
        when something else got there first."""
        resolved = self._resolve(location)
        try:
            resolved.filesystem.delete_file(resolved.path)
        except FileNotFoundError:
            if not missing_ok:
                raise FileError(location, "cannot delete: file not found") from None
        except OSError as exc:
            raise FileError(location, f"cannot delete: {exc}") from exc

    def list_prefix(self, location: str) -> Iterator[ListedFile]:
        """Every file under the directory `location`, at any depth, as a location spelled
        with the caller's scheme and authority.

        The prefix is a directory, not a raw key prefix: listing `s3://b/db/t` must never
        return `s3://b/db/t_backup/...`, since orphan-file removal deletes what it lists. A
        directory that does not exist lists nothing.
        """
        resolved = self._resolve(location)
        selector = pafs.FileSelector(resolved.path, recursive=True, allow_not_found=True)
        try:
            infos = resolved.filesystem.get_file_info(selector)
        except OSError as exc:
            raise FileError(location, f"cannot list: {exc}") from exc
        for info in infos:
            if info.type == pafs.FileType.File:
                mtime_ns = info.mtime_ns
                yield ListedFile(
                    resolved.to_location(info.path),
                    int(info.size),
                    None if mtime_ns is None else mtime_ns // 1_000_000,
                )

    def _info(self, resolved: _Resolved) -> pafs.FileInfo:
        try:
            return resolved.filesystem.get_file_info(resolved.path)
        except OSError as exc:
            raise FileError(resolved.to_location(resolved.path), f"cannot stat: {exc}") from exc

    def _resolve(self, location: str) -> _Resolved:
        if not location:
            raise FileError(location, "empty location")
        scheme, sep, rest = location.partition(":")
        # A bare path, or a Windows drive letter (C:\...), is a local file.
        if not sep or len(scheme) == 1 or "/" in scheme:
            return _Resolved(self._filesystem("", "", pafs.LocalFileSystem), location, str)
        scheme = scheme.lower()
        # Split by hand: urlsplit would read "#" and "?" in a key as fragment and query.
        authority, path = "", rest
        if rest.startswith("//"):
            authority, slash, tail = rest[2:].partition("/")
            path = slash + tail
        if scheme == "file":
            if authority not in ("", "localhost"):
                raise FileError(location, f"file location on remote host {authority!r}")
            filesystem = self._filesystem("file", "", pafs.LocalFileSystem)
            prefix = location[: len(location) - len(path)]
            return _Resolved(filesystem, path, _prefixer(prefix))
        if not authority:
            raise FileError(location, f"{scheme} location lacks a bucket or authority")
        key = path.lstrip("/")
        if scheme in _S3_SCHEMES or scheme in _GCS_SCHEMES:
            build = self._s3 if scheme in _S3_SCHEMES else self._gcs
            filesystem = self._filesystem(scheme, authority, build)
            bucket_path = f"{authority}/{key}" if key else authority
            return _Resolved(filesystem, bucket_path, _prefixer(f"{scheme}://"))
        if scheme in _AZURE_SCHEMES:
            container, at, host = authority.partition("@")
            if not at:
                raise FileError(location, "abfs location must be container@account.host")
            filesystem = self._filesystem(scheme, authority, lambda: self._azure(host))

            def to_azure_location(fs_path: str) -> str:
                container_name, _, blob = fs_path.partition("/")
                return f"{scheme}://{container_name}@{host}/{blob}"

            container_path = f"{container}/{key}" if key else container
            return _Resolved(filesystem, container_path, to_azure_location)
        if scheme == "hdfs":
            filesystem = self._filesystem(scheme, authority, lambda: self._hdfs(authority))
            return _Resolved(filesystem, path or "/", _prefixer(f"hdfs://{authority}"))
        raise FileError(location, f"unsupported scheme {scheme!r}")

    def _filesystem(
        self, scheme: str, authority: str, build: Callable[[], pafs.FileSystem]
    ) -> pafs.FileSystem:
        key = (scheme, authority)
        with self._lock:
            cached = self._filesystems.get(key)
            if cached is None:
                try:
                    cached = self._filesystems[key] = build()
                except (OSError, ValueError) as exc:
                    # libhdfs lists every JVM path it tried; the first line says what failed.
                    problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                    raise FileError(
                        f"{scheme}://{authority}", f"cannot connect: {problem}"
                    ) from exc
            return cached

    def _s3(self) -> pafs.FileSystem:
        p = self.properties
        options: dict[str, object] = {
            "endpoint_override": p.get(S3_ENDPOINT),
            "access_key": p.get(S3_ACCESS_KEY_ID),
            "secret_key": p.get(S3_SECRET_ACCESS_KEY),
            "session_token": p.get(S3_SESSION_TOKEN),
            "region": p.get(S3_REGION),
        }
        path_style = _flag(p, S3_PATH_STYLE_ACCESS)
        if path_style is not None:
            # pyarrow addresses buckets by path only when an endpoint is overridden, unless
            # virtual addressing is forced; Iceberg's property says the opposite way round.
            options["force_virtual_addressing"] = not path_style
        return pafs.S3FileSystem(**{k: v for k, v in options.items() if v is not None})

    def _gcs(self) -> pafs.FileSystem:
        p = self.properties
        options: dict[str, object] = {"project_id": p.get(GCS_PROJECT_ID)}
        if _flag(p, GCS_NO_AUTH):
            options["anonymous"] = True
        if GCS_SERVICE_HOST in p:
            endpoint = urlsplit(p[GCS_SERVICE_HOST])
            options["scheme"] = endpoint.scheme or None
            options["endpoint_override"] = endpoint.netloc or endpoint.path
        if GCS_OAUTH2_TOKEN in p:
            options["access_token"] = p[GCS_OAUTH2_TOKEN]
            if GCS_OAUTH2_TOKEN_EXPIRES_AT in p:
                expires_ms = int(p[GCS_OAUTH2_TOKEN_EXPIRES_AT])
                options["credential_token_expiration"] = datetime.fromtimestamp(
                    expires_ms / 1000, tz=UTC
                )
        return pafs.GcsFileSystem(**{k: v for k, v in options.items() if v is not None})

    def _azure(self, host: str) -> pafs.FileSystem:
        account, _, domain = host.partition(".")
        p = self.properties
        options: dict[str, object] = {
            "account_key": p.get(ADLS_ACCOUNT_KEY),
            "sas_token": p.get(ADLS_SAS_TOKEN),
        }
        if domain:
            # pyarrow prepends the account name to these authorities, hence the leading dot.
            options["dfs_storage_authority"] = f".{domain}"
            options["blob_storage_authority"] = "." + domain.replace("dfs.", "blob.", 1)
        return pafs.AzureFileSystem(account, **{k: v for k, v in options.items() if v})

    def _hdfs(self, authority: str) -> pafs.FileSystem:
        host, _, port = authority.rpartition("@")[2].partition(":")
        return pafs.HadoopFileSystem(
            host or "default", int(port) if port else 8020, user=self.properties.get(HDFS_USER)
        )
