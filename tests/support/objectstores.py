"""Real object-store servers on 127.0.0.1 for the FileIO tests, one of each per test session.

- S3: moto's server (`moto_server`), in its own process;
- Azure Blob: Azurite (`azurite-blob`, from npm; installed into `.cache/node/` on first use);
- GCS: `gcp-storage-emulator`, in memory;
- and a throttling proxy in front of moto (`throttle_proxy.ThrottleProxy`).

Each fixture yields an `ObjectStore`: the Iceberg catalog properties a `FileIO` needs to reach
the server, and `new_bucket()`, which creates a bucket (container) no other test uses and
returns the location of its root, spelled as a table location would be.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pyarrow import fs as pafs

from .throttle_proxy import ThrottleProxy

ROOT = Path(__file__).resolve().parents[2]
NODE_DIR = ROOT / ".cache" / "node"
AZURITE_VERSION = "3.37.0"
AZURITE_BLOB = NODE_DIR / "node_modules" / ".bin" / "azurite-blob"
# Azurite's well-known development account (Azurite's README, "Default Storage Account").
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
S3_ACCESS_KEY = "icefloe-test"
S3_SECRET_KEY = "icefloe-test-secret-key-7f3a9c"
_names = itertools.count(1)


@dataclass
class ObjectStore:
    """A running store: `properties` for `FileIO`, `new_bucket()` -> the new bucket's root."""

    name: str
    properties: dict[str, str]
    new_bucket: Callable[[], str]
    endpoint: str = ""
    extra: dict[str, object] = field(default_factory=dict)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _bucket_name(prefix: str) -> str:
    # Lower case, digits and dashes: valid on S3, GCS and Azure alike.
    return f"{prefix}-{os.getpid()}-{next(_names)}"


def _wait_for_port(port: int, process: subprocess.Popen[bytes], what: str, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}: {log.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within 60 s")


@contextlib.contextmanager
def _serve(
    command: Sequence[str], port: int, what: str, workdir: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """Run a server in its own process group until the session ends."""
    log = workdir / f"{what}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            list(command), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        _wait_for_port(port, process, what, log)
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


class AzuriteRelay:
    """Relays TCP connections from a port of its own to Azurite's, dropping the
    `Expect: 100-continue` header from requests without a body.

    Why: pyarrow's Azure SDK sends that header on bodiless PUTs (blob lease, which every delete
    takes first), and against Azurite on loopback it intermittently loses track of the answer
    when the interim "100 Continue" and the final response arrive together; it then reports
    "Connection closed before getting full response" and retries after seconds of backoff.
    Without the header Azurite answers once, as it would to any client that does not ask for
    100-continue; the request is otherwise byte for byte the same (the header is not signed),
    and the server answering is still Azurite.
    """

    _EXPECT = re.compile(rb"(?im)^expect: *100-continue\r\n")
    _EMPTY = re.compile(rb"(?im)^content-length: *0\r\n")

    def __init__(self, port: int) -> None:
        self._target = port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            upstream = socket.create_connection(("127.0.0.1", self._target))
            for end in (client, upstream):
                end.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    @classmethod
    def _pump(cls, source: socket.socket, sink: socket.socket, requests: bool) -> None:
        try:
            while data := source.recv(1 << 16):
                if requests and cls._EMPTY.search(data):
                    data = cls._EXPECT.sub(b"", data)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self._listener.close()


def ensure_azurite() -> Path:
    """Azurite's blob server, installed from npm into .cache/node/ (git-ignored) if missing.
    `make test` installs it before pytest starts (the Makefile's `node`), so the suite's time is
    the tests'; a test run by other means installs it on first use."""
    if not AZURITE_BLOB.exists():
        npm = shutil.which("npm")
        if npm is None:
            raise RuntimeError("npm is needed to install Azurite for the Azure tests")
        NODE_DIR.mkdir(parents=True, exist_ok=True)
        print(f"npm: installing Azurite {AZURITE_VERSION} into {NODE_DIR}", file=sys.stderr)
        subprocess.run(
            [npm, "install", "--prefix", str(NODE_DIR), "--no-audit", "--no-fund", "--silent",
             f"azurite@{AZURITE_VERSION}"],
            check=True,
            timeout=600,
        )  # fmt: skip
    return AZURITE_BLOB


@pytest.fixture(scope="session")
def s3_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ObjectStore]:
    """moto's S3 server; path-style addressing, a fixed key pair (moto checks none)."""
    import boto3  # noqa: PLC0415 (test dependency, needed by these fixtures only)

    port = free_port()
    workdir = tmp_path_factory.mktemp("moto")
    server = Path(sys.executable).with_name("moto_server")
    with _serve([str(server), "-H", "127.0.0.1", "-p", str(port)], port, "moto", workdir):
        endpoint = f"http://127.0.0.1:{port}"
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id=S3_ACCESS_KEY,
            aws_secret_access_key=S3_SECRET_KEY,
            region_name="us-east-1",
        )

        def new_bucket() -> str:
            bucket = _bucket_name("s3")
            client.create_bucket(Bucket=bucket)
            return f"s3://{bucket}"

        properties = {
            "s3.endpoint": endpoint,
            "s3.access-key-id": S3_ACCESS_KEY,
            "s3.secret-access-key": S3_SECRET_KEY,
            "s3.region": "us-east-1",
            "s3.path-style-access": "true",
        }
        yield ObjectStore("s3", properties, new_bucket, endpoint, {"client": client})


