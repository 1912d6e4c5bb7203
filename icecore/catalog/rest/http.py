"""HTTP for the REST catalog: one `requests` session, auth on every request, timeouts, backoff
on 429/503 for reads, and the spec's error model turned into icecore exceptions that carry the
server's own message and name the catalog.

Only reads (GET, HEAD) are retried by this layer: a write that failed may have been applied,
and whether to resend it is the caller's decision (a commit first checks whether it landed).
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from typing import Any

import requests

from icecore.catalog.rest.auth import OAuth2ClientCredentials, SigV4Signer, connection_problem
from icecore.errors import (
    AlreadyExistsError,
    CatalogError,
    CommitFailedError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
)

CONNECT_TIMEOUT = ("rest.connect-timeout-ms", 10_000)
REQUEST_TIMEOUT = ("rest.request-timeout-ms", 120_000)
READ_RETRIES = ("rest.read-retries", 4)
_RETRIED_STATUS = (429, 503)
_UNKNOWN_OUTCOME = (500, 502, 503, 504)


class RestError(CatalogError):
    """An HTTP error from the catalog: `status`, the spec's error `type` and message."""

    def __init__(self, message: str, status: int, error_type: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type

    @property
    def outcome_unknown(self) -> bool:
        """A server-side failure after which a write may or may not have been applied."""
        return self.status in _UNKNOWN_OUTCOME


def _error_class(status: int, error_type: str, what: str) -> type[CatalogError]:
    if status == 404:
        if "Namespace" in error_type or what.startswith("namespace"):
            return NoSuchNamespaceError
        return NoSuchTableError
    if status == 409:
        if "NotEmpty" in error_type:
            return NamespaceNotEmptyError
        if "CommitFailed" in error_type or what.startswith("commit"):
            return CommitFailedError
        return AlreadyExistsError
    return RestError


def int_property(properties: Mapping[str, str], name: str, default: int) -> int:
    value = properties.get(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise CatalogError(f"catalog property {name} must be an integer, got {value!r}") from None


class RestSession:
    """Requests against one REST catalog; `what` in each call names the action in errors."""

    def __init__(
        self,
        catalog_name: str,
        uri: str,
        properties: Mapping[str, str],
        *,
        oauth: OAuth2ClientCredentials | None,
        token: str | None,
        signer: SigV4Signer | None,
        headers: Mapping[str, str],
        http: requests.Session,
    ) -> None:
        self.catalog_name = catalog_name
        self.uri = uri.rstrip("/")
        self._oauth, self._token, self._signer = oauth, token, signer
        self._http = http
        self._http.headers.update(
            {"Content-Type": "application/json", "X-Client-Version": "icefloe", **headers}
        )
        self.timeout = (
            int_property(properties, *CONNECT_TIMEOUT) / 1000,
            int_property(properties, *REQUEST_TIMEOUT) / 1000,
        )
        self._read_retries = int_property(properties, *READ_RETRIES)

    def request(
        self,
        method: str,
        path: str,
        what: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        ok: tuple[int, ...] = (200,),
    ) -> requests.Response:
        """Send, authenticate, retry reads on 429/503; raise the mapped error otherwise."""
        url = f"{self.uri}/{path.lstrip('/')}"
        attempt = 0
        refreshed = False
        while True:
            attempt += 1
            try:
                response = self._send(method, url, json, params, headers, refresh=refreshed)
            except requests.RequestException as exc:
                if method in ("GET", "HEAD") and attempt <= self._read_retries:
                    self._backoff(attempt, None)
                    continue
                raise RestError(
                    f"catalog {self.catalog_name!r} at {self.uri}: cannot {what}: "
                    f"{connection_problem(exc)}",
                    status=0,
                    error_type=type(exc).__name__,
                ) from exc
            if response.status_code in ok:
                return response
            if response.status_code in (401, 419) and self._oauth is not None and not refreshed:
                refreshed = True  # the token may have been revoked or expired early
                continue
            if (
                method in ("GET", "HEAD")
                and response.status_code in _RETRIED_STATUS
                and attempt <= self._read_retries
            ):
                self._backoff(attempt, response.headers.get("Retry-After"))
                continue
            raise self._error(response, what)

    def _send(
        self,
        method: str,
        url: str,
        body: Any,
        params: Mapping[str, Any] | None,
        headers: Mapping[str, str] | None,
        *,
        refresh: bool,
    ) -> requests.Response:
        request = requests.Request(
            method, url, json=body, params=params, headers=dict(headers or {})
        )
        prepared = self._http.prepare_request(request)
        if self._oauth is not None:
            prepared.headers["Authorization"] = f"Bearer {self._oauth.token(force=refresh)}"
        elif self._token is not None:
            prepared.headers["Authorization"] = f"Bearer {self._token}"
        if self._signer is not None:
            self._signer.sign(prepared)
        return self._http.send(prepared, timeout=self.timeout)

    @staticmethod
    def _backoff(attempt: int, retry_after: str | None) -> None:
        if retry_after and retry_after.isdigit():
            delay = min(float(retry_after), 30.0)
        else:
            delay = min(0.1 * 2 ** (attempt - 1), 5.0) * random.uniform(0.5, 1.0)
        time.sleep(delay)

    def _error(self, response: requests.Response, what: str) -> CatalogError:
        error_type, message = "", response.text[:500].strip()
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            error_type = str(body["error"].get("type") or "")
            message = str(body["error"].get("message") or message)
        status = response.status_code
        if status in (401, 403):
            message = f"not authorized ({message}); check the catalog's credential or token"
        text = (
            f"catalog {self.catalog_name!r} at {self.uri}: cannot {what}: "
            f"{message} (HTTP {status}{' ' + error_type if error_type else ''})"
        )
        cls = _error_class(status, error_type, what)
        if cls is RestError:
            return RestError(text, status, error_type)
        return cls(text)
