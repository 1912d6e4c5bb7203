"""How a REST catalog request proves who sends it, with the property names Iceberg's Java and
Python clients use: OAuth2 client credentials (`credential`, `oauth2-server-uri`, `scope`),
a static bearer `token`, extra `header.*` headers, and AWS SigV4 (`rest.sigv4-enabled`) for
AWS Glue's and S3 Tables' Iceberg endpoints.

OAuth2 tokens are fetched on first use and refreshed before they expire (at 80% of their
lifetime), so a long compaction's commit does not meet a 401; a 401/419 is answered by one
fresh token and one retry of the request.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Mapping
from hashlib import sha256

import requests

from icecore.errors import CatalogError

CREDENTIAL = "credential"  # "client_id:client_secret", or a bare secret
TOKEN = "token"
OAUTH2_SERVER_URI = "oauth2-server-uri"
SCOPE = "scope"
DEFAULT_SCOPE = "catalog"  # Java's and PyIceberg's default
AUDIENCE = "audience"
RESOURCE = "resource"
HEADER_PREFIX = "header."
SIGV4_ENABLED = "rest.sigv4-enabled"
SIGNING_NAME = "rest.signing-name"
SIGNING_REGION = "rest.signing-region"
SIGV4_ACCESS_KEY_ID = "rest.access-key-id"
SIGV4_SECRET_ACCESS_KEY = "rest.secret-access-key"
SIGV4_SESSION_TOKEN = "rest.session-token"
TOKENS_PATH = "v1/oauth/tokens"
REFRESH_AT = 0.8  # of a token's lifetime


class OAuth2ClientCredentials:
    """Bearer tokens from an OAuth2 token endpoint, by the client-credentials grant."""

    def __init__(
        self,
        http: requests.Session,
        *,
        catalog_name: str,
        token_uri: str,
        credential: str,
        properties: Mapping[str, str],
        timeout: float,
    ) -> None:
        client_id, sep, secret = credential.partition(":")
        self._client_id, self._secret = (client_id, secret) if sep else (None, client_id)
        self._http = http
        self._catalog = catalog_name
        self._token_uri = token_uri
        self._scope = properties.get(SCOPE, DEFAULT_SCOPE)
        self._extra = {k: properties[k] for k in (AUDIENCE, RESOURCE) if properties.get(k)}
        self._timeout = timeout
        self._token: str | None = None
        self._refresh_at = 0.0
        self._lock = threading.Lock()

    def token(self, *, force: bool = False) -> str:
        with self._lock:
            if force or self._token is None or time.monotonic() >= self._refresh_at:
                self._fetch()
            assert self._token is not None
            return self._token

    def _fetch(self) -> None:
        form = {"grant_type": "client_credentials", "client_secret": self._secret,
                "scope": self._scope, **self._extra}  # fmt: skip
        if self._client_id is not None:
            form["client_id"] = self._client_id
        try:
            response = self._http.post(self._token_uri, data=form, timeout=self._timeout)
        except requests.RequestException as exc:
            raise CatalogError(
                f"catalog {self._catalog!r}: cannot reach its token endpoint {self._token_uri}: "
                f"{connection_problem(exc)}"
            ) from exc
        if response.status_code != 200:
            raise CatalogError(
                f"catalog {self._catalog!r}: its token endpoint {self._token_uri} refused the "
                f"client credentials (HTTP {response.status_code}: {_oauth_error(response)})"
            )
        body = response.json()
        self._token = body["access_token"]
        lifetime = body.get("expires_in")
        self._refresh_at = (
            time.monotonic() + float(lifetime) * REFRESH_AT if lifetime else float("inf")
        )


def _oauth_error(response: requests.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:200]
    if isinstance(body.get("error"), dict):  # the REST spec's ErrorModel
        return str(body["error"].get("message"))
    return " - ".join(str(body[k]) for k in ("error", "error_description") if body.get(k))


class SigV4Signer:
    """Signs each request with AWS Signature V4 (botocore's signer), body hash included."""

    def __init__(self, properties: Mapping[str, str]) -> None:
        import boto3  # noqa: PLC0415 - only SigV4 catalogs need it

        region = properties.get(SIGNING_REGION) or properties.get("client.region")
        if not region:
            raise CatalogError(f"{SIGV4_ENABLED} needs {SIGNING_REGION} (e.g. us-east-1)")
        session = boto3.Session(
            aws_access_key_id=properties.get(SIGV4_ACCESS_KEY_ID),
            aws_secret_access_key=properties.get(SIGV4_SECRET_ACCESS_KEY),
            aws_session_token=properties.get(SIGV4_SESSION_TOKEN),
            region_name=region,
        )
        credentials = session.get_credentials()
        if credentials is None:
            raise CatalogError("SigV4 signing found no AWS credentials (rest.access-key-id, env)")
        self._credentials = credentials
        self._name = properties.get(SIGNING_NAME, "execute-api")
        self._region = region

    def sign(self, request: requests.PreparedRequest) -> None:
        from botocore.auth import SigV4Auth  # noqa: PLC0415
        from botocore.awsrequest import AWSRequest  # noqa: PLC0415

        body = request.body or b""
        if isinstance(body, str):
            body = body.encode()
        headers = {k: v for k, v in request.headers.items() if k.lower() != "authorization"}
        headers["x-amz-content-sha256"] = sha256(body).hexdigest()
        aws = AWSRequest(method=request.method, url=request.url, data=body, headers=headers)
        SigV4Auth(self._credentials.get_frozen_credentials(), self._name, self._region).add_auth(
            aws
        )
        request.headers.update(dict(aws.headers.items()))


def extra_headers(properties: Mapping[str, str]) -> dict[str, str]:
    """`header.X-Iceberg-Access-Delegation=...` and the like, as Java passes them on."""
    return {
        k[len(HEADER_PREFIX) :]: v for k, v in properties.items() if k.startswith(HEADER_PREFIX)
    }


def connection_problem(exc: requests.RequestException) -> str:
    """The root cause of a failed request in a few words (`[Errno 111] Connection refused`,
    `read timed out`), not urllib3's nested retry report."""
    if isinstance(exc, requests.Timeout):
        return f"no answer in time ({type(exc).__name__})"
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, OSError) and cause.errno is not None:
            return f"cannot connect: [Errno {cause.errno}] {cause.strerror}"
        cause = cause.__cause__ or cause.__context__
    text = re.sub(r"\(Caused by .*", "", str(exc)).strip()
    return text[:300] or type(exc).__name__