@pytest.fixture(scope="session")
def s3_proxy(s3_store: ObjectStore) -> Iterator[tuple[ObjectStore, ThrottleProxy]]:
    """A `ThrottleProxy` in front of moto, and properties pointing at the proxy. It starts
    without throttling; tests set the rate with `proxy.reset(throttle_every=N)`."""
    port = int(s3_store.endpoint.rsplit(":", 1)[1])
    proxy = ThrottleProxy("127.0.0.1", port).start()
    properties = {**s3_store.properties, "s3.endpoint": proxy.endpoint}
    store = ObjectStore("s3-proxy", properties, s3_store.new_bucket, proxy.endpoint)
    try:
        yield store, proxy
    finally:
        proxy.stop()


@pytest.fixture
def held_s3_proxy(
    s3_proxy: tuple[ObjectStore, ThrottleProxy],
) -> Iterator[tuple[ObjectStore, ThrottleProxy]]:
    """The session's proxy for one test that holds requests (a kill test), never left holding
    or throttling for the next."""
    s3_proxy[1].reset()
    try:
        yield s3_proxy
    finally:
        s3_proxy[1].reset()


@pytest.fixture(scope="session")
def gcs_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ObjectStore]:
    """gcp-storage-emulator, in memory, without authentication."""
    port = free_port()
    workdir = tmp_path_factory.mktemp("gcs")
    emulator = Path(sys.executable).with_name("gcp-storage-emulator")
    command = [str(emulator), "start", "--host", "127.0.0.1", "--port", str(port), "--in-memory"]
    with _serve(command, port, "gcp-storage-emulator", workdir):
        endpoint = f"http://127.0.0.1:{port}"
        properties = {
            "gcs.service.host": endpoint,
            "gcs.no-auth": "true",
            "gcs.project-id": "icefloe-test",
        }
        filesystem = pafs.GcsFileSystem(
            anonymous=True,
            scheme="http",
            endpoint_override=f"127.0.0.1:{port}",
            project_id="icefloe-test",
        )

        def new_bucket() -> str:
            bucket = _bucket_name("gcs")
            filesystem.create_dir(bucket)
            return f"gs://{bucket}"

        yield ObjectStore("gcs", properties, new_bucket, endpoint)


@pytest.fixture(scope="session")
def azure_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ObjectStore]:
    """Azurite's blob service with its development account, reached from `abfss://` locations
    through the authority properties (as the real service would be through its hosts)."""
    logging.getLogger("azure").setLevel(logging.WARNING)
    blob = ensure_azurite()
    port = free_port()
    workdir = tmp_path_factory.mktemp("azurite")
    command = [
        str(blob), "--silent", "--skipApiVersionCheck", "--loose", "--disableTelemetry",
        "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location", str(workdir / "data"),
    ]  # fmt: skip
    with _serve(command, port, "azurite", workdir):
        relay = AzuriteRelay(port)
        authority = f"127.0.0.1:{relay.port}"
        properties = {
            "adls.account-name": AZURITE_ACCOUNT,
            "adls.account-key": AZURITE_KEY,
            "adls.blob-storage-authority": authority,
            "adls.dfs-storage-authority": authority,
            "adls.blob-storage-scheme": "http",
            "adls.dfs-storage-scheme": "http",
        }
        filesystem = pafs.AzureFileSystem(
            AZURITE_ACCOUNT,
            account_key=AZURITE_KEY,
            blob_storage_authority=authority,
            dfs_storage_authority=authority,
            blob_storage_scheme="http",
            dfs_storage_scheme="http",
        )

        def new_bucket() -> str:
            container = _bucket_name("abfs")
            filesystem.create_dir(container)
            return f"abfss://{container}@{AZURITE_ACCOUNT}.dfs.core.windows.net"

        try:
            yield ObjectStore("azure", properties, new_bucket, f"http://{authority}")
        finally:
            relay.close()
