"""Iceberg catalog property names that configure file access, and how secret ones are hidden.

The names are Iceberg's (and, where Iceberg's Java and Python implementations differ, PyIceberg's
`PyArrowFileIO`'s), so the properties a catalog already hands to Spark or PyIceberg configure
icecore too. Values travel as strings; flags are 'true' or 'false'.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import quote, quote_plus

from icecore.errors import FileError

S3_ENDPOINT = "s3.endpoint"
S3_ACCESS_KEY_ID = "s3.access-key-id"
S3_SECRET_ACCESS_KEY = "s3.secret-access-key"
S3_SESSION_TOKEN = "s3.session-token"
S3_REGION = "s3.region"
S3_PATH_STYLE_ACCESS = "s3.path-style-access"
S3_CONNECT_TIMEOUT = "s3.connect-timeout"  # seconds, as in PyIceberg
S3_REQUEST_TIMEOUT = "s3.request-timeout"  # seconds, as in PyIceberg
GCS_PROJECT_ID = "gcs.project-id"
GCS_SERVICE_HOST = "gcs.service.host"
GCS_OAUTH2_TOKEN = "gcs.oauth2.token"
GCS_OAUTH2_TOKEN_EXPIRES_AT = "gcs.oauth2.token-expires-at"
GCS_NO_AUTH = "gcs.no-auth"
ADLS_ACCOUNT_NAME = "adls.account-name"
ADLS_ACCOUNT_KEY = "adls.account-key"
ADLS_SAS_TOKEN = "adls.sas-token"
# host[:port] of the Blob and Data Lake services, and http/https: how Azurite is reached.
ADLS_BLOB_STORAGE_AUTHORITY = "adls.blob-storage-authority"
ADLS_DFS_STORAGE_AUTHORITY = "adls.dfs-storage-authority"
ADLS_BLOB_STORAGE_SCHEME = "adls.blob-storage-scheme"
ADLS_DFS_STORAGE_SCHEME = "adls.dfs-storage-scheme"
HDFS_USER = "hdfs.user"

# Property names whose values are credentials. Anything named like a secret counts too, so a
# credential property added later is hidden before anyone remembers to list it here.
SECRET_PROPERTIES = frozenset(
    {S3_SECRET_ACCESS_KEY, S3_SESSION_TOKEN, GCS_OAUTH2_TOKEN, ADLS_ACCOUNT_KEY, ADLS_SAS_TOKEN}
)
_SECRET_NAME = re.compile(r"secret|token|password|credential|account-key|connection-string", re.I)
# Credentials that SDKs put into URLs they echo in errors: SAS and presigned-URL signatures,
# and user:password@ in an endpoint.
_SECRET_IN_URL = re.compile(
    r"(?i)\b(sig|X-Amz-Signature|X-Amz-Credential|X-Amz-Security-Token)=[^&\s'\"]+"
)
_USERINFO = re.compile(r"//[^/@\s:'\"]+:[^/@\s'\"]+@")
MASK = "***"


def flag(properties: Mapping[str, str], name: str) -> bool | None:
    """A 'true'/'false' property as a bool, None when absent; anything else is refused, since a
    misspelled flag silently read as false would e.g. switch S3 addressing."""
    value = properties.get(name)
    if value is None:
        return None
    if value.lower() not in ("true", "false"):
        raise FileError(name, f"property must be 'true' or 'false', got {value!r}")
    return value.lower() == "true"


def seconds(properties: Mapping[str, str], name: str) -> float | None:
    """A duration property in seconds, None when absent."""
    value = properties.get(name)
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        raise FileError(name, f"property must be a number of seconds, got {value!r}") from None


def is_secret(name: str) -> bool:
    return name in SECRET_PROPERTIES or bool(_SECRET_NAME.search(name))


class Redactor:
    """Removes credentials from text before it reaches an exception, a log or a repr.

    Storage SDKs echo request URLs in their errors (Azure's include the SAS token verbatim), so
    every message icecore builds from an SDK error goes through `redact`, which masks each
    secret property's value, spelled raw or URL-encoded, and signatures found in URLs.
    """

    def __init__(self, properties: Mapping[str, str]) -> None:
        values: set[str] = set()
        for name, value in properties.items():
            # Very short values would mask unrelated text; no real credential is that short.
            if is_secret(name) and value and len(value) >= 4:
                values.update({value, quote(value, safe=""), quote_plus(value)})
                # A SAS token's parts may appear on their own, reordered by the SDK.
                values.update(p for p in value.lstrip("?").split("&") if len(p) >= 8)
        # Longest first, so a value containing another is masked whole.
        self._values = sorted(values, key=len, reverse=True)

    def redact(self, text: str) -> str:
        for value in self._values:
            text = text.replace(value, MASK)
        text = _SECRET_IN_URL.sub(lambda m: f"{m.group(1)}={MASK}", text)
        return _USERINFO.sub(f"//{MASK}@", text)

    def properties(self, properties: Mapping[str, str]) -> dict[str, str]:
        """`properties` with every secret value masked, for display."""
        return {k: MASK if is_secret(k) else self.redact(v) for k, v in properties.items()}
