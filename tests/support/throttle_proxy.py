"""A loopback HTTP proxy in front of an S3 server that throttles like S3 does.

Every `throttle_every`-th request is answered `503 SlowDown` with S3's XML error body
(after its body has been read, as S3 does), the rest are relayed byte for byte to the
server behind. Every request is recorded as (method, path, query), so a test can count
what a client sent (DeleteObjects batches, retries) without trusting the client's word.

A test can also hold requests (`hold(predicate)`): a request the predicate picks is read
whole and then neither relayed nor answered until `release()`, which drops it unanswered; the
client is left waiting in the middle of that request (an upload in progress, for a kill test)
for as long as the test needs, and `held` tells when one arrived: no sleeping, no racing.

Clients address it like the real endpoint (`http://127.0.0.1:PORT` as `s3.endpoint`); the
Host header is passed on unchanged, so SigV4 signatures stay valid.
"""

from __future__ import annotations

import http.client
import itertools
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import NamedTuple

_SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n'
    b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message>"
    b"<RequestId>THROTTLEPROXY</RequestId></Error>"
)
# Hop-by-hop headers (RFC 9110 7.6.1): they describe one connection, not the message.
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "trailer", "upgrade"}
)


class Request(NamedTuple):
    method: str
    path: str
    query: str
    throttled: bool


class ThrottleProxy:
    """Start with `start()`, point clients at `endpoint`, stop with `stop()`."""

    def __init__(self, upstream_host: str, upstream_port: int, throttle_every: int = 0) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.throttle_every = throttle_every  # 0: never throttle
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._counter = itertools.count(1)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._hold: Callable[[Request], bool] | None = None
        self.held = threading.Event()  # set when a held request arrives
        self._released = threading.Event()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> ThrottleProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def reset(self, throttle_every: int = 0) -> None:
        """Forget the recorded requests and restart the count with a new rate; stop holding."""
        self.release()
        with self._lock:
            self.requests.clear()
            self._counter = itertools.count(1)
            self.throttle_every = throttle_every

    def hold(self, predicate: Callable[[Request], bool]) -> None:
        """From now on, hold every request `predicate` picks (see the module docstring)."""
        with self._lock:
            self.held.clear()
            self._released.clear()
            self._hold = predicate

    def release(self) -> None:
        """Stop holding; requests held so far are dropped without an answer."""
        with self._lock:
            self._hold = None
            self._released.set()

    def recorded(self) -> list[Request]:
        with self._lock:
            return list(self.requests)

    def _decide(self, method: str, target: str) -> str:
        """`throttle`, `hold` or `relay`."""
        path, _, query = target.partition("?")
        with self._lock:
            n = next(self._counter)
            throttled = bool(self.throttle_every) and n % self.throttle_every == 0
            request = Request(method, path, query, throttled)
            self.requests.append(request)
            if not throttled and self._hold is not None and self._hold(request):
                self.held.set()
                return "hold"
        return "throttle" if throttled else "relay"

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def _body(self) -> bytes:
                """The body exactly as sent, chunked framing included when it was chunked."""
                if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                    raw = bytearray()
                    while True:
                        size_line = self.rfile.readline()
                        raw += size_line
                        size = int(size_line.split(b";")[0].strip(), 16)
                        if size == 0:
                            while True:  # trailers, then the empty line
                                line = self.rfile.readline()
                                raw += line
                                if line in (b"\r\n", b"\n", b""):
                                    return bytes(raw)
                        raw += self.rfile.read(size + 2)
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            def _relay(self) -> None:
                body = self._body()
                decision = proxy._decide(self.command, self.path)
                if decision == "hold":
                    proxy._released.wait(timeout=600)
                    self.close_connection = True  # dropped: neither relayed nor answered
                    return
                if decision == "throttle":
                    self.send_response(503, "Slow Down")
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(_SLOW_DOWN)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(_SLOW_DOWN)
                    return
                upstream = http.client.HTTPConnection(*proxy.upstream, timeout=60)
                try:
                    upstream.putrequest(
                        self.command, self.path, skip_host=True, skip_accept_encoding=True
                    )
                    for name, value in self.headers.items():
                        if name.lower() not in _HOP_BY_HOP:
                            upstream.putheader(name, value)
                    upstream.endheaders()
                    if body:
                        upstream.send(body)
                    response = upstream.getresponse()
                    payload = response.read()
                    self.send_response(response.status, response.reason)
                    for name, value in response.getheaders():
                        lowered = name.lower()
                        if lowered in _HOP_BY_HOP or lowered == "transfer-encoding":
                            continue
                        if lowered == "content-length":
                            continue
                        self.send_header(name, value)
                    # HEAD answers carry the object's length without a body.
                    length = response.getheader("Content-Length")
                    if self.command == "HEAD" and length is not None:
                        self.send_header("Content-Length", length)
                    else:
                        self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(payload)
                finally:
                    upstream.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _relay

        return Handler
