"""Building `pyarrow.fs` filesystems from Iceberg catalog properties.

Anything a property does not say falls back to the SDK's own defaults (environment variables,
instance credentials, the cloud's public endpoints), so the same code serves a laptop against
MinIO or Azurite and a cluster against the real services.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

from pyarrow import fs as pafs

from icecore.errors import FileError
from icecore.io.locations import Location, Store
from icecore.io.properties import (
    ADLS_ACCOUNT_KEY,
    ADLS_BLOB_STORAGE_AUTHORITY,
    ADLS_BLOB_STORAGE_SCHEME,
    ADLS_DFS_STORAGE_AUTHORITY,
    ADLS_DFS_STORAGE_SCHEME,
    ADLS_SAS_TOKEN,
    GCS_NO_AUTH,
    GCS_OAUTH2_TOKEN,
    GCS_OAUTH2_TOKEN_EXPIRES_AT,
    GCS_PROJECT_ID,
    GCS_SERVICE_HOST,
    HDFS_USER,
    S3_ACCESS_KEY_ID,
    S3_CONNECT_TIMEOUT,
    S3_ENDPOINT,
    S3_PATH_STYLE_ACCESS,
    S3_REGION,
    S3_REQUEST_TIMEOUT,
    S3_SECRET_ACCESS_KEY,
    S3_SESSION_TOKEN,
    flag,
    seconds,
)


def build(location: Location, properties: Mapping[str, str], max_attempts: int) -> pafs.FileSystem:
    """The filesystem serving `location`. `max_attempts` bounds the SDK's own retries where
    pyarrow lets it be set (S3); icecore retries whole operations on top (see `retry`)."""
    if location.store is Store.S3:
        return s3(properties, max_attempts)
    if location.store is Store.GCS:
        return gcs(properties)
    if location.store is Store.AZURE:
        return azure(location.endpoint, properties)
    if location.store is Store.HDFS:
        return hdfs(location.endpoint, properties)
    return pafs.LocalFileSystem()


def _given(options: Mapping[str, object]) -> dict[str, object]:
    return {k: v for k, v in options.items() if v is not None}


def s3(properties: Mapping[str, str], max_attempts: int) -> pafs.S3FileSystem:
    p = properties
    options: dict[str, object] = {
        "endpoint_override": p.get(S3_ENDPOINT),
        "access_key": p.get(S3_ACCESS_KEY_ID),
        "secret_key": p.get(S3_SECRET_ACCESS_KEY),
        "session_token": p.get(S3_SESSION_TOKEN),
        "region": p.get(S3_REGION),
        "connect_timeout": seconds(p, S3_CONNECT_TIMEOUT),
        "request_timeout": seconds(p, S3_REQUEST_TIMEOUT),
        # The SDK retries each request (throttling, 5xx, dropped connections) with jittered
        # exponential backoff; AWS's "standard" mode is the one AWS documents for S3.
        "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=max_attempts),
        # A file smaller than one part goes up as one PutObject at close, not as a multipart
        # upload opened at once: one request instead of three, and nothing in flight until
        # the writer is done.
        "allow_delayed_open": True,
    }
    path_style = flag(p, S3_PATH_STYLE_ACCESS)
    if path_style is not None:
        # pyarrow addresses buckets by path only when an endpoint is overridden, unless
        # virtual addressing is forced; Iceberg's property says the opposite way round.
        options["force_virtual_addressing"] = not path_style
    return pafs.S3FileSystem(**_given(options))


def gcs(properties: Mapping[str, str]) -> pafs.GcsFileSystem:
    p = properties
    options: dict[str, object] = {"project_id": p.get(GCS_PROJECT_ID)}
    if flag(p, GCS_NO_AUTH):
        options["anonymous"] = True
    if GCS_SERVICE_HOST in p:
        # `http://127.0.0.1:4443` for an emulator: pyarrow wants scheme and host:port apart.
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
        else:
            # pyarrow requires an expiry with a token; a static token is taken as valid for
            # as long as a job may run.
            options["credential_token_expiration"] = datetime.now(tz=UTC) + timedelta(days=1)
    return pafs.GcsFileSystem(**_given(options))


def azure(host: str, properties: Mapping[str, str]) -> pafs.AzureFileSystem:
    """`host` is the location's `account.dfs.core.windows.net` (or `.blob.`): the account name
    comes from it. The authority properties, when set, replace the public service hosts, which
    is how an `abfss://container@devstoreaccount1.dfs.core.windows.net/...` location reaches
    Azurite: pyarrow then addresses the account as the first path segment."""
    account, _, domain = host.partition(".")
    p = properties
    if p.get(ADLS_ACCOUNT_KEY) and p.get(ADLS_SAS_TOKEN):
        raise FileError(host, f"set only one of {ADLS_ACCOUNT_KEY} and {ADLS_SAS_TOKEN}")
    sas = p.get(ADLS_SAS_TOKEN)
    options: dict[str, object] = {
        "account_key": p.get(ADLS_ACCOUNT_KEY) or None,
        # pyarrow appends the token to the URL as is: without its "?" it lands in the path.
        "sas_token": "?" + sas.lstrip("?") if sas else None,
        "blob_storage_authority": p.get(ADLS_BLOB_STORAGE_AUTHORITY),
        "dfs_storage_authority": p.get(ADLS_DFS_STORAGE_AUTHORITY),
        "blob_storage_scheme": p.get(ADLS_BLOB_STORAGE_SCHEME),
        "dfs_storage_scheme": p.get(ADLS_DFS_STORAGE_SCHEME),
    }
    if domain:
        # pyarrow prepends the account name to authorities that start with a dot.
        dfs_domain = domain.replace("blob.", "dfs.", 1)
        blob_domain = domain.replace("dfs.", "blob.", 1)
        options["dfs_storage_authority"] = options["dfs_storage_authority"] or f".{dfs_domain}"
        options["blob_storage_authority"] = options["blob_storage_authority"] or f".{blob_domain}"
    return pafs.AzureFileSystem(account, **_given(options))


def hdfs(authority: str, properties: Mapping[str, str]) -> pafs.HadoopFileSystem:
    host, _, port = authority.rpartition("@")[2].partition(":")
    return pafs.HadoopFileSystem(
        host or "default", int(port) if port else 8020, user=properties.get(HDFS_USER)
    )
