"""The jobs as clients of a Spark Connect server: the session they use, and the code they ship.

A Spark Connect server runs each session's Python UDFs in Python workers of that session's own,
started for its first task (with the session's artifacts on their path), and Spark 4.1 and
earlier keep them until the server stops (SPARK-54055). A session per job would pay that start
on every job (seconds: a Python start, pyarrow, pandas, the job's modules) and leave a daemon
and its workers behind each time. So jobs share one server session per version of the shipped
code (`shared_session`): its id is derived from the zip's name, which carries a digest of the
sources (`spark_jobs.common.packaging.cached_zip`), and the UTC day. The first job of the day
uploads the zip once (`ship_packages`); later jobs find warm workers that already imported it,
and a new version of the code gets a session of its own, never a worker holding the old one.
A job leaves the shared session open when it ends (the server closes it after its idle timeout,
and a closed id is never reused: the next one in the day's chain is taken).

Settings a job must not share (the compaction's write settings) go on a session of the job's
own (`private_session`), released when the work is done.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import socket
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from icecore.jobs.errors import JobError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_PORT = 15002  # Spark Connect's
_SESSION_PARAM = "session_id"
# Closed shared sessions tried in a day before a job takes a session of its own: a server's
# default idle timeout (an hour) closes at most one an hour.
_SHARED_TRIES = 48
_SHIPPED: set[tuple[str, str]] = set()  # (session id, zip name)
_SHIPPING = threading.Lock()
_URLS: dict[str, str] = {}  # session id -> the server's URL without a session id


def is_connect(spark: SparkSession) -> bool:
    """Whether `spark` is a Spark Connect client's session (PySpark's Connect session class
    is not a subclass of the classic one; both live in `pyspark.sql`)."""
    return type(spark).__module__.startswith("pyspark.sql.connect.")


def check_reachable(url: str, timeout: float = 10.0) -> None:
    """Fail at once, naming the server, when nothing accepts connections where `url` points.
    PySpark's Connect client retries an unavailable server for ten minutes and more (what a
    server restarting mid-job needs); a job pointed at a wrong host or port should not wait."""
    parsed = urlparse(url)
    if parsed.scheme != "sc" or not parsed.hostname:
        return  # not a server address (PySpark's `local` starts one itself)
    address = (parsed.hostname, parsed.port or DEFAULT_PORT)
    try:
        socket.create_connection(address, timeout=timeout).close()
    except OSError as exc:
        raise JobError(f"no Spark Connect server answers at sc://{parsed.netloc}: {exc}") from None


def shared_session(url: str, settings: Mapping[str, str]) -> SparkSession:
    """A session on the server at `url` with `settings` set and the packages shipped: the
    shared one of this code version and day, or the one `url` names with `session_id`. Either
    stays open on the server when the job stops its client."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession  # noqa: PLC0415

    from spark_jobs.common.packaging import cached_zip  # noqa: PLC0415

    check_reachable(url)
    _connect_mode()
    package = cached_zip()
    if _SESSION_PARAM in _params(url):
        candidates = [url]
    else:
        day = dt.datetime.now(dt.UTC).date().isoformat()
        candidates = [
            _with_param(url, f"{_SESSION_PARAM}={_shared_id(f'{package.name}/{day}/{n}')}")
            for n in range(_SHARED_TRIES)
        ]
    for candidate in candidates:
        try:
            session = ConnectSession.builder.remote(candidate).config(map=dict(settings)).create()
        except Exception as exc:
            if "SESSION_CLOSED" in str(exc) and candidate is not candidates[-1]:
                continue  # closed after an idle hour: the next id of the day
            raise
        session.release_session_on_close = False  # others use it; the server times it out
        _URLS[session.session_id] = _without_session(url)
        return ship_packages(session, package.name)
    raise AssertionError("unreachable: the last candidate raises")


@contextmanager
def private_session(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[SparkSession]:
    """A session of the job's own on `spark`'s server, with `spark`'s Iceberg settings'
    values and `settings`, released when the block ends (its Python workers start cold)."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession  # noqa: PLC0415

    url = _URLS.get(spark.session_id)
    if url is None:
        raise JobError("a private Spark Connect session needs the job's own session first")
    session = ConnectSession(connection=url)
    try:
        session.conf._set_all(configs=dict(settings), silent=False)  # one request
        ship_packages(session)
        yield session
    finally:
        session.stop()


def ship_packages(spark: SparkSession, name: str | None = None) -> SparkSession:
    """Add the zip of `icecore` and `spark_jobs` to a Connect session's Python path on the
    server (`addArtifacts(pyfile=True)`), once per session and zip: the server's Python
    workers import the client's own code, whatever the server has installed."""
    from spark_jobs.common.packaging import cached_zip  # noqa: PLC0415

    package = cached_zip()
    key = (spark.session_id, name or package.name)
    with _SHIPPING:
        if key not in _SHIPPED:
            try:
                spark.addArtifacts(str(package), pyfile=True)
            except Exception as exc:
                # Another client of the shared session uploaded the same zip (same name, same
                # bytes): the server refuses a second copy, and the first is the one needed.
                if "ARTIFACT_ALREADY_EXISTS" not in str(exc):
                    raise
            _SHIPPED.add(key)
    return spark


def _connect_mode() -> None:
    """Make `pyspark.sql.functions` build Spark Connect columns in this process (what PySpark's
    builder does for a `remote` session). A process runs one kind of session: a classic
    SparkContext already running here cannot be mixed with a Connect session."""
    from pyspark import SparkContext  # noqa: PLC0415

    if SparkContext._active_spark_context is not None:
        raise JobError(
            "this process already runs a classic Spark session: run a Spark Connect job "
            "in a process of its own"
        )
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"


def _shared_id(key: str) -> str:
    """A UUID (version 4, as Spark Connect wants) derived from `key`."""
    return str(uuid.UUID(bytes=hashlib.sha256(f"icefloe/{key}".encode()).digest()[:16], version=4))


def _params(url: str) -> dict[str, str]:
    _, _, tail = url.partition("/;")
    return dict(p.split("=", 1) for p in tail.split(";") if "=" in p)


def _with_param(url: str, param: str) -> str:
    if "/;" in url:
        return f"{url.rstrip(';')};{param}"
    return f"{url.rstrip('/')}/;{param}"


def _without_session(url: str) -> str:
    base, _, tail = url.partition("/;")
    kept = [p for p in tail.split(";") if p and not p.startswith(f"{_SESSION_PARAM}=")]
    return f"{base}/;{';'.join(kept)}" if kept else base
