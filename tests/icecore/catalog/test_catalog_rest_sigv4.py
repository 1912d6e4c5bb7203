"""AWS SigV4 for Glue's and S3 Tables' Iceberg REST endpoints, checked by a server on loopback
that recomputes each request's signature from AWS's published algorithm (hashlib/hmac, not
botocore), over the bytes it actually received."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

import pytest

from icecore.catalog import load_catalog
from icecore.errors import CatalogError

KEY_ID, SECRET = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
REGION, SERVICE = "eu-west-1", "glue"


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def expected_signature(method: str, path: str, headers: dict[str, str], body: bytes) -> str:
    """AWS Signature Version 4, step by step as AWS documents it."""
    auth = headers["authorization"]
    fields = dict(p.strip().split("=", 1) for p in auth.split(" ", 1)[1].split(","))
    signed = fields["SignedHeaders"].split(";")
    url = urlsplit(path)
    query = sorted(parse_qsl(url.query, keep_blank_values=True))
    canonical = "\n".join(
        [
            method,
            quote(url.path, safe="/-_.~"),  # encoded twice (every service but S3)
            "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in query),
            "".join(f"{h}:{' '.join(headers[h].split())}\n" for h in signed),
            ";".join(signed),
            hashlib.sha256(body).hexdigest(),
        ]
    )
    amz_date = headers["x-amz-date"]
    scope = f"{amz_date[:8]}/{REGION}/{SERVICE}/aws4_request"
    to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = _hmac(f"AWS4{SECRET}".encode(), amz_date[:8])
    for part in (REGION, SERVICE, "aws4_request"):
        key = _hmac(key, part)
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


class _Handler(BaseHTTPRequestHandler):
    seen: list[dict[str, Any]]

    def _answer(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k.lower(): v for k, v in self.headers.items()}
        auth = headers.get("authorization", "")
        given = auth.rsplit("Signature=", 1)[-1]
        valid = auth.startswith("AWS4-HMAC-SHA256") and given == expected_signature(
            self.command, self.path, headers, body
        )
        self.seen.append({"path": self.path, "auth": auth, "valid": valid, "headers": headers})
        if not valid:
            self._json(403, {"error": {"message": "signature mismatch", "type": "Forbidden",
                                       "code": 403}})  # fmt: skip
        elif self.path.startswith("/iceberg/v1/config"):
            self._json(200, {"defaults": {}, "overrides": {"prefix": "catalogs/123"}})
        else:
            self._json(200, {"namespace": ["db"], "properties": {"owner": "me"}})

    do_GET = do_POST = do_HEAD = _answer

    def _json(self, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def signed_server() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []
    handler = type("Handler", (_Handler,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/iceberg", seen
    server.shutdown()


def _properties(uri: str, **extra: str) -> dict[str, str]:
    return {
        "uri": uri,
        "warehouse": "123456789012",
        "rest.sigv4-enabled": "true",
        "rest.signing-name": SERVICE,
        "rest.signing-region": REGION,
        "rest.access-key-id": KEY_ID,
        "rest.secret-access-key": SECRET,
        **extra,
    }


def test_every_request_is_signed_over_what_was_sent(
    signed_server: tuple[str, list[dict[str, Any]]],
) -> None:
    uri, seen = signed_server
    catalog = load_catalog("glue", _properties(uri, **{"header.X-Trace-Id": "icefloe-1"}))
    assert catalog.load_namespace_properties("db") == {"owner": "me"}
    catalog.create_namespace("db2", {"k": "v"})  # a POST: the body hash is signed too
    assert [s["path"].split("?")[0] for s in seen] == [
        "/iceberg/v1/config",
        "/iceberg/v1/catalogs/123/namespaces/db",
        "/iceberg/v1/catalogs/123/namespaces",
    ]
    assert all(s["valid"] for s in seen)
    # `header.*` properties go with every request (and are signed like the rest).
    assert all(s["headers"]["x-trace-id"] == "icefloe-1" for s in seen)
    assert f"Credential={KEY_ID}/" in seen[0]["auth"]
    assert f"/{REGION}/{SERVICE}/aws4_request" in seen[0]["auth"]


def test_a_wrong_secret_is_refused_in_one_line_naming_the_catalog(
    signed_server: tuple[str, list[dict[str, Any]]],
) -> None:
    uri, _ = signed_server
    with pytest.raises(CatalogError) as raised:
        load_catalog("glue", _properties(uri, **{"rest.secret-access-key": "wrong"}))
    message = str(raised.value)
    assert "catalog 'glue'" in message and "not authorized" in message and "HTTP 403" in message
    assert "wrong" not in message
    with pytest.raises(CatalogError, match=r"rest\.signing-region"):
        load_catalog("glue", {**_properties(uri), "rest.signing-region": ""})
